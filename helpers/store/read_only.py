"""Opening the index without ever writing to it, shared by the service and the semantic worker.

The semantic worker (a separate process that may import only helpers/) scans vectors through
the same read-only connection as the service, so it lives here; helpers.store.index_db
re-exports it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.store.fold_sql import register_fold

# Writers hold the lock for one small document or one batch of a big one (about a second,
# helpers.index.document_write); readers never wait in WAL mode. 30 s lets a cancel or a second
# sync_kb queue behind a slow batch instead of failing with "database is locked".
BUSY_TIMEOUT_MS = 30_000
# Read-only opening, in order: mode=ro reads a live WAL index (it needs the -shm file, or the
# right to create it); immutable=1 skips locking and the -shm, safe only while nobody writes, so
# it is tried only when mode=ro cannot open: no -shm exists (no writer is running) and none can
# be made here (a read-only mount or folder after a clean close).
READ_ONLY_URI_QUERIES = ("mode=ro", "mode=ro&immutable=1")

_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def immutable_is_safe(db_path: Path, exc: sqlite3.OperationalError) -> bool:
    """immutable=1 ignores the WAL and takes no locks: only right when mode=ro could not set up
    its shared memory (no write access, a full disk) and no committed page waits in the WAL."""
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return False
    wal = db_path.with_name(db_path.name + "-wal")
    try:
        return wal.stat().st_size == 0
    except FileNotFoundError:
        return True
    except OSError:
        return False


def connect_uri(uri: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """Autocommit (explicit BEGIN for writes), usable from any thread, waiting out locks, with
    chunks.norm readable (helpers.store.fold_sql)."""
    conn = sqlite3.connect(
        uri,
        uri=True,
        isolation_level=None,
        timeout=busy_timeout_ms / 1000,
        check_same_thread=False,
    )
    register_fold(conn)
    return conn


def connect_read_only(
    db_path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> sqlite3.Connection:
    """A connection that never writes (query_only), opened as READ_ONLY_URI_QUERIES say. The
    schema is read once before it is returned; a connection that fails is closed."""
    uri = db_path.resolve().as_uri()
    last: sqlite3.OperationalError | None = None
    for query in READ_ONLY_URI_QUERIES:
        conn = connect_uri(f"{uri}?{query}", busy_timeout_ms)
        try:
            with closed_on_error(conn):
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                conn.execute("PRAGMA query_only = ON")
        except sqlite3.OperationalError as exc:  # e.g. "unable to open database file" (-shm)
            last = exc
            if not immutable_is_safe(db_path, exc):
                raise  # busy or I/O trouble: an immutable read could miss committed rows
            continue
        return conn
    assert last is not None
    raise last


@contextmanager
def closed_on_error(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Close `conn` when the block fails, then let the error go on."""
    try:
        yield conn
    except BaseException:
        conn.close()
        raise
