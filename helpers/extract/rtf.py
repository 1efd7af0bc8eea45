"""RTF (.rtf) through striprtf: paragraphs in order, each located by its paragraph line.

striprtf converts a whole document string, so the file is read whole (it is under the size
cap, and RTF runs in the sandbox child with its memory cap and stall timeout). Before that,
picture, embedded-object and theme groups are cut out: striprtf would otherwise walk their hex
payload one character at a time, which made a 10 MB RTF with a few screenshots cost seconds.
Every output line (a `\\par` or `\\line`) is one block; its location is that line's number in
the extracted text (`line 12` = the 12th paragraph line), the closest RTF has to a page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import MAX_BLOCK_CHARS

RTF_MAGIC = b"{\\rtf"
# Groups that only ever hold binary or layout data (all are ignorable destinations for striprtf).
_BLOB_GROUP = re.compile(
    r"\{\s*(?:\\\*\s*)?\\(?:pict|objdata|blipuid|themedata|datastore|colorschememapping"
    r"|stylesheet|listtable|listoverridetable|rsidtbl|latentstyles|xmlnstbl)(?![a-z])"
)
_BRACE = re.compile(r"\\[\\{}]|[{}]")
NOT_RTF_HINT = "the file has an .rtf name but is not RTF; rename it to its real type"


def drop_blob_groups(text: str) -> str:
    """`text` without the groups `_BLOB_GROUP` starts (braces matched, `\\{` is a literal)."""
    out: list[str] = []
    pos = 0
    while (start := _BLOB_GROUP.search(text, pos)) is not None:
        out.append(text[pos : start.start()])
        depth = 0
        end = len(text)
        for brace in _BRACE.finditer(text, start.start()):
            token = brace.group()
            if token == "{":
                depth += 1
            elif token == "}":
                depth -= 1
                if depth == 0:
                    end = brace.end()
                    break
        pos = end
    out.append(text[pos:])
    return "".join(out)


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    from striprtf.striprtf import rtf_to_text

    raw = path.read_bytes()
    if not raw.lstrip()[:5] == RTF_MAGIC:
        raise ExtractionError("not an RTF file (no {\\rtf header)", NOT_RTF_HINT)
    # RTF is 7-bit text; latin-1 maps every byte to one character, so \bin data survives intact.
    text = drop_blob_groups(raw.decode("latin-1"))
    del raw
    plain = rtf_to_text(text, errors="replace")
    del text
    for number, line in enumerate(plain.split("\n"), start=1):
        line = line.strip()
        if ctx.should_cancel():
            return
        for start in range(0, len(line), MAX_BLOCK_CHARS):
            piece = line[start : start + MAX_BLOCK_CHARS]
            if piece.strip():
                where = Location(line_start=number, line_end=number)
                yield TextBlock(piece, where, BlockKind.PARAGRAPH)
