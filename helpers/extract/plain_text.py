"""Plain text (.txt .text .log .yaml .yml): paragraphs split at blank lines, with line ranges."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import ParagraphBuffer, Span
from helpers.extract.textio import iter_line_pieces


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    buffer = ParagraphBuffer()
    continuing = False
    for line_no, piece, complete in iter_line_pieces(path, ctx):
        if not continuing and not piece.strip():
            yield from _blocks([buffer.flush()])
        else:
            yield from _blocks(buffer.add(piece, line_no, new_line=not continuing))
        continuing = not complete
    yield from _blocks([buffer.flush()])


def _blocks(spans: Iterator[Span] | list[Span | None]) -> Iterator[TextBlock]:
    for span in spans:
        if span is not None and span.text:
            yield TextBlock(
                span.text,
                Location(line_start=span.line_start, line_end=span.line_end),
                BlockKind.PARAGRAPH,
            )
