"""How much a search response can be trusted: `high`, `medium` or `low`, from evidence the fused
ranking already carries (no second retrieval, no model call, no read: the same inputs give the
same band).

Evidence of the top hit: which sides found it (lexical channels, semantic) and how high, the
share of the query's content words its section holds, how far its fused score stands above the
runner-up's, its cosine, whether its section only points at the answer (a cross-reference
that quotes the query), and in lexical mode where the units channel (whole pages) ranks its
document and by what margin. rag_search fills coverage, the pointer weight and the units margin
in the result (TopMatch); `assess` reads the rest from the hits. Without a cosine the lexical
side decides alone, by a rule of its own (`_lexical_band`). The thresholds are in
helpers.ranking.constants; a ranking change may move their calibration: re-run
bench/bench_confidence.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from helpers.lexical.common import ChannelResult
from helpers.lexical.query_terms import Query
from helpers.ranking.constants import (
    AGREE_BY_DOCUMENT,
    AGREE_FOR_HIGH,
    AGREE_RANK,
    AGREED_COSINE_MIN,
    COSINE_GAP_MIN,
    COSINE_MIN,
    COSINE_STRONG,
    COVERAGE_MIN,
    FULL_COVERAGE_LEXICAL,
    HUB_MAX_HIGH,
    LEXICAL_AGREE_RANK,
    MARGIN_AGREED,
    MARGIN_BY_DOCUMENT,
    MARGIN_BY_DOCUMENT_LEXICAL,
    MARGIN_HIGH,
    MARGIN_HIGH_LEXICAL,
    OWN_MARGIN_LEXICAL,
    POINTER_MAX_HIGH,
    UNIT_AGREE_HYBRID,
    UNIT_AGREE_LEXICAL,
    UNIT_MARGIN_LEXICAL,
    UNIT_ROUTE_HYBRID,
)
from helpers.results import Hit, SearchResult
from helpers.text.normalize import fold

__all__ = [
    "AGREE_BY_DOCUMENT",
    "AGREE_FOR_HIGH",
    "AGREE_RANK",
    "AGREED_COSINE_MIN",
    "COSINE_GAP_MIN",
    "COSINE_MIN",
    "COSINE_STRONG",
    "COVERAGE_MIN",
    "FULL_COVERAGE_LEXICAL",
    "HUB_MAX_HIGH",
    "LEXICAL_AGREE_RANK",
    "MARGIN_AGREED",
    "MARGIN_BY_DOCUMENT",
    "MARGIN_BY_DOCUMENT_LEXICAL",
    "MARGIN_HIGH",
    "MARGIN_HIGH_LEXICAL",
    "OWN_MARGIN_LEXICAL",
    "POINTER_MAX_HIGH",
    "UNIT_AGREE_HYBRID",
    "UNIT_AGREE_LEXICAL",
    "UNIT_MARGIN_LEXICAL",
    "UNIT_ROUTE_HYBRID",
    "Evidence",
    "assess",
    "band",
    "coverage",
    "evidence",
    "unit_margin",
]


@dataclass(frozen=True)
class Evidence:
    hits: int
    coverage: float  # 0-1, content words of the query found in the top section
    lexical: bool  # a lexical channel has the top hit within AGREE_RANK
    semantic: bool  # the semantic channel has it within AGREE_RANK
    cosine: float | None  # the top hit's cosine, None when semantic did not run
    margin: float  # (top score - runner-up) / top score; 1.0 for a single hit (or copies)
    cosine_gap: float  # top hit's cosine minus the median cosine of the other hits (0: none)
    hub: float = 0.0  # the top section's hub score (sections.hub: 0 prose, 1 a contents page)
    pointer: float = 0.0  # how far the top section matches only by quoting the query (0-1)
    lexical_rank: int | None = None  # the top hit's best rank in a lexical channel (None: none)
    semantic_rank: int | None = None  # its rank in the semantic channel (None: not there)
    doc_margin: float = 0.0  # the margin over the first hit of another document (not a copy)
    doc_lexical_rank: int | None = None  # best lexical rank of any hit of the top document
    doc_semantic_rank: int | None = None  # best semantic rank of any hit of the top document
    units_ran: bool = False  # the units channel ranked documents for this query
    unit_rank: int | None = None  # the top hit's rank there (its document's); None: not there
    unit_margin: float = 0.0  # that channel's margin of its first document over its second


def evidence(result: SearchResult) -> Evidence:
    if not result.hits:
        return Evidence(0, 0.0, False, False, None, 0.0, 0.0)
    top = result.hits[0]
    sem = top.channels.get("semantic")
    cosine = sem.score if sem is not None else None
    if cosine is None and "semantic" in result.channels_used:
        cosine = 0.0  # semantic ran and did not find the top hit at all
    # The runner-up is the first hit with other text: a copy of the top document ties with it.
    top_text = result.sections.get(top.section_id)
    other_text = [h for h in result.hits[1:] if result.sections.get(h.section_id) != top_text]
    own = [
        h
        for h in result.hits
        if h.path == top.path or result.sections.get(h.section_id) == top_text
    ]
    other_doc = next((h for h in other_text if h.path != top.path), None)
    others = sorted(
        h.channels["semantic"].score for h in result.hits[1:] if "semantic" in h.channels
    )
    gap = (cosine or 0.0) - others[len(others) // 2] if others and cosine else 0.0
    lexical_rank = _best_rank([top], lexical=True)
    return Evidence(
        hits=len(result.hits),
        coverage=result.top.coverage,
        lexical=lexical_rank is not None and lexical_rank <= AGREE_RANK,
        semantic=sem is not None and sem.rank <= AGREE_RANK,
        cosine=cosine,
        margin=_margin(top.score, other_text[0].score if other_text else 0.0),
        cosine_gap=gap,
        hub=top.hub,
        pointer=result.top.pointer,
        lexical_rank=lexical_rank,
        semantic_rank=sem.rank if sem is not None else None,
        doc_margin=_margin(top.score, other_doc.score if other_doc else 0.0),
        doc_lexical_rank=_best_rank(own, lexical=True),
        doc_semantic_rank=_best_rank(own, lexical=False),
        units_ran="units" in result.channels_used,
        unit_rank=result.top.unit_rank,  # rag_search reads the hit's own units rank first
        unit_margin=result.top.unit_margin,
    )


def _margin(top: float, second: float) -> float:
    return (top - second) / top if top > 0 else 0.0


def unit_margin(results: Sequence[ChannelResult]) -> float:
    """The units channel's margin of its first document over its second (1.0: one document,
    0.0: it did not run): whole-page BM25 is evidence of its own on which page answers."""
    units = next((r for r in results if r.name == "units" and r.ranked), None)
    if units is None:
        return 0.0
    ranks = units.ranks or tuple(range(1, len(units.ranked) + 1))
    scores: dict[int, float] = {}
    for (_, score), rank in zip(units.ranked, ranks, strict=True):
        scores.setdefault(rank, score)
    return _margin(scores.get(1, 0.0), scores.get(2, 0.0))


# Channels whose rank is not the chunk's own: the units channel gives every chunk of a unit that
# unit's rank, so it says nothing about whether this passage is the one (helpers.lexical.units).
SHARED_RANK_CHANNELS = frozenset({"units"})


def _best_rank(hits: list[Hit], lexical: bool) -> int | None:
    """Best rank of these hits in the lexical channels (or in the semantic one); None: none."""
    ranks = [
        c.rank
        for h in hits
        for n, c in h.channels.items()
        if (n != "semantic") == lexical and n not in SHARED_RANK_CHANNELS
    ]
    return min(ranks) if ranks else None


def coverage(query: Query, text: str) -> float:
    """Share of the query's content words that occur in `text` (any accepted form)."""
    groups = query.content
    if not groups:
        return 0.0
    folded = fold(text)
    found = 0
    for group in groups:
        forms = group.substrings(recall=False) or (group.text,)
        if any(form and form in folded for form in forms):
            found += 1
    return found / len(groups)


