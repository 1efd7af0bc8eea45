"""Writing one document's rows: visible all at once or not at all, however big it is.

Up to SINGLE_TRANSACTION_CHUNKS rows (old and new together) are replaced in one transaction. A
bigger document (a 20 MB text file is ~100k chunks) would hold the write lock for a minute, past
the busy timeout of cancel_sync, sync_kb and the heartbeat; it is written under an invisible
*staging* row in short batches, then swapped in by one short transaction that also moves the old
version out of sight. Staging rows are discarded in batches: after the swap, on cancel (for
CANCEL_DISCARD_BUDGET_S at most), and at the next sync after a killed worker or a cancel that
left some. Search skips them (helpers.lexical.common).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from helpers.extract import registry as extractors
from helpers.index.discard import delete_document_rows, discard_document
from helpers.index.pacing import paced_write
from helpers.lexical.common import STAGING_PATH_PREFIX
from helpers.safety import FileEntry
from helpers.secrets import DETECTOR_VERSION
from helpers.store.codec import pack_child_location, pack_section_text
from helpers.store.fold_sql import FOLDED_MARK, primed_folds, stored_norm
from helpers.store.index_db import index_chunk_rows, write_transaction
from helpers.store.units import (
    PreparedUnit,
    SectionPlace,
    drop_units,
    prepare_units,
    write_units,
)
from helpers.text.chunking import CHUNK_SCHEME, Section
from helpers.text.cjk import index_text as cjk_index_text
from helpers.text.hubs import hub_score
from helpers.text.normalize import fold

# Rows written (or deleted) per transaction: ~0.3-0.7 ms per chunk row with its FTS entries on
# this machine, so ~1 s of write lock at most (bench/faults/big_doc_lock.py).
SINGLE_TRANSACTION_CHUNKS = 2_000
STAGE_BATCH_CHUNKS = 2_000
# A cancelled staged write deletes its rows for this long at most, then leaves the rest invisible
# for the next sync's discard_staging. Deleting them all kept a job "cancelling" for 8.7 s after a
# cancel 63,000 rows into a 20 MB file's write (2.2 s with the budget, big_doc_lock.py).
CANCEL_DISCARD_BUDGET_S = 2.0
STAGING_STATUS = "staging"
TRUNCATED_NOTE = "text truncated at the per-document character limit"


class JobCancelled(BaseException):
    """Raised inside extraction or writing when cancel is requested.

    A BaseException so an extractor's `except Exception` cannot swallow it.
    """


@dataclass(frozen=True)
class FileProgress:
    """Progress inside one file: pages read (PDF, TIFF) or chunk rows written (staged)."""

    done: int
    total: int
    unit: str  # "page" | "chunks written"

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0

    def label(self) -> str:
        if self.unit == "page":
            return f"current file: page {self.done}/{self.total}"
        return f"current file: {self.done}/{self.total} {self.unit}"


class WriteObserver(Protocol):
    def check_cancel(self) -> None:
        """Raise JobCancelled when a cancel was requested."""


@dataclass(frozen=True)
class DocumentContent:
    title: str
    sections: list[Section]
    needs_ocr_pages: list[int]
    ocr_pages: list[int]
    ocr_engine: str | None
    truncated: bool
    redactions: int = 0  # secret spans replaced by helpers.secrets.REDACTION


def report_file_progress(
    observer: object | None, rel_path: str, size: int, progress: FileProgress
) -> None:
    """Tell an observer that has `on_file_progress` (the worker's JobReporter) where it is."""
    hook = getattr(observer, "on_file_progress", None)
    if hook is not None:
        hook(rel_path, size, progress)


def status_and_note(content: DocumentContent) -> tuple[str, str | None]:
    """A document with scanned pages and no OCR stays needs_ocr even when other pages are
    searchable (the pages are listed in the note); a cut document says so."""
    status = "needs_ocr" if content.needs_ocr_pages else "indexed"
    notes = []
    if content.needs_ocr_pages:
        notes.append(f"pages without a text layer (need OCR): {page_list(content.needs_ocr_pages)}")
    if content.truncated:
        notes.append(TRUNCATED_NOTE)
    return status, "; ".join(notes) or None


def page_list(pages: list[int]) -> str:
    shown = ", ".join(str(p) for p in pages[:20])
    return shown + (f" and {len(pages) - 20} more" if len(pages) > 20 else "")


def write_document(
    conn: sqlite3.Connection,
    entry: FileEntry,
    sha256: str,
    content: DocumentContent,
    observer: WriteObserver | None = None,
) -> None:
    """Replace the document's rows: visible all at once or not at all, however big it is.

    With an observer, a staged write honours cancel between batches (JobCancelled: the staged
    rows are discarded, within CANCEL_DISCARD_BUDGET_S, and the previous version stays)."""
    new_chunks = sum(len(s.children) for s in content.sections)
    old = conn.execute(
        "SELECT id, chunk_count FROM documents WHERE path = ?", (entry.rel_path,)
    ).fetchone()
    old_chunks = old["chunk_count"] if old else 0
    if new_chunks + old_chunks <= SINGLE_TRANSACTION_CHUNKS:
        units = document_units(content)
        with paced_write(conn):
            row = conn.execute(
                "SELECT id FROM documents WHERE path = ?", (entry.rel_path,)
            ).fetchone()
            doc_id = row["id"] if row else None
            if doc_id is not None:
                delete_document_rows(conn, doc_id)
            insert_document(conn, doc_id, entry, sha256, content, units)
        return
    _write_staged(conn, entry, sha256, content, observer)


def insert_document(
    conn: sqlite3.Connection,
    doc_id: int | None,
    entry: FileEntry,
    sha256: str,
    content: DocumentContent,
    units: Sequence[PreparedUnit] | None = None,
) -> None:
    """Inside a write transaction, the old rows of `doc_id` (if any) already deleted: the
    document's row, name keys, sections, chunks and units (`units` as document_units gave them
    before the transaction; computed here when None)."""
    if doc_id is not None:
        drop_units(conn, [doc_id])  # usually gone with the old rows already
    doc_id = _upsert_document(conn, doc_id, entry, sha256, content)
    _write_doc_name(conn, doc_id, entry.rel_path)
    _insert_sections(conn, doc_id, 0, content.sections)
    write_units(conn, doc_id, document_units(content) if units is None else units)


def _write_staged(
    conn: sqlite3.Connection,
    entry: FileEntry,
    sha256: str,
    content: DocumentContent,
    observer: WriteObserver | None,
) -> None:
    check_cancel = immediate_cancel_check(observer)
    total = sum(len(s.children) for s in content.sections)
    staged_id = _insert_staging_row(conn, entry, sha256, content.title)
    retired: int | None = None
    try:
        written = ordinal = 0
        for batch in _batches(content.sections, STAGE_BATCH_CHUNKS):
            check_cancel()
            with paced_write(conn):
                chunks = _insert_sections(conn, staged_id, ordinal, batch)
                conn.execute(
                    "UPDATE documents SET section_count = section_count + ?, "
                    "chunk_count = chunk_count + ? WHERE id = ?",
                    (len(batch), chunks, staged_id),
                )
            ordinal += len(batch)
            written += chunks
            progress = FileProgress(written, total, "chunks written")
            report_file_progress(observer, entry.rel_path, entry.size, progress)
        check_cancel()
        units = document_units(content)
        with paced_write(conn):
            old = conn.execute(
                "SELECT id FROM documents WHERE path = ?", (entry.rel_path,)
            ).fetchone()
            if old is not None:
                retired = old["id"]
                _retire(conn, retired)
            _upsert_document(conn, staged_id, entry, sha256, content, counts=False)
            _write_doc_name(conn, staged_id, entry.rel_path)
            write_units(conn, staged_id, units)
    except BaseException as exc:
        # Cancelled or failed: the old version stays. A second error here (a full disk) must
        # not hide the first; what is left stays invisible and the next sync discards it.
        cancelled = isinstance(exc, JobCancelled)
        with contextlib.suppress(sqlite3.Error):
            discard_document(
                conn, staged_id, _time_budget(CANCEL_DISCARD_BUDGET_S) if cancelled else None
            )
        raise
    if retired is not None:
        discard_document(conn, retired, stop_on_cancel(observer))


def _never_cancelled() -> None:
    return None


def immediate_cancel_check(observer: WriteObserver | None) -> Callable[[], None]:
    """The observer's check_cancel_now where it has one (the worker's reporter reads the job
    row itself: a cancel is seen at the next file or batch, not a heartbeat later; a small sync
    can finish inside one heartbeat), else its check_cancel."""
    if observer is None:
        return _never_cancelled
    return getattr(observer, "check_cancel_now", None) or observer.check_cancel


def _time_budget(seconds: float) -> Callable[[], bool]:
    """A should_stop that says stop once `seconds` have passed."""
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() >= deadline


def _batches(sections: Sequence[Section], max_chunks: int) -> Iterator[Sequence[Section]]:
    """Consecutive runs of whole sections holding at most `max_chunks` children (a section
    bigger than that alone)."""
    start = count = 0
    for index, section in enumerate(sections):
        size = len(section.children)
        if count and count + size > max_chunks:
            yield sections[start:index]
            start, count = index, 0
        count += size
    if start < len(sections):
        yield sections[start:]


def stop_on_cancel(observer: WriteObserver | None) -> Callable[[], bool] | None:
    """check_cancel as a question: cleanup stops quietly at a cancel (what it leaves is
    invisible, and the next sync discards it)."""
    if observer is None:
        return None

    def should_stop() -> bool:
        try:
            observer.check_cancel()
        except JobCancelled:
            return True
        return False

    return should_stop


def _staging_path() -> str:
    return STAGING_PATH_PREFIX + uuid.uuid4().hex


def _insert_staging_row(conn: sqlite3.Connection, entry: FileEntry, sha256: str, title: str) -> int:
    with write_transaction(conn):
        return conn.execute(
            "INSERT INTO documents(path, size, mtime_ns, sha256, format, title, status, error, "
            "chunk_scheme, indexed_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                _staging_path(),
                entry.size,
                entry.mtime_ns,
                sha256,
                extractors.format_of(entry.abs_path),
                title,
                STAGING_STATUS,
                f"being written: {entry.rel_path}",
                CHUNK_SCHEME,
                time.time(),
            ),
        ).lastrowid


