"""The one error base: a stable `code`, the `message` in plain words and a `hint` with the fix.

It lives in helpers/ so that extractors, OCR and the semantic model files (which may not import
top-level modules) raise the same class the service and every face report, and so do the
typed errors of the service boundary below it. A face shows `str(exc)` or `to_dict()` and
never a Python exception type name.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path
from typing import Any


class RagError(Exception):
    """Base of every error a user can see; subclasses set `code` (the console and MCP keep it)."""

    code = "error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — hint: {self.hint}" if self.hint else self.message

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "hint": self.hint}

    def tool_text(self) -> str:
        """One line for a text-only channel (an MCP tool error): `[code] message — hint: …`."""
        return f"[{self.code}] {self}"


class InvalidArgument(RagError):
    code = "invalid_argument"


class ConfigError(RagError):
    code = "config_error"


class IndexMissing(RagError):
    code = "index_missing"


class NotFound(RagError):
    code = "not_found"


class Forbidden(RagError):
    """A path the service will not serve: outside the knowledge dir, hidden or sensitive, not a
    document format, not a regular file."""

    code = "forbidden"


class SemanticUnavailable(InvalidArgument):
    """mode='semantic' was asked for and the semantic channel cannot answer (off, no model,
    not built yet, or the query worker failed); an InvalidArgument, so faces map it alike."""

    code = "semantic_unavailable"


class IndexBusy(RagError):
    """Another process held the SQLite write lock past the busy timeout."""

    code = "index_busy"


class DiskFull(RagError):
    """The data dir's file system is full (SQLITE_FULL or ENOSPC)."""

    code = "disk_full"


class ReadOnlyDataDir(RagError):
    """A write (sync_kb, cancel_sync) on a data dir that is read-only; reads still work."""

    code = "read_only"


# -- storage faults: a raw SQLite or OS error from the data dir, told apart and given its fix --
# SQLite primary result codes (sqlite3.h); Python 3.11 exposes them as `exc.sqlite_errorcode`.
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL = 5, 6, 8, 10, 13
# Less free space than this and an I/O error is taken as a full disk: SQLite needs a few pages
# (the WAL index is 32 KB) to open or write at all.
NEARLY_FULL_BYTES = 1024 * 1024
_FAULT_WORDS = {  # the message text, for errors that carry no code (or a job row's message)
    "busy": ("database is locked", "database is busy", "database table is locked"),
    "full": ("database or disk is full", "no space left on device", "disk quota exceeded"),
    "read_only": ("attempt to write a readonly database", "read-only file system"),
}
_FAULT_CODES = {
    SQLITE_BUSY: "busy",
    SQLITE_LOCKED: "busy",
    SQLITE_FULL: "full",
    SQLITE_READONLY: "read_only",
}
_FAULT_ERRNOS = {errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EROFS: "read_only"}


def storage_fault(exc: BaseException, data_dir: Path | None = None) -> str | None:
    """'busy', 'full' or 'read_only' when `exc` comes from the data dir's storage, else None.

    On a full disk SQLite often says only "disk I/O error" (it cannot size the WAL's
    shared-memory file): an I/O error with `data_dir` (nearly) out of space counts as full."""
    if isinstance(exc, OSError):
        return _FAULT_ERRNOS.get(exc.errno or 0)
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _FAULT_CODES:
        return _FAULT_CODES[primary]
    fault = fault_in_message(str(exc))
    if (
        fault is None
        and data_dir is not None
        and (primary == SQLITE_IOERR or "disk i/o" in str(exc).lower())
    ):
        free = free_bytes(data_dir)
        if free is not None and free < NEARLY_FULL_BYTES:
            return "full"
    return fault


def fault_in_message(text: str) -> str | None:
    """The storage fault a failure message names (a worker writes `OperationalError: …`)."""
    lower = text.lower()
    for fault, words in _FAULT_WORDS.items():
        if any(w in lower for w in words):
            return fault
    return None


def free_bytes(path: Path) -> int | None:
    """Bytes free for files under `path` (its nearest existing parent), None when unknown."""
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def disk_full_error(action: str, data_dir: Path) -> DiskFull:
    free = free_bytes(data_dir)
    return DiskFull(
        f"{action}: the disk holding the data dir is full ({human_bytes(free)} free on {data_dir})",
        f"free space on {data_dir} (or pass a --data-dir on a larger disk), then retry; "
        "nothing half-written was kept and searches still work",
    )


def index_busy_error(
    action: str, busy_timeout_s: float, job_id: str | None, current_file: str | None
) -> IndexBusy:
    if job_id:
        who = f"sync job {job_id} is writing" + (f" {current_file}" if current_file else "")
        extra = f"; sync_status {job_id} shows its progress"
    else:
        who, extra = "another process holds the index's write lock", ""
    return IndexBusy(
        f"{action}: the index is busy ({who}; waited {busy_timeout_s:g} s)",
        f"the index is busy writing a large document; retry in a few seconds{extra}",
    )


def read_only_error(action: str, reason: str) -> ReadOnlyDataDir:
    return ReadOnlyDataDir(
        f"data dir is read-only: {reason}; {action} needs to write to it",
        "pass a writable --data-dir (or remount it read-write, or drop --read-only); "
        "rag_search, rag_list, rag_read and rag_health still work",
    )


def require_unicode(value: str, name: str) -> None:
    """A tool argument with a lone surrogate cannot reach SQLite or a log: refuse it in words."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"{name} is not valid Unicode (lone surrogate)", "send UTF-8 text"
        ) from exc
