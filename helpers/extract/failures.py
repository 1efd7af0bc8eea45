"""The one translation of whatever a parser raised into an ExtractionError a user can act on.

Parsers fail on damaged files with their own internals (`AttributeError: 'lxml.etree._Element'
…`, `KeyError: 'word/document.xml'`, `BadZipFile`); the user must read what happened to the file
and what to do, never our exception types. The in-process guard (registry), the sandbox child
and the sync's chunking step all call `extraction_failure`; the original goes to the log.
"""

from __future__ import annotations

import logging

from helpers.extract.blocks import ExtractionError

log = logging.getLogger(__name__)

DAMAGED_HINT = (
    "the file may be corrupt, truncated or another format renamed; open it in the application "
    "that made it and save it again (it is read again on the next sync)"
)
OUT_OF_MEMORY_HINT = (
    "the file may be a decompression bomb; if it is genuine, split it into smaller files"
)
UNREADABLE_HINT = "check that the file can be read by this user and that its disk is healthy"


def extraction_failure(exc: BaseException, fmt: str = "") -> ExtractionError:
    """`exc` as an ExtractionError in plain words with a fix; an ExtractionError is kept."""
    if isinstance(exc, ExtractionError):
        return exc
    what = f"{fmt} file" if fmt else "file"
    log.info("%s could not be read: %s: %s", what, type(exc).__name__, str(exc)[:300])
    if isinstance(exc, MemoryError):
        return ExtractionError(f"ran out of memory while reading the {what}", OUT_OF_MEMORY_HINT)
    if isinstance(exc, RecursionError):
        return ExtractionError(f"the {what} is nested too deeply to read", DAMAGED_HINT)
    if isinstance(exc, OSError) and exc.errno is not None:  # a real I/O error, not a parser's
        reason = exc.strerror or "input/output error"
        return ExtractionError(f"cannot read the file: {reason}", UNREADABLE_HINT)
    kind = f"a {fmt.upper()} document" if fmt else "a document"
    return ExtractionError(f"the file is damaged: it cannot be read as {kind}", DAMAGED_HINT)
