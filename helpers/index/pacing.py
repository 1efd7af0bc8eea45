"""Spacing the sync writer's transactions, so that another writer gets the lock within a second.

A sync writes in many short transactions (groups of small documents, batches of a big one). Back
to back they would starve every other writer: cancel_sync, sync_kb and the worker's own
heartbeat wait on SQLite's busy handler, which retries at most every 100 ms.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator

from helpers.store.connection import write_transaction

# A gap between two write transactions: SQLite's busy handler retries a waiting writer at most
# every 100 ms, so without a gap this long the next batch would take the lock again before a
# cancel_sync, sync_kb or heartbeat got in (bench/faults/big_doc_lock.py).
BATCH_PAUSE_S = 0.12
# ... but only once the lock was held back to back (gaps under BATCH_PAUSE_S) for this long: a
# pause after every batch would sleep through a large part of a long PDF sync, while a foreign
# writer waits at most this plus one transaction (~1 s) either way. Gaps the work leaves by itself
# (reading the next file) count as pauses.
LOCK_BURST_S = 0.5


class WritePacer:
    """Spaces the writer's transactions so another process's writer gets the lock within about
    a second (see LOCK_BURST_S), sleeping only when the writer's own work left no gap."""

    def __init__(self) -> None:
        self._burst_started = 0.0
        self._released: float | None = None

    def before_lock(self) -> None:
        now = time.monotonic()
        if self._released is None or now - self._released >= BATCH_PAUSE_S:
            self._burst_started = now  # the lock was free long enough: a new burst
            return
        if now - self._burst_started >= LOCK_BURST_S:
            time.sleep(max(0.0, BATCH_PAUSE_S - (now - self._released)))
            self._burst_started = time.monotonic()

    def after_lock(self) -> None:
        self._released = time.monotonic()


PACER = WritePacer()  # one per process: the worker is the index's only document writer


@contextlib.contextmanager
def paced_write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """helpers.store.connection.write_transaction after the pacer's gap (when one is due)."""
    PACER.before_lock()
    try:
        with write_transaction(conn):
            yield conn
    finally:
        PACER.after_lock()
