"""XLSX (openpyxl, read-only, cached values): one TABLE_ROW per row with its sheet and cell range.

The first non-empty row of a sheet is its header and is repeated with every row; a row that is one
long text cell is a paragraph (PROSE_CELL_CHARS), and a header no row used is kept once. Formulas
are never calculated: a formula cell without a cached value (a file written by a script) reads
empty.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import openpyxl
from openpyxl.utils import get_column_letter

from helpers.extract.archive_guard import check_archive
from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import ExtractionCancelled, markdown_header, markdown_row

# Columns past this are dropped from a row: a styled cell in column XFD must not make every row
# 16,384 cells wide. Real tables rarely pass a few dozen columns.
MAX_COLUMNS = 512
CANCEL_CHECK_ROWS = 1000  # how often a long sheet checks for cancellation
# A row whose only filled cell is at least this long holds running text (notes, answers, a
# document pasted into a column), not a record: it is a paragraph, without the header repeated
# into each of its children (a `| Section | Text |` header and its rule would take a large share
# of every child's tokens). Record values (names, numbers, dates, codes) are shorter.
PROSE_CELL_CHARS = 200


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    check_archive(path, ctx.limits)
    try:
        workbook = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    except (KeyError, ValueError, TypeError) as exc:
        raise ExtractionError(
            f"not a readable Excel workbook: {exc}",
            "the file may be damaged or another format renamed to .xlsx; save it again in Excel",
        ) from exc
    try:
        for sheet in workbook.worksheets:
            yield from _sheet_blocks(sheet, ctx)
    finally:
        workbook.close()


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds").removesuffix(" 00:00:00")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value).strip()


def _bounds(cells: Sequence[str]) -> tuple[int, int] | None:
    """0-based first and last non-empty column, or None for an empty row."""
    filled = [i for i, text in enumerate(cells) if text]
    return (filled[0], filled[-1]) if filled else None


def _sheet_blocks(sheet: Any, ctx: ExtractContext) -> Iterator[TextBlock]:
    if hasattr(sheet, "reset_dimensions"):
        sheet.reset_dimensions()  # trust the cells, not a stale `A1:XFD1048576` dimension
    title = sheet.title
    header: str | None = None
    header_cells: list[str] = []
    header_first = 0
    header_row = 0
    data_rows = 0
    header_shown = False
    for row_number, values in enumerate(sheet.iter_rows(values_only=True), start=1):
        if row_number % CANCEL_CHECK_ROWS == 0 and ctx.should_cancel():
            raise ExtractionCancelled("extraction cancelled")
        cells = [cell_text(value) for value in values[:MAX_COLUMNS]]
        bounds = _bounds(cells)
        if bounds is None:
            continue
        first, last = bounds
        if first == last and len(cells[first]) >= PROSE_CELL_CHARS:
            if header is not None and data_rows == 0 and not header_shown:
                header_shown = True  # its column names, once, where the table starts
                yield _header_row(title, header_cells, header_first, header_row)
            column = get_column_letter(first + 1)
            yield TextBlock(cells[first], Location(sheet=title, cell_range=f"{column}{row_number}"))
            continue
        if header is None:
            header_first, header_row = first, row_number
            header_cells = cells[first : last + 1]
            header = markdown_header(header_cells)
            continue
        start = min(first, header_first)
        end = max(last, header_first + len(header_cells) - 1)
        cell_range = f"{get_column_letter(start + 1)}{row_number}:{get_column_letter(end + 1)}"
        data_rows += 1
        yield TextBlock(
            markdown_row(cells[start : end + 1] + [""] * (end + 1 - len(cells))),
            Location(sheet=title, cell_range=f"{cell_range}{row_number}"),
            BlockKind.TABLE_ROW,
            table_header=header,
        )
    if header is not None and data_rows == 0 and not header_shown:
        yield _header_row(title, header_cells, header_first, header_row)


def _header_row(title: str, cells: list[str], first: int, row: int) -> TextBlock:
    """A header no record row repeats, as a row of its own (its words stay searchable)."""
    first_col = get_column_letter(first + 1)
    last_col = get_column_letter(first + len(cells))
    return TextBlock(
        markdown_row(cells),
        Location(sheet=title, cell_range=f"{first_col}{row}:{last_col}{row}"),
        BlockKind.TABLE_ROW,
    )
