"""YAML (.yaml .yml): an OpenAPI / Swagger spec by operation, any other file as plain text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from helpers.extract import plain_text
from helpers.extract.blocks import ExtractContext, TextBlock
from helpers.extract.openapi import read_parsable, spec_blocks
from helpers.extract.openapi_load import load_yaml_spec


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    text = read_parsable(path, ctx)
    spec = load_yaml_spec(text) if text is not None else None
    if spec is None:
        yield from plain_text.extract(path, ctx)
        return
    yield from spec_blocks(spec, len(text or ""))
