"""Fusion: the lexical channels' Reciprocal Rank Fusion (rrf_fuse), and hybrid fusion
(hybrid_fuse): each side's 0-1 section scores and the per-query mix of the two, whose lexical
share follows how decisive each side is (the gap between its top two sections).
"""

from __future__ import annotations

from collections.abc import Callable

from helpers.lexical.common import ChannelResult
from helpers.lexical.proximity import scaled_evidence
from helpers.ranking.constants import (
    CHANNEL_WEIGHTS,
    HUB_PRIOR,
    HYBRID_LEXICAL_BASE,
    HYBRID_MARGIN_GAIN,
    HYBRID_SHARE_BOUNDS,
    RRF_K,
    SEMANTIC_CHILD_COUNT,
    SEMANTIC_CHILD_SHARE,
)
from helpers.results import ChannelRank


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


def rrf_fuse(
    results: list[ChannelResult],
    weights: dict[str, float],
    tie_key: Callable[[int], tuple[object, ...]] | None = None,
    constants: dict[str, float] | None = None,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """(chunk id, fused score, per-channel rank) sorted by score; ties by `tie_key` (path, then
    position in the file, when search() supplies it), else by chunk id. `constants`: a
    channel's own RRF constant instead of RRF_K, its weight scaled so that its rank 1 counts
    the same (a smaller constant only makes its lower ranks count less)."""
    fused: dict[int, float] = {}
    ranks: dict[int, dict[str, ChannelRank]] = {}
    for result in results:
        weight = weights.get(result.name, 1.0) * result.coverage
        k = (constants or {}).get(result.name, RRF_K)
        weight *= (k + 1) / (RRF_K + 1)
        for position, (chunk_id, score) in enumerate(result.ranked, start=1):
            rank = result.ranks[position - 1] if result.ranks else position
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (k + rank)
            ranks.setdefault(chunk_id, {})[result.name] = ChannelRank(rank, score)
    order = tie_key or (lambda cid: (cid,))
    return sorted(
        ((cid, score, ranks[cid]) for cid, score in fused.items()),
        key=lambda x: (-round(x[1], 12), order(x[0])),
    )


def hybrid_fuse(
    lexical: list[ChannelResult],
    semantic: ChannelResult,
    section_of: Callable[[list[int]], dict[int, int]],
    hubs_of: Callable[[list[int]], dict[int, float]] | None = None,
    sizes_of: Callable[[list[int]], dict[int, int]] | None = None,
    proximity_of: Callable[[list[int]], dict[int, float]] | None = None,
    lift: float = 0.0,
    unit_factors_of: Callable[[ChannelResult, float], dict[int, float]] | None = None,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """Convex combination per parent section of lexical evidence and normalised cosine, with
    the lexical share chosen per query (hybrid_share).

    Fusing per section, not per chunk, lets the two sides agree when they picked different
    chunks of the same passage. Each side keeps its best chunk per section; the section is
    represented by the lexical chunk when there is one (its snippet shows the query words).
    The hub prior lowers hub sections on each side before the mix, and each side is scaled
    back to a best of 1: a hub falls behind sections that match about as well on that side,
    but when only hubs hold the query's words it keeps the full lexical weight. The units
    channel is no channel here but a `lift` of the lexical evidence (unit_lift; its factor
    `unit_factors_of`, default unit_factors: rag_search passes units.tail_factors).
    """
    units = next((r for r in lexical if r.name == "units"), None)
    lexical = [r for r in lexical if r.name != "units"]
    lex_ranked = rrf_fuse(lexical, CHANNEL_WEIGHTS)
    evidence = lexical_evidence(lexical)
    if units is not None:
        evidence = unit_lift(evidence, units, lift, unit_factors_of)
    if proximity_of is not None:  # words that stand together (helpers.lexical.proximity)
        ordered = sorted(evidence, key=lambda cid: (-evidence[cid], cid))
        evidence = scaled_evidence(evidence, proximity_of(ordered))
    sections = section_of([cid for cid, _, _ in lex_ranked] + [cid for cid, _ in semantic.ranked])
    chosen: dict[int, int] = {}  # section -> representative chunk
    ranks: dict[int, dict[str, ChannelRank]] = {}
    lexical_best: dict[int, float] = {}
    for cid, _score, channel_ranks in lex_ranked:
        section = sections.get(cid)
        value = evidence.get(cid, 0.0)
        if section is None or value <= lexical_best.get(section, -1.0):
            continue
        lexical_best[section] = value
        chosen[section] = cid
        ranks[section] = dict(channel_ranks)
    cosines: dict[int, list[float]] = {}  # section -> its candidate children's cosines, best first
    for rank, (cid, cosine) in enumerate(semantic.ranked, start=1):
        section = sections.get(cid)
        if section is None:
            continue
        if section not in cosines:  # ranked best first: the section's best chunk comes first
            chosen.setdefault(section, cid)
            ranks.setdefault(section, {})["semantic"] = ChannelRank(rank, cosine)
        cosines.setdefault(section, []).append(cosine)
    section_hub: dict[int, float] = {}
    if hubs_of is not None:
        hubs = hubs_of(list(chosen.values()))
        section_hub = {sec: hubs.get(cid, 0.0) for sec, cid in chosen.items()}
    sizes = (
        sizes_of([sec for sec, values in cosines.items() if len(values) > 1]) if sizes_of else {}
    )
    cosine_best = semantic_sections(cosines, section_hub, sizes)
    if hubs_of is not None:
        lexical_best = lowered_side(lexical_best, section_hub)
        cosine_best = lowered_side(cosine_best, section_hub)
    combined = mix(lexical_best, cosine_best)
    return sorted(
        ((chosen[sec], score, ranks[sec]) for sec, score in combined.items()),
        key=lambda x: (-round(x[1], 12), x[0]),
    )
