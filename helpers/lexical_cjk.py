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


def bigram_index_ready(conn: sqlite3.Connection) -> bool:
    """False for an older index read as it is on a read-only mount (no migration 4 yet)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (CJK_TABLE,)).fetchone()
    return row is not None


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
    ranked = ctx.ranked_match(CJK_TABLE, fts_any(grams))
    return ChannelResult("cjk", ranked, served / len(ctx.query.content))
