"""Org mode (.org): `*` outline headings as the heading path, `#+TITLE:` as the document title.

TODO keywords, priorities and tags are dropped from heading titles (`* TODO [#A] Budget :work:`
cites "Budget"); `#+BEGIN_SRC`/`#+BEGIN_EXAMPLE` blocks become CODE, comment blocks, `#` comment
lines, other `#+KEYWORD:` lines and property drawers are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, TextBlock
from helpers.extract.line_markup import HeadedLines
from helpers.extract.textio import iter_line_pieces

# Linear patterns only: `(.*?)[ \t]*$` backtracked quadratically on a line of spaces (20,000
# spaces took 4.5 s), so titles are stripped and their tags cut off in plain Python.
_HEADING = re.compile(r"^(\*+)[ \t]+(.*)$")
_TODO = re.compile(r"^(?:TODO|DONE|NEXT|WAITING|HOLD|CANCELLED|CANCELED)\b[ \t]*")
_PRIORITY = re.compile(r"^\[#[A-Za-z0-9]\][ \t]*")
_TAGS = re.compile(r":[\w@#%:]+:")
_KEYWORD = re.compile(r"^[ \t]*#\+(\w+):[ \t]*(.*)$")
_BEGIN = re.compile(r"^[ \t]*#\+begin_(\w+)", re.IGNORECASE)
_END = re.compile(r"^[ \t]*#\+end_(\w+)", re.IGNORECASE)
_DRAWER = re.compile(r"^[ \t]*:(PROPERTIES|LOGBOOK|[A-Z_]+):[ \t]*$")
_DRAWER_END = re.compile(r"^[ \t]*:END:[ \t]*$", re.IGNORECASE)
_VERBATIM = frozenset({"src", "example", "export"})


def heading_title(raw: str) -> str:
    title = _PRIORITY.sub("", _TODO.sub("", raw.strip()))
    words = title.rsplit(None, 1)
    if len(words) == 2 and _TAGS.fullmatch(words[1]):
        title = words[0]
    return title.strip()


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    state = HeadedLines()
    code = HeadedLines(BlockKind.CODE)
    code.headings = state.headings
    block: str | None = None  # name of the open #+BEGIN_ block
    in_drawer = False
    continuing = False
    for line_no, piece, complete in iter_line_pieces(path, ctx):
        if continuing:
            if not in_drawer and block != "comment":
                target = code if block in _VERBATIM else state
                yield from target.text(line_no, piece, new_line=False)
            continuing = not complete
            continue
        continuing = not complete
        line = piece.rstrip()
        if block is not None:
            end = _END.match(line)
            if end and end.group(1).lower() == block:
                block = None
                yield from code.blank()
                yield from state.blank()
            elif block == "comment":
                pass
            elif block in _VERBATIM:
                yield from code.text(line_no, line)
            elif line.strip():
                yield from state.text(line_no, line.strip())
            else:
                yield from state.blank()
            continue
        if in_drawer:
            in_drawer = not _DRAWER_END.match(line)
            continue
        heading = _HEADING.match(line)
        if heading:
            yield from state.heading(
                len(heading.group(1)), heading_title(heading.group(2)), line_no
            )
            continue
        begin = _BEGIN.match(line)
        if begin:
            block = begin.group(1).lower()
            yield from state.blank()
            continue
        keyword = _KEYWORD.match(line)
        if keyword:
            if keyword.group(1).lower() == "title":
                yield from state.heading(0, keyword.group(2), line_no)
            continue
        if _DRAWER.match(line):
            in_drawer = True
            continue
        if line.lstrip().startswith("# ") or line.strip() == "#":
            continue
        if not line.strip():
            yield from state.blank()
        else:
            yield from state.text(line_no, line.strip())
    yield from code.blank()
    yield from state.blank()
