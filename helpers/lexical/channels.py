"""The lexical channels over FTS5: word BM25, trigram BM25, exact/all-term, short terms.

Every channel takes the per-query SearchContext and returns chunk ids best first; none of them
passes user text to FTS5 unquoted (helpers.lexical.common.fts_phrase).
"""

from __future__ import annotations

import re

from helpers.lexical.cjk_pairs import bigram_index_ready
from helpers.lexical.common import (
    CHANNEL_DEPTH,
    ChannelResult,
    SearchContext,
    fts_any,
    fts_phrase,
    section_ids,
)
from helpers.lexical.query_terms import TRIGRAM_FORM_MAX_CHARS, TRIGRAM_MIN_CHARS, TermGroup
from helpers.store.batched import rows_in
from helpers.text.cjk import is_hangul
from helpers.text.normalize import has_thai

# chunks_fts holds the chunk text only (migration 8): indexing the title and path again in every
# chunk row changed no ranking (bench/RESULTS.md "Lexical sync speed and index size"); the
# filename channel ranks paths once per document. So the trigram channels rank by the default
# bm25() of the body.
# The exact channel's all-terms part: with more terms than this, hardly any chunk holds them
# all and partial BM25 ranking is better (bench/RESULTS.md "Lexical channel ablation").
EXACT_ALL_MAX_GROUPS = 2
# Words in more chunks than this share are left out of the word channel's query (when the query
# has other words): their BM25 weight is small and their posting lists are the main cost.
WORDS_COMMON_SHARE = 0.25
# ...and only when that is more chunks than this: a shorter posting list ranks in under 5 ms
# (~2.5 µs a chunk), and on small folders the share is a knife edge (one word in a quarter of
# the chunks of one copy of a folder and just under it in another) that costs ranking.
WORDS_COMMON_MIN_CHUNKS = 2000
# A word the stemmer leaves whole is searched as a prefix from this length on (shorter ones
# like "cat*" would expand to hundreds of words).
PREFIX_MIN_CHARS = 5
AGREEMENT_K = 60  # the RRF constant, for ordering inside the exact channel's tiers
# Chunks of the word channel the sections channel aggregates (deeper than one channel's list, so
# a section's other chunks count too).
SECTION_POOL = 500
# A 1-2 character term no index can serve (Thai, or inside a word) is looked for with instr() in
# the newest SHORT_SCAN_WINDOW chunks only (~6 µs a row: ~30 ms at most), keeping SHORT_SCAN_ROWS
# hits. Latin/Cyrillic terms are scanned only when the word index has fewer than
# SHORT_FEW_WORD_HITS whole-word hits.
SHORT_SCAN_WINDOW = 5000
SHORT_FEW_WORD_HITS = 20
SHORT_SCAN_ROWS = 2000
SHORT_RERANK_DEPTH = 400  # candidates of the other channels a mixed query's short terms re-rank
# Next to longer words, short terms re-rank only keyword-style queries: in a question or a long
# query a one- or two-letter word ("C", "10") is incidental (bench/RESULTS.md "Lexical channel
# ablation").
SHORT_MIXED_MAX_GROUPS = 4
# An unspaced (Thai, CJK) query is looked for as one trigram phrase of at most this many
# characters: one posting list per trigram, and a pasted paragraph has a thousand of them.
# Longer than any real question seen (bench/notes/s-scale.md).
PHRASE_MAX_CHARS = 200
LONG_TERM_NOTE = (
    f"a term over {TRIGRAM_FORM_MAX_CHARS} characters was searched by its first "
    f"{TRIGRAM_FORM_MAX_CHARS}"
)
LONG_PHRASE_NOTE = f"the phrase was searched by its first {PHRASE_MAX_CHARS} characters"
_WORD = re.compile(r"[^\W_]+")


