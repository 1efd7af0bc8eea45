"""Jupyter notebooks: markdown cells with their headings, code cells as CODE; outputs dropped.

The cell number is the last element of the heading path (`Setup > cell 4`): notebooks have no
pages, and line numbers of the JSON file mean nothing to a reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import ExtractionCancelled, ParagraphBuffer
from helpers.extract.markdown import MarkdownReader
from helpers.extract.textio import iter_text_chunks, strip_data_uri_stream

NOT_A_NOTEBOOK_HINT = "the file is not a Jupyter notebook (nbformat 4 JSON); re-save it in Jupyter"


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    text = "".join(strip_data_uri_stream(iter_text_chunks(path, ctx)))
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ExtractionError(f"notebook is not valid JSON: {exc}", NOT_A_NOTEBOOK_HINT) from exc
    del text
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if cells is None and isinstance(notebook, dict):
        worksheets = notebook.get("worksheets") or [{}]  # nbformat 3
        cells = worksheets[0].get("cells") if isinstance(worksheets[0], dict) else None
    if not isinstance(cells, list):
        raise ExtractionError("notebook has no cells list", NOT_A_NOTEBOOK_HINT)
    reader = MarkdownReader()
    for number, cell in enumerate(cells, start=1):
        if ctx.should_cancel():
            raise ExtractionCancelled("extraction cancelled")
        if not isinstance(cell, dict):
            continue
        source = _source(cell.get("source", cell.get("input", "")))
        if not source.strip():
            continue
        label = f"cell {number}"
        kind = cell.get("cell_type")
        if kind == "markdown":
            lines = enumerate(source.split("\n"), start=1)
            blocks = [b for n, line in lines for b in reader.line(n, line)]
            for block in [*blocks, *reader.finish()]:
                where = Location(heading_path=(*block.location.heading_path, label))
                yield TextBlock(block.text, where, block.kind, block.table_header)
        else:
            block_kind = BlockKind.CODE if kind == "code" else BlockKind.PARAGRAPH
            where = Location(heading_path=(*reader.headings.path, label))
            buffer = ParagraphBuffer()
            for span in [*buffer.add(source.strip("\n")), buffer.flush()]:
                if span is not None:
                    yield TextBlock(span.text, where, block_kind)


def _source(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return str(value or "")
