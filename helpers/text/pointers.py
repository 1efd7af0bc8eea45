"""Pointer spans: text in a passage that names another place of the document.

A cross-reference (`see Section 5.9, “How does Debian support non-English languages?”`, DocBook
and LibreOffice style; `see Section 4.1 [Functions], page 65`, Texinfo style; `раздел 3,
«Установка»`) or a link's anchor text (`[Installing](install.md)`) describes its *target*, not
the passage it sits in (in IR terms: anchor text belongs to the page it points at). A passage
whose match with a query lies only inside such spans points at the answer; it is not the answer,
yet every lexical and semantic signal calls it a perfect match, because the title it quotes is
the question. rag_search lowers such a passage by a bounded prior (helpers.lexical is not
involved: the spans are found in the section text at query time, for the first candidates only).

Recognised from structure alone, in any script: an outline number (`5.9`, `14.3.`, `7`) followed
within a comma or colon by a quoted title (curly, straight, low-high, guillemet, corner or
single quotes) or a bracketed one; a Markdown link `[text](target)`. A quoted phrase without a
number before it is an ordinary quotation (a man page quoting an option, a law quoting a title)
and is left alone.
"""

from __future__ import annotations

import re

# Longest quoted title taken as one pointer: a section title or an FAQ question (the longest
# debian-faq question quoted in a cross-reference is 227 characters); a longer "quote" is prose
# between two unrelated quote marks.
TITLE_MAX_CHARS = 300
# opening quote -> its closing quotes (German „…“ and Polish „…” both occur; ASCII closes itself)
_QUOTES = {
    "“": "”",
    "„": "“”",
    '"': '"',
    "«": "»",
    "‹": "›",
    "‘": "’",
    "「": "」",
    "『": "』",
}


def _quoted(open_: str, close: str) -> str:
    """A title between `open_` and one of `close`: no closing quote inside, line breaks allowed
    (PDF text wraps) but not a blank line (another paragraph); it starts at once after the
    quote (`" 2 B R` is a character table)."""
    shut = re.escape(close)
    body = rf"(?:[^{shut}\n]|\n(?![ \t]*\n)){{0,{TITLE_MAX_CHARS}}}?"
    pad = "[ \u00a0\u202f]?" if open_ in "«‹" else ""  # French: « Titre »
    return re.escape(open_) + pad + rf"[^\s{shut}]" + body + f"[{shut}]"


_ANY_QUOTED = "|".join(_quoted(o, c) for o, c in _QUOTES.items())
_TITLED = _ANY_QUOTED + "|" + _quoted("[", "]")
_CORNER = _quoted("「", "」") + "|" + _quoted("『", "』")
# an outline number not glued to a Latin word, a number or a date (`5.9`, `14.3.`, `第3`; not
# `x86.3`, `2014-02-11`). The look-behind follows the first digit: a pattern that starts with
# a digit class is scanned for fast by the regex engine (twice as fast on PDF pages).
_NUMBER = r"\d(?<![A-Za-z0-9_.,:/-]\d)\d{0,2}(?:\.\d{1,3}){0,4}\.?"
# a page reference after the title: `, page 65`, `, p. 12`, `, стр. 7` (any word, then a number)
_PAGE = r",\s{0,3}\w{1,12}\.?\s{0,2}\d{1,5}"
_NUMBERED = re.compile(
    _NUMBER
    + "(?:"
    # `Section 5.9, “Title”`: the comma (or colon) ties the title to the number; without it a
    # number and a quotation are often a version and its name (`Debian 3.1 "sarge"`)
    + rf"\s{{0,2}}[,:]\s{{0,3}}(?:{_TITLED})(?:{_PAGE})?"
    # `Section 4.1 [Functions], page 65` (Texinfo): no comma, but a page reference after it
    + rf"|\s{{0,3}}(?:{_TITLED}){_PAGE}"
    # `第3章「設定」`, `5.2節『導入』`: corner quotes after the number and one counter character
    + rf"|[\u3400-\u9fff]?(?:{_CORNER})"
    + ")"
)
_MD_LINK = re.compile(rf"\[([^\]\n]{{1,{TITLE_MAX_CHARS}}})\]\([^)\s]{{1,500}}\)")


def pointer_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the cross-references and link texts in `text`, in order,
    not overlapping."""
    found = [m.span() for m in _NUMBERED.finditer(text)]
    found += [m.span() for m in _MD_LINK.finditer(text)]
    found.sort()
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


_LEAD = re.compile(_NUMBER + r"[\s,:\u3400-\u9fff]*")
_TAIL = re.compile(_PAGE + r"$")
_MARKS = "".join(_QUOTES) + "".join(_QUOTES.values()) + "[]"


def span_title(span: str) -> str:
    """The title a pointer span quotes: without its outline number, page reference, quote
    marks and link target (`5.9, “Title”, page 4` -> `Title`)."""
    link = _MD_LINK.fullmatch(span)
    if link:
        return link.group(1)
    title = _TAIL.sub("", _LEAD.sub("", span, count=1))
    return title.strip().strip(_MARKS).strip()


def without_pointers(text: str) -> str:
    """`text` with every pointer span replaced by one blank (words on either side stay apart)."""
    spans = pointer_spans(text)
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        parts.append(text[last:start])
        last = end
    parts.append(text[last:])
    return " ".join(parts)
