"""Migration 8 turns an index as schema 7 wrote it (a plain trigram table holding its own copy of
every chunk's text plus the title and path) into one external-content table over chunks.norm,
batch by batch; a killed backfill resumes, and writes during it leave a consistent index."""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import downgraded_copy, make_config, undo_migration_8, write_corpus

import rag_search
import rag_service
from helpers.config import Config
from helpers.store import backfill as db_backfill
from helpers.store import index_db
from helpers.store import units as store_units
from helpers.text.normalize import fold

# Trigram-channel queries (a Thai word, an identifier the word index cannot express, a
# substring inside words) and word queries: the same hits before and after the migration.
QUERIES = ("สิทธิ", "c++", "invoic", "budget meeting", "termination notice", "note-00003")


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    docs = tmp_path / "docs"
    write_corpus(docs, 12, 200)
    (docs / "thai.md").write_text("# สิทธิมนุษยชน\n\nทุกคนมีสิทธิและเสรีภาพ\n", "utf-8")
    (docs / "code.md").write_text("# Languages\n\nWe write c++ and rust here.\n", "utf-8")
    config = make_config(docs, tmp_path / "state")
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    return config


def _hits(db: Path) -> dict[str, list[tuple[str, str]]]:
    with closing(index_db.connect(db, readonly=True)) as conn:
        return {
            q: [
                (h.path, h.section_id)
                for h in rag_search.search(conn, q, rag_search.SearchOptions(mode="lexical")).hits
            ]
            for q in QUERIES
        }


def _consistent(conn: sqlite3.Connection) -> None:
    """FTS5 compares every chunks_fts and chunks_words entry with chunks.norm (rank 1: against
    the content), and the generated norm is fold(text) for every row, stored copy or not."""
    conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
    conn.execute("INSERT INTO chunks_words(chunks_words, rank) VALUES ('integrity-check', 1)")
    indexed = conn.execute("SELECT COUNT(*) FROM chunks_fts_docsize").fetchone()[0]
    assert indexed == conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    for text, norm in conn.execute("SELECT text, norm FROM chunks"):
        assert norm == fold(text), text


def test_a_schema_7_index_migrates_in_batches_to_one_copy_and_finds_the_same(
    synced: Config, tmp_path: Path, monkeypatch
) -> None:
    fresh = _hits(synced.db_path)
    assert all(fresh.values()), fresh
    with closing(sqlite3.connect(synced.db_path)) as conn:
        own, total = conn.execute("SELECT SUM(norm_stored != ''), COUNT(*) FROM chunks").fetchone()
    assert own < total / 10  # lower-cased ASCII and Thai: the text is stored once
    db = downgraded_copy(synced.db_path, tmp_path / "old", undo_migration_8)
    with closing(sqlite3.connect(db)) as old:
        tables = {r[0] for r in old.execute("SELECT name FROM sqlite_master")}
        chunks = old.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        sections = old.execute("SELECT COUNT(*) FROM sections").fetchone()[0]
        documents = old.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    assert "chunks_fts_content" in tables  # schema 7's own copy of the text
    pauses: list[float] = []
    monkeypatch.setattr(db_backfill, "TRIGRAM_BACKFILL_ROWS", 7)
    monkeypatch.setattr(db_backfill.time, "sleep", pauses.append)
    monkeypatch.setattr(store_units, "UNITS_REBUILD_BATCH_S", 60.0)  # batches by count here
    with closing(index_db.open_index(db)) as conn:
        assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION
        # one short transaction per batch: trigram rows, then migration 9's compaction
        compaction = math.ceil(sections / db_backfill.COMPACT_SECTION_ROWS) + math.ceil(
            chunks / db_backfill.COMPACT_CHUNK_ROWS
        )
        folds = math.ceil(chunks / db_backfill.FOLD_BACKFILL_ROWS)  # migration 12, one batch
        unit_batches = math.ceil(documents / store_units.UNITS_REBUILD_DOCUMENTS)  # 14
        assert len(pauses) == math.ceil(chunks / 7) + compaction + folds + unit_batches
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "chunks_fts_content" not in tables
        assert (
            conn.execute("SELECT value FROM meta WHERE key = 'trigram_backfill_next'").fetchone()
            is None
        )
        _consistent(conn)
    assert _hits(db) == fresh


class _Killed(BaseException):
    pass