# -- words: unicode61 BM25 ---------------------------------------------------------------------
def word_forms(group: TermGroup) -> list[str]:
    """FTS5 expressions over chunks_words for one group (prefix stems, identifier phrases)."""
    if group.kind == "cjk" and is_hangul(group.text):  # spaced words, particles at the end
        return [fts_phrase(group.text) + "*"]
    if group.kind in ("thai", "cjk"):  # unicode61 makes a whole unspaced clause one token
        return []
    forms: list[str] = []
    if group.stem:
        forms.append(fts_phrase(group.stem) + "*")
    if group.parts:
        parts = [p for p in group.parts if p]
        if len(parts) > 1 and max(len(p) for p in parts) >= 2:
            forms.append(fts_phrase(" ".join(parts)))
        forms.append(fts_phrase("".join(parts)))
    elif not group.stem:
        pieces = _WORD.findall(group.text)
        if group.kind == "word" and len(group.text) >= PREFIX_MIN_CHARS:
            forms.append(fts_phrase(group.text) + "*")  # a stem already: отчет* → отчетов
        elif pieces and max(len(p) for p in pieces) >= 2:  # "c++" is the letter c to unicode61
            forms.append(fts_phrase(" ".join(pieces)))
    for spelling in group.spellings if group.kind == "word" else ():  # bucherei for buecherei
        star = "*" if len(spelling) >= PREFIX_MIN_CHARS else ""
        forms.append(fts_phrase(spelling) + star)
    return list(dict.fromkeys(forms))


def _common(ctx: SearchContext, group: TermGroup) -> bool:
    """A word in more than WORDS_COMMON_SHARE of all chunks: BM25 gives it almost no weight
    (IDF <= log 3) while its posting list dominates the query's cost."""
    if group.kind != "word" or group.parts:
        return False
    if group.stem or len(group.text) >= PREFIX_MIN_CHARS:
        freq = ctx.prefix_freq(group.stem or group.text)
    else:
        freq = ctx.doc_freq(group.text)
    return freq > max(WORDS_COMMON_SHARE * ctx.chunk_count(), WORDS_COMMON_MIN_CHUNKS)


def _words(ctx: SearchContext) -> ChannelResult:
    content = ctx.query.content
    served = [g for g in content if word_forms(g)]
    rare = [g for g in served if not _common(ctx, g)]
    forms = dict.fromkeys(f for g in (rare or served) for f in word_forms(g))
    if not forms:
        return ChannelResult("words", [])
    if not rare or all(g.stop for g in served):  # "the of and": no BM25 order worth its cost
        pool = []
        if len(served) > 1:
            phrase = fts_phrase(" ".join(w for g in served for w in _WORD.findall(g.text)))
            pool = ctx.ranked_match("chunks_words", phrase, depth=SECTION_POOL, newest_first=True)
        if not pool:  # in a small folder every word is "common": the words need not be adjacent
            pool = ctx.ranked_match(
                "chunks_words", " OR ".join(forms), depth=SECTION_POOL, newest_first=True
            )
    else:
        pool = ctx.ranked_match("chunks_words", " OR ".join(forms), depth=SECTION_POOL)
    return ChannelResult("words", pool, len(served) / len(content))


def channel_words(ctx: SearchContext) -> ChannelResult:
    """BM25 over words (unicode61): English and Russian rank best by whole words + stems."""
    pool = ctx.cached("words", lambda: _words(ctx))
    return ChannelResult("words", pool.ranked[:CHANNEL_DEPTH], pool.coverage)


# -- sections: how much of a parent section is about the query ---------------------------------
def channel_sections(ctx: SearchContext) -> ChannelResult:
    return ctx.cached("sections", lambda: _sections(ctx))


