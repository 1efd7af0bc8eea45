"""JSON: an OpenAPI / Swagger spec by operation (helpers.extract.openapi); other pretty-printed
files read as text lines; minified files as flattened `key.path: value`.

Text lines keep exact line numbers and stream at any size. A minified file is one huge line that
reads badly, so when it is small enough to parse it becomes one `a.b[0].c: value` line per leaf.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.extract import plain_text as extract_text
from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.common import MAX_BLOCK_CHARS, ParagraphBuffer
from helpers.extract.openapi import MAX_PARSE_BYTES, read_parsable, spec_blocks
from helpers.extract.openapi_load import load_json_spec

__all__ = ["MAX_PARSE_BYTES", "extract"]
# Average characters per line above which a file counts as minified (pretty JSON is ~30-80).
MINIFIED_LINE_CHARS = 200
# Nesting deeper than this is cut (a hostile file must not exhaust the stack).
MAX_DEPTH = 64


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    text = read_parsable(path, ctx)
    spec = load_json_spec(text) if text is not None else None
    if spec is not None and text is not None:
        yield from spec_blocks(spec, len(text))
        return
    data = _parse_if_minified(text)
    if data is None:
        yield from extract_text.extract(path, ctx)
        return
    buffer = ParagraphBuffer(MAX_BLOCK_CHARS)
    for line in _flatten(data, "", 0):
        for span in buffer.add(line, 1):
            yield _block(span.text)
    span = buffer.flush()
    if span is not None:
        yield _block(span.text)


def _block(text: str) -> TextBlock:
    return TextBlock(text, Location(line_start=1, line_end=1), BlockKind.PARAGRAPH)


def _parse_if_minified(text: str | None) -> Any | None:
    if text is None:
        return None
    if len(text) / (text.count("\n") + 1) < MINIFIED_LINE_CHARS:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None  # broken JSON is still text worth indexing


def _flatten(value: Any, prefix: str, depth: int) -> Iterator[str]:
    if depth > MAX_DEPTH:
        yield f"{prefix}: …"
        return
    if isinstance(value, dict):
        if not value:
            yield f"{prefix}: {{}}"
        for key, item in value.items():
            yield from _flatten(item, f"{prefix}.{key}" if prefix else str(key), depth + 1)
    elif isinstance(value, list):
        if not value:
            yield f"{prefix}: []"
        for index, item in enumerate(value):
            yield from _flatten(item, f"{prefix}[{index}]", depth + 1)
    else:
        text = "null" if value is None else str(value)
        yield f"{prefix}: {text}" if prefix else text
