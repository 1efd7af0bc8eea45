"""Hybrid fusion: each side's 0-1 section scores, and the per-query mix of the two.

rag_search.hybrid_fuse collects the sections of both sides and calls these. The lexical share
of the mix follows how decisive each side is (the gap between its top two sections) and how
much of the query the lexical side really matched: a margin won on one shared word of a query
in another language (a name, a number, a loanword) is no evidence about the rest of it.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass

from helpers.lexical.common import ChannelResult, SearchContext
from helpers.lexical.query_terms import TermGroup
from helpers.ranking.constants import (
    CHANNEL_WEIGHTS,
    HUB_PRIOR,
    HYBRID_LEXICAL_BASE,
    HYBRID_MARGIN_GAIN,
    HYBRID_MATCH_SECTIONS,
    HYBRID_SHARE_BOUNDS,
    SEMANTIC_CHILD_COUNT,
    SEMANTIC_CHILD_SHARE,
)
from helpers.store.codec import section_text
from helpers.text.normalize import fold


@dataclass(frozen=True)
class QueryMatch:
    """How much of the query the lexical side's top sections hold: per content word, its
    weight (rarity in the folder) and whether the best of those sections holds it."""

    weights: tuple[float, ...] = ()
    found: tuple[bool, ...] = ()

    @property
    def share(self) -> float:
        """Rarity-weighted share of the query's content words found (1.0 when unknown)."""
        total = sum(self.weights)
        if total <= 0:
            return 1.0
        return sum(w for w, hit in zip(self.weights, self.found, strict=True) if hit) / total


def lexical_evidence(lexical: list[ChannelResult]) -> dict[int, float]:
    """Per chunk: the weighted sum of each channel's score relative to that channel's best,
    scaled so the best chunk has 1.0.

    Unlike RRF ranks, this keeps how far ahead a hit is: a Thai quotation whose BM25 score is
    2.5x the runner-up's must not tie with it when the cosines are close.
    """
    evidence: dict[int, float] = {}
    for result in lexical:
        top = max((score for _, score in result.ranked), default=0.0)
        if top <= 0:
            continue
        weight = CHANNEL_WEIGHTS.get(result.name, 1.0) * result.coverage
        for chunk_id, score in result.ranked:
            evidence[chunk_id] = evidence.get(chunk_id, 0.0) + weight * max(score, 0.0) / top
    best = max(evidence.values(), default=0.0)
    return {cid: value / best for cid, value in evidence.items()} if best > 0 else {}


def semantic_sections(
    cosines: dict[int, list[float]],
    hubs: dict[int, float] | None = None,
    sizes: dict[int, int] | None = None,
) -> dict[int, float]:
    """Per section: its best child's min-max normalised cosine plus SEMANTIC_CHILD_SHARE x its
    next SEMANTIC_CHILD_COUNT children's, scaled back to a best of 1. A passage whose several
    windows all match the query beats one whose single window happens to (a short generic
    article next to the long one that answers). `sizes` (children per section)
    make it the share of the section that matches, not a count that favours long pages; a hub's
    share shrinks with its hub score: many matching windows are what a contents page is."""
    hubs, sizes = hubs or {}, sizes or {}
    if not cosines:
        return {}
    best = [values[0] for values in cosines.values()]
    high, low = max(best), min(best)
    spread = (high - low) or 1.0
    scores = {}
    for sec, values in cosines.items():
        normed = [max(c - low, 0.0) / spread for c in values[: 1 + SEMANTIC_CHILD_COUNT]]
        share = SEMANTIC_CHILD_SHARE * (1.0 - hubs.get(sec, 0.0))
        size = sizes.get(sec, 0)
        if size > 1 + SEMANTIC_CHILD_COUNT:  # the share of its windows that match, not their count
            share *= (1 + SEMANTIC_CHILD_COUNT) / size
        scores[sec] = normed[0] + share * sum(normed[1:])
    top = max(scores.values()) or 1.0
    return {sec: value / top for sec, value in scores.items()}


def lowered_side(scores: dict[int, float], hubs: dict[int, float]) -> dict[int, float]:
    """One side's 0-1 section scores with the hub prior applied, rescaled to a best of 1."""
    lowered = {sec: v * (1.0 - HUB_PRIOR * hubs.get(sec, 0.0)) for sec, v in scores.items()}
    best = max(lowered.values(), default=0.0)
    return {sec: v / best for sec, v in lowered.items()} if best > 0 else lowered


def hybrid_share(lexical: list[float], semantic: list[float], matched: float = 1.0) -> float:
    """Lexical share for one query from each side's 0-1 section scores: the more decisive
    side (larger gap between its top two) gets more weight, and the lexical side's part above
    the floor shrinks with the share of the query it matched (`matched`, 0-1)."""

    def margin(values: list[float]) -> float:
        top = sorted(values, reverse=True)[:2]
        return top[0] - top[1] if len(top) == 2 else float(bool(top))

    share = HYBRID_LEXICAL_BASE + HYBRID_MARGIN_GAIN * (margin(lexical) - margin(semantic))
    low, high = HYBRID_SHARE_BOUNDS
    share = min(high, max(low, share))
    return low + (share - low) * min(1.0, max(0.0, matched))


def mix(
    lexical: dict[int, float], semantic: dict[int, float], matched: float = 1.0
) -> dict[int, float]:
    """Section -> share x lexical + (1 - share) x semantic, the share chosen per query."""
    share = hybrid_share(list(lexical.values()), list(semantic.values()), matched)
    combined = {sec: share * value for sec, value in lexical.items()}
    for sec, value in semantic.items():
        combined[sec] = combined.get(sec, 0.0) + (1 - share) * value
    return combined


def query_match(ctx: SearchContext, sections: list[int]) -> QueryMatch:
    """The query's content words weighted by rarity in the folder (a word in no document
    weighs most: it is the part of the query the words cannot have matched), each found when
    one of the lexical side's first HYBRID_MATCH_SECTIONS sections (best first) holds it in a
    form the channels accept."""
    groups = ctx.query.content
    if not groups or not sections:
        return QueryMatch()
    total = max(ctx.chunk_count(), 1)
    weights = tuple(math.log(1.0 + total / (1.0 + ctx.doc_freq(g.text))) for g in groups)
    found = [False] * len(groups)
    for text in _section_texts(ctx.conn, sections[:HYBRID_MATCH_SECTIONS]):
        found = [a or b for a, b in zip(found, _held(groups, text), strict=True)]
    return QueryMatch(weights, tuple(found))


def _held(groups: tuple[TermGroup, ...], text: str) -> list[bool]:
    """Per group: whether `text` holds it in an accepted form (as confidence.coverage)."""
    folded = fold(text)
    return [
        any(form and form in folded for form in (g.substrings(recall=False) or (g.text,)))
        for g in groups
    ]


def _section_texts(conn: sqlite3.Connection, sections: list[int]) -> list[str]:
    """The texts of `sections`, in their order (a missing one is left out)."""
    marks = ",".join("?" * len(sections))
    rows = dict(conn.execute(f"SELECT id, text FROM sections WHERE id IN ({marks})", sections))
    return [section_text(rows[sec]) for sec in sections if sec in rows]
