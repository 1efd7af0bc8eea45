"""chunks.norm without a second copy of the text: the folded form SQL computes (migration 12).

`chunks.norm` is a generated column over `norm_stored`: '' means SQLite's lower(text) (ASCII
letters only) already is fold(text); FOLDED_MARK means fold(text) itself, through the SQL
function FOLD_FUNCTION that every connection of this program registers (helpers.store.read_only
.connect_uri, helpers.store.connection.connect); anything else is the folded text as stored.
Only text whose fold cannot change under a later Unicode version is marked (no unassigned code
point: Unicode keeps the normalisation and case of assigned characters), so the values FTS5 was
given at insert are the values its delete triggers read back. fold()'s output is part of the
schema from here on: changing it for marked rows needs a migration that rewrites them.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache

from helpers.text.normalize import fold

FOLD_FUNCTION = "rag_fold"
# norm_stored of a row whose norm is FOLD_FUNCTION(text): fold() removes control characters, so
# no folded text is this one character.
FOLDED_MARK = "\x01"


def register_fold(conn: sqlite3.Connection) -> None:
    """Make chunks.norm readable on `conn` (deterministic: SQLite requires it of a function in a
    generated column)."""
    conn.create_function(FOLD_FUNCTION, 1, _sql_fold, deterministic=True)


# Folds the writer already has, by text: SQLite computes every generated column of a row it
# inserts, so without them each marked row would be folded twice. Values are fold(text) by
# construction, so a search thread that meets one gets the same answer.
_PRIMED: dict[str, str] = {}


@contextmanager
def primed_folds(folds: Mapping[str, str]) -> Iterator[None]:
    """While inserting rows whose fold(text) the caller holds (text -> norm)."""
    _PRIMED.update(folds)
    try:
        yield
    finally:
        _PRIMED.clear()


def _sql_fold(text: object) -> object:
    if not isinstance(text, str):
        return text
    primed = _PRIMED.get(text)
    return primed if primed is not None else fold(text)


def ascii_lower(text: str) -> str:
    """SQLite's lower() of `text`: ASCII letters only (UTF-8 bytes of other characters are all
    >= 0x80, which bytes.lower() leaves alone)."""
    return text.lower() if text.isascii() else text.encode().lower().decode()


def stored_norm(text: str, norm: str) -> str:
    """What chunks.norm_stored keeps of `norm` = fold(text): '' when lower(text) gives it,
    FOLDED_MARK when FOLD_FUNCTION(text) gives it for good, else the folded text itself."""
    if norm == ascii_lower(text):
        return ""
    return FOLDED_MARK if fold_is_stable(text) else norm


def fold_is_stable(text: str) -> bool:
    """Whether no character of `text` is unassigned in this Python's Unicode tables (one that a
    later version may give a decomposition or a case mapping)."""
    if text.isascii():
        return True
    if _unassigned_bmp().search(text):
        return False
    if max(text) <= "\uffff":
        return True
    return all(unicodedata.category(ch) != "Cn" for ch in set(text) if ch > "\uffff")


@cache
def _unassigned_bmp() -> re.Pattern[str]:
    """A character class of this Python's unassigned code points below U+10000: one scan in C
    per text (a class with the astral ranges too is checked range by range, 20x slower)."""
    ranges: list[tuple[int, int]] = []
    start = -1
    for code in range(0x80, 0x10001):
        gap = code < 0x10000 and unicodedata.category(chr(code)) == "Cn"
        if gap and start < 0:
            start = code
        elif not gap and start >= 0:
            ranges.append((start, code - 1))
            start = -1
    return re.compile(
        "".join(["[", *(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges), "]"])
    )
