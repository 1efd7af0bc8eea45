"""AsciiDoc (.adoc .asciidoc): `=` section titles (and Markdown-style `#`) as the heading path.

Delimited blocks are tracked so a `== x` inside a listing is not taken as a heading; listing and
literal blocks become CODE, comment blocks and `//` comment lines are dropped, and attribute
entries (`:toc: left`) are configuration, not text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, TextBlock
from helpers.extract.line_markup import HeadedLines
from helpers.extract.textio import iter_line_pieces

# Linear: a lazy title followed by `[ \t]*$` backtracked quadratically on long runs of spaces.
_TITLE = re.compile(r"^(={1,6}|#{1,6})[ \t]+(\S.*)$")
_ATTRIBUTE = re.compile(r"^:!?[\w-]+!?:(?:[ \t].*)?$")
# Delimiter lines: 4+ of one character (listing ----, literal ...., comment ////, example ====,
# sidebar ****, quote ____, passthrough ++++), or an open block `--`, or a ``` fence.
_DELIMITER = re.compile(r"^(-{4,}|\.{4,}|/{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|--|`{3,}.*)[ \t]*$")
_VERBATIM = ("-", ".", "`", "+")  # contents kept as code, no headings inside
_TABLE = re.compile(r"^[|!,:]===[ \t]*$")


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    state = HeadedLines()
    code = HeadedLines(BlockKind.CODE)
    code.headings = state.headings  # one heading path for prose and code
    delimiter: str | None = None
    continuing = False
    for line_no, piece, complete in iter_line_pieces(path, ctx):
        in_code = delimiter is not None and delimiter[0] in _VERBATIM and delimiter != "--"
        if continuing:
            if delimiter is None or delimiter[0] != "/":
                yield from (code if in_code else state).text(line_no, piece, new_line=False)
            continuing = not complete
            continue
        continuing = not complete
        stripped = piece.rstrip()
        fence = _DELIMITER.match(stripped)
        if delimiter is not None:
            if stripped == delimiter or (delimiter.startswith("```") and stripped == "```"):
                delimiter = None
                yield from code.blank()
                yield from state.blank()
            elif delimiter[0] == "/":
                pass  # comment block
            elif in_code:
                yield from code.text(line_no, stripped)
            elif not stripped:
                yield from state.blank()
            else:
                yield from state.text(line_no, stripped)
            continue
        if fence:
            delimiter = "```" if stripped.startswith("```") else stripped
            yield from state.blank()
            continue
        if stripped.startswith("//") or _ATTRIBUTE.match(stripped) or _TABLE.match(stripped):
            continue
        title = _TITLE.match(stripped)
        if title:
            marker, text = title.group(1), title.group(2)
            if text.endswith(" " + marker):  # the symmetric form `== Title ==`
                text = text[: -len(marker)]
            yield from state.heading(len(marker), text, line_no)
        elif not stripped:
            yield from state.blank()
        else:
            yield from state.text(line_no, stripped)
    yield from code.blank()
    yield from state.blank()
