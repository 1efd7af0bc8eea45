"""What may be read: the knowledge dir only, no hidden or sensitive files, no links out of it."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from helpers.errors import RagError
from helpers.skips import SkipReason

# Names that usually hold secrets; such files are never indexed, even when the user points the
# server at a home folder. Matched case-insensitively against every path component, together
# with the word rule below (`is_secret_store_name`).
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
    "*.kdbx",  # KeePass
    "*.kdb",
    "*.keychain",  # macOS keychains
    "*.keychain-db",
    "*.psafe3",  # Password Safe
    "*.1pif",  # 1Password export
    "*.opvault",
    "*.agilekeychain",
    "*.jceks",
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
    ".git-credentials",
    ".dockercfg",
    ".s3cfg",
    ".boto",
    "*.tfvars",  # Terraform variables: provider keys and passwords
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

# The word rule: a name is a secret store when its words (split at spaces, punctuation, digits
# and camelCase; case-insensitive) hold a secret word and nothing but qualifiers and numbers:
# "Passwords 2024.xlsx", "secret.txt", "github-token.json", "myPasswords.docx", "api_keys.txt".
# A name with any other word is a document ABOUT secrets and is indexed: "password-policy.md",
# "how to rotate tokens.pdf", "secret-santa.docx", "password reset guide.pdf".
SECRET_WORDS = frozenset(
    {
        "password", "passwords", "passwd", "passwds", "pwd", "pwds", "passphrase",
        "passphrases", "passcode", "passcodes", "secret", "secrets",
        "credential", "credentials", "creds", "token", "tokens", "apikey", "apikeys",
        "пароль", "пароли", "паролей", "секреты",  # Russian: password(s), secrets
        "รหัสผ่าน",  # Thai: password
    }
)  # fmt: skip
# "keys"/"codes" alone name keyboard shortcuts or source code; beside one of these kinds they
# are secrets ("api keys", "recovery codes", "PIN codes").
KEY_WORDS = frozenset({"key", "keys", "code", "codes"})
KEY_KINDS = frozenset(
    {
        "api", "private", "ssh", "access", "signing", "encryption", "recovery", "master",
        "license", "backup", "pin", "pins",
    }
)  # fmt: skip
# Words that may stand beside a secret word without making the name a topic: whose, where,
# which service, which copy.
SECRET_QUALIFIERS = frozenset(
    {
        "my", "our", "all", "team", "shared", "personal", "work", "home", "family", "old", "new",
        "backup", "bak", "copy", "orig", "list", "final", "master", "current", "latest",
        "api", "access", "auth", "oauth", "client", "service", "account", "accounts", "user",
        "users", "admin", "root", "login", "logins", "db", "database", "prod", "production",
        "staging", "dev", "test", "local", "aws", "gcp", "azure", "github", "gitlab", "npm",
        "pypi", "docker", "slack", "wifi", "bank", "app", "apps", "web", "site", "vault",
        "store", "file", "export", "v", *KEY_KINDS,
    }
)  # fmt: skip
# ASCII words split at camelCase; other scripts by runs (Thai vowel marks are not \w).
_WORD_PIECES = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[^\x00-\x7F\u00A0-\u00BF\u2000-\u206F]+")


def name_words(name: str) -> list[str]:
    """Lower-case words of a file or folder name without its last suffix (digits dropped);
    a word glued from two known words ("MYPASSWORDS", "wifipassword") is split in two."""
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return [part for w in _WORD_PIECES.findall(stem) for part in _unglue(w.lower())]


_KNOWN_WORDS = SECRET_WORDS | KEY_WORDS | KEY_KINDS | SECRET_QUALIFIERS


def _unglue(word: str) -> list[str]:
    if word not in _KNOWN_WORDS:
        for i in range(1, len(word)):
            if word[:i] in _KNOWN_WORDS and word[i:] in _KNOWN_WORDS:
                return [word[:i], word[i:]]
    return [word]


# Every word that can make a name secret, as one search: such a word is a substring of the
# lower-cased name (name_words only cuts and lower-cases it), so a name without any is no
# secret store, decided without splitting it (most names of a walk).
_SECRET_HINT = re.compile("|".join(map(re.escape, sorted(SECRET_WORDS | KEY_WORDS))))


def is_secret_store_name(name: str) -> bool:
    """The word rule above: secret words plus only qualifiers (numbers are dropped)."""
    if not _SECRET_HINT.search(name.lower()):
        return False
    words = name_words(name)
    secret = {w for w in words if w in SECRET_WORDS}
    if KEY_KINDS.intersection(words):
        secret |= KEY_WORDS.intersection(words)
    return bool(secret) and all(w in secret or w in SECRET_QUALIFIERS for w in words)


class PathRejected(RagError, ValueError):
    """A path argument that would leave the knowledge dir or touch a hidden/sensitive file."""

    code = "path_rejected"

    def __init__(self, message: str, hint: str = "") -> None:
        hint = hint or "pass a path relative to the knowledge dir, as returned by rag_search"
        super().__init__(message, hint)


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
    reason: str  # the sentence shown to the user
    kind: SkipReason = SkipReason.UNREADABLE  # the counted reason (helpers.skips)
    is_dir: bool = False  # a skipped folder counts once; its contents are not walked


_WILDCARDS = frozenset("*?[")


def _pattern_kinds(
    patterns: tuple[str, ...],
) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...], re.Pattern[str]]:
    """The patterns as plain names, `prefix*`, `*suffix` and the rest (one regex): a walk
    checks every name, and str lookups decide what fnmatch would at a fraction of its cost."""
    exact: set[str] = set()
    prefixes: list[str] = []
    suffixes: list[str] = []
    other: list[str] = []
    for pattern in patterns:
        if not _WILDCARDS.intersection(pattern):
            exact.add(pattern)
        elif pattern.startswith("*") and not _WILDCARDS.intersection(pattern[1:]):
            suffixes.append(pattern[1:])
        elif pattern.endswith("*") and not _WILDCARDS.intersection(pattern[:-1]):
            prefixes.append(pattern[:-1])
        else:
            other.append(pattern)
    rest = re.compile("|".join(fnmatch.translate(p) for p in other) or r"(?!)")
    return frozenset(exact), tuple(prefixes), tuple(suffixes), rest


_SENSITIVE_EXACT, _SENSITIVE_PREFIXES, _SENSITIVE_SUFFIXES, _SENSITIVE_NAME_RE = _pattern_kinds(
    SENSITIVE_NAME_PATTERNS
)


def _longest_literal(pattern: str) -> str:
    return max(re.split(r"[*?\[\]]", pattern), key=len)


# A piece every rule needs in the lower-cased name (a pattern's longest literal part, a folder
# name, a secret word): a name holding none is not sensitive, decided by one search. Most names
# of a walk hold none, and the full rules cost more than the walk's stat call.
_SENSITIVE_HINT = re.compile(
    "|".join(
        re.escape(piece)
        for piece in sorted(
            {_longest_literal(p) for p in SENSITIVE_NAME_PATTERNS}
            | SENSITIVE_DIR_NAMES
            | SECRET_WORDS
            | KEY_WORDS
        )
    )
)


def is_sensitive_name(name: str) -> bool:
    lower = name.lower()
    if not _SENSITIVE_HINT.search(lower):
        return False
    if lower.endswith(".gz") and len(lower) > 3 and is_sensitive_name(name[:-3]):
        return True  # a gzipped copy is as sensitive: `server.key.gz`, `passwords.txt.gz`
    if lower in SENSITIVE_DIR_NAMES or lower in _SENSITIVE_EXACT:
        return True
    if lower.startswith(_SENSITIVE_PREFIXES) or lower.endswith(_SENSITIVE_SUFFIXES):
        return True
    if _SENSITIVE_NAME_RE.match(lower):
        return True
    return is_secret_store_name(name)


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


def like_escape(text: str) -> str:
    """`text` as a literal inside a LIKE pattern written with ESCAPE '\\'."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def scope_like_pattern(prefix: str) -> str:
    """The SQL twin of `in_scope`: `path = ? OR path LIKE ? ESCAPE '\\'` with this pattern."""
    return like_escape(prefix.strip("/")) + "/%"


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


