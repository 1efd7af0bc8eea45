"""Small pieces every extractor shares: bounded paragraph buffers, heading paths, Markdown rows."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from helpers.extract.blocks import BlockKind, ExtractionError, Location, TextBlock

# A block never grows past the chunker's parent size (~4,000 chars), so one block always fits in
# one parent section; longer text is cut at a space near the bound.
MAX_BLOCK_CHARS = 4000
# Cells longer than this are cut in Markdown rows: one giant cell must not make a giant row.
MAX_CELL_CHARS = 2000
_SPACE_RUN = re.compile(r"\s+")


class ExtractionCancelled(ExtractionError):
    """`ctx.should_cancel()` turned true mid-document: the partial document must be discarded."""


@dataclass(frozen=True)
class Span:
    """Text with the 1-based line range it came from (lines are None for formats without lines)."""

    text: str
    line_start: int | None
    line_end: int | None


class ParagraphBuffer:
    """Collects line pieces into paragraphs and cuts them into blocks of at most `max_chars`."""

    def __init__(self, max_chars: int = MAX_BLOCK_CHARS) -> None:
        self.max_chars = max_chars
        self._parts: list[str] = []
        self._size = 0
        self._start: int | None = None
        self._end: int | None = None
        self.line_count = 0

    def __bool__(self) -> bool:
        return self._size > 0

    @property
    def last_line(self) -> int | None:
        return self._end

    def text(self) -> str:
        return "".join(self._parts)

    def add(self, piece: str, line: int | None = None, *, new_line: bool = True) -> Iterator[Span]:
        """Append a new line or the continuation of the current one; yield full blocks."""
        if new_line and self._parts:
            self._parts.append("\n")
            self._size += 1
        if new_line:
            self.line_count += 1
        if self._start is None:
            self._start = line
        self._end = line if line is not None else self._end
        self._parts.append(piece)
        self._size += len(piece)
        if self._size <= self.max_chars:
            return
        text = "".join(self._parts)
        pos = 0
        limit = self.max_chars
        while len(text) - pos > limit:
            window_end = pos + limit
            cut = max(
                text.rfind(" ", pos + limit // 2, window_end),
                text.rfind("\n", pos + limit // 2, window_end),
            )
            cut = cut + 1 if cut > 0 else window_end
            head = text[pos:cut].rstrip()
            if self._start is None:
                yield Span(head, None, None)
            else:
                yield Span(head, self._start, self._start + head.count("\n"))
                self._start += text.count("\n", pos, cut)
            pos = cut
        rest = text[pos:]
        self._parts, self._size = [rest], len(rest)

    def flush(self) -> Span | None:
        """The buffered paragraph (None when it holds only whitespace); the buffer empties."""
        text = "".join(self._parts)
        span = Span(text.strip(), self._start, self._end) if text.strip() else None
        self._parts, self._size, self._start, self._end = [], 0, None, None
        self.line_count = 0
        return span


class HeadingStack:
    """Breadcrumb of headings: a level-n heading replaces everything at level >= n."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def push(self, level: int, title: str) -> tuple[str, ...]:
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, title))
        return self.path

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(title for _, title in self._stack)


def collapse_spaces(text: str) -> str:
    return _SPACE_RUN.sub(" ", text).strip()


def markdown_cell(value: object) -> str:
    """One cell as Markdown: a single line, `|` escaped, bounded length."""
    if value is None:
        return ""
    text = collapse_spaces(str(value))
    if len(text) > MAX_CELL_CHARS:
        text = text[:MAX_CELL_CHARS] + "…"
    return text.replace("|", "\\|")


def markdown_row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(markdown_cell(cell) for cell in cells) + " |"


def markdown_header(cells: Sequence[object]) -> str:
    """Header row plus separator, the text the chunker repeats above every table chunk."""
    return markdown_row(cells) + "\n|" + "---|" * max(1, len(cells))


def is_blank_row(cells: Iterable[object]) -> bool:
    return all(value is None or not str(value).strip() for value in cells)


def table_blocks(rows: Iterable[Sequence[object]], location: Location) -> Iterator[TextBlock]:
    """TABLE_ROW blocks: the first non-blank row is the header repeated with every other row.

    A table holding only its header row yields that row, so its text is still searchable.
    """
    header: str | None = None
    header_cells: Sequence[object] = ()
    data_rows = 0
    for cells in rows:
        if is_blank_row(cells):
            continue
        if header is None:
            header, header_cells = markdown_header(cells), cells
            continue
        data_rows += 1
        yield TextBlock(markdown_row(cells), location, BlockKind.TABLE_ROW, table_header=header)
    if header is not None and data_rows == 0:
        yield TextBlock(markdown_row(header_cells), location, BlockKind.TABLE_ROW)