def document_units(content: DocumentContent) -> tuple[PreparedUnit, ...]:
    """The document's retrieval units (helpers.store.units), computed outside the write lock."""
    return prepare_units(*document_unit_input(content))


def document_unit_input(content: DocumentContent) -> tuple[str, list[tuple[str, SectionPlace]]]:
    """What prepare_units takes of a document: its title and each section's (text, place)."""
    return content.title, [
        (s.text, (s.location.section_path, s.location.page)) for s in content.sections
    ]


def _retire(conn: sqlite3.Connection, doc_id: int, why: str = "replaced") -> None:
    """Inside a write transaction: move a document out of sight, to be discarded in batches."""
    row = conn.execute("SELECT path FROM documents WHERE id = ?", (doc_id,)).fetchone()
    conn.execute("DELETE FROM doc_names WHERE doc_id = ?", (doc_id,))
    drop_units(conn, [doc_id])  # out of sight: its units leave now, while its sections are here
    conn.execute(
        "UPDATE documents SET path = ?, status = ?, error = ? WHERE id = ?",
        (_staging_path(), STAGING_STATUS, f"{why}: {row['path']}", doc_id),
    )


def max_ids(conn: sqlite3.Connection) -> tuple[int, int]:
    """The highest chunk and section ids in use (0 when empty)."""
    return _next_id(conn, "chunks") - 1, _next_id(conn, "sections") - 1