class WalkedFile(NamedTuple):
    """A file walk_stats yielded: a FileEntry's facts with the path still a string (a Path
    object per file cost more than its stat call on a no-op resync, which needs Paths only
    for the files that changed). A NamedTuple: immutable, and a quarter of a frozen
    dataclass's construction cost, paid once per walked file."""

    rel_path: str
    abs_path: str
    size: int
    mtime_ns: int
    dev: int
    ino: int

    def entry(self) -> FileEntry:
        return FileEntry(
            self.rel_path, Path(self.abs_path), self.size, self.mtime_ns, self.dev, self.ino
        )


def walk_files(
    knowledge_dir: Path,
    suffixes: frozenset[str],
    scope: str = "",
    excluded: Callable[[str, bool], bool] | None = None,
) -> Iterator[FileEntry | SkippedEntry]:
    """Regular files with a supported suffix, depth-first in sorted order (deterministic), and a
    SkippedEntry with its reason for everything else the walk sees (nothing is left out
    silently; a skipped folder is one entry and is not descended into).

    Never follows symlinks (files or folders), never reads hidden or sensitive names, refuses
    non-UTF-8 names (they cannot be stored); `excluded(rel_path, is_dir)` applies the user's
    excludes (.ragignore, --exclude).
    """
    for found in walk_stats(knowledge_dir, suffixes, scope, excluded):
        yield found.entry() if isinstance(found, WalkedFile) else found


