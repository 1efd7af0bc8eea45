"""HTML (stdlib html.parser): visible text only, h1-h6 as the heading path, tables as rows.

Page chrome (script, style, nav, header, footer, noscript, template) is dropped; inline base64
images are stripped while streaming and their alt text kept. Also used per chapter by EPUB.

A DOCTYPE internal subset (`<!DOCTYPE html [ <!ENTITY x "..."> ]>`) is skipped whole; entities
are never expanded (no external files, no entity bombs) and references to the ones it declares
are dropped from the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import (
    HeadingStack,
    ParagraphBuffer,
    Span,
    collapse_spaces,
    is_blank_row,
    markdown_header,
    markdown_row,
)
from helpers.extract.textio import iter_text_chunks, strip_data_uri_stream

SKIPPED_TAGS = frozenset(
    {"script", "style", "nav", "header", "footer", "noscript", "template", "svg", "head"}
)
BLOCK_TAGS = frozenset(
    {
        "p", "div", "section", "article", "main", "aside", "li", "ul", "ol", "dl", "dt", "dd",
        "blockquote", "hr", "form", "fieldset", "figure", "figcaption", "address", "details",
        "summary", "body", "html", "caption", "center", "legend",
    }
)  # fmt: skip
HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
CELL_TAGS = frozenset({"td", "th"})
# A real internal subset declares a few entities; past this a missing "]>" is taken as a stray
# "[" and the DOCTYPE ends at its first ">" (the parser would otherwise buffer the whole file).
MAX_INTERNAL_SUBSET_CHARS = 64 * 1024
_ENTITY_DECL = re.compile(r"<!ENTITY\s+([^\s%\"'>]+)")


_DOCTYPE_MARKS = re.compile(r"[\"'\[\]>]|<!--")


def doctype_end(text: str, start: int) -> tuple[int, str] | None:
    """(index after the DOCTYPE at `start`, its internal subset or ''), or None when the text
    ends inside it. Quoted strings and comments may hold "]" and ">"."""
    i, subset_start = start + len("<!doctype"), -1
    while i - start <= MAX_INTERNAL_SUBSET_CHARS:
        mark = _DOCTYPE_MARKS.search(text, i)
        if mark is None:
            break
        token, i = mark.group(), mark.end()
        if token in ("'", '"') or token == "<!--":
            close = text.find("-->" if token == "<!--" else token, i)
            if close < 0:
                break
            i = close + (3 if token == "<!--" else 1)
        elif token == "[" and subset_start < 0:
            subset_start = i
        elif token == "]" and subset_start >= 0:
            gt = text.find(">", i)
            return (gt + 1, text[subset_start : i - 1]) if gt >= 0 else None
        elif token == ">" and subset_start < 0:
            return i, ""
    if len(text) - start > MAX_INTERNAL_SUBSET_CHARS:  # no end in sight: not a real subset
        gt = text.find(">", start)
        return (gt + 1, "") if gt >= 0 else None
    return None


class _Table:
    def __init__(self) -> None:
        self.header: str | None = None
        self.header_cells: list[str] | None = None
        self.rows = 0
        self.row: list[str] | None = None
        self.row_has_th = False
        self.cell: list[str] | None = None
        self.line = 0


class _HtmlBlocks(HTMLParser):
    """Turns parser callbacks into TextBlocks collected in `out` (drained after each feed)."""

    def __init__(
        self, root_path: tuple[str, ...], with_lines: bool, skipped_tags: frozenset[str]
    ) -> None:
        super().__init__(convert_charrefs=True)
        self.keep_title = not root_path  # an EPUB chapter's <title> repeats the chapter name
        self.skipped_tags = skipped_tags
        self.root_path = root_path
        self.with_lines = with_lines
        self.out: list[TextBlock] = []
        self.headings = HeadingStack()
        self.para = ParagraphBuffer()
        self.skip_depth = 0
        self.pre_depth = 0
        self.heading: tuple[int, list[str]] | None = None
        self.title: list[str] | None = None
        self.title_seen = False
        self.tables: list[_Table] = []
        self.nested_tables = 0
        self.line_buf: list[str] = []
        self.line_buf_start: int | None = None
        self.declared_entities: re.Pattern[str] | None = None
        self.closing = False

    # -- locations -------------------------------------------------------------------------
    def path(self) -> tuple[str, ...]:
        return self.root_path + self.headings.path

    def location(self, start: int | None, end: int | None) -> Location:
        if not self.with_lines:
            return Location(heading_path=self.path())
        return Location(heading_path=self.path(), line_start=start, line_end=end)

    # -- text accumulation -------------------------------------------------------------------
    def flush_line(self) -> None:
        """Move the current inline run (words between block tags) into the paragraph buffer."""
        text = "".join(self.line_buf)
        text = text.strip("\n") if self.pre_depth else collapse_spaces(text)
        start = self.line_buf_start
        self.line_buf, self.line_buf_start = [], None
        if text:
            self.emit(self.para.add(text, start), BlockKind.PARAGRAPH)

    def flush_paragraph(self) -> None:
        self.flush_line()
        kind = BlockKind.CODE if self.pre_depth else BlockKind.PARAGRAPH
        self.emit([self.para.flush()], kind)

    def emit(self, spans: Iterable[Span | None], kind: BlockKind) -> None:
        for span in spans:
            if span is not None and span.text:
                end = self.getpos()[0] if span.line_end is not None else None
                loc = self.location(span.line_start, max(end or 0, span.line_start or 0) or None)
                self.out.append(TextBlock(span.text, loc, kind))

    def add_text(self, text: str) -> None:
        if self.title is not None:
            self.title.append(text)
        elif self.skip_depth:
            return
        elif self.heading is not None:
            self.heading[1].append(text)
        elif self.tables and self.tables[-1].cell is not None:
            self.tables[-1].cell.append(text)
        elif self.tables and not self.nested_tables:
            return  # stray text between cells
        else:
            if self.line_buf_start is None and text.strip():
                self.line_buf_start = self.getpos()[0]
            self.line_buf.append(text)
            if sum(map(len, self.line_buf)) > self.para.max_chars:
                self.flush_line()

    # -- parser callbacks ------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.title_seen:
            self.title, self.title_seen = [], True
            return
        if tag == "body":
            self.skip_depth = 0  # an unclosed <head> ends where the body starts
        if tag in self.skipped_tags:
            self.skip_depth += 1
            return
        if self.skip_depth:
            return
        if tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self.add_text(f" {alt} ")
        elif tag == "br":
            self.add_text("\n") if self.pre_depth else self.flush_line()
        elif tag in HEADING_TAGS and not self.tables:
            self.flush_paragraph()
            self.heading = (HEADING_TAGS[tag], [])
        elif tag == "pre":
            self.flush_paragraph()
            self.pre_depth += 1
        elif tag == "table":
            self.start_table()
        elif self.tables and not self.nested_tables:
            self.table_tag(tag, start=True)
        elif tag in BLOCK_TAGS:
            if self.tables and self.tables[-1].cell is not None:
                self.tables[-1].cell.append(" ")
            else:
                self.flush_paragraph()
            if tag == "li":
                self.add_text("- ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.skipped_tags or tag in HEADING_TAGS or tag in CELL_TAGS or tag == "table":
            return  # a self-closed container holds nothing
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title is not None:
            title = collapse_spaces("".join(self.title))
            self.title = None
            line = self.getpos()[0]
            if title and self.keep_title:
                self.out.append(TextBlock(title, self.location(line, line)))
            return
        if tag in self.skipped_tags:
            self.skip_depth = max(0, self.skip_depth - 1)
            return
        if self.skip_depth:
            return
        if tag in HEADING_TAGS and self.heading is not None:
            level, parts = self.heading
            self.heading = None
            title = collapse_spaces("".join(parts))
            if title:
                self.headings.push(level, title)
                line = self.getpos()[0]
                self.out.append(TextBlock(title, self.location(line, line), BlockKind.HEADING))
        elif tag == "pre" and self.pre_depth:
            self.flush_paragraph()
            self.pre_depth -= 1
        elif tag == "table":
            self.end_table()
        elif self.tables and not self.nested_tables:
            self.table_tag(tag, start=False)
        elif tag in BLOCK_TAGS:
            self.flush_paragraph()

    def handle_data(self, data: str) -> None:
        if self.declared_entities is not None:
            data = self.declared_entities.sub("", data)
        self.add_text(data)

    def parse_html_declaration(self, i: int) -> int:
        """html.parser ends a DOCTYPE at its first ">", inside an internal subset, and shows
        the rest ("]>", entity text) as page text: skip the subset whole instead."""
        rawdata = self.rawdata
        if rawdata[i : i + 9].lower() != "<!doctype":
            return super().parse_html_declaration(i)
        found = doctype_end(rawdata, i)
        if found is None and not self.closing:
            return -1  # wait for more text
        if found is None:  # the file ends inside it: not a real subset, or a cut-off one
            gt = rawdata.find(">", i)
            found = (gt + 1 if gt >= 0 else len(rawdata)), ""
        end, subset = found
        names = _ENTITY_DECL.findall(subset)
        if names:
            alternatives = "|".join(re.escape(n) for n in dict.fromkeys(names))
            self.declared_entities = re.compile(f"&(?:{alternatives});")
        self.handle_decl(rawdata[i + 2 : end - 1])
        return end

    # -- tables ----------------------------------------------------------------------------
    def start_table(self) -> None:
        if self.tables and self.tables[-1].cell is not None:
            self.nested_tables += 1  # an inner table's text joins the outer cell
            return
        self.flush_paragraph()
        self.tables.append(_Table())

    def end_table(self) -> None:
        if self.nested_tables:
            self.nested_tables -= 1
            return
        if not self.tables:
            return
        table = self.tables[-1]
        self.end_row(table)
        if table.rows == 0 and table.header_cells:
            row = markdown_row(table.header_cells)
            where = self.location(table.line, table.line)
            self.out.append(TextBlock(row, where, BlockKind.TABLE_ROW))
        self.tables.pop()

    def table_tag(self, tag: str, *, start: bool) -> None:
        table = self.tables[-1]
        if tag == "tr":
            self.end_row(table)
            if start:
                table.row, table.row_has_th, table.line = [], False, self.getpos()[0]
        elif tag in CELL_TAGS:
            self.end_cell(table)
            if start:
                if table.row is None:
                    table.row, table.row_has_th, table.line = [], False, self.getpos()[0]
                table.cell = []
                table.row_has_th |= tag == "th"
        elif table.cell is not None and tag in BLOCK_TAGS | {"br"}:
            table.cell.append(" ")

    def end_cell(self, table: _Table) -> None:
        if table.cell is not None and table.row is not None:
            table.row.append("".join(table.cell))
        table.cell = None

    def end_row(self, table: _Table) -> None:
        self.end_cell(table)
        row, table.row = table.row, None
        if row is None or is_blank_row(row):
            return
        if table.header is None:
            # The first row is the header (a `<th>` row or not): it names the columns.
            table.header, table.header_cells = markdown_header(row), row
            return
        table.rows += 1
        line = self.getpos()[0]
        self.out.append(
            TextBlock(
                markdown_row(row),
                self.location(table.line, line),
                BlockKind.TABLE_ROW,
                table_header=table.header,
            )
        )

    def finish(self) -> None:
        self.closing = True
        self.close()
        while self.tables:
            self.end_table()
        self.heading = None
        self.flush_paragraph()


def extract_html_chunks(
    chunks: Iterable[str],
    root_path: tuple[str, ...] = (),
    *,
    with_lines: bool = True,
    skipped_tags: frozenset[str] = SKIPPED_TAGS,
) -> Iterator[TextBlock]:
    """Blocks of an HTML document given as text chunks; EPUB passes the chapter as `root_path`."""
    parser = _HtmlBlocks(root_path, with_lines, skipped_tags)
    for chunk in strip_data_uri_stream(chunks):
        parser.feed(chunk)
        yield from parser.out
        parser.out.clear()
    parser.finish()
    yield from parser.out


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    yield from extract_html_chunks(iter_text_chunks(path, ctx))
