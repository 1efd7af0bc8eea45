"""ODS: per sheet, rows streamed as TABLE_ROW blocks with the header row and their cell range.

Rows are parsed one at a time; repeated empty rows and cells (LibreOffice pads sheets to 1,048,576
rows x 16,384 columns with repeat counts) are counted, never expanded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import ExtractionCancelled, markdown_header, markdown_row
from helpers.extract.odf import (
    TABLE,
    TABLE_ROW,
    TABLE_TABLE,
    check_mimetype,
    iter_units,
    open_odf,
    q,
    row_cells,
    rows_repeated,
)

CANCEL_CHECK_ROWS = 1000
TABLE_NAME = q(TABLE, "name")


def column_letter(index: int) -> str:
    """0-based column index -> spreadsheet letters (0 -> A, 26 -> AA)."""
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


class _Sheets:
    """Tracks which sheet and row the parser is in (nested tables inside cells are skipped)."""

    def __init__(self) -> None:
        self.depth = 0
        self.name = ""
        self.row = 1
        self.header: str | None = None
        self.header_cells: list[str] = []
        self.header_at = (0, 0)
        self.data_rows = 0
        self.finished: list[TextBlock] = []
        self.sheets = 0

    def on_start(self, element: etree._Element) -> None:
        if element.tag != TABLE_TABLE:
            return
        self.depth += 1
        if self.depth == 1:
            self.finish_sheet()
            self.sheets += 1
            self.name = element.get(TABLE_NAME) or f"Sheet{self.sheets}"
            self.row, self.header, self.header_cells, self.data_rows = 1, None, [], 0

    def is_unit(self, element: etree._Element) -> bool:
        if element.tag == TABLE_TABLE:
            self.depth -= 1
            return False
        return element.tag == TABLE_ROW and self.depth == 1

    def finish_sheet(self) -> None:
        """A sheet holding only its header row still yields that row."""
        if self.header is not None and self.data_rows == 0:
            row, first = self.header_at
            last = first + len(self.header_cells) - 1
            cell_range = f"{column_letter(first)}{row}:{column_letter(last)}{row}"
            self.finished.append(
                TextBlock(
                    markdown_row(self.header_cells),
                    Location(sheet=self.name, cell_range=cell_range),
                    BlockKind.TABLE_ROW,
                )
            )
        self.header = None

    def row_block(self, element: etree._Element) -> TextBlock | None:
        repeat = rows_repeated(element)
        first_row = self.row
        self.row += repeat
        cells = row_cells(element)
        first = next((i for i, text in enumerate(cells) if text), None)
        if first is None:
            return None
        if self.header is None:
            self.header_cells = cells[first:]
            self.header = markdown_header(self.header_cells)
            self.header_at = (first_row, first)
            return None
        self.data_rows += 1
        start = min(first, self.header_at[1])
        end = max(len(cells), self.header_at[1] + len(self.header_cells)) - 1
        padded = cells[start:] + [""] * (end + 1 - len(cells))
        last_row = first_row + repeat - 1  # identical repeated rows are one block
        cell_range = f"{column_letter(start)}{first_row}:{column_letter(end)}{last_row}"
        return TextBlock(
            markdown_row(padded),
            Location(sheet=self.name, cell_range=cell_range),
            BlockKind.TABLE_ROW,
            table_header=self.header,
        )


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    archive = open_odf(path, ctx)
    try:
        check_mimetype(archive, ".ods")
        sheets = _Sheets()
        rows = iter_units(archive, "content.xml", sheets.is_unit, sheets.on_start)
        for count, row in enumerate(rows, start=1):
            if count % CANCEL_CHECK_ROWS == 0 and ctx.should_cancel():
                raise ExtractionCancelled("extraction cancelled")
            yield from sheets.finished
            sheets.finished.clear()
            block = sheets.row_block(row)
            if block is not None:
                yield block
        sheets.finish_sheet()
        yield from sheets.finished
    finally:
        archive.close()