def _upsert_document(
    conn: sqlite3.Connection,
    doc_id: int | None,
    entry: FileEntry,
    sha256: str,
    content: DocumentContent,
    counts: bool = True,
) -> int:
    """The documents row of `entry` (inserted when doc_id is None); `counts=False` keeps the
    section/chunk counts a staged write kept current batch by batch."""
    status, note = status_and_note(content)
    values = (
        entry.size,
        entry.mtime_ns,
        sha256,
        extractors.format_of(entry.abs_path),
        content.title,
        status,
        note,
        CHUNK_SCHEME,
        content.ocr_engine,
        json.dumps(content.ocr_pages) if content.ocr_pages else None,
        json.dumps(content.needs_ocr_pages) if content.needs_ocr_pages else None,
        content.redactions,
        DETECTOR_VERSION,
        extractors.format_version(entry.abs_path),
        time.time(),
        entry.rel_path,
    )
    if doc_id is None:
        return conn.execute(
            "INSERT INTO documents(size, mtime_ns, sha256, format, title, status, error, "
            "chunk_scheme, ocr_engine, ocr_pages, needs_ocr_pages, redactions, detector_version, "
            "format_version, indexed_at, path, section_count, chunk_count) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                *values,
                len(content.sections),
                sum(len(s.children) for s in content.sections),
            ),
        ).lastrowid
    conn.execute(
        "UPDATE documents SET size=?, mtime_ns=?, sha256=?, format=?, title=?, status=?, "
        "error=?, chunk_scheme=?, ocr_engine=?, ocr_pages=?, needs_ocr_pages=?, redactions=?, "
        "detector_version=?, format_version=?, indexed_at=?, path=? WHERE id=?",
        (*values, doc_id),
    )
    if counts:
        conn.execute(
            "UPDATE documents SET section_count = ?, chunk_count = ? WHERE id = ?",
            (len(content.sections), sum(len(s.children) for s in content.sections), doc_id),
        )
    return doc_id


