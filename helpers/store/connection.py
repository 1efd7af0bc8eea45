"""Connections that write the index: settings every writer shares, and the one write transaction.

Below both the migrations and their backfills (which take the write lock batch by batch), so
neither imports the other's module to open a transaction; index_db re-exports both names.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.store.fold_sql import register_fold
from helpers.store.read_only import BUSY_TIMEOUT_MS, closed_on_error, connect_uri

# Pause between tries of the WAL switch: short beside the busy timeout, long beside the switch.
WAL_RETRY_PAUSE_S = 0.02
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def connect(
    db_path: Path, *, readonly: bool = False, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> sqlite3.Connection:
    """Autocommit connection (explicit BEGIN IMMEDIATE for writes), WAL, foreign keys on.

    When a PRAGMA fails (a full disk has no room for the WAL, a damaged file) the connection is
    closed before the error propagates: left to the garbage collector it keeps the index, its
    WAL and -shm open, and a data dir on a full disk then cannot even be unmounted."""
    if readonly:
        conn = connect_uri(f"{db_path.resolve().as_uri()}?mode=ro", busy_timeout_ms)
    else:
        conn = sqlite3.connect(
            str(db_path),
            isolation_level=None,
            timeout=busy_timeout_ms / 1000,
            check_same_thread=False,
        )
    with closed_on_error(conn):
        register_fold(conn)  # chunks.norm (migration 12); connect_uri registers it too
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                # A new file only (SQLite fixes it with the first table, before WAL): lets
                # release_free_pages hand back what FTS5 segment merges leave free.
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            _use_wal(conn, busy_timeout_ms)
            conn.execute("PRAGMA synchronous = NORMAL")
            # Deleted rows and freed pages are overwritten with zeros: a redacted or removed
            # secret does not linger in the file's free space (purge_removed_text does the FTS).
            conn.execute("PRAGMA secure_delete = ON")
    return conn


def _use_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """PRAGMA journal_mode = WAL, tried again until the busy timeout: while another process
    switches a new file to WAL at the same moment, SQLite returns "database is locked" at once,
    without its busy handler (seen with eight processes opening one new index)."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
            if code not in (_SQLITE_BUSY, _SQLITE_LOCKED) or time.monotonic() >= deadline:
                raise
            time.sleep(WAL_RETRY_PAUSE_S)


def release_free_pages(conn: sqlite3.Connection) -> None:
    """Give the file's free pages back to the file system (the sync's last step): FTS5 merges
    free whole segments, a few per cent of a fresh index. Only indexes created with
    auto_vacuum = INCREMENTAL (by connect, since migration 12's program); a no-op on others.
    executescript steps the pragma to its end (one execute() step frees one page)."""
    conn.executescript("PRAGMA incremental_vacuum;")


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any exception (never a half-written row set).
    SQLite itself rolls a transaction back on some errors (a full disk at commit): then that
    error is what is raised, not a failed ROLLBACK."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
