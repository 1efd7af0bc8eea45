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
from collections.abc import Sequence
from functools import lru_cache

from helpers.lexical.query_terms import Query
from helpers.store.codec import section_text
from helpers.text.normalize import fold
from helpers.text.pointers import pointer_spans, span_title

# The fused score of a section whose best pointer span matches the query fully is multiplied by
# 1 - POINTER_PRIOR; 0.9 as HUB_PRIOR (a quoted question is an entry of a list of questions
# that happens to sit in prose). From the ablation in bench/RESULTS.md ("Pointer spans").
POINTER_PRIOR = 0.9
# Match (the smaller of the two shares of content words) up to this lowers nothing; from there
# to 1 the factor grows linearly. "Most" both ways, as ranking.confidence.COVERAGE_MIN: an answer
# often points at a neighbouring question or a chapter elsewhere (`section 5, "Control files
# and their fields"` inside the answer to `What is a Debian control file?`: 2/3 both ways), a
# pointer section quotes the question itself (1.0). On debfaq-en every non-relevant section in
# a top 10 with a match over 0.4 has 0.5 or 1.0, every relevant one 0.5 or 0.67; a floor of
# 0.5 cost one query its Recall@8 in lexical and semantic mode (bench/RESULTS.md).
MATCH_FLOOR = 2 / 3
# A pointer counts only when it holds at least this many of the query's content words: a quoted
# one-word title is a term, and a page that points at `[graph], page 98` is a page about graphs
# (a back-of-book index lists it: with no minimum the debian-pdf index half lost page R@1
# 0.616 -> 0.580 in hybrid mode; 167 of its 224 queries are one word). 2 holds debian-pdf in
# every mode and keeps more of debfaq's gain than 3 (hybrid 0.664 against 0.659).
MIN_MATCHED_WORDS = 2
# Spans looked at per section: a manual page with many cross-references is judged by its first
# ones (bounded cost on hostile text).
MAX_SPANS = 40
# Characters of section text judged per search, best candidates first (each section whole; the
# one that crosses the budget is the last). The span regex costs ~0.02 ms per 4 KB of prose but
# 6-24 ms per 4 KB of hostile text (runs of `1 [`, `1, “`, `[`: each starts a title scan), and
# a search's window holds up to 400 candidates. On 400 generated hostile sections a lexical
# search took 1.2 s (top_k 8) and 4.2 s (top_k 50) unbounded, 0.22-0.25 s with this budget
# (bare search 29-47 ms). On the public sets every section the prior lowers lies within the
# first 13,708 characters of the window (rank <= 11): their rankings are identical
# (bench/RESULTS.md, "Pointer-span budget (wave 7)"). Cached texts count too: a ranking never
# depends on what an earlier search left in the cache.
POINTER_SCAN_BUDGET = 32_000


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
    found: dict[int, tuple[int, str]] = {}
    for start in range(0, len(chunk_ids), 500):
        batch = chunk_ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        for cid, sid, text in conn.execute(
            "SELECT c.id, s.id, s.text FROM chunks c JOIN sections s ON s.id = c.section_id "
            f"WHERE c.id IN ({marks})",
            batch,
        ):
            found[cid] = (sid, section_text(text))
    return found


def apply_pointer_prior(
    conn: sqlite3.Connection,
    query: Query,
    fused: list[tuple[int, float, dict]],
    window: int,
    strength: float | None = None,
) -> list[tuple[int, float, dict]]:
    """Lower the fused score of the first `window` candidates whose section quotes the query
    in a pointer span (by `strength`, default POINTER_PRIOR), and re-sort (stable).
    Candidates past the window cannot become hits before the lowered ones do (they score
    less), so they are not read; within it, sections are judged best first until
    POINTER_SCAN_BUDGET characters have been."""
    strength = POINTER_PRIOR if strength is None else strength
    forms = _forms(query)
    if strength <= 0 or not fused or len(forms) < MIN_MATCHED_WORDS:
        return fused  # a one-word query is never a quoted title (nothing is read)
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
        return fused
    lowered = []
    for cid, score, ranks in head:
        sid = texts.get(cid, (None, ""))[0]
        factor = 1.0 - strength * weights.get(sid, 0.0) if sid is not None else 1.0
        lowered.append((cid, score * factor, ranks))
    return sorted(lowered + fused[window:], key=lambda x: -round(x[1], 12))