def _sections(ctx: SearchContext) -> ChannelResult:
    """Sections ranked by query-term density: the summed chunk scores of a section divided by
    its number of chunks, represented by its best chunk. A long section or table of contents
    that mentions the terms once loses to a short section about them. Built on the word
    channel only: over trigram scores (Thai) it ranks worse (bench/RESULTS.md "Lexical channel
    ablation")."""
    source = ctx.cached("words", lambda: _words(ctx))
    pool = source.ranked
    if not pool:
        return ChannelResult("sections", [])
    section_of = section_ids(ctx.conn, [cid for cid, _ in pool])
    totals: dict[int, float] = {}
    best: dict[int, int] = {}
    for cid, score in pool:
        sid = section_of.get(cid)
        if sid is None:
            continue
        totals[sid] = totals.get(sid, 0.0) + max(score, 0.0)
        best.setdefault(sid, cid)  # the pool is best first
    sids = list(totals)
    sizes_sql = (
        "SELECT section_id, COUNT(*) FROM chunks WHERE section_id IN ({marks}) GROUP BY section_id"
    )
    sizes = {row[0]: row[1] for row in rows_in(ctx.conn, sizes_sql, sids)}
    scored = sorted(
        ((totals[sid] / max(sizes.get(sid, 1), 1), best[sid]) for sid in sids),
        key=lambda x: (-x[0], x[1]),
    )
    ranked = [(cid, score) for score, cid in scored[:CHANNEL_DEPTH]]
    if ctx.marked:  # density ranks marked and unmarked forms alike: the unmarked ones go last
        ranked = ctx.marks_first(ranked)
    return ChannelResult("sections", ranked, source.coverage)


# -- bm25: trigram over the chunk text ---------------------------------------------------------
def trigram_groups(ctx: SearchContext) -> list[TermGroup]:
    """Groups only a substring search serves: Thai words, terms the word index cannot express
    (c++), and words or identifier parts the word index does not hold (compound parts, odd
    spellings, OCR)."""
    out: list[TermGroup] = []
    for group in ctx.query.content:
        if not group.substrings():
            continue  # one or two letters: the short channel's
        if group.kind == "thai" or not word_forms(group):
            out.append(group)
        elif group.parts:
            if any(len(p) >= 2 and ctx.doc_freq(p) == 0 for p in group.parts):
                out.append(group)
        elif len(group.text) >= TRIGRAM_MIN_CHARS and not ctx.has_prefix(group.stem or group.text):
            out.append(group)
    return out


def channel_bm25(ctx: SearchContext) -> ChannelResult:
    return ctx.cached("bm25", lambda: _bm25(ctx))


def _bm25(ctx: SearchContext) -> ChannelResult:
    groups = trigram_groups(ctx)
    forms = [f for g in groups for f in g.substrings()]
    if not forms:
        return ChannelResult("bm25", [])
    if any(g.cut for g in groups):
        ctx.cut_short("bm25", LONG_TERM_NOTE)
    ranked = ctx.ranked_match("chunks_fts", fts_any(forms))
    return ChannelResult("bm25", ranked, len(groups) / len(ctx.query.content))


# -- exact: exact phrase, then all terms -------------------------------------------------------
def channel_exact(ctx: SearchContext) -> ChannelResult:
    """Chunks holding the query as an exact phrase, then those holding every content term;
    inside each tier, sections dense in the query come first (as in the sections channel).

    Questions are left to the other channels: an answer rarely repeats the question's wording
    or all its words, while tables of contents, FAQ lists and long pages that touch every
    topic do (bench/RESULTS.md "Lexical channel ablation")."""
    query = ctx.query
    content = query.content
    tiers: dict[int, int] = {}
    if query.question:
        return ChannelResult("exact", [])
    if len(query.groups) > 1:
        for chunk_id, _ in _phrase_hits(ctx):
            tiers.setdefault(chunk_id, 2)
    if 1 < len(content) <= EXACT_ALL_MAX_GROUPS:
        for chunk_id, _ in _all_terms_hits(ctx, content):
            tiers.setdefault(chunk_id, 1)
    if not tiers:
        return ChannelResult("exact", [])
    # Inside a tier, the order the word and sections channels agree on (their RRF): the exact
    # channel says which chunks qualify, not which of them is best.
    prior = _agreement(ctx, list(tiers))
    order = sorted(tiers, key=lambda cid: (-tiers[cid], -prior.get(cid, 0.0), cid))
    return ChannelResult("exact", [(cid, float(tiers[cid])) for cid in order[:CHANNEL_DEPTH]])