def walk_stats(
    knowledge_dir: Path,
    suffixes: frozenset[str],
    scope: str = "",
    excluded: Callable[[str, bool], bool] | None = None,
) -> Iterator[WalkedFile | SkippedEntry]:
    """walk_files with each file as a WalkedFile (same files, order and skips)."""
    root = knowledge_dir.resolve()
    start = root / scope if scope else root
    if scope and _has_link_component(root, scope):
        # Checked again here, in the worker: the folder may have been swapped for a link since
        # the service validated the argument.
        yield SkippedEntry(
            scope,
            "folder is (or passes through) a symbolic link: not followed",
            SkipReason.SYMLINK,
            True,
        )
        return
    if scope and excluded is not None:
        parts = PurePosixPath(scope.strip("/")).parts
        for i in range(1, len(parts) + 1):
            if excluded("/".join(parts[:i]), True):  # a scope argument never un-excludes
                yield SkippedEntry(scope.strip("/"), "excluded folder", SkipReason.EXCLUDED, True)
                return
    # (absolute folder, its '/'-separated path relative to root): plain strings, because Path
    # objects per entry cost more than the stat calls on a no-op resync.
    stack: list[tuple[str, str]] = [(str(start), scope.strip("/") if scope else "")]
    while stack:
        folder, folder_rel = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield SkippedEntry(
                folder_rel or ".",
                f"folder not readable: {exc.strerror or exc}",
                SkipReason.UNREADABLE,
                True,
            )
            continue
        subdirs: list[tuple[str, str]] = []
        folder_ascii = folder_rel.isascii()  # an ASCII path always encodes: no check needed
        for entry in entries:
            name = entry.name
            rel = f"{folder_rel}/{name}" if folder_rel else name
            if not (folder_ascii and name.isascii()) and not _utf8_ok(rel):
                yield SkippedEntry(
                    _printable(rel), "file name is not valid UTF-8", SkipReason.BAD_NAME
                )
                continue
            if name.startswith("."):
                is_dir = entry.is_dir(follow_symlinks=False)
                yield SkippedEntry(rel, "hidden file or folder", SkipReason.HIDDEN, is_dir)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                yield SkippedEntry(rel, f"cannot stat: {exc.strerror or exc}")
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if excluded is not None and excluded(rel, is_dir):
                what = "excluded folder" if is_dir else "excluded file"
                yield SkippedEntry(rel, what, SkipReason.EXCLUDED, is_dir)
                continue
            if is_dir:
                if is_sensitive_name(name):  # rel_path_problem refuses its files on rag_read too
                    yield SkippedEntry(
                        rel,
                        "sensitive-looking folder name: never indexed",
                        SkipReason.SENSITIVE,
                        True,
                    )
                else:
                    subdirs.append((entry.path, rel))
                continue
            if stat.S_ISLNK(st.st_mode):  # never followed: it could point anywhere
                yield SkippedEntry(rel, "symbolic link: never followed", SkipReason.SYMLINK)
                continue
            if not stat.S_ISREG(st.st_mode):  # reading a FIFO or device could block forever
                yield SkippedEntry(
                    rel, "not a regular file (FIFO, socket or device)", SkipReason.SPECIAL
                )
                continue
            # The type first: the name rules cost more than the walk itself on a folder of
            # 50,000 unsupported files, and such a file is never read anyway.
            if os.path.splitext(name)[1].lower() not in suffixes:
                yield SkippedEntry(rel, "unsupported file type", SkipReason.UNSUPPORTED)
                continue
            if is_sensitive_name(name):
                yield SkippedEntry(
                    rel, "sensitive-looking name (keys, credentials, .env)", SkipReason.SENSITIVE
                )
                continue
            yield WalkedFile(rel, entry.path, st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)
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


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
