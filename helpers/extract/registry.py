"""Which extractor reads which file suffix, behind one guard that enforces the extractor contract.

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

log = logging.getLogger(__name__)

Extractor = Callable[[Path, ExtractContext], Iterator[TextBlock]]

# Source code and config files, read as text with line ranges (helpers/extract/source_code.py).
SOURCE_CODE_SUFFIXES = frozenset(
    {
        # programming languages
        ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java",
        ".kt", ".kts", ".swift", ".scala", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh",
        ".hxx", ".cs", ".fs", ".vb", ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".m",
        ".dart", ".hs", ".ml", ".ex", ".exs", ".erl", ".clj", ".el", ".lisp", ".scm", ".groovy",
        ".gradle", ".vue", ".svelte", ".css", ".scss", ".less", ".zig", ".nim", ".v", ".vhd",
        ".f90", ".asm", ".s", ".proto", ".graphql", ".tf", ".cmake", ".mk", ".bat", ".ps1",
        # shells and queries
        ".sh", ".bash", ".zsh", ".fish", ".sql",
        # config
        ".toml", ".ini", ".cfg", ".conf", ".properties", ".desktop", ".service",
    }
)  # fmt: skip

# suffix -> module under helpers/extract/ with an `extract(path, ctx)` generator.
_MODULES: dict[str, str] = {
    ".txt": "plain_text",
    ".text": "plain_text",
    ".log": "plain_text",
    ".yaml": "yaml_text",
    ".yml": "yaml_text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".csv": "delimited",
    ".tsv": "delimited",
    ".json": "json_text",
    ".html": "html_page",
    ".htm": "html_page",
    ".xhtml": "html_page",
    ".pdf": "pdf",
    ".docx": "docx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".pptx": "pptx",
    ".odt": "odt",
    ".ods": "ods",
    ".odp": "odp",
    ".doc": "legacy",
    ".xls": "legacy",
    ".ppt": "legacy",
    ".epub": "epub",
    ".ipynb": "ipynb",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
    ".bmp": "image",
    ".webp": "image",
    ".tex": "latex",
    ".ltx": "latex",
    ".adoc": "asciidoc",
    ".asciidoc": "asciidoc",
    ".org": "org",
    ".xml": "xml_text",
    ".gz": "gzip_file",
    ".rtf": "rtf",
    ".eml": "mail",
    ".mbox": "mail",
}
_MODULES.update(dict.fromkeys(SOURCE_CODE_SUFFIXES, "source_code"))

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_MODULES)
# Line-oriented text read by our own streaming Python code (no C library that could hang or
# balloon): the sync worker reads these in process, like .txt and .md (rag_sync).
PURE_TEXT_SUFFIXES: frozenset[str] = SOURCE_CODE_SUFFIXES | {
    ".tex",
    ".ltx",
    ".adoc",
    ".asciidoc",
    ".org",
}

# Reader version per suffix (0 when absent), stored with each document: bump a suffix's number
# when its reader's output changes, and the next sync reads those documents again, no others.
# 1: YAML and JSON read OpenAPI / Swagger specs by operation (helpers.extract.openapi).
_FORMAT_VERSIONS = {".yaml": 1, ".yml": 1, ".json": 1}

# Import name of a third-party library -> what to install when it is missing.
_INSTALL_HINTS = {
    "pypdfium2": "pip install pypdfium2",
    "docx": "pip install python-docx",
    "pptx": "pip install python-pptx",
    "openpyxl": "pip install openpyxl",
    "odf": "pip install odfpy",
    "PIL": "pip install pillow",
    "striprtf": "pip install striprtf",
}


def format_of(path: Path) -> str:
    """The format name stored for a document: its suffix without the dot, lower-case."""
    return path.suffix.lower().lstrip(".")


def format_version(path: Path | str) -> int:
    """The version of the reader of `path`'s format (documents.format_version)."""
    return _FORMAT_VERSIONS.get(Path(path).suffix.lower(), 0)


def unsupported_reason(path: Path) -> str | None:
    """Why a file with a registered suffix still cannot be read (`bundle.tar.gz`), or None."""
    if path.suffix.lower() == ".gz":
        from helpers.extract.gzip_file import unsupported_reason as gzip_reason

        return gzip_reason(path)
    return None


def extractor_for(path: Path) -> Extractor | None:
    """The guarded extractor for `path`'s suffix, or None when the format is not supported."""
    module = _MODULES.get(path.suffix.lower())
    if module is None:
        return None
    return partial(_guarded_extract, module)


def _load(module: str) -> Extractor:
    try:
        return importlib.import_module(f"helpers.extract.{module}").extract
    except ImportError as exc:
        top = (exc.name or "").split(".")[0]
        hint = _INSTALL_HINTS.get(top, "reinstall MCP-RagDoc with its dependencies")
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
