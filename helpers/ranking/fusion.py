"""Hybrid fusion: each side's 0-1 section scores, and the per-query mix of the two.

rag_search.hybrid_fuse collects the sections of both sides and calls these; the lexical share
of the mix follows how decisive each side is (the gap between its top two sections).
"""

from __future__ import annotations

from collections.abc import Callable

from helpers.lexical.common import ChannelResult
from helpers.ranking.constants import (
    CHANNEL_WEIGHTS,
    HUB_PRIOR,
    HYBRID_LEXICAL_BASE,
    HYBRID_MARGIN_GAIN,
    HYBRID_SHARE_BOUNDS,
    SEMANTIC_CHILD_COUNT,
    SEMANTIC_CHILD_SHARE,
)


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


def hybrid_share(lexical: list[float], semantic: list[float]) -> float:
    """Lexical share for one query from each side's 0-1 section scores: the more decisive
    side (larger gap between its top two) gets more weight."""

    def margin(values: list[float]) -> float:
        top = sorted(values, reverse=True)[:2]
        return top[0] - top[1] if len(top) == 2 else float(bool(top))

    share = HYBRID_LEXICAL_BASE + HYBRID_MARGIN_GAIN * (margin(lexical) - margin(semantic))
    low, high = HYBRID_SHARE_BOUNDS
    return min(high, max(low, share))


def mix(lexical: dict[int, float], semantic: dict[int, float]) -> dict[int, float]:
    """Section -> share x lexical + (1 - share) x semantic, the share chosen per query."""
    share = hybrid_share(list(lexical.values()), list(semantic.values()))
    combined = {sec: share * value for sec, value in lexical.items()}
    for sec, value in semantic.items():
        combined[sec] = combined.get(sec, 0.0) + (1 - share) * value
    return combined


def unit_factors(units: ChannelResult, lift: float) -> dict[int, float]:
    """Chunk -> 1 + lift x its document's unit score relative to the best document's: one
    bounded factor per document, so the order of its chunks is kept."""
    top = max((score for _, score in units.ranked), default=0.0)
    if lift <= 0 or top <= 0:
        return {}
    return {cid: 1.0 + lift * max(score, 0.0) / top for cid, score in units.ranked}


def unit_lift(
    evidence: dict[int, float],
    units: ChannelResult,
    lift: float,
    factors_of: Callable[[ChannelResult, float], dict[int, float]] | None = None,
) -> dict[int, float]:
    """Per chunk: its lexical evidence x its unit factor (`factors_of`, default unit_factors),
    rescaled to a best of 1; chunks the units channel did not rank keep theirs. Unlike a channel
    score, which gives each chunk of the top document the same full share, the passage margin
    survives."""
    factors = (factors_of or unit_factors)(units, lift)
    if not factors or not evidence:
        return evidence
    lifted = {cid: value * factors.get(cid, 1.0) for cid, value in evidence.items()}
    best = max(lifted.values())
    return {cid: value / best for cid, value in lifted.items()} if best > 0 else lifted
