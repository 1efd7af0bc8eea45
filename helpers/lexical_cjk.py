"""The cjk channel: BM25 over the character-bigram index of Chinese, Japanese and Korean text.

A query's CJK runs become their bigrams (helpers.cjk), OR-ed: a chunk holding more of the pairs,
more often, in less text ranks first. Two-character words (most of the CJK vocabulary) are exact
tokens here, at any corpus size; the trigram index cannot see them and the short-term scan only
reads the newest chunks.
"""

from __future__ import annotations

import sqlite3

from helpers import cjk
from helpers.lexical_common import ChannelResult, SearchContext, fts_any

CJK_TABLE = "chunks_cjk"  # migration 4
CJK_VOCAB = "chunks_cjk_vocab"
# Ranking costs ~2.5 µs per matching chunk, and a question's pairs include common ones (的是, 我们)
# found in a large share of all chunks. Pairs are taken rarest first until their chunk counts add
# up to this budget (the rarest pair is always taken); the rare pairs carry the BM25 weight anyway.
# bench/bench_cjk.py (100,000 Zipf-distributed Chinese chunks), unlimited -> this budget:
# 10-character questions p50 49 -> 22 ms, max 121 -> 33 ms; 4-character words max 164 -> 24 ms;
# the source chunk of 400 6- and 10-character substrings R@1 0.905 -> 0.887, R@8 0.948 -> 0.925.
PAIR_POSTINGS_BUDGET = 30_000
# When every pair kept is in more than this share of the chunks, BM25 order is worth little and
# costs the most: the newest matching chunks are returned unranked (as the words channel does).
COMMON_PAIR_SHARE = 0.25


def bigram_index_ready(conn: sqlite3.Connection) -> bool:
    """False for an older index read as it is on a read-only mount (no migration 4 yet)."""
    names = (CJK_TABLE, CJK_VOCAB)
    row = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name IN (?, ?)", names).fetchone()
    return row[0] == len(names)


def query_bigrams(ctx: SearchContext) -> list[str]:
    runs = [group.text for group in ctx.query.content if group.kind == "cjk"]
    return list(dict.fromkeys(gram for run in runs for gram in cjk.bigrams(run)))


def channel_cjk(ctx: SearchContext) -> ChannelResult:
    return ctx.cached("cjk", lambda: _cjk(ctx))


def _cjk(ctx: SearchContext) -> ChannelResult:
    grams = query_bigrams(ctx)
    if not grams or not bigram_index_ready(ctx.conn):
        return ChannelResult("cjk", [])
    served = sum(1 for g in ctx.query.content if g.kind == "cjk" and len(g.text) >= 2)
    freq = {gram: _pair_freq(ctx.conn, gram) for gram in grams}
    kept: list[str] = []
    postings = 0
    for gram in sorted((g for g in grams if freq[g] > 0), key=lambda g: (freq[g], grams.index(g))):
        if kept and postings + freq[gram] > PAIR_POSTINGS_BUDGET:
            break
        kept.append(gram)
        postings += freq[gram]
    if not kept:
        return ChannelResult("cjk", [])
    common = min(freq[g] for g in kept) > COMMON_PAIR_SHARE * ctx.chunk_count()
    ranked = ctx.ranked_match(CJK_TABLE, fts_any(kept), newest_first=common)
    return ChannelResult("cjk", ranked, served / len(ctx.query.content))


def _pair_freq(conn: sqlite3.Connection, gram: str) -> int:
    """Chunks holding the pair (an fts5vocab seek)."""
    row = conn.execute(f"SELECT doc FROM {CJK_VOCAB} WHERE term = ?", (gram,)).fetchone()
    return int(row[0]) if row else 0
