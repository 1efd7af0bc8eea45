"""DOCX (python-docx): body in reading order, headings by style, tables as rows, notes last.

The body XML is walked directly (paragraphs, tables, and content controls that python-docx's own
iterators skip, such as cover pages); paragraph text is read from every `w:t` so hyperlinks,
fields and tracked insertions are not lost. Headers/footers, footnotes, endnotes and comments
follow the body as NOTE blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import docx
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.oxml.ns import qn
from lxml import etree

from helpers.extract.archive_guard import check_archive
from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import (
    ExtractionCancelled,
    HeadingStack,
    ParagraphBuffer,
    collapse_spaces,
    table_blocks,
)

_HEADING_STYLE = re.compile(r"^(?:heading|заголовок|หัวเรื่อง)\s*(\d)$", re.IGNORECASE)
_W_P, _W_TBL, _W_SDT = qn("w:p"), qn("w:tbl"), qn("w:sdt")
_W_SDT_CONTENT, _W_TR, _W_TC = qn("w:sdtContent"), qn("w:tr"), qn("w:tc")
_W_T, _W_TAB, _W_BR, _W_CR = qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:cr")
_W_NO_BREAK_HYPHEN = qn("w:noBreakHyphen")
_W_GRID_SPAN, _W_VMERGE = qn("w:gridSpan"), qn("w:vMerge")
_W_FOOTNOTE, _W_ENDNOTE, _W_TYPE, _W_VAL = (
    qn("w:footnote"),
    qn("w:endnote"),
    qn("w:type"),
    qn("w:val"),
)
# Rows past this are still read, but a table wider than this many columns is cut: a generated
# table with thousands of empty columns must not produce megabyte rows.
MAX_COLUMNS = 256
# Safe XML parsing for the notes parts we read ourselves: no entities, no network, no huge trees.
_XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    check_archive(path, ctx.limits)
    try:
        document = docx.Document(str(path))
    except (KeyError, ValueError) as exc:
        raise ExtractionError(
            f"not a Word document: {exc}", "the file may be another format renamed to .docx"
        ) from exc
    walker = _BodyWalker(document, ctx)
    yield from walker.walk(document.element.body)
    yield from _header_footer_notes(document)
    yield from _notes_parts(document)
    yield from _comments(document)


class _BodyWalker:
    def __init__(self, document: docx.document.Document, ctx: ExtractContext) -> None:
        self.ctx = ctx
        self.headings = HeadingStack()
        self.styles = _style_names(document)
        self.count = 0

    def location(self) -> Location:
        return Location(heading_path=self.headings.path)

    def walk(self, container: etree._Element) -> Iterator[TextBlock]:
        for child in container.iterchildren():
            self.count += 1
            if self.count % 500 == 0 and self.ctx.should_cancel():
                raise ExtractionCancelled("extraction cancelled")
            if child.tag == _W_P:
                yield from self.paragraph(child)
            elif child.tag == _W_TBL:
                yield from self.table(child)
            elif child.tag == _W_SDT:
                content = child.find(_W_SDT_CONTENT)
                if content is not None:
                    yield from self.walk(content)

    def paragraph(self, p: etree._Element) -> Iterator[TextBlock]:
        text = paragraph_text(p).strip()
        if not text:
            return
        level = self.heading_level(p)
        if level is not None:
            title = collapse_spaces(text)
            path = self.headings.push(level, title)
            yield TextBlock(title, Location(heading_path=path), BlockKind.HEADING)
            return
        if p.find(f"{qn('w:pPr')}/{qn('w:numPr')}") is not None or self.style_of(p).startswith(
            "List"
        ):
            text = "- " + text
        buffer = ParagraphBuffer()
        spans = [*buffer.add(text), buffer.flush()]
        for span in spans:
            if span is not None:
                yield TextBlock(span.text, self.location())

    def style_of(self, p: etree._Element) -> str:
        style = p.find(f"{qn('w:pPr')}/{qn('w:pStyle')}")
        style_id = style.get(_W_VAL) if style is not None else None
        return self.styles.get(style_id or "", style_id or "")

    def heading_level(self, p: etree._Element) -> int | None:
        name = self.style_of(p)
        if name.lower() == "title":
            return 0
        match = _HEADING_STYLE.match(name)
        if match:
            return int(match.group(1))
        outline = p.find(f"{qn('w:pPr')}/{qn('w:outlineLvl')}")
        if outline is not None and (outline.get(_W_VAL) or "").isdigit():
            level = int(outline.get(_W_VAL) or "9")
            return level + 1 if level < 9 else None  # 9 means body text
        return None

    def table(self, tbl: etree._Element) -> Iterator[TextBlock]:
        rows = (_row_cells(tr) for tr in tbl.iterchildren(_W_TR))
        yield from table_blocks(rows, self.location())


def _style_names(document: docx.document.Document) -> dict[str, str]:
    """style id -> style name (ids are language-specific in localised Word, names are not)."""
    names: dict[str, str] = {}
    for style in document.styles:
        if style.style_id and style.name:
            names[style.style_id] = style.name
    return names


def paragraph_text(element: etree._Element) -> str:
    """Text of a paragraph, text boxes inside it on their own lines."""
    parts: list[str] = []
    for node in element.iter(_W_T, _W_TAB, _W_BR, _W_CR, _W_NO_BREAK_HYPHEN, _W_P):
        if node.tag == _W_P:
            if node is not element:
                parts.append("\n")  # a paragraph of a text box anchored in this one
        elif node.tag == _W_T:
            parts.append(node.text or "")
        elif node.tag == _W_TAB:
            parts.append("\t")
        elif node.tag == _W_NO_BREAK_HYPHEN:
            parts.append("-")
        else:
            parts.append("\n")
    return "".join(parts)


def outer_paragraphs(container: etree._Element) -> Iterator[etree._Element]:
    """Paragraphs of a container, except those inside another paragraph (its text boxes)."""
    for p in container.iter(_W_P):
        ancestor = p.getparent()
        while ancestor is not None and ancestor is not container and ancestor.tag != _W_P:
            ancestor = ancestor.getparent()
        if ancestor is None or ancestor is container:
            yield p


def _cell_text(tc: etree._Element) -> str:
    """All text of a cell, nested tables included, as one line."""
    return collapse_spaces(" ".join(paragraph_text(p) for p in outer_paragraphs(tc)))


def _row_cells(tr: etree._Element) -> list[str]:
    cells: list[str] = []
    for tc in tr.iterchildren(_W_TC):
        tc_pr = tc.find(qn("w:tcPr"))
        span = 1
        if tc_pr is not None:
            grid = tc_pr.find(_W_GRID_SPAN)
            if grid is not None and (grid.get(_W_VAL) or "").isdigit():
                span = max(1, int(grid.get(_W_VAL) or "1"))
            merge = tc_pr.find(_W_VMERGE)
            if merge is not None and merge.get(_W_VAL) != "restart":
                cells.extend([""] * span)  # continuation of a vertically merged cell
                continue
        cells.append(_cell_text(tc))
        cells.extend([""] * min(span - 1, MAX_COLUMNS))
        if len(cells) >= MAX_COLUMNS:
            break
    return cells[:MAX_COLUMNS]


def _note(text: str, label: str) -> TextBlock:
    return TextBlock(text, Location(heading_path=(label,)), BlockKind.NOTE)


def _header_footer_notes(document: docx.document.Document) -> Iterator[TextBlock]:
    seen: set[str] = set()
    for section in document.sections:
        for label, part in (("Header", section.header), ("Footer", section.footer)):
            if part.is_linked_to_previous:
                continue
            lines = (paragraph_text(p).strip() for p in outer_paragraphs(part._element))
            text = "\n".join(line for line in lines if line)
            if text and text not in seen:
                seen.add(text)
                yield _note(text, label)


def _notes_parts(document: docx.document.Document) -> Iterator[TextBlock]:
    for reltype, tag, label in (
        (RT.FOOTNOTES, _W_FOOTNOTE, "Footnotes"),
        (RT.ENDNOTES, _W_ENDNOTE, "Endnotes"),
    ):
        for rel in document.part.rels.values():
            if rel.reltype != reltype or rel.is_external:
                continue
            root = etree.fromstring(rel.target_part.blob, _XML_PARSER)
            for note in root.iter(tag):
                if note.get(_W_TYPE) in ("separator", "continuationSeparator"):
                    continue
                text = collapse_spaces(" ".join(paragraph_text(p) for p in outer_paragraphs(note)))
                if text:
                    yield _note(text, label)


def _comments(document: docx.document.Document) -> Iterator[TextBlock]:
    try:
        comments = list(document.comments)
    except (KeyError, ValueError, AttributeError):
        return  # no or unreadable comments part: the body is what matters
    for comment in comments:
        text = collapse_spaces(comment.text or "")
        if text:
            yield _note(text, "Comments")
