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

import sqlite3
import unicodedata

from helpers.text.normalize import fold

FOLD_FUNCTION = "rag_fold"
# norm_stored of a row whose norm is FOLD_FUNCTION(text): fold() removes control characters, so
# no folded text is this one character.
FOLDED_MARK = "\x01"


def register_fold(conn: sqlite3.Connection) -> None:
    """Make chunks.norm readable on `conn` (deterministic: SQLite requires it of a function in a
    generated column)."""
    conn.create_function(FOLD_FUNCTION, 1, _sql_fold, deterministic=True)


def _sql_fold(text: object) -> object:
    return fold(text) if isinstance(text, str) else text


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
    return all(unicodedata.category(ch) != "Cn" for ch in set(text) if ch > "\x7f")