def band(
    ev: Evidence,
    margin_high: float = MARGIN_HIGH,
    agree_for_high: bool = AGREE_FOR_HIGH,
    hub_max_high: float = HUB_MAX_HIGH,
    cosine_strong: float = COSINE_STRONG,
    pointer_max_high: float = POINTER_MAX_HIGH,
    margin_agreed: float | None = MARGIN_AGREED,
    lexical_agree_rank: int = LEXICAL_AGREE_RANK,
    agreed_cosine_min: float = AGREED_COSINE_MIN,
    margin_by_document: bool = MARGIN_BY_DOCUMENT,
    agree_by_document: bool = AGREE_BY_DOCUMENT,
    coverage_min: float = COVERAGE_MIN,
    margin_high_lexical: float = MARGIN_HIGH_LEXICAL,
    margin_by_document_lexical: bool = MARGIN_BY_DOCUMENT_LEXICAL,
    unit_agree_lexical: bool = UNIT_AGREE_LEXICAL,
    unit_margin_lexical: float = UNIT_MARGIN_LEXICAL,
    full_coverage_lexical: bool = FULL_COVERAGE_LEXICAL,
    own_margin_lexical: float | None = OWN_MARGIN_LEXICAL,
    unit_agree_hybrid: bool = UNIT_AGREE_HYBRID,
    unit_route_hybrid: tuple[float, float] | None = UNIT_ROUTE_HYBRID,
) -> str:
    """low when neither side really matched; high for a top hit that is neither a hub nor a
    pointer to the answer and is a clear winner the semantic side agrees with, or a narrower
    winner both sides put at their top, or (unit_route_hybrid) a winner whose document the units
    channel ranks first by a margin of its own; (unit_agree_hybrid) never one whose document it
    ranks lower; without a semantic side, a clear lexical winner by the
    lexical rules; else medium. The keyword arguments are for calibration
    (bench/bench_confidence.py); search uses the constants."""
    if ev.hits == 0:
        return "low"
    semantic_weak = (
        ev.cosine is None
        or ev.cosine < COSINE_MIN
        or (ev.cosine_gap < COSINE_GAP_MIN and ev.cosine < cosine_strong)
    )
    # A top section that holds every content word of the query (in a form the lexical channels
    # accept) matched it: never `low`, whatever the other signals say.
    if ev.coverage < min(coverage_min, 1.0) and semantic_weak:
        return "low"
    if ev.hub > hub_max_high or ev.pointer > pointer_max_high:
        return "medium"
    if ev.cosine is None:
        return _lexical_band(
            ev,
            margin_high_lexical,
            margin_by_document_lexical,
            unit_agree_lexical,
            unit_margin_lexical,
            full_coverage_lexical,
            own_margin_lexical,
        )
    margin = ev.doc_margin if margin_by_document else ev.margin
    if _unit_route(ev, margin, unit_route_hybrid):
        return "high"
    if ev.units_ran and unit_agree_hybrid and ev.unit_rank != 1:
        return "medium"
    if agree_by_document:
        rank = ev.doc_semantic_rank
        semantic_agrees = rank is not None and rank <= AGREE_RANK
        lexical_rank = ev.doc_lexical_rank
    else:
        semantic_agrees, lexical_rank = ev.semantic, ev.lexical_rank
    if margin >= margin_high and (not agree_for_high or semantic_agrees):
        return "high"
    both_agree = semantic_agrees and lexical_rank is not None and lexical_rank <= lexical_agree_rank
    sure = ev.cosine >= agreed_cosine_min
    if margin_agreed is not None and margin >= margin_agreed and both_agree and sure:
        return "high"
    return "medium"


