"""Migration 12: chunks.norm is computed by SQL (rag_fold) where only the stored copy gave it, so
accented, Cyrillic and CJK text is stored once. A fresh index and an upgraded schema-11 index
store and answer the same; the full-text tables stay consistent through re-syncs and removals;
a program without the function (the sqlite3 shell) still reads the text and runs MATCH."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import downgraded_copy, synced_written, undo_migration_12

import rag_service
from helpers.config import Config
from helpers.store import backfill, index_db, units
from helpers.store.fold_sql import FOLDED_MARK
from helpers.store.read_only import connect_read_only
from helpers.text.normalize import fold

SPANISH = "# Canción\n\nEl NIÑO canta una canción en la reunión. " * 40
RUSSIAN = "# Ёлка\n\nЁлка и ёж стоят в лесу. " * 40
ENGLISH = "# Budget\n\nthe budget meeting is on monday. " * 40
JAPANESE = "# 条件式\n\n条件式の作成とＡＢＣ社のテスト。" * 40
UNASSIGNED = "# Odd\n\nA letter not in Unicode 14: \u0378 café. " * 20  # U+0378: unassigned
QUERIES = ("cancion nino", "reunión", "елка", "ёж", "budget meeting", "条件式", "abc社", "cafe")
FTS_TABLES = ("chunks_fts", "chunks_words", "doc_names_fts")


def _write(docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("es.md", SPANISH),
        ("ru.md", RUSSIAN),
        ("en.md", ENGLISH),
        ("ja.md", JAPANESE),
        ("odd.md", UNASSIGNED),
    ):
        (docs / name).write_text(text, "utf-8")


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def _stored(db: Path) -> dict[str, str]:
    """Each document's distinct chunks.norm_stored kinds: '', the mark, or 'copy'."""
    with closing(connect_read_only(db)) as conn:
        rows = conn.execute(
            "SELECT d.path, c.text, c.norm_stored, c.norm FROM chunks c "
            "JOIN documents d ON d.id = c.document_id ORDER BY c.id"
        ).fetchall()
    kinds: dict[str, set[str]] = {}
    for path, text, stored, norm in rows:
        assert norm == fold(text), (path, text)  # what every table and channel reads
        kind = {"": "lower", FOLDED_MARK: "mark"}.get(stored, "copy")
        kinds.setdefault(path, set()).add(kind)
    return {path: "/".join(sorted(k)) for path, k in kinds.items()}