def _agreement(ctx: SearchContext, ids: list[int]) -> dict[int, float]:
    """RRF of the words and sections channels for each chunk (0 when neither ranks it); a
    chunk not ranked itself inherits its section's sections-channel rank."""
    score: dict[int, float] = {}
    words = {cid: rank for rank, (cid, _) in enumerate(channel_words(ctx).ranked, start=1)}
    sections = channel_sections(ctx).ranked
    section_of = section_ids(ctx.conn, [*ids, *(cid for cid, _ in sections)])
    section_rank: dict[int, int] = {}
    for rank, (cid, _) in enumerate(sections, start=1):
        section_rank.setdefault(section_of.get(cid, -1), rank)
    for cid in ids:
        total = 0.0
        if cid in words:
            total += 1.0 / (AGREEMENT_K + words[cid])
        rank = section_rank.get(section_of.get(cid, -2))
        if rank is not None:
            total += 1.0 / (AGREEMENT_K + rank)
        score[cid] = total
    return score


def _phrase_hits(ctx: SearchContext) -> list[tuple[int, float]]:
    query = ctx.query
    if query.has_thai or any(g.kind == "cjk" for g in query.groups):
        # Thai, Chinese and Japanese write no spaces between words; Korean, and Latin words
        # inside CJK text, do: a CJK query is looked for both ways.
        forms = ["".join(query.folded.split())]
        if not query.has_thai:
            forms.append(" ".join(query.folded.split()))
        forms = [f for f in dict.fromkeys(forms) if len(f) >= TRIGRAM_MIN_CHARS]
        if not forms:
            return []
        if any(len(f) > PHRASE_MAX_CHARS for f in forms):
            ctx.cut_short("exact", LONG_PHRASE_NOTE)
        return ctx.ranked_match("chunks_fts", fts_any(f[:PHRASE_MAX_CHARS] for f in forms))
    words = [w for g in query.groups for w in _WORD.findall(g.text)]
    if len(words) < 2:
        return []
    return ctx.ranked_match("chunks_words", fts_phrase(" ".join(words)))


def passage_holds_all(ctx: SearchContext) -> bool:
    """Whether one chunk holds every content word of the query (each in a form the channels
    search; a word no index serves, one or two letters, is left out): then the passage channels
    have seen the words together, else only a whole unit has (helpers.lexical.units weighs its
    evidence by this). One AND query, unranked, its first hit only."""
    content = ctx.query.content
    if len(content) < 2:
        return True
    table, match = _all_terms_match(ctx, content, searchable_only=True)
    if match.count(" AND ") == 0:
        return True
    return bool(ctx.ranked_match(table, match, depth=1, newest_first=True))


def _all_terms_match(
    ctx: SearchContext, groups: tuple[TermGroup, ...], searchable_only: bool = False
) -> tuple[str, str]:
    """(table, FTS5 AND of the groups' forms); "" when a group has no form (unless
    `searchable_only`: then such groups are left out)."""
    if ctx.query.has_thai or any(not word_forms(g) for g in groups):
        clauses = [fts_any(g.substrings(False)) for g in groups if g.substrings(False)]
        if len(clauses) < len(groups) and not searchable_only:
            return "chunks_fts", ""
        if any(g.cut for g in groups) and not searchable_only:  # the exact channel's note
            ctx.cut_short("exact", LONG_TERM_NOTE)
        return "chunks_fts", " AND ".join(f"({c})" for c in clauses)
    return "chunks_words", " AND ".join(f"({' OR '.join(word_forms(g))})" for g in groups)


def _all_terms_hits(ctx: SearchContext, groups: tuple[TermGroup, ...]) -> list[tuple[int, float]]:
    table, match = _all_terms_match(ctx, groups)
    return ctx.ranked_match(table, match) if match else []


