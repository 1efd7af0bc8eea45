"""The user's excludes: `.ragignore` in the knowledge dir (gitignore syntax) plus `--exclude GLOB`.

Matched with pathspec's GitIgnoreSpec (the rules git documents: `dir/`, `/anchored`, `**`,
`!negation`, last match wins), not a hand-written matcher. Like git, a file inside an
excluded folder cannot be re-included: the walk never enters that folder. Excludes only narrow
what is indexed; no tool argument can undo them.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pathspec

RAGIGNORE_NAME = ".ragignore"
# A rules file is a few lines; past this it is probably not one (a log renamed by mistake).
RAGIGNORE_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ExcludeRules:
    """Callable as `excluded(rel_path, is_dir)`, the shape helpers.safety.walk_files takes."""

    spec: pathspec.GitIgnoreSpec | None
    patterns: tuple[str, ...] = ()  # every valid line, .ragignore first, then --exclude
    problems: tuple[str, ...] = ()  # unreadable file, invalid lines: shown as job errors

    def __call__(self, rel_path: str, is_dir: bool) -> bool:
        if self.spec is None:
            return False
        return self.spec.match_file(rel_path + "/" if is_dir else rel_path)

    def __bool__(self) -> bool:
        return self.spec is not None


def load_excludes(knowledge_dir: Path, globs: tuple[str, ...] = ()) -> ExcludeRules:
    """The rules from `<knowledge_dir>/.ragignore` (never through a link) and `globs`."""
    problems: list[str] = []
    lines: list[tuple[str, str]] = []  # (where it came from, the line)
    text = _read_ragignore(knowledge_dir / RAGIGNORE_NAME, problems)
    if text is not None:
        lines += [(f"{RAGIGNORE_NAME} line {n}", ln) for n, ln in enumerate(text.splitlines(), 1)]
    lines += [("--exclude", g) for g in globs]
    valid: list[str] = []
    for where, line in lines:
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except ValueError as exc:  # pathspec's GitIgnorePatternError, e.g. a lone '!'
            problems.append(f"{where}: invalid pattern {line!r} ignored ({exc})")
            continue
        valid.append(line)
    patterns = tuple(p for p in valid if p.strip() and not p.lstrip().startswith("#"))
    spec = pathspec.GitIgnoreSpec.from_lines(valid) if patterns else None
    return ExcludeRules(spec, patterns, tuple(problems))


def _read_ragignore(path: Path, problems: list[str]) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(
            f"{RAGIGNORE_NAME} not read: {exc.strerror or exc} (links are not followed)"
        )
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            problems.append(f"{RAGIGNORE_NAME} is not a regular file: not read")
            return None
        data = f.read(RAGIGNORE_MAX_BYTES + 1)
    if len(data) > RAGIGNORE_MAX_BYTES:
        problems.append(f"{RAGIGNORE_NAME} is over {RAGIGNORE_MAX_BYTES // 1024} KB: not read")
        return None
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def own_folder_rules(knowledge_dir: Path, *folders: Path) -> tuple[str, ...]:
    """Anchored rules for our own folders inside the knowledge dir (a data dir placed there):
    the index must never index its own logs and database."""
    root = knowledge_dir.resolve()
    rules = []
    for folder in folders:
        try:
            rel = folder.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        if rel != ".":
            rules.append(f"/{rel}/")
    return tuple(rules)


def split_exclude_env(value: str) -> tuple[str, ...]:
    """RAGDOC_EXCLUDE: globs separated by commas or os.pathsep (':' here), blanks dropped."""
    parts = value.replace(os.pathsep, ",").split(",")
    return tuple(p.strip() for p in parts if p.strip())


def rules_in_force(knowledge_dir: Path, globs: tuple[str, ...], *own_folders: Path) -> ExcludeRules:
    """What a sync leaves out: <knowledge-dir>/.ragignore, the --exclude globs, and our own
    folders (a data dir inside the knowledge dir). The sync and rag_health both ask here."""
    return load_excludes(knowledge_dir, globs + own_folder_rules(knowledge_dir, *own_folders))
