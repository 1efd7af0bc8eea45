"""How deep containers may nest (a .gz holding an .eml whose attachment is a .gz ...).

Each container extractor (gzip, mail) enters `nested()` while it reads its inner files, in the
same process and one file at a time, so a module-level counter is enough. Real mail nests a
forwarded message or two; a hostile file nests until the stack or the disk gives out.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from helpers.extract.blocks import ExtractionError

MAX_CONTAINER_DEPTH = 4
NESTING_HINT = "unpack the inner files into the folder to index them"
_depth = 0


@contextmanager
def nested(what: str) -> Iterator[int]:
    """Enter one container level; ExtractionError past MAX_CONTAINER_DEPTH."""
    global _depth
    if _depth >= MAX_CONTAINER_DEPTH:
        raise ExtractionError(
            f"{what} is nested more than {MAX_CONTAINER_DEPTH} containers deep", NESTING_HINT
        )
    _depth += 1
    try:
        yield _depth
    finally:
        _depth -= 1


def depth() -> int:
    return _depth
