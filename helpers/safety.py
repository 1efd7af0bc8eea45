"""What may be read: the knowledge dir only, no hidden or sensitive files, no links out of it."""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Names that usually hold secrets; such files are never indexed, even when the user points the
# server at a home folder. Matched case-insensitively against every path component.
SENSITIVE_NAME_PATTERNS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.gpg",
    "*.asc",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.ppk",
    "authorized_keys",
    "known_hosts",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    "credentials",
    "credentials.*",
    "*credentials*.json",
    "secrets",
    "secrets.*",
    "*secret*.json",
    "*.tfstate",
    "htpasswd",
    ".htpasswd",
    "shadow",
)
SENSITIVE_DIR_NAMES = frozenset({".ssh", ".gnupg", ".aws", ".azure", ".kube", ".git", ".docker"})


class PathRejected(ValueError):
    """A path argument that would leave the knowledge dir or touch a hidden/sensitive file."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint or "pass a path relative to the knowledge dir, as returned by rag_search"


@dataclass(frozen=True)
class FileEntry:
    rel_path: str  # '/'-separated, relative to the knowledge dir
    abs_path: Path
    size: int
    mtime_ns: int
    dev: int = 0  # device and inode identify the file: a swap for another file is detected
    ino: int = 0


@dataclass(frozen=True)
class SkippedEntry:
    rel_path: str
    reason: str


def is_sensitive_name(name: str) -> bool:
    lower = name.lower()
    if lower in SENSITIVE_DIR_NAMES:
        return True
    return any(fnmatch.fnmatchcase(lower, pattern) for pattern in SENSITIVE_NAME_PATTERNS)


def rel_path_problem(rel_path: str) -> str | None:
    """Why a relative path must not be indexed or served, or None when it is fine."""
    for part in PurePosixPath(rel_path).parts:
        if part.startswith("."):
            return "hidden file or folder"
        if is_sensitive_name(part):
            return "sensitive-looking name (keys, credentials, .env): never indexed"
    return None


def in_scope(rel_path: str, prefix: str) -> bool:
    """Prefix match only at a '/' boundary: 'docs/proj' never matches 'docs/project-secret'."""
    prefix = prefix.strip("/")
    return not prefix or rel_path == prefix or rel_path.startswith(prefix + "/")


def scope_like_pattern(prefix: str) -> str:
    """The SQL twin of `in_scope`: `path = ? OR path LIKE ? ESCAPE '\\'` with this pattern."""
    escaped = prefix.strip("/").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"


def normalize_user_path(raw: str) -> str:
    """A tool argument as a clean relative path, or PathRejected (absolute, '..', hidden, NUL)."""
    if "\x00" in raw:
        raise PathRejected("path contains a NUL byte")
    if not _utf8_ok(raw):
        raise PathRejected("path is not valid Unicode (lone surrogate)")
    text = raw.replace("\\", "/").strip()
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise PathRejected(f"absolute paths are not accepted: {raw!r}")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PathRejected(f"'..' is not allowed in paths: {raw!r}")
    rel = "/".join(parts)
    problem = rel_path_problem(rel) if rel else None
    if problem:
        raise PathRejected(f"{rel!r}: {problem}")
    return rel


def resolve_inside(knowledge_dir: Path, rel_path: str) -> Path:
    """Absolute path of rel_path, refusing anything whose real location leaves knowledge_dir."""
    rel = normalize_user_path(rel_path)
    root = knowledge_dir.resolve()
    candidate = root / rel if rel else root
    real = candidate.resolve()
    if real != root and root not in real.parents:
        raise PathRejected(f"{rel_path!r} resolves outside the knowledge dir")
    if candidate.is_symlink():
        raise PathRejected(f"{rel_path!r} is a symbolic link; links are never followed")
    return real


def walk_files(
    knowledge_dir: Path, suffixes: frozenset[str], scope: str = ""
) -> Iterator[FileEntry | SkippedEntry]:
    """Regular files with a supported suffix, depth-first in sorted order (deterministic).

    Never follows symlinks (files or folders), skips hidden and sensitive names silently for
    folders and with a reason for files, and refuses non-UTF-8 names (they cannot be stored).
    """
    root = knowledge_dir.resolve()
    start = root / scope if scope else root
    if scope and _has_link_component(root, scope):
        # Checked again here, in the worker: the folder may have been swapped for a link since
        # the service validated the argument.
        yield SkippedEntry(scope, "folder is (or passes through) a symbolic link: not followed")
        return
    stack: list[Path] = [start]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            rel = _rel(root, Path(folder))
            yield SkippedEntry(rel or ".", f"folder not readable: {exc.strerror or exc}")
            continue
        subdirs: list[Path] = []
        for entry in entries:
            name = entry.name
            rel = _rel(root, Path(entry.path))
            if name.startswith(".") or name.lower() in SENSITIVE_DIR_NAMES:
                continue
            if not _utf8_ok(rel):
                yield SkippedEntry(_printable(rel), "file name is not valid UTF-8")
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                yield SkippedEntry(rel, f"cannot stat: {exc.strerror or exc}")
                continue
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(Path(entry.path))
                continue
            supported = Path(name).suffix.lower() in suffixes
            if stat.S_ISLNK(st.st_mode):  # never followed: it could point anywhere
                yield SkippedEntry(rel, "symbolic link: never followed")
                continue
            if not stat.S_ISREG(st.st_mode):  # reading a FIFO or device could block forever
                yield SkippedEntry(rel, "not a regular file (FIFO, socket or device)")
                continue
            if not supported:
                continue
            if is_sensitive_name(name):
                yield SkippedEntry(rel, "sensitive-looking name (keys, credentials, .env)")
                continue
            yield FileEntry(rel, Path(entry.path), st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)
        stack.extend(reversed(subdirs))


def _has_link_component(root: Path, scope: str) -> bool:
    current = root
    for part in PurePosixPath(scope).parts:
        current = current / part
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return True
        except OSError:
            return True
    return False


def open_verified(entry: FileEntry) -> int:
    """Open the planned file without following links and check it is still that file.

    Returns a file descriptor; raises OSError when the path is now a link, another file (a
    parent folder swapped for a link lands on another inode), or not a regular file.
    """
    fd = os.open(entry.abs_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (
        entry.ino and (st.st_dev, st.st_ino) != (entry.dev, entry.ino)
    ):
        os.close(fd)
        raise FileReplaced(
            f"{entry.rel_path} changed while being read (replaced by another file or a link)"
        )
    return fd


def still_same_file(entry: FileEntry) -> bool:
    """After reading: the path is still the planned regular file (not swapped for a link)."""
    try:
        st = os.lstat(entry.abs_path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (
        not entry.ino or (st.st_dev, st.st_ino) == (entry.dev, entry.ino)
    )


class FileReplaced(OSError):
    """The file at a planned path is no longer the file the plan saw (swap, link, rename)."""


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path != root else ""


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
