"""Short excerpts around the matched terms, with the terms marked **like this**."""

from __future__ import annotations

from helpers.text.cjk import has_cjk
from helpers.text.normalize import fold

SNIPPET_CHARS = 240  # about two lines: enough to judge a hit without reading the section
MARK_OPEN, MARK_CLOSE = "**", "**"
MIN_MARK_CHARS = 3


def _folded_with_map(text: str) -> tuple[str, list[int]]:
    """fold(text) plus, for each folded character, the index of its source character."""
    whole = fold(text)
    if len(whole) == len(text):  # the usual case: folding kept every position
        return whole, list(range(len(text)))
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        folded = fold(ch)
        out.append(folded)
        index.extend([i] * len(folded))
    return "".join(out), index


def make_snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """Window of `text` around the first matched term; every term occurrence in it is marked."""
    folded, index = _folded_with_map(text)
    spans: list[tuple[int, int]] = []
    wanted = {fold(t) for t in terms if t.strip()}
    # One- and two-letter terms ("о", "a") would light up half the text; mark them only when the
    # query has nothing longer.
    # A CJK pair is a word, not a letter: it stays (bigrams of a CJK query mark what matched).
    if any(len(t) >= MIN_MARK_CHARS for t in wanted):
        wanted = {t for t in wanted if len(t) >= MIN_MARK_CHARS or (len(t) == 2 and has_cjk(t))}
    for term in sorted(wanted):
        start = folded.find(term)
        while start != -1 and len(spans) < 64:
            end = start + len(term)
            spans.append((index[start], index[end - 1] + 1))
            start = folded.find(term, end)
    spans.sort()
    if spans:
        first = spans[0][0]
        lo = max(0, first - width // 3)
    else:
        lo = 0
    hi = min(len(text), lo + width)
    lo = _word_start(text, lo)
    hi = _word_end(text, hi)
    pieces: list[str] = []
    cursor = lo
    for s, e in _merge(spans):
        if s < cursor or e > hi:
            continue
        pieces.append(text[cursor:s])
        pieces.append(MARK_OPEN + text[s:e] + MARK_CLOSE)
        cursor = e
    pieces.append(text[cursor:hi])
    snippet = " ".join("".join(pieces).split())
    return ("… " if lo > 0 else "") + snippet + (" …" if hi < len(text) else "")


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def _word_start(text: str, pos: int) -> int:
    if pos <= 0:
        return 0
    space = text.rfind(" ", max(0, pos - 20), pos)
    return space + 1 if space != -1 else pos


def _word_end(text: str, pos: int) -> int:
    if pos >= len(text):
        return len(text)
    space = text.find(" ", pos, pos + 20)
    return space if space != -1 else pos
