"""The documents channel: whole-document evidence for keyword queries.

A keyword query ("tables insert", "RANK-function") often names a page by terms that stand in
different passages of it: one in its title, one in a section. The word channel scores each
chunk alone, so no chunk holds all the terms and the page loses to one passage that repeats a
single term. Here each content term is ranked on its own (word BM25 per chunk: the term's IDF
and the chunk-length normalisation), a document scores the sum over terms of its best chunk's
score for that term, saturated and length-normalised at page level as BM25 does, and it is
represented by its best chunk in the word channel (the passage the other channels rank).
An identifier's parts ("rank", "function") count as terms too, so a page that writes them
apart still matches. Questions are left to the passage channels, as in the exact channel: an
answer rarely holds a question's words, while long pages that touch every topic do.
"""

from __future__ import annotations

from helpers.lexical.common import CHANNEL_DEPTH, ChannelResult, SearchContext, fts_phrase
from helpers.lexical.query_terms import TermGroup
from helpers.store.batched import rows_in

# Chunks each term's own ranking reaches: deep enough that a document's best chunk for a term
# is usually among them, shallow enough that a common word costs a bounded ranking.
TERM_POOL = 300
# Queries of more content terms than this are left to the passage channels: a phrase that
# long (a description, a sentence) names a passage, and summing its common words over a
# whole page ranks the long pages that hold them all.
KEYWORD_MAX_TERMS = 4
# Terms looked at: keyword queries are short, and each term is one ranked FTS5 query.
MAX_TERMS = 6
_DOCUMENT_OF = "SELECT id, document_id FROM chunks WHERE id IN ({marks})"
# BM25's saturation and length normalisation (Robertson's k1 and b, FTS5's defaults), applied at
# document level: a term's chunks in the document count as its frequency, the document's
# chunks as its length, so a long page that mentions every term once (release notes, contents)
# does not outrank the page about them.
DOC_K1 = 1.2
DOC_B = 0.75
# Identifier parts this short ("c", "n") say nothing on their own.
PART_MIN_CHARS = 2


def _term_forms(group: TermGroup) -> list[list[str]]:
    """Per term of `group`, its FTS5 forms over chunks_words (an identifier: each part)."""
    from helpers.lexical.channels import PREFIX_MIN_CHARS, word_forms

    if group.parts:
        parts = [p for p in dict.fromkeys(group.parts) if len(p) >= PART_MIN_CHARS]
        return [[fts_phrase(p) + ("*" if len(p) >= PREFIX_MIN_CHARS else "")] for p in parts]
    forms = word_forms(group)
    return [forms] if forms else []


def channel_documents(ctx: SearchContext) -> ChannelResult:
    return ctx.cached("documents", lambda: _documents(ctx))


def _documents(ctx: SearchContext) -> ChannelResult:
    query = ctx.query
    if query.question:
        return ChannelResult("documents", [])
    content = [g for g in query.content if not g.stop]
    if len(content) > KEYWORD_MAX_TERMS:
        return ChannelResult("documents", [])
    terms = [forms for g in content for forms in _term_forms(g)][:MAX_TERMS]
    if not terms:
        return ChannelResult("documents", [])
    per_term = [
        ctx.ranked_match("chunks_words", " OR ".join(forms), depth=TERM_POOL) for forms in terms
    ]
    ids = list(dict.fromkeys(cid for ranked in per_term for cid, _ in ranked))
    if not ids:
        return ChannelResult("documents", [])
    doc_of = dict(rows_in(ctx.conn, _DOCUMENT_OF, ids))
    best: dict[tuple[int, int], float] = {}  # (document, term) -> best chunk score
    hits: dict[tuple[int, int], int] = {}  # (document, term) -> its chunks in the term's pool
    chunk_total: dict[int, float] = {}
    for term, ranked in enumerate(per_term):
        for cid, score in ranked:
            doc = doc_of.get(cid)
            if doc is None:
                continue
            value = max(score, 0.0)
            chunk_total[cid] = chunk_total.get(cid, 0.0) + value
            hits[(doc, term)] = hits.get((doc, term), 0) + 1
            if value > best.get((doc, term), -1.0):
                best[(doc, term)] = value
    lengths = _document_lengths(ctx, {doc for doc, _ in best})
    average = max(ctx.chunk_count(), 1) / max(_document_count(ctx), 1)
    totals: dict[int, float] = {}
    for (doc, term), value in best.items():
        norm = DOC_K1 * (1 - DOC_B + DOC_B * lengths.get(doc, 1) / average)
        count = hits[(doc, term)]
        totals[doc] = totals.get(doc, 0.0) + value * (DOC_K1 + 1) * count / (count + norm)
    representative = _representatives(ctx, doc_of, chunk_total)
    order = sorted(totals, key=lambda doc: (-totals[doc], representative[doc]))
    ranked = [(representative[doc], totals[doc]) for doc in order[:CHANNEL_DEPTH]]
    if ctx.marked:  # a query typed with marks: the marked forms first, as in every channel
        ranked = ctx.marks_first(ranked)
    return ChannelResult("documents", ranked, len(content) / len(query.content))


def _document_lengths(ctx: SearchContext, docs: set[int]) -> dict[int, int]:
    """Document id -> its number of chunks."""
    sql = "SELECT document_id, COUNT(*) FROM chunks WHERE document_id IN ({marks}) GROUP BY 1"
    return {row[0]: row[1] for row in rows_in(ctx.conn, sql, list(docs))}


def _document_count(ctx: SearchContext) -> int:
    row = ctx.conn.execute("SELECT COUNT(DISTINCT document_id) FROM chunks").fetchone()
    return int(row[0] or 0)


def _representatives(
    ctx: SearchContext, doc_of: dict[int, int], chunk_total: dict[int, float]
) -> dict[int, int]:
    """Document -> the chunk that carries its score in fusion: its best chunk in the word
    channel when it has one there (so the document's evidence adds to the passage the other
    channels already rank, not to a contents chunk that lists every term), else its chunk
    holding the most of the per-term evidence."""
    from helpers.lexical.channels import channel_words

    chosen: dict[int, int] = {}
    for cid, _value in sorted(chunk_total.items(), key=lambda item: (-item[1], item[0])):
        chosen.setdefault(doc_of[cid], cid)
    words = [cid for cid, _ in channel_words(ctx).ranked]
    words_doc = dict(rows_in(ctx.conn, _DOCUMENT_OF, words))
    taken: set[int] = set()
    for cid in words:
        doc = words_doc.get(cid)
        if doc in chosen and doc not in taken:
            chosen[doc] = cid
            taken.add(doc)
    return chosen
