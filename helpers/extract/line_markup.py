"""Shared state for line-oriented markup (LaTeX, AsciiDoc, Org, source code): a heading stack,
a bounded paragraph buffer, and blocks that carry the heading path plus their line range."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from helpers.extract.blocks import BlockKind, Location, TextBlock
from helpers.extract.common import MAX_BLOCK_CHARS, HeadingStack, ParagraphBuffer, Span


class HeadedLines:
    """Feed lines with `text()`, `blank()` and `heading()`; every call yields finished blocks."""

    def __init__(self, kind: BlockKind = BlockKind.PARAGRAPH, max_chars: int = MAX_BLOCK_CHARS):
        self.kind = kind
        self.headings = HeadingStack()
        self.para = ParagraphBuffer(max_chars)

    def _emit(self, spans: Iterable[Span | None], kind: BlockKind) -> Iterator[TextBlock]:
        for span in spans:
            if span is not None and span.text.strip():
                where = Location(
                    heading_path=self.headings.path,
                    line_start=span.line_start,
                    line_end=span.line_end,
                )
                yield TextBlock(span.text, where, kind)

    def text(self, line_no: int, piece: str, *, new_line: bool = True) -> Iterator[TextBlock]:
        yield from self._emit(self.para.add(piece, line_no, new_line=new_line), self.kind)

    def blank(self) -> Iterator[TextBlock]:
        yield from self._emit([self.para.flush()], self.kind)

    def heading(self, level: int, title: str, line_no: int) -> Iterator[TextBlock]:
        yield from self.blank()
        title = title.strip()
        if not title:
            return
        path = self.headings.push(level, title[:200])
        where = Location(heading_path=path, line_start=line_no, line_end=line_no)
        yield TextBlock(title, where, BlockKind.HEADING)

    @property
    def line_count(self) -> int:
        return self.para.line_count
