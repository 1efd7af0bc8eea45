"""Small documents written together: one write transaction for several files.

Every commit writes into the WAL each page it touched (the FTS5 segment it flushed, the right
edges of the b-trees), then into the file at a checkpoint: with a commit per document a first
sync writes several times the bytes of one in groups (bench/RESULTS.md, "Small documents in
one transaction"). The sync loop hands its writes to a WriteGroup, which keeps the documents
that fit in one transaction (helpers.index.document_write.SINGLE_TRANSACTION_CHUNKS) in memory
and writes up to GROUP_CHUNKS rows of them, or what is there after GROUP_MAX_S, in one
transaction. Reading stays outside it: the write lock is held only while rows are written.

A group is atomic like a document: a killed worker or a failed write leaves none of it (the next
sync writes its files again), and a cancel drops it unwritten. Each file's outcome (counts,
errors, files done) is reported by the commit that made it true (`after_commit`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from helpers.index.discard import delete_rows_of
from helpers.index.document_write import (
    SINGLE_TRANSACTION_CHUNKS,
    DocumentContent,
    WriteObserver,
    document_unit_input,
    insert_document,
    max_ids,
    record_failure,
    record_stat,
    remove_document,
    write_document,
    write_failure,
)
from helpers.index.pacing import paced_write
from helpers.safety import FileEntry
from helpers.store.batched import SQL_PARAMS, rows_in
from helpers.store.units import PreparedUnit, drop_units, prepare_many

# Rows (written and replaced) per group transaction: the bound one document already had, ~1 s
# of write lock at most (0.3-0.7 ms per chunk row with its full-text entries).
GROUP_CHUNKS = SINGLE_TRANSACTION_CHUNKS
# A file read waits at most this long (plus the read of one more file) for its commit, so
# progress and counts keep moving between two heartbeats and a cancel drops little work.
GROUP_MAX_S = 0.5
GROUP_MAX_FILES = 400  # stat-only updates and failures have no rows: bound the list anyway
# A file this big may take a while to read: the group waiting for it is written first.
GROUP_BEFORE_BYTES = 1_000_000


@dataclass(frozen=True)
class _Document:
    entry: FileEntry
    sha256: str
    content: DocumentContent
    units: tuple[PreparedUnit, ...] | None  # computed for the whole group before its lock


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


class WriteGroup:
    """The pending writes of one sync loop; `flush` commits them in one transaction."""

    def __init__(self, conn: sqlite3.Connection, observer: WriteObserver | None = None) -> None:
        self._conn = conn
        self._observer = observer
        self._items: list[_Item] = []
        self._callbacks: list[Callable[[], None]] = []
        self._rows = 0
        self._started = 0.0
        self.commits = 0  # group transactions written (tests, benches)

    # -- the writes of helpers.index.document_write, deferred when they fit ---------------------
    def write_document(self, entry: FileEntry, sha256: str, content: DocumentContent) -> None:
        rows = sum(len(s.children) for s in content.sections) + self._old_rows(entry)
        if rows > SINGLE_TRANSACTION_CHUNKS:  # staged in batches of its own
            self.flush()
            write_document(self._conn, entry, sha256, content, self._observer)
            return
        self._add(_Document(entry, sha256, content, None), rows)

    def write_failure(self, entry: FileEntry, sha256: str, reason: str) -> None:
        rows = self._old_rows(entry)
        if rows > SINGLE_TRANSACTION_CHUNKS:  # the old version is retired and discarded
            self.flush()
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
        """Before reading the next file: commit when the group is full or old enough, or when
        the file may take long to read."""
        if self._items and (
            self._rows >= GROUP_CHUNKS
            or len(self._items) >= GROUP_MAX_FILES
            or time.monotonic() - self._started >= GROUP_MAX_S
            or entry.size >= GROUP_BEFORE_BYTES
        ):
            self.flush()

    def flush(self) -> None:
        """Write every pending item in one transaction, then report their files."""
        items, callbacks = self._items, self._callbacks
        self._items, self._callbacks, self._rows = [], [], 0
        if not items:
            return
        items = _with_units(items)  # outside the write lock
        with paced_write(self._conn):
            _write_items(self._conn, items)
        self.commits += 1
        for callback in callbacks:
            callback()

    def discard(self) -> None:
        """Drop what is pending, unwritten and unreported (a cancel, or the job failing)."""
        self._items, self._callbacks, self._rows = [], [], 0

    def _add(self, item: _Item, rows: int) -> None:
        if self._items and self._rows + rows > GROUP_CHUNKS:
            self.flush()
        if not self._items:
            self._started = time.monotonic()
        self._items.append(item)
        self._rows += rows

    def _old_rows(self, entry: FileEntry) -> int:
        row = self._conn.execute(
            "SELECT chunk_count FROM documents WHERE path = ?", (entry.rel_path,)
        ).fetchone()
        return int(row[0]) if row else 0


def _with_units(items: list[_Item]) -> list[_Item]:
    """The items with their documents' units, the group's computed together (prepare_many)."""
    documents = [item for item in items if isinstance(item, _Document) and item.units is None]
    prepared = iter(prepare_many([document_unit_input(item.content) for item in documents]))
    return [
        replace(item, units=next(prepared))
        if isinstance(item, _Document) and item.units is None
        else item
        for item in items
    ]


def _write_items(conn: sqlite3.Connection, items: Sequence[_Item]) -> None:
    """Inside a write transaction: every item's rows, then the rows they replace deleted at
    once (see helpers.index.discard.delete_rows_of)."""
    paths = [item.entry.rel_path for item in items if not isinstance(item, _Stat)]
    existing: dict[str, int] = {
        row[1]: row[0]
        for row in rows_in(conn, "SELECT id, path FROM documents WHERE path IN ({marks})", paths)
    }
    # New rows first, then the replaced ones out (ids up to the maxima before the inserts): ids
    # keep growing as with a write per document (a semantic generation maps ids to vectors
    # until it is rebuilt, so a deleted id must not come back with other text).
    chunks_upto, sections_upto = max_ids(conn)
    drop_units(conn, list(existing.values()))  # they need the old sections' text
    for item in items:
        if isinstance(item, _Document):
            doc_id = existing.get(item.entry.rel_path)
            insert_document(conn, doc_id, item.entry, item.sha256, item.content, item.units)
        elif isinstance(item, _Failure):
            doc_id = existing.get(item.entry.rel_path)
            record_failure(conn, doc_id, item.entry, item.sha256, item.reason)
        else:
            record_stat(conn, item.doc_id, item.entry, item.detector_version)
    delete_rows_of(conn, sorted(existing.values()), chunks_upto, sections_upto)


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
    query = "SELECT id, chunk_count FROM documents WHERE id IN ({marks})"
    return {row[0]: row[1] for row in rows_in(conn, query, doc_ids)}
