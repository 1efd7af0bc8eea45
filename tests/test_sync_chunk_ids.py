"""Chunk ids never come back: a semantic generation maps ids to vectors until it is rebuilt, so
an id freed at the top of the range must not be given to another document's text."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from conftest import make_config

import rag_service


def _chunk_ids(db_path: Path, path: str) -> list[int]:
    with closing(sqlite3.connect(db_path)) as conn:
        rows = conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = ?",
            (path,),
        )
        return [cid for (cid,) in rows]


def test_ids_freed_at_the_top_are_not_given_to_new_text(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    body = " ".join(f"word{i} alpha beta gamma delta" for i in range(120))
    (docs / "a.md").write_text(f"# A\n\n{body}\n", encoding="utf-8")
    (docs / "b.md").write_text(f"# B\n\n{body} zeta\n", encoding="utf-8")
    config = make_config(docs, tmp_path / "state")
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    b_ids = _chunk_ids(config.db_path, "b.md")
    assert b_ids and max(b_ids) > max(_chunk_ids(config.db_path, "a.md"))  # b holds the top
    (docs / "b.md").unlink()
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    (docs / "c.md").write_text(f"# C\n\n{body} theta\n", encoding="utf-8")
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    c_ids = _chunk_ids(config.db_path, "c.md")
    assert c_ids and min(c_ids) > max(b_ids)
