"""Variants channel: split-word recovery (`data base` ↔ `database`, `email` ↔ `e mail`).

Adjacent query words are tried joined, and a query word the corpus (almost) lacks is tried split
in two; a variant is searched only when the word index holds its words, so nothing is guessed
blindly. camelCase/snake_case/kebab-case and hyphenated words are split and joined at parse time
(helpers.lexical.query_terms) and searched by the words and bm25 channels.
"""

from __future__ import annotations

import re

from helpers.lexical.common import ChannelResult, SearchContext, fts_phrase

_LETTERS = re.compile(r"^(?:[a-z]+|[\u0400-\u04ff]+)$")
SPLIT_MIN_CHARS = 5  # shorter words have too few plausible halves to be worth a look-up
SPLIT_RARE_DF = 2  # a word in fewer chunks than this is tried split ("database" → "data base")
SPLIT_MIN_RIGHT = 3  # the right half carries the meaning ("e mail", "data base")
MAX_LOOKUPS = 40  # vocabulary look-ups per query (each well under a millisecond)


def variant_expressions(ctx: SearchContext) -> tuple[list[str], int]:
    """FTS5 expressions over chunks_words for every joined or split form found in the corpus,
    and how many query words they stand for."""
    groups = [g for g in ctx.query.groups if g.kind == "word" and not g.parts]
    budget = [MAX_LOOKUPS]
    exprs: list[str] = []
    involved: set[str] = set()

    def known(word: str) -> bool:
        if budget[0] <= 0:
            return False
        budget[0] -= 1
        return ctx.doc_freq(word) > 0

    for left, right in zip(groups, groups[1:], strict=False):
        joined = left.text + right.text
        if _LETTERS.match(joined) and known(joined):
            exprs.append(fts_phrase(joined))
            involved |= {left.text, right.text}
    for group in groups:
        word = group.text
        if group.stop or len(word) < SPLIT_MIN_CHARS or not _LETTERS.match(word):
            continue
        if ctx.doc_freq(word) >= SPLIT_RARE_DF:
            continue
        for cut in range(1, len(word) - SPLIT_MIN_RIGHT + 1):
            head, tail = word[:cut], word[cut:]
            if known(tail) and known(head):
                exprs.append(fts_phrase(f"{head} {tail}"))
                involved.add(word)
    return list(dict.fromkeys(exprs)), len(involved)


def channel_variants(ctx: SearchContext) -> ChannelResult:
    exprs, involved = variant_expressions(ctx)
    if not exprs:
        return ChannelResult("variants", [])
    ranked = ctx.ranked_match("chunks_words", " OR ".join(exprs))
    return ChannelResult("variants", ranked, min(1.0, involved / len(ctx.query.content)))