def _answers(config: Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for query in QUERIES:
        result = rag_service.search(config, query, mode="lexical").to_dict()
        result.pop("elapsed_ms", None)
        out[query] = result
    return out


def _consistent(db: Path) -> None:
    """FTS5's own check of each table against chunks.norm (rank 1: the content too)."""
    with closing(index_db.connect(db)) as conn:
        for table in FTS_TABLES:
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")


def _schema_11_copy(config: Config, target: Path) -> Config:
    db = downgraded_copy(config.db_path, target, undo_migration_12)
    return dataclasses.replace(config, data_dir=target, db_path=db)


def test_a_fresh_index_stores_a_folded_copy_only_where_sql_cannot_fold_for_good(
    synced: Config,
) -> None:
    assert _stored(synced.db_path) == {
        "en.md": "lower",
        "es.md": "mark",
        "ru.md": "mark",
        "ja.md": "mark",
        "odd.md": "copy",  # an unassigned character: a later Unicode could fold it otherwise
    }
    _consistent(synced.db_path)
    answers = _answers(synced)
    tops = {q: answers[q]["hits"][0]["path"] for q in QUERIES}
    assert tops == {
        "cancion nino": "es.md",
        "reunión": "es.md",
        "елка": "ru.md",
        "ёж": "ru.md",
        "budget meeting": "en.md",
        "条件式": "ja.md",
        "abc社": "ja.md",
        "cafe": "odd.md",
    }


def test_a_schema_11_index_migrates_in_batches_to_what_a_fresh_sync_stores(
    synced: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh, answers = _stored(synced.db_path), _answers(synced)
    old = _schema_11_copy(synced, tmp_path / "old")
    with closing(sqlite3.connect(old.db_path)) as conn:
        assert index_db.schema_version(conn) == 11
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        documents = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        copies = conn.execute("SELECT COUNT(*) FROM chunks WHERE norm_stored <> ''").fetchone()[0]
        triggers = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
    assert "doc_names_ai" in triggers
    assert _stored(old.db_path) == {p: "copy" if k == "mark" else k for p, k in fresh.items()}
    assert copies > chunks / 2
    size = old.db_path.stat().st_size
    pauses: list[float] = []
    monkeypatch.setattr(backfill, "FOLD_BACKFILL_ROWS", 3)
    monkeypatch.setattr(backfill.time, "sleep", pauses.append)
    monkeypatch.setattr(units, "UNITS_REBUILD_BATCH_S", 60.0)  # batches by count here
    with closing(index_db.open_index(old.db_path)) as conn:
        assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION == 15
        assert conn.execute("SELECT 1 FROM meta WHERE key = 'fold_chunks_next'").fetchone() is None
        assert not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'doc_names_ai'"
        ).fetchone()
        conn.execute("VACUUM")
    # One short transaction per batch: the folds, then migration 14's units.
    units_batches = math.ceil(documents / units.UNITS_REBUILD_DOCUMENTS)
    assert len(pauses) == math.ceil(chunks / 3) + units_batches
    assert _stored(old.db_path) == fresh
    _consistent(old.db_path)
    assert _answers(old) == answers
    assert old.db_path.stat().st_size < size


class _Killed(BaseException):
    pass


def test_a_half_converted_index_answers_the_same_and_a_killed_backfill_resumes(
    synced: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh, answers = _stored(synced.db_path), _answers(synced)
    old = _schema_11_copy(synced, tmp_path / "old")
    monkeypatch.setattr(backfill, "FOLD_BACKFILL_ROWS", 3)

    def killed(_: float) -> None:
        raise _Killed

    monkeypatch.setattr(backfill.time, "sleep", killed)
    with pytest.raises(_Killed):  # killed after the first committed batch
        index_db.open_index(old.db_path)
    with closing(connect_read_only(old.db_path)) as conn:
        assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION
        assert conn.execute("SELECT value FROM meta WHERE key = 'fold_chunks_next'").fetchone()
    half = _stored(old.db_path)
    assert half != fresh  # some rows converted, some still copies
    _consistent(old.db_path)
    monkeypatch.setattr(backfill.time, "sleep", lambda _: None)
    assert _answers(old) == answers  # a search rebuilds migration 14's units, not the folds
    assert _stored(old.db_path) == half
    with closing(index_db.open_index(old.db_path)) as conn:
        index_db.run_backfills(conn)
    assert _stored(old.db_path) == fresh
    _consistent(old.db_path)
    assert _answers(old) == answers


def test_resyncs_renames_and_removals_keep_the_full_text_tables_consistent(synced: Config) -> None:
    docs = synced.knowledge_dir
    (docs / "es.md").write_text("# Canción\n\nOtra canción: la música del pájaro. " * 30, "utf-8")
    (docs / "ru.md").unlink()
    (docs / "notes").mkdir()
    (docs / "en.md").rename(docs / "notes" / "quarterly-plan.md")  # a new file-name row
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    _consistent(synced.db_path)
    assert rag_service.search(synced, "quarterly plan", mode="lexical").hits[0].path == (
        "notes/quarterly-plan.md"
    )
    assert rag_service.search(synced, "musica pajaro", mode="lexical").hits[0].path == "es.md"
    assert not rag_service.search(synced, "reunion", mode="lexical").hits
    assert not rag_service.search(synced, "елка", mode="lexical").hits


def test_a_program_without_rag_fold_still_reads_the_text_and_runs_match(synced: Config) -> None:
    with closing(sqlite3.connect(synced.db_path)) as conn:  # as the sqlite3 shell opens it
        texts = conn.execute("SELECT text FROM chunks WHERE text LIKE '%NIÑO%'").fetchall()
        assert texts
        hits = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'cancion'")
        assert len(hits.fetchall()) == len(texts)
        with pytest.raises(sqlite3.OperationalError, match="rag_fold"):
            conn.execute("SELECT norm FROM chunks").fetchall()
