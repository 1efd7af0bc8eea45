"""The golden file of `rag_eval.py`: its records and its parser, which checks every entry
against the knowledge dir and reports all problems at once (pure: reads only the file and the
existence of the relevant paths)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

UNDETERMINED_LANG = "und"  # BCP 47 "undetermined", for queries without a "lang"
MAX_PROBLEMS_SHOWN = 20  # a badly broken golden file should not scroll the first problems away


class EvalInputError(Exception):
    """The golden file, the arguments or the knowledge dir cannot be evaluated (exit 2)."""


@dataclass(frozen=True)
class RelevantDoc:
    path: str  # relative to the knowledge dir, '/'-separated, as hits report it
    location: dict[str, Any] | None = None  # page/slide/sheet/heading: scored at that level


@dataclass(frozen=True)
class GoldenQuery:
    query_id: str
    query: str
    relevant: tuple[RelevantDoc, ...]
    lang: str
    group: str = ""  # e.g. how the query was derived ("index", "bookmark"); reported apart

    @property
    def located(self) -> bool:
        """A query with a location on any relevant entry is also scored at unit level."""
        return any(r.location for r in self.relevant)


@dataclass(frozen=True)
class GoldenSet:
    name: str
    queries: tuple[GoldenQuery, ...]
    # Units that list every topic and answer none (contents and index pages): how often one of
    # them is the top hit is reported, never used for the ranking.
    hubs: tuple[RelevantDoc, ...] = ()


def _relative_path(value: str) -> str | None:
    """The path as hits report it, or None when it could leave the knowledge dir."""
    if "\\" in value or value.startswith("/"):
        return None
    parts = [p for p in PurePosixPath(value).parts if p != "."]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def _parse_relevant(item: Any, where: str, knowledge_dir: Path, problems: list[str]) -> list:
    if isinstance(item, str):
        raw, location = item, None
    elif isinstance(item, dict):
        raw, location = item.get("path"), item.get("location")
        if not isinstance(raw, str):
            problems.append(f"{where}: a relevant entry object needs a string 'path'")
            return []
        if location is not None and not isinstance(location, dict):
            problems.append(f"{where}: 'location' of {raw!r} must be an object")
            return []
    else:
        problems.append(f"{where}: a relevant entry must be a path or {{'path', 'location'}}")
        return []
    rel = _relative_path(raw.strip())
    if rel is None:
        problems.append(f"{where}: relevant path {raw!r} must be relative to the knowledge dir")
        return []
    if not (knowledge_dir / rel).is_file():
        problems.append(f"{where}: relevant file {rel!r} does not exist in {knowledge_dir}")
        return []
    return [RelevantDoc(rel, location)]


def _parse_query(
    entry: Any, index: int, knowledge_dir: Path, problems: list[str]
) -> GoldenQuery | None:
    where = f"queries[{index}]"
    if not isinstance(entry, dict):
        problems.append(f"{where}: must be an object with id, query, relevant, lang")
        return None
    qid = entry.get("id")
    if not isinstance(qid, str) or not qid.strip():
        problems.append(f"{where}: 'id' must be a non-empty string")
        return None
    where = f"{where} (id {qid!r})"
    ok = True
    text = entry.get("query")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: 'query' must be a non-empty string")
        ok = False
    lang = entry.get("lang", UNDETERMINED_LANG)
    if not isinstance(lang, str) or not lang.strip():
        problems.append(f"{where}: 'lang' must be a non-empty string (e.g. 'en', 'ru', 'th')")
        ok = False
    relevant_raw = entry.get("relevant")
    if not isinstance(relevant_raw, list) or not relevant_raw:
        problems.append(f"{where}: 'relevant' must be a non-empty list of paths")
        return None
    relevant: list[RelevantDoc] = []
    for item in relevant_raw:
        relevant += _parse_relevant(item, where, knowledge_dir, problems)
    group = entry.get("group", "")
    if not isinstance(group, str):
        problems.append(f"{where}: 'group' must be a string")
        ok = False
    if not ok or len(relevant) != len(relevant_raw):
        return None
    return GoldenQuery(qid, text.strip(), tuple(relevant), lang.strip(), group.strip())


def load_golden(path: Path, knowledge_dir: Path) -> GoldenSet:
    """Parse and check a golden file against the knowledge dir; EvalInputError lists problems."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EvalInputError(f"golden file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalInputError(f"golden file {path} cannot be read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise EvalInputError(f"golden file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise EvalInputError(f"{path}: the top level must be an object with 'name' and 'queries'")
    name = data.get("name", path.parent.name)
    if not isinstance(name, str) or not name.strip():
        raise EvalInputError(f"{path}: 'name' must be a non-empty string")
    entries = data.get("queries")
    if not isinstance(entries, list):
        raise EvalInputError(f"{path}: 'queries' must be a list of query objects")
    if not entries:
        raise EvalInputError(f"{path}: 'queries' is empty: nothing to evaluate")
    problems: list[str] = []
    queries: list[GoldenQuery] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        qid = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(qid, str) and qid.strip():
            if qid in seen:
                problems.append(f"queries[{index}]: duplicate id {qid!r}")
            seen.add(qid)
        parsed = _parse_query(entry, index, knowledge_dir, problems)
        if parsed is not None:
            queries.append(parsed)
    hubs: list[RelevantDoc] = []
    hubs_raw = data.get("hubs", [])
    if not isinstance(hubs_raw, list):
        problems.append("'hubs' must be a list of {'path', 'location'} entries")
        hubs_raw = []
    for index, item in enumerate(hubs_raw):
        hubs += _parse_relevant(item, f"hubs[{index}]", knowledge_dir, problems)
    if problems:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        tail = [f"... and {more} more"] if more else []
        raise EvalInputError(
            f"{path}: {len(problems)} problem(s):\n  " + "\n  ".join([*shown, *tail])
        )
    return GoldenSet(name.strip(), tuple(queries), tuple(hubs))