def _insert_sections(
    conn: sqlite3.Connection,
    doc_id: int,
    first_ordinal: int,
    sections: Sequence[Section],
) -> int:
    """Insert sections (numbered from `first_ordinal`) and their chunks; returns the number of
    chunks. Inside a write transaction: ids are allocated here (MAX + 1, what SQLite itself
    would pick; chunk ids never below CHUNK_ID_HIGH_KEY's), so every table gets one
    executemany instead of a statement per row."""
    section_id = _next_id(conn, "sections")
    chunk_id = _next_chunk_id(conn)
    section_rows: list[tuple[object, ...]] = []
    chunk_rows: list[tuple[object, ...]] = []
    cjk_rows: list[tuple[int, str]] = []
    fts_rows: list[tuple[int, str, bool]] = []
    marked: dict[str, str] = {}  # text -> fold(text) of the rows whose norm SQL computes
    for ordinal, section in enumerate(sections, start=first_ordinal):
        section_fields = section.location.to_dict()
        section_rows.append(
            (
                section_id,
                doc_id,
                ordinal,
                pack_section_text(section.text),
                json.dumps(section_fields),
                section.hub if section.hub is not None else hub_score(section.text),
            )
        )
        for child_ordinal, child in enumerate(section.children):
            norm = fold(child.text)
            stored = stored_norm(child.text, norm)
            if stored == FOLDED_MARK:
                marked[child.text] = norm
            chunk_rows.append(
                (
                    chunk_id,
                    doc_id,
                    section_id,
                    child_ordinal,
                    child.text,
                    stored,
                    "",  # text_hash: the semantic build hashes the text itself (migration 9)
                    pack_child_location(child.location, section.location, section_fields),
                    int(child.ocr),
                )
            )
            fts_rows.append((chunk_id, norm, child.ocr))
            grams = cjk_index_text(norm)
            if grams:
                cjk_rows.append((chunk_id, grams))
            chunk_id += 1
        section_id += 1
    conn.executemany(
        "INSERT INTO sections(id, document_id, ordinal, text, location, hub) VALUES (?,?,?,?,?,?)",
        section_rows,
    )
    with primed_folds(marked):  # SQLite computes chunks.norm of each row it inserts
        conn.executemany(
            "INSERT INTO chunks(id, document_id, section_id, ordinal, text, norm_stored, "
            "text_hash, location, ocr) VALUES (?,?,?,?,?,?,?,?,?)",
            chunk_rows,
        )
    if chunk_rows:
        index_chunk_rows(conn, fts_rows)
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (CHUNK_ID_HIGH_KEY, str(chunk_rows[-1][0])),
        )
    if cjk_rows:
        conn.executemany("INSERT INTO chunks_cjk(rowid, grams) VALUES (?,?)", cjk_rows)
    # chunks_ocr_fts follows the chunks rows through triggers; every full-text row leaves with
    # its chunk through a trigger (migrations 2, 4 and 8).
    return len(chunk_rows)


def _next_id(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}").fetchone()[0])


# meta row: the highest chunk id ever written. A semantic generation maps chunk ids to vectors
# until it is rebuilt, so an id freed at the top of the range (a removed or failed document) must
# not come back with other text: a sync without a finished semantic build in between would
# otherwise serve the old document's vector for the new text.
CHUNK_ID_HIGH_KEY = "chunk_id_high"


def _next_chunk_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (CHUNK_ID_HIGH_KEY,)).fetchone()
    return max(_next_id(conn, "chunks"), int(row[0]) + 1 if row else 1)


