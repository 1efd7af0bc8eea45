"""Migration 2 upgrades a version-1 index in place (file names, word index, OCR index) and is
idempotent; the new tables follow every later write and delete."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import astuple
from pathlib import Path

import rag_search
from helpers.lexical.filename import name_keys
from helpers.store import index_db, migrations
from helpers.store.index_db import _split_statements
from helpers.text.normalize import fold


def _v1_index(path: Path) -> sqlite3.Connection:
    """A version-1 file written the way version-1 rag_sync wrote it."""
    conn = index_db.connect(path)
    with index_db.write_transaction(conn):
        for statement in _split_statements(migrations.MIGRATIONS[0].sql):
            conn.execute(statement)
        conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '1')")
        docs = [
            ("Отчёты/Sales_Report-2026.TXT", "Отчёт о продажах за квартал", 0),
            ("scans/Board Minutes.pdf", "rnanagement board minutes", 1),
        ]
        for doc_id, (rel, text, ocr) in enumerate(docs, start=1):
            conn.execute(
                "INSERT INTO documents(id, path, size, mtime_ns, sha256, format, title, status, "
                "chunk_scheme, section_count, chunk_count, indexed_at) "
                "VALUES (?, ?, 1, 1, '', 'txt', ?, 'indexed', 1, 1, 1, 0)",
                (doc_id, rel, rel),
            )
            conn.execute(
                "INSERT INTO sections(id, document_id, ordinal, text, location) "
                "VALUES (?, ?, 0, ?, '{}')",
                (doc_id, doc_id, text),
            )
            conn.execute(
                "INSERT INTO chunks(id, document_id, section_id, ordinal, text, norm, text_hash, "
                "location, ocr) VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?)",
                (
                    doc_id,
                    doc_id,
                    doc_id,
                    text,
                    fold(text),
                    hashlib.sha256(text.encode()).hexdigest(),
                    json.dumps({"page": 1}),
                    ocr,
                ),
            )
            conn.execute(
                "INSERT INTO chunks_fts(rowid, title, path, body) VALUES (?, ?, ?, ?)",
                (doc_id, fold(rel), fold(rel), fold(text)),
            )
    return conn


def test_a_version_1_index_upgrades_in_place_and_is_searchable_by_every_channel(
    tmp_path: Path,
) -> None:
    _v1_index(tmp_path / "index.sqlite3").close()
    conn = index_db.open_index(tmp_path / "index.sqlite3")
    assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION == 15
    names = {tuple(r) for r in conn.execute("SELECT name_key, stem_key, path_key FROM doc_names")}
    assert names == {
        ("sales report 2026 txt", "sales report 2026", "отчеты sales report 2026 txt"),
        ("board minutes pdf", "board minutes", "scans board minutes pdf"),
    }
    written = {astuple(name_keys(row[0])) for row in conn.execute("SELECT path FROM documents")}
    assert written == names  # the backfill and rag_sync's writer agree
    hits = rag_search.search(conn, "sales_report-2026", rag_search.SearchOptions()).hits
    assert hits[0].path == "Отчёты/Sales_Report-2026.TXT" and "filename" in hits[0].channels
    hits = rag_search.search(conn, "отчетов", rag_search.SearchOptions()).hits
    assert hits and "words" in hits[0].channels
    hits = rag_search.search(conn, "management", rag_search.SearchOptions()).hits
    assert hits and hits[0].path == "scans/Board Minutes.pdf" and "fuzzy" in hits[0].channels


def test_migration_2_run_twice_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    _v1_index(tmp_path / "index.sqlite3").close()
    # Up to version 2 only: its backfill reads the title/path columns migration 8 drops.
    conn = index_db.connect(tmp_path / "index.sqlite3")
    index_db.migrate(conn, upto=2)

    def counts() -> tuple[int, ...]:
        return tuple(
            conn.execute(sql).fetchone()[0]
            for sql in (
                "SELECT COUNT(*) FROM doc_names",
                "SELECT COUNT(*) FROM doc_names_fts WHERE doc_names_fts MATCH '\"board\"'",
                "SELECT COUNT(*) FROM chunks_words WHERE chunks_words MATCH 'board'",
                "SELECT COUNT(*) FROM chunks_ocr_fts WHERE chunks_ocr_fts MATCH 'board'",
            )
        )

    before = counts()
    with index_db.write_transaction(conn):
        for statement in _split_statements(migrations.MIGRATIONS[1].sql):
            conn.execute(statement)
    assert counts() == before == (2, 1, 1, 1)
    conn.execute("INSERT INTO chunks_words(chunks_words) VALUES ('integrity-check')")
    conn.execute("INSERT INTO doc_names_fts(doc_names_fts) VALUES ('integrity-check')")


def test_deleting_a_document_removes_its_names_words_and_ocr_rows(tmp_path: Path) -> None:
    _v1_index(tmp_path / "index.sqlite3").close()
    conn = index_db.open_index(tmp_path / "index.sqlite3")
    with index_db.write_transaction(conn):
        conn.execute("DELETE FROM documents WHERE id = 2")  # cascades to sections and chunks
    assert conn.execute("SELECT COUNT(*) FROM doc_names").fetchone()[0] == 1
    for table, term in (("doc_names_fts", '"board"'), ("chunks_words", "board")):
        sql = f"SELECT COUNT(*) FROM {table} WHERE {table} MATCH ?"
        assert conn.execute(sql, (term,)).fetchone()[0] == 0
    sql = "SELECT COUNT(*) FROM chunks_ocr_fts WHERE chunks_ocr_fts MATCH 'board'"
    assert conn.execute(sql).fetchone()[0] == 0
    conn.execute("INSERT INTO chunks_words(chunks_words) VALUES ('integrity-check')")


def test_a_migration_read_stale_before_the_lock_is_skipped_not_reapplied(
    tmp_path: Path, monkeypatch
) -> None:
    """Another process migrated between our version read and our write lock (the CI race
    that raised "duplicate column name: phase_started_at")."""
    index_db.open_index(tmp_path / "index.sqlite3").close()
    conn = index_db.connect(tmp_path / "index.sqlite3")
    real = index_db.schema_version
    reads: list[int] = []

    def stale_first(c: sqlite3.Connection) -> int:
        reads.append(1)
        return 2 if len(reads) == 1 else real(c)

    monkeypatch.setattr(index_db, "schema_version", stale_first)
    assert index_db.migrate(conn) == index_db.SCHEMA_VERSION
    assert len(reads) >= 2  # the version was read again under the lock
    columns = [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
    assert columns.count("phase_started_at") == 1
    conn.close()


_OPEN_INDEX = (
    "import sys, pathlib; from helpers.store import index_db; "
    "c = index_db.open_index(pathlib.Path(sys.argv[1])); print(index_db.schema_version(c))"
)


def test_eight_processes_opening_one_new_index_at_once_all_succeed(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    for round_no in range(3):
        db = tmp_path / f"round{round_no}" / "index.sqlite3"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_INDEX, str(db)],
                cwd=root,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        outcomes = [p.communicate(timeout=60) for p in procs]
        assert [out.strip() for out, _ in outcomes] == [str(index_db.SCHEMA_VERSION)] * 8, outcomes


def test_the_migrations_are_numbered_one_to_the_schema_version_without_a_gap() -> None:
    versions = [m.version for m in migrations.MIGRATIONS]
    assert versions == list(range(1, migrations.SCHEMA_VERSION + 1))
    # each resumable backfill keeps its own cursor row in meta
    assert len({r.key for r in index_db.RESUMABLE}) == len(index_db.RESUMABLE)
