"""Fuzzy channel: recover query words that OCR misread, inside OCR-derived chunks only.

A content word with fewer than FEW_HITS exact hits in OCR text is compared with the words of the
OCR chunks that share the most trigrams with it. Both sides are first mapped to an OCR skeleton
(rn→m, vv→w, cl→d, 0→o, 1/i→l, Cyrillic look-alikes → Latin), then a bounded Levenshtein
distance (1 for words up to 6 characters, 2 beyond) decides. Work per query is capped.
"""

from __future__ import annotations

import re
from functools import lru_cache

from helpers.lexical.common import ChannelResult, SearchContext, fts_any
from helpers.lexical.query_terms import TermGroup

MIN_CHARS = 4  # shorter words have too many neighbours at distance 1 to be recovered safely
LONG_CHARS = 7  # from this length on, two edits are allowed
FEW_HITS = 3  # a word with this many exact OCR hits needs no recovery
MAX_TERMS = 3  # words recovered per query
RARE_GRAMS = 4  # trigrams that select candidate chunks: the rarest ones, as the FTS5 OR query
CANDIDATE_CHUNKS = 12  # OCR chunks read per word (those sharing the most trigrams)
# The hard cap on CPU work per query, in units of one bigram-filter check (~2 µs); a distance
# computation costs COMPARISON_COST units (~20 µs).
WORK_BUDGET = 3000
COMPARISON_COST = 10
MAX_VARIANTS = 8  # misread forms searched per word, closest first

_WORD = re.compile(r"[^\W_]+")
_MULTI = (("rn", "m"), ("vv", "w"), ("cl", "d"))
_SINGLE = str.maketrans(
    {
        "0": "o",
        "1": "l",
        "i": "l",
        "а": "a",
        "в": "b",
        "е": "e",
        "к": "k",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "с": "c",
        "т": "t",
        "у": "y",
        "х": "x",
        "і": "l",
        "ј": "j",
        "ѕ": "s",
    }
)


def skeleton(word: str) -> str:
    """The word with every common OCR confusion mapped to one representative."""
    for many, one in _MULTI:
        word = word.replace(many, one)
    return word.translate(_SINGLE)


def max_distance(word: str) -> int:
    if len(word) < MIN_CHARS:
        return 0
    return 2 if len(word) >= LONG_CHARS else 1


def bounded_levenshtein(a: str, b: str, limit: int) -> int:
    """Edit distance of a and b, or limit + 1 as soon as it must exceed limit."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        best = i
        for j, cb in enumerate(b, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            best = min(best, current[j])
        if best > limit:
            return limit + 1
        previous = current
    return previous[-1]


def trigrams(word: str) -> list[str]:
    return list(dict.fromkeys(word[i : i + 3] for i in range(len(word) - 2)))


@lru_cache(maxsize=65536)
def _shape(word: str) -> tuple[str, frozenset[str]]:
    """Skeleton and its bigram set (cached: OCR vocabularies repeat across queries)."""
    shape = skeleton(word)
    return shape, frozenset(shape[i : i + 2] for i in range(len(shape) - 1))


def close_words(term: str, texts: list[str], budget: list[int]) -> list[tuple[int, str]]:
    """(distance, word) for words of `texts` within max_distance(term) of it, closest first.

    A cheap bigram filter (one edit changes at most two bigrams) runs first; every word looked
    at spends one unit of `budget` (a one-element list shared by the whole query) and every
    distance computed spends COMPARISON_COST more."""
    limit = max_distance(term)
    target, target_grams = _shape(term)
    words = {w for text in texts for w in _WORD.findall(text)}
    words.discard(term)
    found: dict[str, int] = {}
    for word in sorted(w for w in words if abs(len(w) - len(term)) <= limit + 1):
        if budget[0] <= 0:
            break
        budget[0] -= 1
        shape, grams = _shape(word)
        if len(target_grams & grams) < max(len(target_grams), len(grams)) - 2 * limit:
            continue
        budget[0] -= COMPARISON_COST
        distance = bounded_levenshtein(target, shape, limit)
        if distance <= limit:
            found[word] = distance
    return sorted((d, w) for w, d in found.items())


def fuzzy_groups(ctx: SearchContext) -> list[TermGroup]:
    groups = [
        g
        for g in ctx.query.content
        if g.kind == "word" and not g.stop and len(g.text) >= MIN_CHARS and not g.text.isdigit()
    ]
    out: list[TermGroup] = []
    for group in groups:
        hits = ctx.conn.execute(
            "SELECT COUNT(*) FROM (SELECT rowid FROM chunks_ocr_fts WHERE chunks_ocr_fts MATCH ? "
            "LIMIT ?)",
            (fts_any([group.text]), FEW_HITS),
        ).fetchone()[0]
        if hits < FEW_HITS:
            out.append(group)
        if len(out) >= MAX_TERMS:
            break
    return out


def _rarest_trigrams(ctx: SearchContext, word: str) -> list[str]:
    """The word's RARE_GRAMS rarest trigrams that OCR text contains: chunks sharing them are
    the candidates (all trigrams would read most of the OCR index for a common word)."""
    grams = trigrams(word)
    marks = ",".join("?" * len(grams))
    freq = dict(
        ctx.conn.execute(
            f"SELECT term, doc FROM chunks_ocr_vocab WHERE term IN ({marks})", grams
        ).fetchall()
    )
    present = sorted((g for g in grams if freq.get(g)), key=lambda g: (freq[g], g))
    return present[:RARE_GRAMS]


def channel_fuzzy(ctx: SearchContext) -> ChannelResult:
    if ctx.conn.execute("SELECT 1 FROM chunks WHERE ocr = 1 LIMIT 1").fetchone() is None:
        return ChannelResult("fuzzy", [])
    budget = [WORK_BUDGET]
    variants: list[str] = []
    groups = fuzzy_groups(ctx)
    for group in groups:
        grams = _rarest_trigrams(ctx, group.text)
        if not grams:
            continue
        candidates = ctx.conn.execute(
            "SELECT c.norm FROM chunks_ocr_fts f JOIN chunks c ON c.id = f.rowid "
            "WHERE chunks_ocr_fts MATCH ? ORDER BY f.rank, f.rowid LIMIT ?",
            (fts_any(grams), CANDIDATE_CHUNKS),
        ).fetchall()
        close = close_words(group.text, [row[0] for row in candidates], budget)
        variants += [word for _, word in close[:MAX_VARIANTS] if len(word) >= 3]
        if budget[0] <= 0:
            break
    if not variants:
        return ChannelResult("fuzzy", [])
    ranked = ctx.ranked_match("chunks_ocr_fts", fts_any(variants))
    return ChannelResult("fuzzy", ranked, len(groups) / len(ctx.query.content))
