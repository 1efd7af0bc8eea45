"""CSV/TSV: the first row is the header repeated with every row; rows keep their line range."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import is_blank_row, markdown_header, markdown_row
from helpers.extract.textio import iter_line_pieces

# Text the delimiter sniffer sees; a few dozen rows is enough to tell `,` from `;` from a tab.
SNIFF_CHARS = 16 * 1024
_DELIMITERS = ",;\t|"


def _sniff_delimiter(sample: str, default: str) -> str:
    cut = sample.rfind("\n")
    sample = sample[:cut] if cut > 0 else sample
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        return default


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    default = "\t" if path.suffix.lower() == ".tsv" else ","
    lines = _lines_with_numbers(path, ctx)
    # Sniff from the first lines, then replay them to the reader.
    head: list[tuple[int, str]] = []
    size = 0
    for item in lines:
        head.append(item)
        size += len(item[1])
        if size >= SNIFF_CHARS:
            break
    delimiter = default if default == "\t" else _sniff_delimiter("".join(t for _, t in head), ",")
    tracker = _LineTracker(head, lines)
    csv.field_size_limit(max(ctx.limits.max_line_chars, 1) + 1)
    reader = csv.reader(tracker, delimiter=delimiter)
    header: str | None = None
    header_line = 0
    data_rows = 0
    try:
        for row in reader:
            first, last = tracker.record_start, tracker.current
            tracker.record_start = last + 1
            if is_blank_row(row):
                continue
            if header is None:
                header = markdown_header(row)
                header_line = first
                continue
            data_rows += 1
            yield TextBlock(
                markdown_row(row),
                Location(line_start=first, line_end=last),
                BlockKind.TABLE_ROW,
                table_header=header,
            )
    except csv.Error as exc:
        raise ExtractionError(
            f"malformed CSV near line {tracker.current}: {exc}",
            "check the quoting and delimiter, or re-export the file",
        ) from exc
    if header is not None and data_rows == 0:
        # A file holding only its header row still has searchable text.
        yield TextBlock(
            header.split("\n", 1)[0],
            Location(line_start=header_line, line_end=header_line),
            BlockKind.TABLE_ROW,
        )


def _lines_with_numbers(path: Path, ctx: ExtractContext) -> Iterator[tuple[int, str]]:
    """Lines with their newline; an over-long line comes as several pseudo-lines (bounded)."""
    for line_no, piece, _complete in iter_line_pieces(path, ctx):
        yield line_no, piece + "\n"


class _LineTracker:
    """Feeds the csv reader and remembers which file line it is on."""

    def __init__(self, head: list[tuple[int, str]], rest: Iterator[tuple[int, str]]) -> None:
        self._head = iter(head)
        self._rest = rest
        self.current = 0
        self.record_start = 1

    def __iter__(self) -> _LineTracker:
        return self

    def __next__(self) -> str:
        item = next(self._head, None)
        if item is None:
            item = next(self._rest)
        self.current = item[0]
        return item[1]
