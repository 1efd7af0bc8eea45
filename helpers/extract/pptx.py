"""PPTX (python-pptx): per slide the title as heading, text in reading order, tables, notes.

A title without a letter (a slide number in the title placeholder) is no heading (_WORDED).

Shapes are read top-to-bottom, left-to-right (the XML order is z-order, not reading order);
group shapes are opened; speaker notes become NOTE blocks of the same slide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pptx
from pptx.enum.shapes import MSO_SHAPE_TYPE

from helpers.extract.archive_guard import check_archive
from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import (
    ExtractionCancelled,
    ParagraphBuffer,
    collapse_spaces,
    table_blocks,
)

MAX_GROUP_DEPTH = 16  # nested groups deeper than this are not opened (hostile files)
# A title placeholder without a letter ("1", "2.", "- 3 -") names nothing: as the heading it would
# become the breadcrumb of every child and the document's title. Equal to the slide number it
# repeats the location and is dropped; otherwise ("2024", "3.1") it stays as slide text.
_WORDED = re.compile(r"[^\W\d_]")
_NUMBER_DECORATION = " .-–—#()[]/"  # "- 3 -", "(3)", "#3", "3." on slide 3


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    check_archive(path, ctx.limits)
    try:
        presentation = pptx.Presentation(str(path))
    except (KeyError, ValueError) as exc:
        raise ExtractionError(
            f"not a PowerPoint presentation: {exc}",
            "the file may be another format renamed to .pptx",
        ) from exc
    for number, slide in enumerate(presentation.slides, start=1):
        if ctx.should_cancel():
            raise ExtractionCancelled("extraction cancelled")
        yield from _slide_blocks(slide, number)


def _slide_blocks(slide: Any, number: int) -> Iterator[TextBlock]:
    title_shape = slide.shapes.title
    title = collapse_spaces(title_shape.text_frame.text) if title_shape is not None else ""
    numeral = not _WORDED.search(title)
    path = (title,) if title and not numeral else ()
    location = Location(slide=number, heading_path=path)
    if title and not numeral:
        yield TextBlock(title, location, BlockKind.HEADING)
    elif title and title.strip(_NUMBER_DECORATION) != str(number):
        yield TextBlock(title, location)  # "2024", "3.1": text of the slide, not its name
    title_id = title_shape.shape_id if title_shape is not None else None
    for shape in _reading_order(slide.shapes, 0):
        if shape.shape_id == title_id and title_shape is not None:
            continue
        yield from _shape_blocks(shape, location)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = frame.text.strip() if frame is not None else ""
        if notes:
            yield TextBlock(notes, location, BlockKind.NOTE)


def _reading_order(shapes: Iterable[Any], depth: int) -> Iterator[Any]:
    ordered = sorted(shapes, key=lambda s: ((s.top or 0) // 10_000, s.left or 0))
    for shape in ordered:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            if depth < MAX_GROUP_DEPTH:
                yield from _reading_order(shape.shapes, depth + 1)
        else:
            yield shape


def _shape_blocks(shape: Any, location: Location) -> Iterator[TextBlock]:
    if getattr(shape, "has_table", False) and shape.has_table:
        yield from _table_blocks(shape.table, location)
        return
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = []
        for paragraph in shape.text_frame.paragraphs:
            text = "".join(run.text for run in paragraph.runs) or paragraph.text
            if text.strip():
                lines.append("  " * (paragraph.level or 0) + text.strip())
        buffer = ParagraphBuffer()
        for span in [*buffer.add("\n".join(lines)), buffer.flush()]:
            if span is not None:
                yield TextBlock(span.text, location)
        return
    alt = _alt_text(shape)
    if alt:
        yield TextBlock(alt, location)


def _alt_text(shape: Any) -> str:
    """A picture's description (alt text) is all the text it carries without OCR."""
    element = getattr(shape, "_element", None)
    if element is None:
        return ""
    for c_nv_pr in element.iter(
        "{http://schemas.openxmlformats.org/presentationml/2006/main}cNvPr"
    ):
        return collapse_spaces(c_nv_pr.get("descr") or "")
    return ""


def _table_blocks(table: Any, location: Location) -> Iterator[TextBlock]:
    rows = ([collapse_spaces(cell.text) for cell in row.cells] for row in table.rows)
    yield from table_blocks(rows, location)
