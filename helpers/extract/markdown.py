"""Markdown: ATX/setext headings as a heading path, fenced code as CODE, pipe tables as rows.

Inline base64 images are dropped while streaming (the alt text stays), so a Markdown file with a
10 MB embedded screenshot costs no more than its prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import (
    HeadingStack,
    ParagraphBuffer,
    Span,
    markdown_header,
    markdown_row,
)
from helpers.extract.textio import iter_line_pieces

# Linear: the old `(.*?)(?:[ \t]+#+)?[ \t]*$` backtracked quadratically on a run of spaces (a
# `# a` line with 20,000 spaces took 10 s, in the worker itself); the closing #s are cut below.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t])#+$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_SEPARATOR_CELL = re.compile(r"[ \t]*:?-+:?[ \t]*")
# What is left of an inline image once its data URI is stripped: `![alt]()` -> alt.
_EMPTIED_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*(?:\"[^\"]*\"\s*)?\)")


def is_table_separator(line: str) -> bool:
    """`|---|:--:|` and the like, checked cell by cell: the one-regex form with adjacent
    `[ \t]*` runs backtracked quadratically (a `|-` line with 20,000 spaces took 3.6 s)."""
    if len(line) - len(line.lstrip(" ")) > 3:
        return False
    body = line.strip(" \t")
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    return all(_SEPARATOR_CELL.fullmatch(cell) for cell in body.split("|"))


def table_cells(line: str) -> list[str]:
    """Cells of a pipe-table line (`| a | b |` or `a | b`), escaped pipes kept."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


class MarkdownReader:
    """Line-by-line Markdown state; `finish()` ends a document (or a notebook cell)."""

    def __init__(self) -> None:
        self.headings = HeadingStack()
        self.para = ParagraphBuffer()
        self.code = ParagraphBuffer()
        self.fence: str | None = None
        self.table_header: str | None = None

    def location(self, span: Span) -> Location:
        return Location(
            heading_path=self.headings.path, line_start=span.line_start, line_end=span.line_end
        )

    def emit(self, spans: Iterable[Span | None], kind: BlockKind) -> Iterator[TextBlock]:
        for span in spans:
            if span is None or not span.text:
                continue
            text = _EMPTIED_IMAGE.sub(r"\1", span.text) if kind is not BlockKind.CODE else span.text
            if text.strip():
                yield TextBlock(text, self.location(span), kind)

    def heading(self, level: int, title: str, line: int) -> Iterator[TextBlock]:
        title = _EMPTIED_IMAGE.sub(r"\1", title).strip()
        if not title:
            return
        path = self.headings.push(level, title)
        yield TextBlock(
            title, Location(heading_path=path, line_start=line, line_end=line), BlockKind.HEADING
        )

    def line(self, line_no: int, text: str) -> Iterator[TextBlock]:
        """One whole first piece of a line, outside a fence."""
        if self.fence is not None:
            marker = self.fence
            stripped = text.strip()
            if stripped.startswith(marker) and not stripped.strip(marker[0]):
                self.fence = None
                yield from self.emit([self.code.flush()], BlockKind.CODE)
            else:
                yield from self.emit(self.code.add(text, line_no), BlockKind.CODE)
            return
        if self.table_header is not None:
            if "|" in text and text.strip():
                row = TextBlock(
                    markdown_row(table_cells(text)),
                    Location(heading_path=self.headings.path, line_start=line_no, line_end=line_no),
                    BlockKind.TABLE_ROW,
                    table_header=self.table_header,
                )
                yield row
                return
            self.table_header = None
        fence = _FENCE.match(text)
        if fence:
            yield from self.emit([self.para.flush()], BlockKind.PARAGRAPH)
            self.fence = fence.group(1)
            return
        atx = _ATX.match(text)
        if atx:
            yield from self.emit([self.para.flush()], BlockKind.PARAGRAPH)
            title = _ATX_CLOSE.sub("", (atx.group(2) or "").rstrip(" \t"))
            yield from self.heading(len(atx.group(1)), title, line_no)
            return
        if not text.strip():
            yield from self.emit([self.para.flush()], BlockKind.PARAGRAPH)
            return
        single = self.para.line_count == 1 and self.para.last_line == line_no - 1
        if single and _SETEXT.match(text):
            title = self.para.flush()
            if title is not None:
                level = 1 if text.strip().startswith("=") else 2
                yield from self.heading(level, title.text, title.line_start or line_no)
            return
        if single and "|" in self.para.text() and is_table_separator(text) and "|" in text:
            header = self.para.flush()
            if header is not None:
                self.table_header = markdown_header(table_cells(header.text))
            return
        if _SETEXT.match(text) and text.strip().startswith("-"):
            yield from self.emit([self.para.flush()], BlockKind.PARAGRAPH)  # thematic break
            return
        yield from self.emit(self.para.add(text, line_no), BlockKind.PARAGRAPH)

    def finish(self) -> Iterator[TextBlock]:
        """Flush open blocks; headings stay, so a next notebook cell continues under them."""
        yield from self.emit([self.code.flush()], BlockKind.CODE)
        yield from self.emit([self.para.flush()], BlockKind.PARAGRAPH)
        self.fence = None
        self.table_header = None


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    state = MarkdownReader()
    continuing = False
    for line_no, piece, complete in iter_line_pieces(path, ctx, strip_data_uris=True):
        if continuing:
            target = state.code if state.fence is not None else state.para
            kind = BlockKind.CODE if state.fence is not None else BlockKind.PARAGRAPH
            yield from state.emit(target.add(piece, line_no, new_line=False), kind)
        else:
            yield from state.line(line_no, piece)
        continuing = not complete
    yield from state.finish()
