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
    existing: dict[str, ExistingDoc] = field(default_factory=dict)


def plan_sync(
    conn: sqlite3.Connection,
    knowledge_dir: Path,
    scope: str,
    max_file_bytes: int | None = None,
    excluded: Callable[[str, bool], bool] | None = None,
) -> SyncPlan:
    """Compare the folder with the index by size + mtime_ns (hashes only for what changed).
    Files over `max_file_bytes` and `excluded` ones are skipped: their old rows go."""
    plan = SyncPlan()
    versions: dict[str, int] = {}  # suffix -> its format's current reader version
    rows = conn.cursor()
    rows.row_factory = None  # plain tuples: one per document, read by position
    rows.execute(
        "SELECT path, id, size, mtime_ns, sha256, chunk_scheme, status, detector_version, "
        "format_version FROM documents"
    )
    for path, doc_id, size, mtime_ns, sha, scheme, status, detector, version in rows:
        if path.startswith(STAGING_PATH_PREFIX):
            continue  # a staged or retired copy, never a file (discarded by sync_files)
        if in_scope(path, scope):
            # The reader version depends on the suffix only: one lookup per suffix.
            suffix = os.path.splitext(path)[1].lower()
            if suffix not in versions:
                versions[suffix] = extractors.format_version(path)
            current = version == versions[suffix]
            plan.existing[path] = ExistingDoc(
                doc_id, size, mtime_ns, sha, scheme, status, detector, current
            )
    seen: set[str] = set()
    for found in walk_stats(knowledge_dir, extractors.SUPPORTED_SUFFIXES, scope, excluded):
        if isinstance(found, SkippedEntry):
            plan.skipped.append(found)
            continue
        if max_file_bytes is not None and found.size > max_file_bytes:
            plan.skipped.append(too_large_skip(found.entry(), max_file_bytes))
            continue
        seen.add(found.rel_path)
        old = plan.existing.get(found.rel_path)
        if (
            old is not None
            and old.size == found.size
            and old.mtime_ns == found.mtime_ns
            and old.chunk_scheme == CHUNK_SCHEME
            and old.status == "indexed"
            and old.detector_version == DETECTOR_VERSION
            and old.reader_current
        ):
            plan.unchanged += 1
        else:
            plan.candidates.append(found.entry())  # a Path only for a file that is read
    # A folder or file that could not be read is not gone: keep what was indexed from it.
    unreadable = [
        "" if s.rel_path == "." else s.rel_path
        for s in plan.skipped
        if s.kind == SkipReason.UNREADABLE or (s.kind == SkipReason.SYMLINK and s.rel_path == scope)
    ]
    plan.removed = [
        (doc.id, path)
        for path, doc in plan.existing.items()
        if path not in seen and not any(in_scope(path, u) for u in unreadable)
    ]
    return plan


def too_large_skip(entry: FileEntry, max_file_bytes: int) -> SkippedEntry:
    """The skip of a file over the size limit (planned, or grown since the plan)."""
    return SkippedEntry(
        entry.rel_path, str(file_too_large(entry.size, max_file_bytes)), SkipReason.TOO_LARGE
    )
