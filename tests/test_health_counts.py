"""rag_health counts what rag_list and rag_search can show: the staging row of a big document being
written, here left behind by a SIGKILLed writer, is neither a document nor a status."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from stress.harness import run_sync
from test_sync_large_docs import _kill_writer_when, _write_big

import rag_service
from helpers.config import Config
from helpers.lexical.common import STAGING_PATH_PREFIX


def _staged(db_path: Path) -> tuple[int, int]:
    """(staging documents, their chunks), read straight from the index."""
    conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT COUNT(DISTINCT d.id), COUNT(c.id) FROM documents d "
            "LEFT JOIN chunks c ON c.document_id = d.id WHERE substr(d.path, 1, ?) = ?",
            (len(STAGING_PATH_PREFIX), STAGING_PATH_PREFIX),
        ).fetchone()
    finally:
        conn.close()


def test_health_leaves_out_the_staging_row_a_killed_writer_left_behind(
    config: Config, knowledge: Path
):
    _write_big(knowledge / "big.md", "alphaold")
    (knowledge / "small.md").write_text("# Small\n\nsmall note about payroll\n", encoding="utf-8")
    assert run_sync(config).state == "succeeded"
    before = rag_service.health(config)
    _write_big(knowledge / "big.md", "betanew", paragraphs=150)
    _kill_writer_when(
        config,
        knowledge,
        "SELECT 1 FROM documents WHERE error LIKE 'being written:%' AND chunk_count >= 30",
    )
    staged_documents, staged_chunks = _staged(config.db_path)
    assert staged_documents == 1 and staged_chunks >= 30  # the row health must leave out

    report = rag_service.health(config)
    listing = rag_service.list_documents(config)

    assert report["documents"] == {"total": 2, "indexed": 2} == before["documents"]
    assert "staging" not in report["documents"]
    assert (report["sections"], report["chunks"]) == (before["sections"], before["chunks"])
    assert report["chunks"] == sum(item["chunks"] for item in listing["items"])
    assert report["documents"]["total"] == listing["total"]
    assert report["needs_reindex_documents"] == 0
