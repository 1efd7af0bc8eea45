"""ODT: headings by outline level, paragraphs, lists, tables as rows, notes after their paragraph.

Headers and footers (from the master pages in styles.xml) follow the body as NOTE blocks.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import (
    ExtractionCancelled,
    HeadingStack,
    ParagraphBuffer,
    collapse_spaces,
    table_blocks,
)
from helpers.extract.odf import (
    OFFICE,
    STYLE,
    T_H,
    T_LIST,
    T_LIST_HEADER,
    T_LIST_ITEM,
    T_P,
    TABLE_TABLE,
    TEXT,
    check_mimetype,
    iter_units,
    node_text,
    open_odf,
    parent_tag,
    q,
    table_rows,
)

OFFICE_TEXT = q(OFFICE, "text")
CONTAINERS = frozenset({q(TEXT, "section"), q(TEXT, "index-body"), q(TEXT, "alphabetical-index")})
SKIPPED = frozenset(
    {
        q(TEXT, "table-of-content"),  # repeats the headings
        q(TEXT, "sequence-decls"),
        q(TEXT, "variable-decls"),
        q(TEXT, "user-field-decls"),
        q(OFFICE, "forms"),
    }
)
_HEADER_FOOTER = {
    q(STYLE, "header"): "Header",
    q(STYLE, "header-left"): "Header",
    q(STYLE, "footer"): "Footer",
    q(STYLE, "footer-left"): "Footer",
}
CANCEL_CHECK_UNITS = 200
_SAFE_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    archive = open_odf(path, ctx)
    try:
        check_mimetype(archive, ".odt")
        state = _Body()
        units = iter_units(archive, "content.xml", lambda e: parent_tag(e) == OFFICE_TEXT)
        for count, unit in enumerate(units, start=1):
            if count % CANCEL_CHECK_UNITS == 0 and ctx.should_cancel():
                raise ExtractionCancelled("extraction cancelled")
            yield from state.element(unit, 0)
        yield from _header_footer(archive)
    finally:
        archive.close()


class _Body:
    def __init__(self) -> None:
        self.headings = HeadingStack()

    def location(self) -> Location:
        return Location(heading_path=self.headings.path)

    def element(self, element: etree._Element, list_depth: int) -> Iterator[TextBlock]:
        tag = element.tag
        if tag in SKIPPED:
            return
        if tag == T_H:
            yield from self.heading(element)
        elif tag == T_P:
            yield from self.paragraph(element, list_depth)
        elif tag == T_LIST:
            for item in element:
                if item.tag in (T_LIST_ITEM, T_LIST_HEADER):
                    for child in item:
                        yield from self.element(child, list_depth + 1)
        elif tag == TABLE_TABLE:
            yield from self.table(element)
        elif tag in CONTAINERS:
            for child in element:
                yield from self.element(child, list_depth)

    def heading(self, element: etree._Element) -> Iterator[TextBlock]:
        notes: list[str] = []
        title = collapse_spaces(node_text(element, notes))
        if title:
            level_attr = element.get(q(TEXT, "outline-level"), "1")
            level = int(level_attr) if level_attr.isdigit() else 1
            path = self.headings.push(level, title)
            yield TextBlock(title, Location(heading_path=path), BlockKind.HEADING)
        yield from self.notes(notes)

    def paragraph(self, element: etree._Element, list_depth: int) -> Iterator[TextBlock]:
        notes: list[str] = []
        text = node_text(element, notes).strip()
        if text:
            if list_depth:
                text = "  " * (list_depth - 1) + "- " + text
            buffer = ParagraphBuffer()
            for span in [*buffer.add(text), buffer.flush()]:
                if span is not None:
                    yield TextBlock(span.text, self.location())
        yield from self.notes(notes)

    def notes(self, notes: list[str]) -> Iterator[TextBlock]:
        for note in notes:
            yield TextBlock(note, self.location(), BlockKind.NOTE)

    def table(self, element: etree._Element) -> Iterator[TextBlock]:
        yield from table_blocks((cells for _, _, cells in table_rows(element)), self.location())


def _header_footer(archive: zipfile.ZipFile) -> Iterator[TextBlock]:
    try:
        data = archive.read("styles.xml")
    except KeyError:
        return
    try:
        root = etree.fromstring(data, _SAFE_PARSER)
    except etree.XMLSyntaxError:
        return  # broken styles only lose headers/footers; the body is already out
    seen: set[str] = set()
    for tag, label in _HEADER_FOOTER.items():
        for element in root.iter(tag):
            text = "\n".join(
                collapse_spaces(node_text(p))
                for p in element.iter(T_P, T_H)
                if node_text(p).strip()
            )
            if text and text not in seen:
                seen.add(text)
                yield TextBlock(text, Location(heading_path=(label,)), BlockKind.NOTE)
