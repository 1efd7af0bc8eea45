"""The one SQLite file: open it, migrate it (helpers.store.migrations holds the steps), and index
the chunks a write adds. The face the rest of the program opens the index through."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from helpers.store import backfill, units
from helpers.store.backfill import TRIGRAM_BACKFILL_KEY
from helpers.store.connection import connect, write_transaction
from helpers.store.migrations import MIGRATIONS, READABLE_FROM_VERSION, SCHEMA_VERSION
from helpers.store.read_only import BUSY_TIMEOUT_MS, closed_on_error, connect_read_only

# Opened, written and versioned through this module: the names it passes on from its parts.
__all__ = [
    "BUSY_TIMEOUT_MS",
    "READABLE_FROM_VERSION",
    "SCHEMA_VERSION",
    "closed_on_error",
    "connect",
    "connect_read_only",
    "write_transaction",
]
# Every resumable backfill, in migration order: the trigram rows before the compaction (searches
# miss the chunks the trigram rebuild has not reached; only the size waits on the compaction).
RESUMABLE = tuple(step for migration in MIGRATIONS for step in migration.resumable)
# `ALTER TABLE t ADD COLUMN c` at the start of a statement (after its comment lines).
_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", re.I | re.M)


def schema_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not exists:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(
    conn: sqlite3.Connection, full_backfill: bool = False, upto: int = SCHEMA_VERSION
) -> int:
    """Apply every migration newer than the file's version (up to `upto`), one transaction each,
    then advance the resumable backfills (bounded unless `full_backfill`)."""
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise RuntimeError(
            f"index schema {current} is newer than this program ({SCHEMA_VERSION}); "
            "upgrade MCP-RagDoc or point --data-dir at a fresh folder"
        )
    for migration in [m for m in MIGRATIONS if current < m.version <= upto]:
        with write_transaction(conn):
            # Another process may have migrated while we waited for the write lock:
            # re-read under the lock, because ALTER TABLE is not idempotent.
            if schema_version(conn) >= migration.version:
                continue
            for statement in _split_statements(migration.sql):
                if not _adds_existing_column(conn, statement):
                    conn.execute(statement)
            if migration.backfill is not None:
                migration.backfill(conn)
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(migration.version),),
            )
            conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('created_at', ?)",
                (str(time.time()),),
            )
    if schema_version(conn) >= units.UNITS_SCHEMA:  # rows follow their tokenizer
        units.ensure_current(conn)
    run_backfills(conn, bounded=not full_backfill)
    return upto


def run_backfills(conn: sqlite3.Connection, bounded: bool = False) -> int:
    """Every resumable backfill a migration left, in order; returns the rows done (0 once none
    is left). Bounded: one budget for all (helpers.store.backfill.OPEN_BACKFILL_BUDGET_S)."""
    return backfill.run_resumable(conn, RESUMABLE, bounded=bounded)


def index_new_chunks(conn: sqlite3.Connection, first_id: int, last_id: int) -> None:
    """Inside a write transaction: the word, OCR and trigram rows of the chunks just inserted with
    ids first_id..last_id (migration 8; rows at or past a pending backfill's cursor are the
    backfill's)."""
    conn.execute(
        "INSERT INTO chunks_words(rowid, norm) SELECT id, norm FROM chunks "
        "WHERE id >= ? AND id <= ?",
        (first_id, last_id),
    )
    conn.execute(
        "INSERT INTO chunks_ocr_fts(rowid, norm) SELECT id, norm FROM chunks "
        "WHERE id >= ? AND id <= ? AND ocr = 1",
        (first_id, last_id),
    )
    conn.execute(
        "INSERT INTO chunks_fts(rowid, norm) SELECT id, norm FROM chunks WHERE id >= ? AND id <= ? "
        "AND id < COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?), id + 1)",
        (first_id, last_id, TRIGRAM_BACKFILL_KEY),
    )


def index_chunk_rows(conn: sqlite3.Connection, rows: Sequence[tuple[int, str, bool]]) -> None:
    """index_new_chunks for the chunks just inserted as (id, norm, ocr) in rising id, from the
    folded text the writer has: reading chunks.norm back would fold a marked row again for each
    table (helpers.store.fold_sql). The same rows, in the same order."""
    if not rows:
        return
    conn.executemany(
        "INSERT INTO chunks_words(rowid, norm) VALUES (?, ?)", [(i, n) for i, n, _ in rows]
    )
    ocr = [(i, n) for i, n, is_ocr in rows if is_ocr]
    if ocr:
        conn.executemany("INSERT INTO chunks_ocr_fts(rowid, norm) VALUES (?, ?)", ocr)
    cursor = conn.execute(
        "SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?", (TRIGRAM_BACKFILL_KEY,)
    ).fetchone()
    trigram = [(i, n) for i, n, _ in rows if cursor is None or i < cursor[0]]
    conn.executemany("INSERT INTO chunks_fts(rowid, norm) VALUES (?, ?)", trigram)


def _adds_existing_column(conn: sqlite3.Connection, statement: str) -> bool:
    """True for an `ALTER TABLE t ADD COLUMN c` whose column is there already: SQLite has no
    `IF NOT EXISTS` for columns, and a file downgraded by hand (or by a test) still has it."""
    match = _ADD_COLUMN.search(statement)
    if match is None:
        return False
    table, column = match.groups()
    return any(
        row[1] == column for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))
    )


def _split_statements(script: str) -> list[str]:
    """Split a migration into statements (sqlite3.complete_statement handles ';' in comments)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def open_index(db_path: Path) -> sqlite3.Connection:
    """Open (creating and migrating if needed) the index for reading and writing."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(db_path)
    with closed_on_error(conn):
        migrate(conn)
    return conn
