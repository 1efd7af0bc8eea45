"""Term proximity: whether a candidate section holds the query's words together.

BM25 scores each word apart, so a page that mentions the query's words scattered over its
length (or each in passing) ranks with one that says them together where it answers the query.
Proximity is the classic complement (Tao & Zhai 2007; Büttcher et al. 2006): here, the
IDF-weighted share of the query's content words that the best window of PROXIMITY_WINDOW_WORDS
consecutive words of a section holds (1.0: every word in one window; each word counted once,
in any form the word channel accepts: Snowball prefix stems, joined identifiers). It is computed
at query time on the sections the lexical channels already ranked (no index of its own, no
schema change) and scales each section's lexical evidence in hybrid fusion (rag_search). Not
in lexical mode (the fused RRF score times the share): it helped one set and cost another
(bench/RESULTS.md, "Term proximity").

Thai and CJK groups are left out (an unspaced clause is one token to a word regex; the trigram,
bigram and exact channels serve those scripts): a query with such words, or without two
spaced words, is not touched. Questions are left out as the exact channel leaves them out
(helpers.lexical.channels): an answer rarely repeats the question's words together, while lists
of questions and cross-references do (bench/RESULTS.md, "Term proximity").
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from helpers.lexical.common import SearchContext, section_ids
from helpers.lexical.query_terms import TermGroup
from helpers.ranking.constants import PROXIMITY_MAX_SECTIONS, PROXIMITY_WINDOW_WORDS
from helpers.store.batched import rows_in

_WORD = re.compile(r"[^\W_]+")
PREFIX_MIN_CHARS = 5  # as helpers.lexical.channels: a whole word this long is also a prefix
# Between an identifier's parts in the text: up to three marks, spaces or underscores (the
# word channel's phrase of the parts accepts any spelling: x86-64, x86_64, x86 / 64, o’reilly).
IDENTIFIER_GAP = r"[\W_]{0,3}"


@dataclass(frozen=True)
class Term:
    """One content word of the query: the forms a text word may take, and its IDF weight."""

    exact: frozenset[str]
    prefixes: tuple[str, ...]
    weight: float
    parts: tuple[str, ...] = ()  # an identifier's words (8859-15): matched in any spelling

    def matches(self, word: str) -> bool:
        return word in self.exact or any(word.startswith(p) for p in self.prefixes)


def word_terms(ctx: SearchContext) -> list[Term]:
    """The query's spaced content words with IDF weights, log(1 + N / df), df counted as the
    word channel counts it (chunks holding a word that starts with the stem)."""
    total = max(ctx.chunk_count(), 1)
    out: dict[tuple[frozenset[str], tuple[str, ...]], Term] = {}
    for group in ctx.query.content:
        forms = _forms(group)
        if forms is None or forms[:2] in out:
            continue
        exact, prefixes, parts = forms
        weight = math.log(1.0 + total / max(_df(ctx, forms), 1))
        out[forms[:2]] = Term(exact, prefixes, weight, parts)
    return list(out.values())


def _df(ctx: SearchContext, forms: tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]) -> int:
    """Chunks holding the term as the word index sees it. An identifier is indexed as its
    parts (unicode61 splits 8859-15 and wi-fi), so its df is at least that of its rarest part
    (an upper bound of the chunks holding them all); the joined spelling counts too."""
    exact, prefixes, parts = forms
    if not parts:
        return ctx.prefix_freq(prefixes[0]) if prefixes else ctx.doc_freq(min(exact))
    joined = "".join(parts)
    written = ctx.prefix_freq(joined) if prefixes else ctx.doc_freq(joined)
    return max(written, min(ctx.doc_freq(part) for part in parts))


def _forms(
    group: TermGroup,
) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...]] | None:
    """(exact words, prefixes, identifier parts) of a content word, None when proximity
    cannot place it (not a spaced word)."""
    if group.parts:  # псевдо-файловая, get_user_name, 8859-15: joined, spaced or hyphenated
        joined = "".join(group.parts)
        if not _WORD.fullmatch(joined):
            return None
        prefixes = (joined,) if len(joined) >= PREFIX_MIN_CHARS else ()
        return frozenset({joined}), prefixes, tuple(group.parts)
    if group.kind != "word":
        return None
    if group.stem:
        return frozenset({group.text}), (group.stem,), ()
    prefixes = (group.text,) if len(group.text) >= PREFIX_MIN_CHARS else ()
    return frozenset({group.text}), prefixes, ()


def window_share(terms: Sequence[Term], text: str, window: int = PROXIMITY_WINDOW_WORDS) -> float:
    """0-1: the largest IDF share of `terms` that any `window` consecutive words of the
    folded `text` hold (each term counted once; words are counted by the spaces between)."""
    total = sum(t.weight for t in terms)
    if total <= 0:
        return 0.0
    text = " ".join(text.split())  # PDF text breaks lines: one space between words
    hits: list[tuple[int, int]] = []  # (word position, term index)
    position = previous = 0
    single = [i for i, term in enumerate(terms) if not term.parts]
    for match in _pattern(tuple(terms)).finditer(text):
        position += text.count(" ", previous, match.start())
        previous = match.start()
        index = int(match.lastgroup[1:])  # type: ignore[index]
        hits.append((position, index))
        if not terms[index].parts:  # one word may be several query words (network, networking)
            word = match.group()
            hits += [(position, i) for i in single if i != index and terms[i].matches(word)]
    best = held = 0.0
    counts = [0] * len(terms)
    start = 0
    for position, index in hits:
        counts[index] += 1
        if counts[index] == 1:
            held += terms[index].weight
        while hits[start][0] <= position - window:
            old = hits[start][1]
            counts[old] -= 1
            if counts[old] == 0:
                held -= terms[old].weight
            start += 1
        best = max(best, held)
    return best / total


@lru_cache(maxsize=64)
def _pattern(terms: tuple[Term, ...]) -> re.Pattern[str]:
    """One regex for every term: group t<i> is a word that is term i (a prefix form and the
    rest of its word, or an exact form), so the text is scanned once, in C."""
    alternatives = []
    for index, term in enumerate(terms):
        longest = sorted(term.prefixes, key=lambda p: (-len(p), p))
        forms = [re.escape(p) + r"[^\W_]*" for p in longest]
        exact = sorted(term.exact, key=lambda e: (-len(e), e))
        forms += [re.escape(e) + r"(?![^\W_])" for e in exact]
        if term.parts:  # x86_64, x86-64, x86 64, x86/64, o’reilly: parts with few marks between
            spelled = IDENTIFIER_GAP.join(re.escape(part) for part in term.parts)
            forms.append(spelled + r"(?![^\W_])")
        alternatives.append(f"(?P<t{index}>{'|'.join(forms)})")
    return re.compile(r"(?<![^\W_])(?:" + "|".join(alternatives) + ")")


def section_proximity(ctx: SearchContext, ranked_chunks: Iterable[int]) -> dict[int, float]:
    """Chunk id -> window_share of its section, for the chunks of the first
    PROXIMITY_MAX_SECTIONS sections (in the order given: best evidence first) that hold a query
    word. Empty when proximity does not apply (fewer than two spaced content words, a
    question, Thai or CJK)."""
    if ctx.query.question or any(g.kind in ("thai", "cjk") for g in ctx.query.content):
        return {}  # an unspaced script's words have no word positions here
    terms = word_terms(ctx)
    if len(terms) < 2:
        return {}
    ids = list(dict.fromkeys(ranked_chunks))
    located = _sections_of(ctx.conn, ids)
    sections = dict.fromkeys(located[cid] for cid in ids if cid in located)
    order = list(sections)[:PROXIMITY_MAX_SECTIONS]
    texts = _section_norms(ctx.conn, order)
    shares = {sid: window_share(terms, texts.get(sid, ""), PROXIMITY_WINDOW_WORDS) for sid in order}
    # 0: the channels matched what no word here starts with (a word inside a compound, found
    # by the trigram channel): unknown, not absent; such a section is treated as unread
    return {cid: shares[sid] for cid, sid in located.items() if shares.get(sid, 0.0) > 0}


def scaled_evidence(evidence: dict[int, float], shares: dict[int, float]) -> dict[int, float]:
    """Lexical evidence times the section's proximity share, scaled back to a best of 1 (a
    section that holds every query word in one window keeps its evidence; one that holds them
    only apart keeps the share one window has). Chunks past the PROXIMITY_MAX_SECTIONS read
    (the weakest evidence) get the smallest factor read: they cannot overtake a read one by
    being unread."""
    if not shares:
        return evidence
    floor = min(shares.values())
    scaled = {cid: value * shares.get(cid, floor) for cid, value in evidence.items()}
    best = max(scaled.values(), default=0.0)
    return {cid: v / best for cid, v in scaled.items()} if best > 0 else evidence


def _sections_of(conn: sqlite3.Connection, ids: list[int]) -> dict[int, int]:
    return section_ids(conn, ids)


def _section_norms(conn: sqlite3.Connection, sids: list[int]) -> dict[int, str]:
    """Section id -> its children's folded text (chunks.norm, stored at sync: no unpacking and
    no folding per search), in order; children overlap by a few words, which can only set two
    words further apart."""
    parts: dict[int, list[str]] = {}
    sql = (
        "SELECT section_id, norm FROM chunks WHERE section_id IN ({marks}) "
        "ORDER BY section_id, ordinal"
    )
    for sid, norm in rows_in(conn, sql, sids):
        parts.setdefault(sid, []).append(norm)
    return {sid: " ".join(texts) for sid, texts in parts.items()}