def test_a_killed_backfill_resumes_and_writes_during_it_stay_consistent(
    synced: Config, tmp_path: Path, monkeypatch
) -> None:
    db = downgraded_copy(synced.db_path, tmp_path / "old", undo_migration_8)
    monkeypatch.setattr(db_backfill, "TRIGRAM_BACKFILL_ROWS", 5)

    def killed(_seconds: float) -> None:
        raise _Killed

    monkeypatch.setattr(db_backfill.time, "sleep", killed)
    with pytest.raises(_Killed):
        index_db.open_index(db)  # migrated, then killed after the first batch
    monkeypatch.setattr(db_backfill.time, "sleep", lambda _s: None)
    with closing(index_db.connect(db)) as conn:
        cursor = int(
            conn.execute("SELECT value FROM meta WHERE key = 'trigram_backfill_next'").fetchone()[0]
        )
        assert conn.execute("SELECT COUNT(*) FROM chunks_fts_docsize").fetchone()[0] == 5
        first = conn.execute("SELECT document_id FROM chunks WHERE id < ? LIMIT 1", (cursor,))
        last = conn.execute("SELECT document_id FROM chunks ORDER BY id DESC LIMIT 1")
        gone = {first.fetchone()[0], last.fetchone()[0]}
        thai = conn.execute("SELECT id FROM documents WHERE path = 'thai.md'").fetchone()[0]
        gone.discard(thai)
        with index_db.write_transaction(conn):  # a sync's writes while the backfill is pending
            for doc_id in gone:
                conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))  # cascades
            conn.execute(
                "UPDATE chunks SET text = text || ' zyxwvut', norm_stored = norm || ' zyxwvut' "
                "WHERE document_id = ?",
                (thai,),
            )
            new_id = conn.execute(
                "INSERT INTO chunks(document_id, section_id, ordinal, text, norm_stored, "
                "text_hash, location) SELECT document_id, section_id, 99, 'Qwertzy added', "
                "'qwertzy added', '', '{}' FROM chunks WHERE document_id = ? LIMIT 1",
                (thai,),
            ).lastrowid
            index_db.index_new_chunks(conn, new_id, new_id)
    with closing(index_db.open_index(db)) as conn:
        assert (
            conn.execute("SELECT value FROM meta WHERE key = 'trigram_backfill_next'").fetchone()
            is None
        )
        _consistent(conn)
        found = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH '\"zyxwvut\"'")
        assert [r[0] for r in found]
        found = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH '\"qwertzy\"'")
        assert [r[0] for r in found] == [new_id]
        left = {r[0] for r in conn.execute("SELECT DISTINCT document_id FROM chunks")}
        assert not gone & left


def test_opening_an_upgraded_index_waits_one_budget_and_searches_and_the_worker_finish_it(
    synced: Config, tmp_path: Path, monkeypatch
) -> None:
    """A tool call that opens an upgraded index waits at most one budget of the trigram rebuild
    (not the whole of it: minutes on a big index), each later search advances it, and the sync
    worker finishes it."""
    import dataclasses

    from helpers.store import open_index

    db = downgraded_copy(synced.db_path, tmp_path / "old", undo_migration_8)
    monkeypatch.setattr(db_backfill, "TRIGRAM_BACKFILL_ROWS", 5)
    monkeypatch.setattr(db_backfill, "OPEN_BACKFILL_BUDGET_S", 0.0)  # one batch per budget
    monkeypatch.setattr(db_backfill.time, "sleep", lambda _s: None)

    def indexed() -> int:
        with closing(index_db.connect(db, readonly=True)) as conn:
            return conn.execute("SELECT COUNT(*) FROM chunks_fts_docsize").fetchone()[0]

    config = dataclasses.replace(synced, data_dir=db.parent, db_path=db)
    open_index.write_conn(config, "upgrading the index").close()  # what a tool call does
    assert indexed() == 5
    open_index.read_conn(config).close()  # a search on the upgraded index
    assert indexed() == 10
    from helpers import health

    warnings = " ".join(health.health(config)["warnings"])
    assert "substring index is being rebuilt" in warnings and "sync_kb finishes it" in warnings
    with closing(index_db.connect(db)) as conn:
        assert db_backfill.trigram_backfill_pending(conn)
        total = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    assert total > 10
    monkeypatch.setattr(db_backfill, "OPEN_BACKFILL_BUDGET_S", 2.0)
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    with closing(index_db.connect(db)) as conn:
        assert not db_backfill.trigram_backfill_pending(conn)
        assert (
            conn.execute("SELECT COUNT(*) FROM chunks_fts_docsize").fetchone()[0]
            == (conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        )
        _consistent(conn)
    assert _hits(db) == _hits(synced.db_path)
    assert "substring index" not in " ".join(health.health(config)["warnings"])
