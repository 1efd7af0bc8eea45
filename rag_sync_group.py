"""Small documents written together: one write transaction for several files.

Every commit makes FTS5 write its pending terms out as a new index segment (and merge segments
later): with a commit per document that was ~40 % of a first sync's SQLite time
(bench/RESULTS.md, "Lexical sync speed and index size"). The sync loop hands its writes to a
WriteGroup, which keeps the documents that fit in one transaction (rag_sync_write's
SINGLE_TRANSACTION_CHUNKS) in memory and writes up to GROUP_CHUNKS rows of them, or what is
there after GROUP_MAX_S, in one transaction. Reading stays outside it: the write lock is held
only while rows are written, as before. With `background=True` (the sync loop) a group is
written by a side thread on a connection of its own while the loop reads the next files:
SQLite releases the GIL while it inserts (the full-text work is most of a write), so on two
cores that part of writing overlaps the reading and chunking of the next files. One group is
in flight at most; every other write of the loop waits for it first.

A group is atomic like a document: a killed worker or a failed write leaves none of it (the next
sync writes its files again), and a cancel drops it unwritten. Each file's outcome (counts,
errors, files done) is reported by the commit that made it true (`after_commit`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from helpers.safety import FileEntry
from rag_db import connect
from rag_sync_pacing import paced_write
from rag_sync_write import (
    SINGLE_TRANSACTION_CHUNKS,
    SQL_PARAMS,
    DocumentContent,
    WriteObserver,
    delete_rows_of,
    insert_document,
    record_failure,
    record_stat,
    remove_document,
    write_document,
    write_failure,
)

# Rows (written and replaced) per group transaction: the bound one document already had, ~1 s
# of write lock at most (0.3-0.7 ms per chunk row with its full-text entries).
GROUP_CHUNKS = SINGLE_TRANSACTION_CHUNKS
# A file read waits at most this long (plus the read of one more file) for its commit, so
# progress and counts keep moving about once a second, as the heartbeat does.
GROUP_MAX_S = 1.0
GROUP_MAX_FILES = 400  # stat-only updates and failures have no rows: bound the list anyway
# A file this big may take a while to read: the group waiting for it is written first.
GROUP_BEFORE_BYTES = 1_000_000


@dataclass(frozen=True)
class _Document:
    entry: FileEntry
    sha256: str
    content: DocumentContent


@dataclass(frozen=True)
class _Failure:
    entry: FileEntry
    sha256: str
    reason: str


@dataclass(frozen=True)
class _Stat:
    doc_id: int
    entry: FileEntry
    detector_version: int | None


_Item = _Document | _Failure | _Stat


class _SideWriter:
    """Writes one group at a time on a thread and connection of its own."""

    def __init__(self, db_path: Path) -> None:
        self._conn = connect(db_path)
        self._thread: threading.Thread | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._error: BaseException | None = None

    def submit(self, items: list[_Item], callbacks: list[Callable[[], None]]) -> None:
        self.wait()
        self._callbacks = callbacks
        self._thread = threading.Thread(
            target=self._run, args=(items,), name="group-writer", daemon=True
        )
        self._thread.start()

    def _run(self, items: list[_Item]) -> None:
        try:
            with paced_write(self._conn):
                _write_items(self._conn, items)
        except BaseException as exc:  # noqa: BLE001 - handed to the loop's thread by wait()
            self._error = exc

    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def wait(self) -> None:
        """Until the group in flight is committed (its files reported) or failed (raised)."""
        if self._thread is None:
            return
        self._thread.join()
        self._thread = None
        callbacks, self._callbacks = self._callbacks, []
        error, self._error = self._error, None
        if error is not None:
            raise error
        for callback in callbacks:
            callback()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._conn.close()


class WriteGroup:
    """The pending writes of one sync loop; `flush` commits them in one transaction."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        observer: WriteObserver | None = None,
        background: bool = False,
    ) -> None:
        self._conn = conn
        self._observer = observer
        self._items: list[_Item] = []
        self._callbacks: list[Callable[[], None]] = []
        self._rows = 0
        self._started = 0.0
        self.commits = 0  # group transactions written (tests, benches)
        db_file = conn.execute("PRAGMA database_list").fetchone()[2] if background else ""
        self._side = _SideWriter(Path(db_file)) if db_file else None

    # -- the writes of rag_sync_write, deferred when they fit ----------------------------------
    def write_document(self, entry: FileEntry, sha256: str, content: DocumentContent) -> None:
        rows = sum(len(s.children) for s in content.sections) + self._old_rows(entry)
        if rows > SINGLE_TRANSACTION_CHUNKS:  # staged in batches of its own
            self.wait()
            write_document(self._conn, entry, sha256, content, self._observer)
            return
        self._add(_Document(entry, sha256, content), rows)

    def write_failure(self, entry: FileEntry, sha256: str, reason: str) -> None:
        rows = self._old_rows(entry)
        if rows > SINGLE_TRANSACTION_CHUNKS:  # the old version is retired and discarded
            self.wait()
            write_failure(self._conn, entry, sha256, reason)
            return
        self._add(_Failure(entry, sha256, reason), rows)

    def update_stat_only(
        self, doc_id: int, entry: FileEntry, detector_version: int | None = None
    ) -> None:
        self._add(_Stat(doc_id, entry, detector_version), 0)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback` once everything handed over so far is committed (now if it is)."""
        if self._items:
            self._callbacks.append(callback)
        else:
            callback()

    # -- committing ----------------------------------------------------------------------------
    def before_file(self, entry: FileEntry) -> None:
        """Before reading the next file: report a group the side thread has committed; commit
        when the group is full or old enough, or when the file may take long to read."""
        if self._side is not None and self._side.done():
            self._side.wait()
        if not self._items:
            return
        if (
            self._rows >= GROUP_CHUNKS
            or len(self._items) >= GROUP_MAX_FILES
            or time.monotonic() - self._started >= GROUP_MAX_S
            or entry.size >= GROUP_BEFORE_BYTES
        ):
            self._commit(wait=False)

    def flush(self) -> None:
        """Write every pending item, then report their files."""
        self._commit(wait=True)

    def wait(self) -> None:
        """Before a write of the caller's own: everything handed over is committed."""
        self._commit(wait=True)

    def _commit(self, wait: bool) -> None:
        items, callbacks = self._items, self._callbacks
        self._items, self._callbacks, self._rows = [], [], 0
        if items:
            self.commits += 1
            if self._side is not None:
                self._side.submit(items, callbacks)
            else:
                with paced_write(self._conn):
                    _write_items(self._conn, items)
                for callback in callbacks:
                    callback()
        if wait and self._side is not None:
            self._side.wait()

    def discard(self) -> None:
        """Drop what is pending, unwritten and unreported (a cancel, or the job failing); a
        group already being written is let finish (its files are reported)."""
        self._items, self._callbacks, self._rows = [], [], 0
        if self._side is not None:
            with contextlib.suppress(Exception):
                self._side.wait()

    def close(self) -> None:
        if self._side is not None:
            self._side.close()
            self._side = None

    def _add(self, item: _Item, rows: int) -> None:
        if self._items and self._rows + rows > GROUP_CHUNKS:
            self._commit(wait=False)
        if not self._items:
            self._started = time.monotonic()
        self._items.append(item)
        self._rows += rows

    def _old_rows(self, entry: FileEntry) -> int:
        row = self._conn.execute(
            "SELECT chunk_count FROM documents WHERE path = ?", (entry.rel_path,)
        ).fetchone()
        return int(row[0]) if row else 0


def _write_items(conn: sqlite3.Connection, items: Sequence[_Item]) -> None:
    """Inside a write transaction: every item's rows, the replaced rows deleted first, at once
    (see rag_sync_write.delete_rows_of)."""
    paths = [item.entry.rel_path for item in items if not isinstance(item, _Stat)]
    existing: dict[str, int] = {}
    for start in range(0, len(paths), SQL_PARAMS):
        part = paths[start : start + SQL_PARAMS]
        marks = ",".join("?" * len(part))
        for row in conn.execute(f"SELECT id, path FROM documents WHERE path IN ({marks})", part):
            existing[row[1]] = row[0]
    delete_rows_of(conn, sorted(existing.values()))
    for item in items:
        if isinstance(item, _Document):
            doc_id = existing.get(item.entry.rel_path)
            insert_document(conn, doc_id, item.entry, item.sha256, item.content)
        elif isinstance(item, _Failure):
            doc_id = existing.get(item.entry.rel_path)
            record_failure(conn, doc_id, item.entry, item.sha256, item.reason)
        else:
            record_stat(conn, item.doc_id, item.entry, item.detector_version)


def remove_documents(
    conn: sqlite3.Connection,
    doc_ids: Sequence[int],
    check_cancel: Callable[[], None],
    on_removed: Callable[[int], None],
    should_stop: Callable[[], bool] | None = None,
) -> None:
    """Remove documents whose files are gone: small ones together, up to GROUP_CHUNKS rows per
    transaction, a big one on its own (out of sight first, then in batches).
    `check_cancel` runs before each transaction; `on_removed(n)` after each."""
    sizes = _chunk_counts(conn, doc_ids)
    batch: list[int] = []
    rows = 0

    def flush() -> None:
        nonlocal batch, rows
        if not batch:
            return
        check_cancel()
        with paced_write(conn):
            delete_rows_of(conn, batch)
            marks = ",".join("?" * len(batch))
            conn.execute(f"DELETE FROM documents WHERE id IN ({marks})", batch)
        on_removed(len(batch))
        batch, rows = [], 0

    for doc_id in doc_ids:
        size = sizes.get(doc_id)
        if size is None:  # already gone
            on_removed(1)
            continue
        if size > SINGLE_TRANSACTION_CHUNKS:
            flush()
            check_cancel()
            remove_document(conn, doc_id, should_stop)
            on_removed(1)
            continue
        if batch and (rows + size > GROUP_CHUNKS or len(batch) >= SQL_PARAMS):
            flush()
        batch.append(doc_id)
        rows += size
    flush()


def _chunk_counts(conn: sqlite3.Connection, doc_ids: Sequence[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for start in range(0, len(doc_ids), SQL_PARAMS):
        part = list(doc_ids[start : start + SQL_PARAMS])
        marks = ",".join("?" * len(part))
        query = f"SELECT id, chunk_count FROM documents WHERE id IN ({marks})"
        counts.update((row[0], row[1]) for row in conn.execute(query, part))
    return counts
