"""The cjk channel: BM25 over the character-bigram index of Chinese, Japanese and Korean text.

A query's CJK runs become their bigrams (helpers.text.cjk), OR-ed: a chunk holding more of the
pairs, more often, in less text ranks first (within a postings budget; when every word is common,
the words' rarest pairs are AND-ed instead). Two-character words (most of the CJK vocabulary) are
exact tokens here, at any corpus size; the trigram index cannot see them and the short-term scan
only reads the newest chunks.
"""

from __future__ import annotations

import sqlite3

from helpers.lexical.common import ChannelResult, SearchContext, fts_any, fts_phrase
from helpers.text import cjk

CJK_TABLE = "chunks_cjk"  # migration 4
CJK_VOCAB = "chunks_cjk_vocab"
# Ranking costs ~2.5 µs per matching chunk, and a question's pairs include common ones (的是, 我们)
# found in a large share of all chunks. Pairs are taken rarest first until their chunk counts add
# up to this budget (the rarest pair is always taken); the rare pairs carry the BM25 weight anyway.
# It bounds a query's time for a little substring recall (bench/bench_cjk.py; bench/RESULTS.md,
# "Chinese / Japanese / Korean keyword search").
PAIR_POSTINGS_BUDGET = 30_000
# When every pair kept is in more than this share of the chunks and they add up to over half the
# budget, BM25 order is worth little and costs the most: the newest matching chunks are returned
# unranked (as the words channel does).
COMMON_PAIR_SHARE = 0.25


def bigram_index_ready(conn: sqlite3.Connection) -> bool:
    """False for an older index read as it is on a read-only mount (no migration 4 yet)."""
    names = (CJK_TABLE, CJK_VOCAB)
    row = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name IN (?, ?)", names).fetchone()
    return row[0] == len(names)


def channel_cjk(ctx: SearchContext) -> ChannelResult:
    return ctx.cached("cjk", lambda: _cjk(ctx))


def _cjk(ctx: SearchContext) -> ChannelResult:
    runs = [g.text for g in ctx.query.content if g.kind == "cjk" and len(g.text) >= 2]
    if not runs or not bigram_index_ready(ctx.conn):
        return ChannelResult("cjk", [])
    pairs_of = {run: cjk.bigrams(run) for run in runs}
    grams = list(dict.fromkeys(p for run in runs for p in pairs_of[run]))
    freq = {gram: _pair_freq(ctx.conn, gram) for gram in grams}
    position = {gram: i for i, gram in enumerate(grams)}

    def rarest_first(pairs: list[str]) -> list[str]:
        return sorted((p for p in pairs if freq[p] > 0), key=lambda p: (freq[p], position[p]))

    # Every word keeps its rarest pair, whatever the budget: no word of the query drops out.
    found = [pairs[0] for pairs in (rarest_first(pairs_of[run]) for run in runs) if pairs]
    anchors = list(dict.fromkeys(found))
    if not anchors:
        return ChannelResult("cjk", [])
    coverage = len(found) / len(ctx.query.content)
    postings = sum(freq[a] for a in anchors)
    if postings > PAIR_POSTINGS_BUDGET and len(anchors) > 1:
        # Every word is common: rank only the chunks that hold all of them (their intersection).
        match = " AND ".join(fts_phrase(a) for a in anchors)
        return ChannelResult("cjk", ctx.ranked_match(CJK_TABLE, match), coverage)
    kept = list(anchors)
    for gram in rarest_first(grams):
        if gram in kept:
            continue
        if postings + freq[gram] > PAIR_POSTINGS_BUDGET:
            break
        kept.append(gram)
        postings += freq[gram]
    # Unranked only when ranking would be costly and nearly worthless (small folders always rank).
    common = (
        postings > PAIR_POSTINGS_BUDGET // 2
        and min(freq[g] for g in kept) > COMMON_PAIR_SHARE * ctx.chunk_count()
    )
    ranked = ctx.ranked_match(CJK_TABLE, fts_any(kept), newest_first=common)
    return ChannelResult("cjk", ranked, coverage)


def _pair_freq(conn: sqlite3.Connection, gram: str) -> int:
    """Chunks holding the pair (an fts5vocab seek)."""
    row = conn.execute(f"SELECT doc FROM {CJK_VOCAB} WHERE term = ?", (gram,)).fetchone()
    return int(row[0]) if row else 0
