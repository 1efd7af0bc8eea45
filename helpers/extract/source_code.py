"""Source code and config files as text with line ranges.

Blocks end at blank lines and are kept to at most `MAX_BLOCK_LINES` lines (and the chunker's
atomic code size), so a hit in a dense file without blank lines still cites a narrow range.
In INI-style config files (`.ini .cfg .conf .properties .toml`) a `[section]` line is a
heading, so a hit cites `database, lines 12-14`. Sensitive names (`.env`, keys, credentials)
never get here: the walk and `helpers.safety` refuse them first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, TextBlock
from helpers.extract.line_markup import HeadedLines
from helpers.extract.textio import iter_line_pieces
from helpers.text.chunking import CODE_BLOCK_MAX_CHARS

# ~A screen of code: a citation narrower than this rarely helps, wider makes it vague.
MAX_BLOCK_LINES = 40
SECTIONED_SUFFIXES = frozenset({".ini", ".cfg", ".conf", ".properties", ".toml", ".desktop"})
# `[section]`, `[[array.of.tables]]`, `[section "sub"]` (git config style).
# Tried only on stripped lines of at most MAX_SECTION_LINE_CHARS: with runs of spaces on both
# sides of the name a longer line would backtrack quadratically.
_SECTION = re.compile(r"\[{1,2}([^\[\]=]{1,200})\]{1,2}(?:\s*[#;].*)?")
MAX_SECTION_LINE_CHARS = 300


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    state = HeadedLines(BlockKind.CODE, max_chars=CODE_BLOCK_MAX_CHARS)
    sectioned = path.suffix.lower() in SECTIONED_SUFFIXES
    continuing = False
    for line_no, piece, complete in iter_line_pieces(path, ctx):
        if continuing:
            yield from state.text(line_no, piece, new_line=False)
        elif not piece.strip():
            yield from state.blank()
        elif sectioned and (section := _section(piece)):
            yield from state.heading(1, section, line_no)
        else:
            if state.line_count >= MAX_BLOCK_LINES:
                yield from state.blank()
            yield from state.text(line_no, piece.rstrip())
        continuing = not complete
    yield from state.blank()


def _section(line: str) -> str | None:
    """The name of an INI/TOML `[section]` line, or None."""
    line = line.strip()
    if len(line) > MAX_SECTION_LINE_CHARS or not line.startswith("["):
        return None
    found = _SECTION.fullmatch(line)
    return found.group(1).strip() if found else None
