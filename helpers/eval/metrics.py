"""Retrieval metrics at document level (pure functions, no I/O), used by `rag_eval.py`.

A query's ranking is collapsed to distinct documents in rank order first: several sections of
one file must count once, or one long document could fill the top k on its own.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECALL_CUTOFFS = (1, 3, 8)  # 1: the agent reads only the top hit; 8: the default top_k
MRR_CUTOFF = 10  # the usual MRR@10: a relevant document below rank 10 is as good as missed
LATENCY_PERCENTILES = (50, 95)


@dataclass(frozen=True)
class QueryOutcome:
    """One evaluated query: where its first relevant document landed and how long it took."""

    query_id: str
    lang: str
    rank: int | None  # 1-based rank of the first relevant document; None = not retrieved
    top: tuple[str, ...]  # distinct documents in rank order
    latency_ms: float


@dataclass(frozen=True)
class Metrics:
    queries: int
    recall: dict[int, float]  # cut-off k -> share of queries with a relevant doc in the top k
    mrr: float  # MRR@MRR_CUTOFF
    zero_results: int  # queries for which search returned nothing at all
    latency_ms: dict[int, float]  # percentile -> milliseconds

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queries": self.queries}
        for k, value in sorted(self.recall.items()):
            out[f"recall@{k}"] = round(value, 4)
        out[f"mrr@{MRR_CUTOFF}"] = round(self.mrr, 4)
        out["zero_results"] = self.zero_results
        out["latency_ms"] = {f"p{p}": round(v, 2) for p, v in sorted(self.latency_ms.items())}
        return out


def distinct_documents(paths: Iterable[str]) -> list[str]:
    """Paths in first-seen order without repeats (hits are sections; documents are scored)."""
    return list(dict.fromkeys(paths))


def first_relevant_rank(documents: Sequence[str], relevant: Iterable[str]) -> int | None:
    """1-based rank of the first relevant document, or None when none was retrieved."""
    wanted = set(relevant)
    for rank, path in enumerate(documents, start=1):
        if path in wanted:
            return rank
    return None


def recall_at(ranks: Sequence[int | None], k: int) -> float:
    """Share of queries with at least one relevant document in the top k (0.0 for no queries)."""
    if not ranks:
        return 0.0
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def mrr_at(ranks: Sequence[int | None], k: int = MRR_CUTOFF) -> float:
    """Mean reciprocal rank of the first relevant document; a rank beyond k scores 0."""
    if not ranks:
        return 0.0
    return sum(1.0 / r for r in ranks if r is not None and r <= k) / len(ranks)


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0.0 for no values."""
    if not values:
        return 0.0
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be within 0..100, got {pct}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * pct / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(outcomes: Sequence[QueryOutcome], extra_cutoffs: Iterable[int] = ()) -> Metrics:
    ranks = [o.rank for o in outcomes]
    latencies = [o.latency_ms for o in outcomes]
    cutoffs = sorted({*RECALL_CUTOFFS, *extra_cutoffs})
    return Metrics(
        queries=len(outcomes),
        recall={k: recall_at(ranks, k) for k in cutoffs},
        mrr=mrr_at(ranks, MRR_CUTOFF),
        zero_results=sum(1 for o in outcomes if not o.top),
        latency_ms={p: percentile(latencies, p) for p in LATENCY_PERCENTILES},
    )


def summarize_by_lang(
    outcomes: Sequence[QueryOutcome], extra_cutoffs: Iterable[int] = ()
) -> dict[str, Metrics]:
    """The same metrics per query language, languages in sorted order."""
    groups: dict[str, list[QueryOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.lang, []).append(outcome)
    cutoffs = tuple(extra_cutoffs)
    return {lang: summarize(groups[lang], cutoffs) for lang in sorted(groups)}


# -- unit level (page / slide / sheet / heading) ------------------------------------------------
# A golden `relevant` entry with a `location` names the place in the file, not only the file.
# These keys of a location identify the unit; a hit's location dict (Location.to_dict) is
# matched against them. `heading` matches any level of the hit's heading path.
UNIT_KEYS = ("page", "slide", "sheet")


def unit_key(path: str, location: dict[str, Any]) -> tuple[Any, ...]:
    """The unit a hit lies in: its file plus page/slide/sheet, else its heading path.

    Two sections of one page (a PDF page cut at a heading) are one unit: page-level ranks count
    pages, not the pieces a page was cut into.
    """
    place = tuple(location.get(k) for k in UNIT_KEYS)
    if any(v is not None for v in place):
        return (path, *place, ())
    return (path, *place, tuple(location.get("heading_path") or ()))


def location_matches(wanted: dict[str, Any] | None, location: dict[str, Any]) -> bool:
    """True when a hit's location lies in the wanted unit (no wanted location: any place)."""
    if not wanted:
        return True
    for key in UNIT_KEYS:
        if key in wanted and location.get(key) != wanted[key]:
            return False
    path = tuple(location.get("heading_path") or ())
    if "heading" in wanted and wanted["heading"] not in path:
        return False
    want_path = tuple(wanted.get("heading_path") or ())
    return not want_path or path[: len(want_path)] == want_path


def first_relevant_unit_rank(
    hits: Sequence[tuple[str, dict[str, Any]]],
    relevant: Sequence[tuple[str, dict[str, Any] | None]],
) -> tuple[int | None, list[tuple[Any, ...]]]:
    """1-based rank among distinct units of the first hit in a relevant unit, and the units."""
    units: dict[tuple[Any, ...], bool] = {}
    for path, location in hits:
        key = unit_key(path, location)
        hit = any(p == path and location_matches(w, location) for p, w in relevant)
        units[key] = units.get(key, False) or hit
    order = list(units)
    for rank, key in enumerate(order, start=1):
        if units[key]:
            return rank, order
    return None, order


def _file_digest(path: Path) -> str | None:
    """sha256 of a document's bytes (None when unreadable): copies are told apart by it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return _digest_of(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=65536)
def _digest_of(path: Path, size: int, mtime_ns: int) -> str | None:
    """Cached per (path, size, mtime): a PDF set hashes its few big files once, not per query."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def copy_rank(knowledge_dir: Path, documents: Sequence[str], relevant: Sequence[str]) -> int | None:
    """Rank of the first document with the bytes of a relevant one. A golden query can name one
    of several identical files (manru: `latin1.7.md` = `iso_8859-1.7.md` = ...); no ranking can
    tell them apart and the MCP answer lists the others in the hit's `other_paths`, so this is
    the rank an agent gets. Reported beside the path-exact metrics, never instead of them."""
    wanted = {d for d in (_file_digest(knowledge_dir / r) for r in relevant) if d}
    for rank, path in enumerate(documents, start=1):
        if path in relevant or _file_digest(knowledge_dir / path) in wanted:
            return rank
    return None
