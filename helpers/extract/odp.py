"""ODP: per slide (`draw:page`) the title as heading, shapes in reading order, tables, notes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import (
    ExtractionCancelled,
    ParagraphBuffer,
    collapse_spaces,
    table_blocks,
)
from helpers.extract.odf import (
    DRAW,
    OFFICE,
    PRESENTATION,
    SVG,
    TABLE_TABLE,
    block_lines,
    check_mimetype,
    iter_units,
    length_cm,
    open_odf,
    parent_tag,
    q,
    table_rows,
)

OFFICE_PRESENTATION = q(OFFICE, "presentation")
DRAW_PAGE, DRAW_FRAME, DRAW_GROUP = q(DRAW, "page"), q(DRAW, "frame"), q(DRAW, "g")
DRAW_TEXT_BOX = q(DRAW, "text-box")
NOTES = q(PRESENTATION, "notes")
CLASS = q(PRESENTATION, "class")
SVG_TITLE, SVG_DESC = q(SVG, "title"), q(SVG, "desc")
MAX_GROUP_DEPTH = 16


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    archive = open_odf(path, ctx)
    try:
        check_mimetype(archive, ".odp")
        pages = iter_units(
            archive,
            "content.xml",
            lambda e: e.tag == DRAW_PAGE and parent_tag(e) == OFFICE_PRESENTATION,
        )
        for number, page in enumerate(pages, start=1):
            if ctx.should_cancel():
                raise ExtractionCancelled("extraction cancelled")
            yield from _slide_blocks(page, number)
    finally:
        archive.close()


def _position(shape: etree._Element) -> tuple[float, float]:
    return round(length_cm(shape.get(q(SVG, "y"))), 1), length_cm(shape.get(q(SVG, "x")))


def _shapes(container: etree._Element, depth: int) -> Iterator[etree._Element]:
    """Drawn shapes in reading order (top to bottom, then left to right); groups opened."""
    children = [c for c in container if isinstance(c.tag, str) and c.tag != NOTES]
    children.sort(
        key=lambda c: (round(length_cm(c.get(q(SVG, "y"))), 1), length_cm(c.get(q(SVG, "x"))))
    )
    for child in children:
        if child.tag == DRAW_GROUP:
            if depth < MAX_GROUP_DEPTH:
                yield from _shapes(child, depth + 1)
        elif child.tag.startswith(f"{{{DRAW}}}"):
            yield child


def _shape_text(shape: etree._Element) -> str:
    lines: list[str] = []
    boxes = shape.findall(DRAW_TEXT_BOX) if shape.tag == DRAW_FRAME else [shape]
    for box in boxes:
        lines.extend(block_lines(box, None))
    if not lines:
        alt = " ".join((node.text or "") for node in shape.iter(SVG_TITLE, SVG_DESC))
        return collapse_spaces(alt)
    return "\n".join(lines)


def _slide_blocks(page: etree._Element, number: int) -> Iterator[TextBlock]:
    shapes = list(_shapes(page, 0))
    title_shape = next((s for s in shapes if s.get(CLASS) == "title"), None)
    title = collapse_spaces(_shape_text(title_shape)) if title_shape is not None else ""
    location = Location(slide=number, heading_path=(title,) if title else ())
    if title:
        yield TextBlock(title, location, BlockKind.HEADING)
    for shape in shapes:
        if shape is title_shape:
            continue
        table = shape.find(TABLE_TABLE)
        if table is not None:
            yield from table_blocks((cells for _, _, cells in table_rows(table)), location)
            continue
        buffer = ParagraphBuffer()
        for span in [*buffer.add(_shape_text(shape)), buffer.flush()]:
            if span is not None:
                yield TextBlock(span.text, location)
    for notes in page.iter(NOTES):
        text = "\n".join(
            _shape_text(frame) for frame in notes.iter(DRAW_FRAME) if frame.get(CLASS) == "notes"
        ).strip()
        if text:
            yield TextBlock(text, location, BlockKind.NOTE)
