"""Why a file the walk saw was not indexed: one reason set, one tally, one exception.

Every file the sync sees and does not index is counted under exactly one `SkipReason`, so a user
can tell "not found" from "not indexed" (`sync_status().skipped`, `rag_list(status="skipped")`,
`rag_health().skipped`). Code that decides after reading that a file must not be indexed (e.g. a
file that is mostly secret material) raises `FileSkipped(SkipReason.SECRET, "why")` from the
extraction path; rag_sync records it, drops any earlier copy from the index and goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class SkipReason(StrEnum):
    """Stored as the value in skipped_files.reason and the keys of a job's breakdown."""

    UNSUPPORTED = "unsupported"  # no extractor for the suffix
    HIDDEN = "hidden"  # a name starting with '.', file or folder (a folder counts once)
    SENSITIVE = "sensitive"  # keys, credentials, .env, secret stores: never read
    EXCLUDED = "excluded"  # .ragignore or --exclude / RAGDOC_EXCLUDE
    TOO_LARGE = "too_large"  # over --max-file-mb
    SYMLINK = "symlink"  # never followed
    SPECIAL = "special"  # FIFO, socket, device: reading could block forever
    BAD_NAME = "bad_name"  # not valid UTF-8: cannot be stored or served
    UNREADABLE = "unreadable"  # folder not readable, stat failed (also a job error)
    SECRET = "secret"  # content is mostly secret material (decided after reading)


SKIP_REASON_LABELS: dict[SkipReason, str] = {
    SkipReason.UNSUPPORTED: "unsupported file type",
    SkipReason.HIDDEN: "hidden file or folder",
    SkipReason.SENSITIVE: "sensitive-looking name: keys, credentials, .env",
    SkipReason.EXCLUDED: "excluded by .ragignore or --exclude",
    SkipReason.TOO_LARGE: "over the --max-file-mb limit",
    SkipReason.SYMLINK: "symbolic link: never followed",
    SkipReason.SPECIAL: "not a regular file: FIFO, socket or device",
    SkipReason.BAD_NAME: "file name is not valid UTF-8",
    SkipReason.UNREADABLE: "cannot be read: permissions or I/O",
    SkipReason.SECRET: "mostly secret material: keys, tokens",
}
# Reasons that are faults, not choices: they are also written to the job's errors (they are rare;
# the choices above can be 50,000 files and would drown real errors).
ERROR_REASONS = frozenset({SkipReason.UNREADABLE})
EXAMPLES_PER_REASON = 5  # paths shown per reason in a job; all are in skipped_files


class FileSkipped(Exception):
    """Raised while reading a file that must not be indexed; not a failure of the file."""

    def __init__(self, reason: SkipReason, detail: str = "") -> None:
        super().__init__(detail or SKIP_REASON_LABELS[reason])
        self.reason = reason
        self.detail = detail or SKIP_REASON_LABELS[reason]


@dataclass(frozen=True)
class SkipRecord:
    rel_path: str
    reason: SkipReason
    detail: str = ""
    is_dir: bool = False

    @property
    def extension(self) -> str:
        """Lower-case suffix with its dot ('.gz'), '' for none or a folder (health statistics)."""
        if self.is_dir:
            return ""
        name = self.rel_path.rsplit("/", 1)[-1]
        stem, dot, ext = name.lstrip(".").rpartition(".")
        return f".{ext.lower()}" if dot and stem else ""


@dataclass
class SkipTally:
    """Counts per reason plus the first few paths of each: what a job row carries."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, record: SkipRecord) -> None:
        key = str(record.reason)
        self.counts[key] = self.counts.get(key, 0) + 1
        shown = self.examples.setdefault(key, [])
        if len(shown) < EXAMPLES_PER_REASON:
            shown.append(record.rel_path + ("/" if record.is_dir else ""))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, dict[str, object]]:
        """{reason: {"count": n, "label": "...", "examples": [...]}}, largest count first."""
        return {
            key: {
                "count": count,
                "label": SKIP_REASON_LABELS[SkipReason(key)],
                "examples": self.examples.get(key, []),
            }
            for key, count in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        }