# -- short: 1-2 character terms ----------------------------------------------------------------
def short_groups(ctx: SearchContext) -> list[TermGroup]:
    groups = [g for g in ctx.query.content if len(g.text) < TRIGRAM_MIN_CHARS]
    if not groups and all(g.stop for g in ctx.query.groups):
        groups = [g for g in ctx.query.groups if len(g.text) < TRIGRAM_MIN_CHARS]
    if any(_bigram_served(g) for g in groups) and bigram_index_ready(ctx.conn):
        groups = [g for g in groups if not _bigram_served(g)]  # the cjk channel's, at any scale
    return groups


def _bigram_served(group: TermGroup) -> bool:
    return group.kind == "cjk" and len(group.text) == 2


def channel_short(ctx: SearchContext) -> ChannelResult:
    """Terms under 3 characters, which trigram MATCH and LIKE cannot find (SQLite 3.40).

    Alone, they are looked up as whole words in the word index, then (Thai, or too few hits)
    by a bounded instr() scan of chunks.norm. Next to longer terms, they re-rank the other
    channels' candidates instead of scanning."""
    groups = short_groups(ctx)
    if not groups:
        return ChannelResult("short", [])
    terms = [g.text for g in groups]
    longer = [g for g in ctx.query.content if len(g.text) >= TRIGRAM_MIN_CHARS]
    if longer:
        if ctx.query.question or len(ctx.query.content) > SHORT_MIXED_MAX_GROUPS:
            return ChannelResult("short", [])
        candidates: list[int] = []
        for result in (channel_words(ctx), channel_bm25(ctx)):
            candidates += [cid for cid, _ in result.ranked if cid not in candidates]
        ranked = _rerank(ctx, candidates[:SHORT_RERANK_DEPTH], terms)
        return ChannelResult("short", ranked, len(groups) / len(ctx.query.content))
    ranked: list[tuple[int, float]] = []
    latin = [t for t in terms if not has_thai(t)]
    if latin:
        hits = ctx.ranked_match("chunks_words", fts_any(latin))
        ranked += [(cid, 2.0 + score) for cid, score in _rerank(ctx, [c for c, _ in hits], terms)]
    if len(ranked) < SHORT_FEW_WORD_HITS or len(latin) < len(terms):
        seen = {cid for cid, _ in ranked}
        scanned = [cid for cid in _scan(ctx, terms) if cid not in seen]
        ranked += _rerank(ctx, scanned, terms)
    return ChannelResult("short", ranked[:CHANNEL_DEPTH])


def _scan(ctx: SearchContext, terms: list[str]) -> list[int]:
    """Chunk ids whose norm contains any term: the newest SHORT_SCAN_WINDOW chunks are read
    (newest first) and at most SHORT_SCAN_ROWS hits kept, so the cost has a fixed ceiling."""
    where, params = ctx.filters.sql()
    any_hit = " OR ".join("instr(c.norm, ?) > 0" for _ in terms)
    rows = ctx.conn.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
        f"WHERE c.id > (SELECT MAX(id) FROM chunks) - ? AND ({any_hit}) AND {where} "
        "ORDER BY c.id DESC LIMIT ?",
        (SHORT_SCAN_WINDOW, *terms, *params, SHORT_SCAN_ROWS),
    ).fetchall()
    return [row[0] for row in rows]


def _rerank(ctx: SearchContext, ids: list[int], terms: list[str]) -> list[tuple[int, float]]:
    """Candidates that contain the short terms: whole-word hits first, then substring hits;
    the incoming order breaks ties."""
    if not ids:
        return []
    norm_sql = "SELECT id, norm FROM chunks WHERE id IN ({marks})"
    norms = {row[0]: row[1] for row in rows_in(ctx.conn, norm_sql, ids)}
    scored: list[tuple[float, int, int]] = []
    for position, cid in enumerate(ids):
        text = norms.get(cid, "")
        score = 0.0
        for term in terms:
            if has_thai(term):
                score += 1.0 if term in text else 0.0
            elif re.search(rf"(?<![^\W_]){re.escape(term)}(?![^\W_])", text):
                score += 1.0
            elif term in text:
                score += 0.25
        if score > 0:
            scored.append((score, position, cid))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [(cid, score) for score, _, cid in scored]
