"""How much a search response can be trusted: `high`, `medium` or `low`, from evidence the fused
ranking already carries (no second retrieval, no model call; the same inputs give the same band).

Evidence of the top hit: which sides found it (lexical channels, semantic) and how high, the
share of the query's content words its section holds, how far its fused score stands above the
runner-up's, its cosine, and whether its section only points at the answer (a cross-reference
that quotes the query: helpers.lexical.pointers). `high` needs a clear fused winner that the
semantic side also puts near its top (when it ran), or a narrower one both sides put at their
top. Fed by the fused SearchResult (rag_service calls `assess` after rag_search.search), so
ranking changes never touch this module (they may move the calibration: re-run
bench/bench_confidence.py). Thresholds are calibrated on the public eval sets, in-domain and
against another set's documents (numbers in bench/RESULTS.md, "Answer confidence" and "Pointer
spans").
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.lexical.pointers import pointer_match, pointer_weight
from helpers.lexical.query_terms import Query
from helpers.results import Hit, SearchResult
from helpers.text.normalize import fold

# A side "agrees" when the top hit is within its first few ranks (chunk ranks inside a channel;
# several chunks of one passage often take the first places). band() asks it of the semantic
# side for `high` (AGREE_FOR_HIGH).
AGREE_RANK = 3
# Nothing really matched = neither side has evidence. Lexical: under two thirds of the query's
# content words are in the top section. Semantic: the top cosine is under 0.84 or (unless it is
# COSINE_STRONG) stands less than 0.02 above the median of the other hits (multilingual-e5-small
# INT8: in-domain tops 0.85-0.94, another set's questions 0.75-0.88; gaps 0.01-0.06 against
# -0.01-0.03). The
# three constants are the grid point (coverage 0.4-0.67 x cosine 0.84-0.88 x gap 0-0.02) that
# keeps every cross-set pair >= 80 % low while marking the fewest correct in-domain answers low
# on the worst set (bench/RESULTS.md, "Answer confidence").
COVERAGE_MIN = 2 / 3
COSINE_MIN = 0.84
COSINE_GAP_MIN = 0.02
# A top cosine this high is evidence by itself, whatever the gap: on collections of similar
# documents (man pages, an FAQ) every hit has a high cosine, so the gap to the median is ~0 even
# for the right answer (29 % of manru's correct answers were low on the gap alone). Above every
# top cosine of a question run against another set's documents (711 queries, 6 pairs, both
# directions of language: max 0.878, p99 0.870) with 0.02 to spare; the in-domain median top
# cosine is 0.90 on every monolingual set. In-domain answers called low: manru 0.33 -> 0.10
# (precision@1 of low 0.66 -> 0.17), debfaq-en 0.21 -> 0.15; cross-set low unchanged.
COSINE_STRONG = 0.90
# A clear winner: the top fused score at least 25 % above the runner-up's. The margin is the one
# signal whose best 30 % of queries has the highest precision@1 on every set (ceilings printed
# by bench_confidence.py: cosine, cosine gap, coverage and agreement + margin are lower or equal);
# the gap to the best other cosine, semantic rank 1, the top section's hub score and
# IDF-weighted coverage did not beat it either (2026-12-01). 0.25 (was 0.2) is the point of the
# grid 0.1-0.4 that leave-one-set-out picks in all six folds: precision@1 of high on
# debfaq-en-mixed 0.59 -> 0.64 for shares of 0.30-0.53 on the other sets (bench/RESULTS.md).
MARGIN_HIGH = 0.25
# `high` also needs the semantic side to have the top hit within AGREE_RANK when it ran: in
# hybrid, 93-100 % of the in-domain `high` answers have it and most queries run against another
# set's documents that reach `high` on margin alone do not (cross-set `high` 3.2 % -> 2.4 % of
# queries at MARGIN_HIGH; in-domain `high` shares drop by 0-0.04, its precision@1 rises on
# pyfaq-en 0.889 -> 0.904 and falls by one query on debfaq-en-mixed). Leave-one-set-out keeps it.
AGREE_FOR_HIGH = True
# A hub (contents page, index, list of questions: helpers.text.hubs) mentions every topic and
# answers none, so it is never a `high` answer once it is more list than prose (hub score 0.5 =
# 55 % of its text in list entries). When the hub prior still leaves one on top, it was wrong
# in 6 of 6 cases on the public sets (all on the debfaq sets; no other set nor cross pair has a
# hub on top): precision@1 of high on debfaq-en 0.683 -> 0.700, debfaq-en-mixed 0.639 -> 0.676.
HUB_MAX_HIGH = 0.5
# A top section that matches by quoting the query in a cross-reference (`see Section 5.9, “…”`,
# helpers.lexical.pointers) points at the answer: it is never `high`. The pointer prior has
# already moved such sections behind any that match in their own text, so one is on top only
# when nothing else matched as well. POINTER_MAX_HIGH is the largest pointer weight (0-1) a
# `high` top hit may carry; 0 = none. From bench_confidence.py (bench/RESULTS.md, "Pointer
# spans").
POINTER_MAX_HIGH = 0.0
# A second route to `high` when both sides put the top hit at their top: the semantic side within
# AGREE_RANK, a lexical channel within LEXICAL_AGREE_RANK and a top cosine of at least
# AGREED_COSINE_MIN; then a margin of MARGIN_AGREED is enough. Two independent sides naming the
# same section is evidence the fused margin does not show: on converted documents (slides,
# sheets, PDF pages) RRF scores are flatter, so right answers that both sides rank first or
# second often stand only 15-25 % above the runner-up (debfaq-en-mixed had 0.252 of its
# queries `high` at MARGIN_HIGH, debfaq-en 0.303 on the same questions). The cosine floor keeps
# agreement on a weak match out (the two cross-set queries this route would call `high` had a
# top cosine of 0.84 and half the query's words); 0.86 is above the median top cosine of
# another set's questions (0.78-0.84), below the in-domain median of every monolingual set
# (0.90-0.92; English questions on Thai text have no lexical side to agree). Of the grid
# (margin 0.1-0.2 x lexical rank 1-3 x cosine 0.84-0.88) only margin 0.15 at lexical rank 2
# meets the `high` target on all six sets; the floor 0.86 adds no cross-set `high` (0.88
# neither, at a lower debfaq-en precision). bench/RESULTS.md, "Answer confidence", 19:45 UTC.
# Semantic mode and lexical mode never take it (one side only). None: no second route.
MARGIN_AGREED: float | None = 0.15
LEXICAL_AGREE_RANK = 2
AGREED_COSINE_MIN = 0.86
# The margin is over the first hit with other text (not a copy). MARGIN_BY_DOCUMENT measures it
# over the first hit of another document instead (two sections of one document competing is no
# doubt about which document answers); AGREE_BY_DOCUMENT asks agreement of the best rank of any
# hit of the top document. Studied and off: on debfaq-en-mixed the runner-up is never another
# section of the top document (0 of 119; manru 52 of 240), so neither moves it; with the
# second route neither meets more sets (grid ties), and by document manru's `high` precision
# falls (0.879 -> 0.872).
MARGIN_BY_DOCUMENT = False
AGREE_BY_DOCUMENT = False


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
    text = result.sections.get(top.section_id, top.snippet)
    pointer = pointer_weight(pointer_match(Query.parse(result.query), text))
    lexical_rank = _best_rank([top], lexical=True)
    # A query that names the file ("budget.csv") matched its path, not its text: the path
    # counts as matched text when the filename channel found the top hit.
    named = f"{top.path}\n{text}" if "filename" in top.channels else text
    return Evidence(
        hits=len(result.hits),
        coverage=coverage(result.query, named),
        lexical=lexical_rank is not None and lexical_rank <= AGREE_RANK,
        semantic=sem is not None and sem.rank <= AGREE_RANK,
        cosine=cosine,
        margin=_margin(top.score, other_text[0].score if other_text else 0.0),
        cosine_gap=gap,
        hub=top.hub,
        pointer=pointer,
        lexical_rank=lexical_rank,
        semantic_rank=sem.rank if sem is not None else None,
        doc_margin=_margin(top.score, other_doc.score if other_doc else 0.0),
        doc_lexical_rank=_best_rank(own, lexical=True),
        doc_semantic_rank=_best_rank(own, lexical=False),
    )


def _margin(top: float, second: float) -> float:
    return (top - second) / top if top > 0 else 0.0


def _best_rank(hits: list[Hit], lexical: bool) -> int | None:
    """Best rank of these hits in the lexical channels (or in the semantic one); None: none."""
    ranks = [c.rank for h in hits for n, c in h.channels.items() if (n != "semantic") == lexical]
    return min(ranks) if ranks else None


def coverage(raw_query: str, text: str) -> float:
    """Share of the query's content words that occur in `text` (any accepted form)."""
    groups = Query.parse(raw_query).content
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
) -> str:
    """low when neither side really matched; high for a top hit that is neither a hub nor a
    pointer to the answer and is a clear winner the semantic side agrees with (when it ran), or
    a narrower winner both sides put at their top; else medium. The keyword arguments are for
    calibration (bench/bench_confidence.py); search uses the constants."""
    if ev.hits == 0:
        return "low"
    semantic_weak = (
        ev.cosine is None
        or ev.cosine < COSINE_MIN
        or (ev.cosine_gap < COSINE_GAP_MIN and ev.cosine < cosine_strong)
    )
    if ev.coverage < COVERAGE_MIN and semantic_weak:
        return "low"
    if ev.hub > hub_max_high or ev.pointer > pointer_max_high:
        return "medium"
    margin = ev.doc_margin if margin_by_document else ev.margin
    if agree_by_document:
        rank = ev.doc_semantic_rank
        semantic_agrees = rank is not None and rank <= AGREE_RANK
        lexical_rank = ev.doc_lexical_rank
    else:
        semantic_agrees, lexical_rank = ev.semantic, ev.lexical_rank
    semantic_ran = ev.cosine is not None
    if margin >= margin_high and (not (agree_for_high and semantic_ran) or semantic_agrees):
        return "high"
    both_agree = semantic_agrees and lexical_rank is not None and lexical_rank <= lexical_agree_rank
    sure = ev.cosine is not None and ev.cosine >= agreed_cosine_min
    if margin_agreed is not None and margin >= margin_agreed and both_agree and sure:
        return "high"
    return "medium"


def assess(result: SearchResult) -> str:
    return band(evidence(result))
