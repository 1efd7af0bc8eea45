"""A new index hands the pages FTS5 merges and removed documents leave free back to the file
system at the end of each sync (auto_vacuum = INCREMENTAL, set when the file is created); an
index created before keeps its mode, and the same step is a no-op there."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from conftest import make_config, write_corpus

import rag_service
from helpers.store.connection import connect, release_free_pages


def _pages(db: Path) -> tuple[int, int, int]:
    with closing(sqlite3.connect(db)) as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("auto_vacuum", "freelist_count", "page_count")
        )


def test_a_sync_leaves_no_free_pages_in_a_new_index_even_after_removals(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    paths = write_corpus(docs, 60, 400)
    config = make_config(docs, tmp_path / "state")
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    mode, free, pages = _pages(config.db_path)
    assert (mode, free) == (2, 0)
    for path in paths[:40]:
        path.unlink()
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    mode, free, fewer = _pages(config.db_path)
    assert (mode, free) == (2, 0) and fewer < pages  # the removed rows' pages left the file
    assert rag_service.search(config, "marker00050", mode="lexical").hits


def test_an_index_created_without_auto_vacuum_keeps_its_mode_and_its_free_pages(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.sqlite3"
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:  # as older programs made it
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 3000,)] * 200)
        conn.execute("DELETE FROM t")
    with closing(connect(db)) as conn:
        release_free_pages(conn)
    mode, free, _ = _pages(db)
    assert mode == 0 and free > 100
