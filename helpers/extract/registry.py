"""The extractor of a file's format (helpers.extract.formats), behind one guard that enforces
the extractor contract.

Importing this module is cheap: format modules (and their libraries: pypdfium2, openpyxl, ...)
are imported the first time a file of that format is extracted. Every extractor returned by
`extractor_for` checks the file-size cap, stops past `max_text_chars` (ending with a
BlockKind.TRUNCATED marker block), and raises only
`ExtractionError` for a file it cannot read (any other exception is converted, in plain words
with a hint, by `failures.extraction_failure`).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from helpers.extract.blocks import (
    BlockKind,
    ExtractContext,
    ExtractionError,
    TextBlock,
    file_too_large,
)
from helpers.extract.failures import extraction_failure
from helpers.extract.formats import (
    INSTALL_HINTS,
    SUPPORTED_SUFFIXES,
    format_for,
    format_of,
    format_version,
    unsupported_reason,
)

log = logging.getLogger(__name__)

Extractor = Callable[[Path, ExtractContext], Iterator[TextBlock]]

# The sync's view of the formats: which suffixes, each file's extractor, why one is refused.
__all__ = [
    "Extractor",
    "SUPPORTED_SUFFIXES",
    "extractor_for",
    "format_of",
    "format_version",
    "unsupported_reason",
]


def extractor_for(path: Path) -> Extractor | None:
    """The guarded extractor for `path`'s suffix, or None when the format is not supported."""
    fmt = format_for(path)
    if fmt is None:
        return None
    return partial(_guarded_extract, fmt.module)


def _load(module: str) -> Extractor:
    try:
        return importlib.import_module(f"helpers.extract.{module}").extract
    except ImportError as exc:
        top = (exc.name or "").split(".")[0]
        hint = INSTALL_HINTS.get(top, "reinstall MCP-RagDoc with its dependencies")
        raise ExtractionError(f"extractor {module} is unavailable: {exc}", hint) from exc


def _guarded_extract(module: str, path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    limits = ctx.limits
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ExtractionError(f"cannot read file: {exc.strerror or exc}") from exc
    if size > limits.max_file_bytes:
        raise file_too_large(size, limits.max_file_bytes)
    blocks = _load(module)(path, ctx)
    emitted = 0
    try:
        for block in blocks:
            emitted += len(block.text)
            if emitted > limits.max_text_chars:
                log.warning(
                    "%s: stopped after %d characters (max_text_chars)", path, limits.max_text_chars
                )
                # The caller must know the document is cut (its status note says so).
                yield TextBlock("", block.location, BlockKind.TRUNCATED)
                return
            yield block
    except ExtractionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract: one error type per unreadable file
        raise extraction_failure(exc, format_of(path)) from exc
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()
