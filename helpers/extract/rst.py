"""reStructuredText: underlined (and overlined) section titles become the heading path.

RST has no fixed heading levels: the first underline style met is level 1, the next new one
level 2, and so on, exactly as docutils assigns them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import HeadingStack, ParagraphBuffer, Span
from helpers.extract.textio import iter_line_pieces

_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+_.:<>!$%&,;/?@\\|])\1{2,}[ \t]*$")


class _RstState:
    def __init__(self) -> None:
        self.headings = HeadingStack()
        self.styles: list[tuple[str, bool]] = []
        self.para = ParagraphBuffer()
        self.overline: tuple[str, int] | None = None  # adornment char and its line

    def emit(self, spans: Iterable[Span | None]) -> Iterator[TextBlock]:
        for span in spans:
            if span is not None and span.text:
                location = Location(
                    heading_path=self.headings.path,
                    line_start=span.line_start,
                    line_end=span.line_end,
                )
                yield TextBlock(span.text, location, BlockKind.PARAGRAPH)

    def heading(self, style: tuple[str, bool], title: str, line: int) -> Iterator[TextBlock]:
        if style not in self.styles:
            self.styles.append(style)
        path = self.headings.push(self.styles.index(style) + 1, title.strip())
        yield TextBlock(
            title.strip(),
            Location(heading_path=path, line_start=line, line_end=line),
            BlockKind.HEADING,
        )

    def line(self, line_no: int, text: str) -> Iterator[TextBlock]:
        adornment = _ADORNMENT.match(text)
        single = self.para.line_count == 1 and self.para.last_line == line_no - 1
        if adornment and single:
            title = self.para.flush()
            if title is not None:
                char = adornment.group(1)
                over = self.overline is not None and self.overline[0] == char
                start = self.overline[1] if over and self.overline else title.line_start
                self.overline = None
                yield from self.heading((char, over), title.text, start or line_no)
            return
        if adornment and not self.para:
            self.overline = (adornment.group(1), line_no)
            return
        if not text.strip():
            self.overline = None
            yield from self.emit([self.para.flush()])
            return
        yield from self.emit(self.para.add(text, line_no))


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    state = _RstState()
    continuing = False
    for line_no, piece, complete in iter_line_pieces(path, ctx):
        if continuing:
            yield from state.emit(state.para.add(piece, line_no, new_line=False))
        else:
            yield from state.line(line_no, piece)
        continuing = not complete
    yield from state.emit([state.para.flush()])