def _write_doc_name(conn: sqlite3.Connection, doc_id: int, rel_path: str) -> None:
    """The file-name keys the filename channel looks up (migration 2's doc_names)."""
    from helpers.lexical.filename import name_keys

    keys = name_keys(rel_path)
    values = (keys.name_key, keys.stem_key, keys.path_key, doc_id)
    if conn.execute("SELECT 1 FROM doc_names WHERE doc_id = ?", (doc_id,)).fetchone():
        conn.execute(  # doc_names_au keeps doc_names_fts in step
            "UPDATE doc_names SET name_key = ?, stem_key = ?, path_key = ? WHERE doc_id = ?", values
        )
        return
    # No insert trigger (migration 12): a trigger statement makes FTS5 write out the pending
    # terms of every full-text table in the transaction, once per document of a group.
    conn.execute(
        "INSERT INTO doc_names(name_key, stem_key, path_key, doc_id) VALUES (?,?,?,?)", values
    )
    conn.execute(
        "INSERT INTO doc_names_fts(rowid, path_key) VALUES (?, ?)", (doc_id, keys.path_key)
    )


def write_failure(conn: sqlite3.Connection, entry: FileEntry, sha256: str, reason: str) -> None:
    """A failed file keeps a documents row (status failed + reason) and no searchable rows."""
    retired: int | None = None
    with paced_write(conn):
        row = conn.execute(
            "SELECT id, chunk_count FROM documents WHERE path = ?", (entry.rel_path,)
        ).fetchone()
        if row and row["chunk_count"] > SINGLE_TRANSACTION_CHUNKS:
            retired = row["id"]
            _retire(conn, retired)
            row = None
        if row:
            delete_document_rows(conn, row["id"])
        record_failure(conn, row["id"] if row else None, entry, sha256, reason)
    if retired is not None:
        discard_document(conn, retired)


def record_failure(
    conn: sqlite3.Connection, doc_id: int | None, entry: FileEntry, sha256: str, reason: str
) -> None:
    """Inside a write transaction, the old rows of `doc_id` (if any) already deleted: the
    failed file's documents row."""
    fmt = extractors.format_of(entry.abs_path)
    if doc_id is not None:
        conn.execute(
            "UPDATE documents SET size=?, mtime_ns=?, sha256=?, format=?, status='failed', "
            "error=?, chunk_scheme=?, section_count=0, chunk_count=0, indexed_at=? "
            "WHERE id=?",
            (
                entry.size,
                entry.mtime_ns,
                sha256,
                fmt,
                reason,
                CHUNK_SCHEME,
                time.time(),
                doc_id,
            ),
        )
        return
    conn.execute(
        "INSERT INTO documents(path, size, mtime_ns, sha256, format, title, status, "
        "error, chunk_scheme, indexed_at) VALUES (?,?,?,?,?,?,'failed',?,?,?)",
        (
            entry.rel_path,
            entry.size,
            entry.mtime_ns,
            sha256,
            fmt,
            entry.abs_path.stem,
            reason,
            CHUNK_SCHEME,
            time.time(),
        ),
    )


def update_stat_only(
    conn: sqlite3.Connection, doc_id: int, entry: FileEntry, detector_version: int | None = None
) -> None:
    """Same bytes: only the stat changes (and the detector version, when the stored text was
    checked again instead of re-read)."""
    with paced_write(conn):
        record_stat(conn, doc_id, entry, detector_version)


def record_stat(
    conn: sqlite3.Connection, doc_id: int, entry: FileEntry, detector_version: int | None = None
) -> None:
    """Inside a write transaction: update_stat_only's row change."""
    conn.execute(
        "UPDATE documents SET size = ?, mtime_ns = ? WHERE id = ?",
        (entry.size, entry.mtime_ns, doc_id),
    )
    if detector_version is not None:
        conn.execute(
            "UPDATE documents SET detector_version = ? WHERE id = ?",
            (detector_version, doc_id),
        )


def remove_document(
    conn: sqlite3.Connection, doc_id: int, should_stop: Callable[[], bool] | None = None
) -> None:
    """Remove a document whose file is gone (a big one out of sight first, then in batches;
    `should_stop` may leave the invisible rest to the next sync)."""
    with write_transaction(conn):
        row = conn.execute("SELECT chunk_count FROM documents WHERE id = ?", (doc_id,)).fetchone()
        if row is None:
            return
        big = row["chunk_count"] > SINGLE_TRANSACTION_CHUNKS
        if big:
            _retire(conn, doc_id, "removed")
        else:
            delete_document_rows(conn, doc_id)
            conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
    if big:
        discard_document(conn, doc_id, should_stop)