def _unit_route(ev: Evidence, margin: float, route: tuple[float, float] | None) -> bool:
    """The units channel ran and ranks the top hit's document first by at least route[0] of its
    own margin, and the fused margin is at least route[1]."""
    if route is None or not ev.units_ran or ev.unit_rank != 1:
        return False
    return ev.unit_margin >= route[0] and margin >= route[1]


def _lexical_band(
    ev: Evidence,
    margin_high: float,
    by_document: bool,
    unit_agree: bool,
    unit_margin_min: float,
    full_coverage: bool,
    own_margin: float | None,
) -> str:
    """The lexical side alone, past `low`, hubs and pointers: `high` for a clear winner by the
    fused margin (or by `own_margin` over the first other document when the runner-up is a
    passage of the top document: doc_margin > margin) whose document the units channel (when it
    ran) also ranks first by its own margin, and whose section holds every content word when
    asked; else medium."""
    margin = ev.doc_margin if by_document else ev.margin
    own = own_margin is not None and ev.doc_margin > ev.margin and ev.doc_margin >= own_margin
    if (margin < margin_high and not own) or (full_coverage and ev.coverage < 1.0):
        return "medium"
    if ev.units_ran and unit_agree and ev.unit_rank != 1:
        return "medium"
    if ev.units_ran and ev.unit_margin < unit_margin_min:
        return "medium"
    return "high"


def assess(result: SearchResult) -> str:
    return band(evidence(result))
