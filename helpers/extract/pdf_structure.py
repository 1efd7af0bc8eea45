"""PDF structure beyond the text layer: outline (bookmarks), printed page labels, running lines.

The outline names every section and the page it starts on, so a hit can say which section it is
in; the title itself is indexed only where the section starts (repeating it on every page of the
section would rebuild the running-header problem). Running headers and footers are found within
a run of neighbouring pages, so a per-chapter header or one on alternate (odd/even) pages is
removed too, and digits are masked so `Chapter 4: Factors 19` and `... 20` are one line.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw

# A hostile outline can be huge or deep; real manuals have < 2,000 bookmarks, depth < 6.
MAX_OUTLINE_ITEMS = 20_000
MAX_OUTLINE_DEPTH = 12
MAX_TITLE_CHARS = 200
MAX_LABEL_CHARS = 32
# A line counts as running on a page when the same masked line sits at the same edge of at least
# RUN_MIN_OTHER other pages within RUN_WINDOW pages either side: a chapter header (every page of
# a 3+ page chapter) or an odd/even one (every other page) is caught, a line that happens to
# open two pages is not. One other page is enough when the line's last number grows with the
# page across a gap (`Chapter 1: Alpha 1` on page 3, `... 3` on page 5: an odd/even header of a
# short chapter); on adjacent pages that is as likely a numbered step (`Step 1`, `Step 2`).
MIN_PAGES = 3  # on 1-2 pages a repeated line is as likely content as a header
RUN_WINDOW = 6
RUN_MIN_OTHER = 2
EDGE_LINES = 2

_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"[ \t]+")
# "4.1 ", "A ", "IV ", "Chapter 4: ": numbering printed before a heading or kept in a bookmark
_NUMBERING = re.compile(
    r"^(?:(?:chapter|appendix|part|section)\s+)?(?:\d+(?:\.\d+)*\.?|[a-z]|[ivxlc]+)[:.]?\s+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Bookmark:
    page: int  # 0-based page index
    path: tuple[str, ...]  # titles from the top level down to this bookmark


def outline(pdf: pdfium.PdfDocument) -> list[Bookmark]:
    """Bookmarks with a page, in outline order, each with the titles above it."""
    page_count = len(pdf)
    stack: list[str] = []
    marks: list[Bookmark] = []
    try:
        items = pdf.get_toc(max_depth=MAX_OUTLINE_DEPTH)
        for count, item in enumerate(items):
            if count >= MAX_OUTLINE_ITEMS:
                break
            title = " ".join((item.get_title() or "").split())[:MAX_TITLE_CHARS]
            del stack[item.level :]
            stack.extend([""] * (item.level - len(stack)))
            stack.append(title)
            dest = item.get_dest()
            index = None if dest is None else dest.get_index()
            if title and index is not None and 0 <= index < page_count:
                marks.append(Bookmark(index, tuple(t for t in stack if t)))
    except (pdfium.PdfiumError, ValueError, OSError):
        return marks  # a damaged outline: keep what was read, the text is what matters
    return marks


def page_labels(pdf: pdfium.PdfDocument) -> list[str | None]:
    """The printed label of each page (/PageLabels) when it differs from its 1-based number."""
    labels: list[str | None] = []
    for index in range(len(pdf)):
        size = pdfium_raw.FPDF_GetPageLabel(pdf.raw, index, None, 0)
        label = None
        if 2 < size <= 2 * (MAX_LABEL_CHARS + 1):
            buffer = ctypes.create_string_buffer(size)
            pdfium_raw.FPDF_GetPageLabel(pdf.raw, index, buffer, size)
            label = buffer.raw[: size - 2].decode("utf-16-le", errors="replace").strip() or None
        labels.append(None if label == str(index + 1) else label)
    return labels


def section_starts(marks: Iterable[Bookmark]) -> dict[int, list[tuple[str, ...]]]:
    """Page index -> the section paths that start on it, in outline order."""
    starts: dict[int, list[tuple[str, ...]]] = {}
    for mark in marks:
        starts.setdefault(mark.page, []).append(mark.path)
    return starts


def heading_key(text: str) -> str:
    """A heading compared without its numbering, case or spacing ("4.1 Foo" == "Foo")."""
    text = " ".join(text.split()).casefold()
    return _NUMBERING.sub("", text, count=1).strip()


def find_heading(lines: list[str], title: str, start: int) -> int | None:
    """Index of the first line at or after `start` that prints this bookmark title."""
    wanted = heading_key(title)
    if not wanted:
        return None
    for i in range(start, len(lines)):
        line = lines[i]
        if line and len(line) <= 2 * len(title) + 20 and heading_key(line) == wanted:
            return i
    return None


def edge_key(line: str) -> str:
    """Lines differing only in numbers (`Page 3`, `Page 4`) count as the same running line."""
    return _DIGITS.sub("#", _SPACES.sub(" ", line.lower()))


EdgeKey = tuple[str, str, int | None]  # (edge, masked line, its last number)


def _last_number(line: str) -> int | None:
    numbers = _DIGITS.findall(line)
    return int(numbers[-1][-6:]) if numbers else None


def edge_keys(lines: list[str]) -> frozenset[EdgeKey]:
    """(edge, key, last number) of the first and last content lines: a header stays a header."""
    content = [line for line in lines if line]
    top = {("top", edge_key(line), _last_number(line)) for line in content[:EDGE_LINES]}
    bottom = {("bottom", edge_key(line), _last_number(line)) for line in content[-EDGE_LINES:]}
    return frozenset(top | bottom)


class RunningLines:
    """Per page, the masked edge lines that repeat on neighbouring pages.

    Pages are read ahead through `read_keys(index)` at most RUN_WINDOW pages in front of the
    page being cleaned; only the small key sets are kept, never more than 2 x RUN_WINDOW + 1.
    """

    def __init__(self, page_count: int, read_keys: Callable[[int], frozenset[EdgeKey]]) -> None:
        self._count = page_count
        self._read = read_keys
        self._keys: dict[int, frozenset[EdgeKey]] = {}

    def _get(self, index: int) -> frozenset[EdgeKey]:
        if index not in self._keys:
            self._keys[index] = self._read(index)
        return self._keys[index]

    def at(self, index: int, max_chars: int) -> frozenset[str]:
        if self._count < MIN_PAGES:
            return frozenset()
        low, high = max(0, index - RUN_WINDOW), min(self._count - 1, index + RUN_WINDOW)
        for old in [k for k in self._keys if k < low]:
            del self._keys[old]
        mine = self._get(index)
        wanted = {(edge, key): number for edge, key, number in mine if len(key) <= max_chars}
        counts: Counter[tuple[str, str]] = Counter()
        paged: set[tuple[str, str]] = set()
        for other in range(low, high + 1):
            if other == index:
                continue
            for edge, key, number in self._get(other):
                mine_number = wanted.get((edge, key), -1)
                if mine_number == -1:
                    continue
                counts[(edge, key)] += 1
                if (
                    number is not None
                    and mine_number is not None
                    and number - mine_number == other - index
                    and abs(other - index) >= 2
                ):
                    paged.add((edge, key))
        return frozenset(
            key
            for (edge, key) in wanted
            if counts[(edge, key)] >= RUN_MIN_OTHER or (edge, key) in paged
        )
