"""The pointer prior: a passage that matches a query only by quoting it in a cross-reference.

`see Section 5.9, “How does Debian support non-English languages?”` names the place that
answers the question; the passage around it is about something else. Its quoted title is the
question's own words, so BM25, the exact-phrase channel and the embedding all rank it first.
In IR terms anchor text describes its target, not its source. When a pointer span
(helpers.text.pointers) of a candidate section *is* the query (most of the query's content
words are in the span and most of the span's are in the query), the section's fused score is
lowered by a bounded factor, like the hub prior: it falls behind sections that match about as
well in their own text, and still ranks when nothing else matches.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from helpers.lexical.query_terms import Query
from helpers.ranking.constants import (
    MATCH_FLOOR,
    MIN_MATCHED_WORDS,
    POINTER_PRIOR,
    POINTER_SCAN_BUDGET,
)
from helpers.store.batched import rows_in
from helpers.store.codec import section_text
from helpers.text.normalize import fold
from helpers.text.pointers import pointer_spans, span_title

# Spans looked at per section: a manual page with many cross-references is judged by its first
# ones (bounded cost on hostile text).
MAX_SPANS = 40
# Per-process caches: the same sections and the same quoted titles come back query after query
# (a section's spans are a pure function of its text). Bounded: 1,024 sections of <= 4,000
# characters (a few MB).
CACHE_TEXTS = 1024


def _forms(query: Query) -> tuple[tuple[str, ...], ...]:
    """The accepted forms of each content word, one entry per stem (`packages` and `package`
    are one word of a title)."""
    seen: dict[str, tuple[str, ...]] = {}
    for group in query.content:
        seen.setdefault(group.stem or group.text, group.substrings(recall=False) or (group.text,))
    return tuple(seen.values())


@lru_cache(maxsize=CACHE_TEXTS)
def _pointers_of(text: str) -> tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]:
    """Per pointer span of `text` (the first MAX_SPANS): its folded text and its title's
    content-word forms."""
    out = []
    for start, end in pointer_spans(text)[:MAX_SPANS]:
        piece = text[start:end]
        out.append((fold(piece), _title_forms(span_title(piece))))
    return tuple(out)


@lru_cache(maxsize=CACHE_TEXTS)
def _title_forms(title: str) -> tuple[tuple[str, ...], ...]:
    return _forms(Query.parse(title))


def _share(forms: Sequence[tuple[str, ...]], folded: str) -> float:
    if not forms:
        return 0.0
    return sum(any(f and f in folded for f in group) for group in forms) / len(forms)


def pointer_match(query: Query, text: str, forms: Sequence[tuple[str, ...]] | None = None) -> float:
    """0-1: how far the best pointer span of `text` is the query itself (the smaller of the
    share of the query's content words in the span and of the span's in the query; 0 when the
    span holds fewer than MIN_MATCHED_WORDS of them). `forms`: the query's, when the caller
    has them (_forms)."""
    spans = _pointers_of(text)
    forms = _forms(query) if forms is None else forms
    if not spans or len(forms) < MIN_MATCHED_WORDS:
        return 0.0
    best = 0.0
    for folded_span, title_forms in spans:
        into = _share(forms, folded_span)
        if into <= best or into * len(forms) < MIN_MATCHED_WORDS - 1e-9:
            continue  # cannot beat the best; or a term, not a title
        best = max(best, min(into, _share(title_forms, query.folded)))
    return best


def pointer_weight(match: float) -> float:
    """0 below MATCH_FLOOR, 1 for a span that is the query, linear between."""
    if match <= MATCH_FLOOR:
        return 0.0
    return min(1.0, (match - MATCH_FLOOR) / (1.0 - MATCH_FLOOR))


def section_texts(conn: sqlite3.Connection, chunk_ids: list[int]) -> dict[int, tuple[int, str]]:
    """Chunk id -> (section id, section text)."""
    sql = (
        "SELECT c.id, s.id, s.text FROM chunks c JOIN sections s ON s.id = c.section_id "
        "WHERE c.id IN ({marks})"
    )
    return {cid: (sid, section_text(text)) for cid, sid, text in rows_in(conn, sql, chunk_ids)}


Ranked = list[tuple[int, float, dict]]


@dataclass(frozen=True)
class PointerPrior:
    """The candidates after the prior, and the pointer weight of each section it judged: the
    confidence band reads the top hit's weight here instead of judging its section again."""

    query: Query
    ranked: Ranked
    weights: Mapping[int, float] = field(default_factory=dict)  # section id -> 0-1

    def weight(self, section_id: int, text: str) -> float:
        """The pointer weight of a section (`text`: its text): the one the prior computed, else
        computed now (a section past the window or the scan budget, or a prior turned off, can
        still be the top hit)."""
        forms = _forms(self.query)
        if len(forms) < MIN_MATCHED_WORDS:
            return 0.0  # a one-word query is never a quoted title
        if section_id in self.weights:
            return self.weights[section_id]
        return pointer_weight(pointer_match(self.query, text, forms))


def apply_pointer_prior(
    conn: sqlite3.Connection,
    query: Query,
    fused: Ranked,
    window: int,
    strength: float | None = None,
) -> PointerPrior:
    """Lower the fused score of the first `window` candidates whose section quotes the query
    in a pointer span (by `strength`, default POINTER_PRIOR), and re-sort (stable).
    Candidates past the window cannot become hits before the lowered ones do (they score
    less), so they are not read; within it, sections are judged best first until
    POINTER_SCAN_BUDGET characters have been."""
    strength = POINTER_PRIOR if strength is None else strength
    forms = _forms(query)
    if strength <= 0 or not fused or len(forms) < MIN_MATCHED_WORDS:
        return PointerPrior(query, fused)  # a one-word query is never a quoted title
    head = fused[:window]
    texts = section_texts(conn, [cid for cid, _, _ in head])
    weights: dict[int, float] = {}
    scanned = 0
    for cid, _, _ in head:  # in rank order: the budget goes to the best candidates
        sid, text = texts.get(cid, (None, ""))
        if sid is None or sid in weights:
            continue
        if scanned >= POINTER_SCAN_BUDGET:
            break  # the rest keep their score (see POINTER_SCAN_BUDGET)
        scanned += len(text)
        weights[sid] = pointer_weight(pointer_match(query, text, forms))
    if not any(weights.values()):
        return PointerPrior(query, fused, weights)
    lowered = []
    for cid, score, ranks in head:
        sid = texts.get(cid, (None, ""))[0]
        factor = 1.0 - strength * weights.get(sid, 0.0) if sid is not None else 1.0
        lowered.append((cid, score * factor, ranks))
    ranked = sorted(lowered + fused[window:], key=lambda x: -round(x[1], 12))
    return PointerPrior(query, ranked, weights)
