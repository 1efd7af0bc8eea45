"""Planning a sync: what the folder holds against what the index holds, before any file is read.

It stands apart from rag_sync (which reads, extracts and writes the planned files) because the
plan is a pure comparison with its own rules: unchanged by size + mtime_ns, chunk scheme, status,
format reader and secrets-detector version; staged or retired copies are never files; skipped
files (over the size limit, excluded) lose their old rows, but a folder that could not be read
keeps what was indexed from it. It reads the index and walks the folder, and writes nothing.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from helpers.extract import registry as extractors
from helpers.extract.blocks import file_too_large
from helpers.lexical.common import STAGING_PATH_PREFIX
from helpers.safety import FileEntry, SkippedEntry, in_scope, walk_stats
from helpers.secrets import DETECTOR_VERSION
from helpers.skips import SkipReason
from helpers.store.batched import rows_in
from helpers.text.chunking import CHUNK_SCHEME


@dataclass(frozen=True)
class ExistingDoc:
    id: int
    size: int
    mtime_ns: int
    sha256: str
    chunk_scheme: int
    status: str
    detector_version: int = DETECTOR_VERSION  # helpers.secrets version its text was read with
    reader_current: bool = True  # read by its format's current reader (registry.format_version)


@dataclass
class SyncPlan:
    candidates: list[FileEntry] = field(default_factory=list)  # new, changed or stale
    unchanged: int = 0
    skipped: list[SkippedEntry] = field(default_factory=list)
    removed: list[tuple[int, str]] = field(default_factory=list)  # (document id, path)
    existing: dict[str, ExistingDoc] = field(default_factory=dict)  # the candidates' old rows


# What the comparison needs of every document, as plain tuples: (path, id, size, mtime_ns,
# kept, format_version), `kept` = indexed with the current chunk scheme and secrets detector.
# The rest of a row is read only for the files that will be read (_existing_doc).
_STORED = (
    "SELECT path, id, size, mtime_ns, "
    "chunk_scheme = ? AND status = 'indexed' AND detector_version = ?, format_version "
    "FROM documents"
)
StoredRow = tuple[str, int, int, int, int, int]


def plan_sync(
    conn: sqlite3.Connection,
    knowledge_dir: Path,
    scope: str,
    max_file_bytes: int | None = None,
    excluded: Callable[[str, bool], bool] | None = None,
) -> SyncPlan:
    """Compare the folder with the index by size + mtime_ns (hashes only for what changed).
    Files over `max_file_bytes` and `excluded` ones are skipped: their old rows go.

    One read of every documents row as a plain tuple, one walk, and objects (a Path, an
    ExistingDoc) only for the files that will be read: a no-op resync of 100,000 files costs
    little more than the walk (bench/bench_noop_resync.py)."""
    plan = SyncPlan()
    stored = _stored_rows(conn, scope)
    versions: dict[str, int] = {}  # suffix -> its format's current reader version
    seen: set[str] = set()
    changed: list[StoredRow] = []  # stored rows of the files that will be read, in walk order
    for found in walk_stats(knowledge_dir, extractors.SUPPORTED_SUFFIXES, scope, excluded):
        if isinstance(found, SkippedEntry):
            plan.skipped.append(found)
            continue
        if max_file_bytes is not None and found.size > max_file_bytes:
            plan.skipped.append(too_large_skip(found.entry(), max_file_bytes))
            continue
        rel = found.rel_path
        seen.add(rel)
        row = stored.get(rel)
        if row is not None and _unchanged(row, found.size, found.mtime_ns, versions):
            plan.unchanged += 1
            continue
        plan.candidates.append(found.entry())
        if row is not None:
            changed.append(row)
    plan.existing = _existing_docs(conn, changed, versions)
    # A folder or file that could not be read is not gone: keep what was indexed from it.
    unreadable = [
        "" if s.rel_path == "." else s.rel_path
        for s in plan.skipped
        if s.kind == SkipReason.UNREADABLE or (s.kind == SkipReason.SYMLINK and s.rel_path == scope)
    ]
    plan.removed = [
        (row[1], path)
        for path, row in stored.items()
        if path not in seen and not any(in_scope(path, u) for u in unreadable)
    ]
    return plan


def _stored_rows(conn: sqlite3.Connection, scope: str) -> dict[str, StoredRow]:
    """Every document in `scope` by path; staged or retired copies are never files (sync_files
    discards them)."""
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples, read by position
    rows = cursor.execute(_STORED, (CHUNK_SCHEME, DETECTOR_VERSION))
    return {
        row[0]: row
        for row in rows
        if not row[0].startswith(STAGING_PATH_PREFIX) and (not scope or in_scope(row[0], scope))
    }


def _reader_version(path: str, versions: dict[str, int]) -> int:
    """The current reader version of `path`'s format: it depends on the suffix only."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in versions:
        versions[suffix] = extractors.format_version(path)
    return versions[suffix]


def _unchanged(row: StoredRow, size: int, mtime_ns: int, versions: dict[str, int]) -> bool:
    """Same size and mtime, indexed with the current chunk scheme, detector and reader."""
    path, _id, old_size, old_mtime, kept, version = row
    return (
        old_size == size
        and old_mtime == mtime_ns
        and bool(kept)
        and version == _reader_version(path, versions)
    )


def _existing_docs(
    conn: sqlite3.Connection, rows: list[StoredRow], versions: dict[str, int]
) -> dict[str, ExistingDoc]:
    """The whole stored records of the documents whose files will be read, by path (one
    batched read)."""
    full = {
        found[0]: tuple(found)
        for found in rows_in(
            conn,
            "SELECT id, size, mtime_ns, sha256, chunk_scheme, status, detector_version "
            "FROM documents WHERE id IN ({marks})",
            [row[1] for row in rows],
        )
    }
    return {
        row[0]: ExistingDoc(
            *full[row[1]], reader_current=row[5] == _reader_version(row[0], versions)
        )
        for row in rows
    }


def too_large_skip(entry: FileEntry, max_file_bytes: int) -> SkippedEntry:
    """The skip of a file over the size limit (planned, or grown since the plan)."""
    return SkippedEntry(
        entry.rel_path, str(file_too_large(entry.size, max_file_bytes)), SkipReason.TOO_LARGE
    )
