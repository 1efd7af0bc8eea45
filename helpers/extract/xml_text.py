"""XML (.xml): element text in document order, `<title>`/`<head>` elements as the heading path,
line ranges from the parser.

Parsed with the stdlib expat parser, streamed in chunks, and made as safe as the HTML and EPUB
readers (`resolve_entities=False`, `no_network=True` there): a default handler is set, which
turns off the expansion of internal entities (no billion-laughs), external entities and the
external DTD are never loaded (no XXE: `SYSTEM "file:///etc/passwd"` stays unread) and parameter
entities are not parsed. Entity references are dropped from the text. Expat rather than lxml
because it reports the line of every piece of text, which a hit in a 50,000-line file needs.
Attributes, comments and processing instructions are not text; a malformed file is reported.
"""

from __future__ import annotations

import xml.parsers.expat as expat
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import HeadingStack, ParagraphBuffer, Span, collapse_spaces

READ_BYTES = 256 * 1024
HEADING_NAMES = frozenset({"title", "head", "heading", "h1", "h2", "h3", "h4", "h5", "h6"})
# Elements that end a paragraph (DocBook, DITA, TEI, XHTML, Office XML); any element directly
# under the root does too, so each record of a data file is its own block.
BLOCK_NAMES = frozenset(
    {
        "p", "para", "simpara", "div", "section", "sect1", "sect2", "sect3", "chapter",
        "article", "entry", "item", "li", "listitem", "row", "record", "note", "abstract",
        "blockquote", "description", "summary", "topic", "body", "td", "th", "tr", "table",
        "term", "definition", "dd", "dt", "paragraph", "text", "message", "string",
    }
)  # fmt: skip
MALFORMED_HINT = "the XML is malformed or truncated; check it with `xmllint --noout FILE`"


def _local(name: str) -> str:
    return name.rsplit(":", 1)[-1].lower()


class _XmlBlocks:
    def __init__(self) -> None:
        self.parser = expat.ParserCreate()
        self.parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        self.parser.UseForeignDTD(False)
        # A DefaultHandler (not DefaultHandlerExpand) turns off internal entity expansion: the
        # references reach it unexpanded and are dropped.
        self.parser.DefaultHandler = lambda data: None
        self.parser.ExternalEntityRefHandler = lambda *args: 1  # never read: accepted as empty
        self.parser.StartElementHandler = self.start
        self.parser.EndElementHandler = self.end
        self.parser.CharacterDataHandler = self.data
        self.parser.buffer_text = True
        self.out: list[TextBlock] = []
        self.headings = HeadingStack()
        self.para = ParagraphBuffer()
        self.stack: list[str] = []
        self.run: list[str] = []
        self.run_line: int | None = None
        self.heading: list[str] | None = None
        self.heading_line = 0

    def data(self, text: str) -> None:
        if self.heading is not None:
            self.heading.append(text)
            return
        if self.run_line is None and text.strip():
            self.run_line = self.parser.CurrentLineNumber
        self.run.append(text)

    def flush_run(self) -> None:
        text = collapse_spaces("".join(self.run))
        line, self.run, self.run_line = self.run_line, [], None
        if text:
            last = self.para.last_line
            self.emit(self.para.add(text, line, new_line=last != line))

    def flush_paragraph(self) -> None:
        self.flush_run()
        self.emit([self.para.flush()])

    def emit(self, spans: Iterator[Span] | list[Span | None]) -> None:
        for span in spans:
            if span is not None and span.text:
                where = Location(
                    heading_path=self.headings.path,
                    line_start=span.line_start,
                    line_end=max(span.line_end or 0, self.parser.CurrentLineNumber),
                )
                self.out.append(TextBlock(span.text, where, BlockKind.PARAGRAPH))

    def start(self, name: str, attrs: dict[str, str]) -> None:
        local = _local(name)
        self.stack.append(local)
        if self.heading is not None:
            return  # markup inside a title: its text joins the title
        if local in HEADING_NAMES:
            self.flush_paragraph()
            self.heading, self.heading_line = [], self.parser.CurrentLineNumber
        elif local in BLOCK_NAMES:
            self.flush_paragraph()
        else:
            self.run.append(" ")

    def end(self, name: str) -> None:
        local = self.stack.pop() if self.stack else _local(name)
        if self.heading is not None:
            if local not in HEADING_NAMES or any(n in HEADING_NAMES for n in self.stack):
                return
            title = collapse_spaces("".join(self.heading))[:200]
            self.heading = None
            if title:
                path = self.headings.push(max(1, len(self.stack)), title)
                line = self.heading_line
                where = Location(heading_path=path, line_start=line, line_end=line)
                self.out.append(TextBlock(title, where, BlockKind.HEADING))
            return
        if local in BLOCK_NAMES or len(self.stack) <= 1:
            self.flush_paragraph()
        else:
            self.run.append(" ")

    def feed(self, data: bytes, final: bool = False) -> None:
        try:
            self.parser.Parse(data, final)
        except expat.ExpatError as exc:
            raise ExtractionError(
                f"malformed XML: {expat.ErrorString(exc.code)} at line {exc.lineno}",
                MALFORMED_HINT,
            ) from exc
        if final:
            self.flush_paragraph()


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    reader = _XmlBlocks()
    with path.open("rb") as handle:
        while chunk := handle.read(READ_BYTES):
            if ctx.should_cancel():
                return
            reader.feed(chunk)
            yield from reader.out
            reader.out.clear()
    reader.feed(b"", final=True)
    yield from reader.out
