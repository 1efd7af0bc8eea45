"""How much a search response can be trusted: `high`, `medium` or `low`, from evidence the fused
ranking already carries (no second retrieval, no model call; the same inputs give the same band).

Evidence of the top hit: which sides found it (lexical channels, semantic) and how high, the
share of the query's content words its section holds, how far its fused score stands above the
runner-up's, and its cosine. Fed by the fused SearchResult (rag_service calls `assess` after
rag_search.search), so ranking changes never touch this module. Thresholds are calibrated on the
public eval sets, in-domain and against another set's documents (bench/bench_confidence.py;
numbers in bench/RESULTS.md, "Answer confidence").
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.lexical.query_terms import Query
from helpers.text.normalize import fold
from rag_results import SearchResult

# A side "agrees" when the top hit is within its first few ranks (chunk ranks inside a channel;
# several chunks of one passage often take the first places).
AGREE_RANK = 3
# Content-word coverage of the top section: share of the query's non-stop words (any accepted
# form) present in it. Unanswerable queries (another set's questions) cover < 0.5 in 9 of 10.
COVERAGE_HIGH = 0.75
COVERAGE_LOW = 0.5
# Cosine of the top chunk (multilingual-e5-small INT8: in-domain tops 0.84-0.92, another set's
# questions 0.78-0.83). Only used when the semantic side ran.
COSINE_HIGH = 0.86
COSINE_LOW = 0.83
MARGIN_HIGH = 0.1  # relative fused-score gap to the runner-up that marks a clear winner


@dataclass(frozen=True)
class Evidence:
    hits: int
    coverage: float  # 0-1, content words of the query found in the top section
    lexical: bool  # a lexical channel has the top hit within AGREE_RANK
    semantic: bool  # the semantic channel has it within AGREE_RANK
    cosine: float | None  # the top hit's cosine, None when semantic did not run
    margin: float  # (top score - runner-up) / top score; 1.0 for a single hit
    cosine_gap: float  # top hit's cosine minus the median cosine of the other hits (0: none)


def evidence(result: SearchResult) -> Evidence:
    if not result.hits:
        return Evidence(0, 0.0, False, False, None, 0.0, 0.0)
    top = result.hits[0]
    lexical = any(c.rank <= AGREE_RANK for name, c in top.channels.items() if name != "semantic")
    sem = top.channels.get("semantic")
    cosine = sem.score if sem is not None else None
    if cosine is None and "semantic" in result.channels_used:
        cosine = 0.0  # semantic ran and did not find the top hit at all
    second = result.hits[1].score if len(result.hits) > 1 else 0.0
    margin = (top.score - second) / top.score if top.score > 0 else 0.0
    others = sorted(
        h.channels["semantic"].score for h in result.hits[1:] if "semantic" in h.channels
    )
    gap = (cosine or 0.0) - others[len(others) // 2] if others and cosine else 0.0
    return Evidence(
        hits=len(result.hits),
        coverage=coverage(result.query, result.sections.get(top.section_id, top.snippet)),
        lexical=lexical,
        semantic=sem is not None and sem.rank <= AGREE_RANK,
        cosine=cosine,
        margin=margin,
        cosine_gap=gap,
    )


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


def band(ev: Evidence) -> str:
    """high / medium / low from the evidence (rules in the order they are read)."""
    if ev.hits == 0:
        return "low"
    semantic_ran = ev.cosine is not None
    if semantic_ran:
        strong_meaning = ev.cosine is not None and ev.cosine >= COSINE_HIGH
        weak_meaning = ev.cosine is None or ev.cosine < COSINE_LOW
    else:
        strong_meaning, weak_meaning = False, False
    if ev.coverage < COVERAGE_LOW and (weak_meaning or not semantic_ran):
        return "low"
    if ev.lexical and ev.semantic and ev.coverage >= COVERAGE_HIGH and strong_meaning:
        return "high"
    if not semantic_ran and ev.coverage >= COVERAGE_HIGH and ev.margin >= MARGIN_HIGH:
        return "high"
    return "medium"


def assess(result: SearchResult) -> str:
    return band(evidence(result))
