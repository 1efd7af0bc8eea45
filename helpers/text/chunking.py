"""Blocks → parent sections (what a caller reads) → retrieval children (what gets ranked).

Parents follow the document's own units (heading section, page, slide, sheet block) up to
PARENT_MAX_CHARS. Children are small, overlapping windows sized for a MiniLM-class encoder, each
carrying its heading breadcrumb so a child still says what it is about.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import accumulate

from helpers.extract.blocks import BlockKind, Location, TextBlock
from helpers.text import thai
from helpers.text.token_estimate import estimate_tokens

# Bump when the output of this module changes: documents indexed with another scheme are
# `needs_reindex` and the next sync re-extracts them. 3: token estimate per character run (code
# identifiers, paths, hex and base64 no longer overflow the encoder window). 4: PDF pages carry
# their outline section and printed page label, are cut at section headings, and lose
# per-chapter and odd/even running headers. 5: a slide title without a letter is no heading;
# a spreadsheet row that is one long text cell is a paragraph, without the repeated header.
# 6: the matching form (helpers.text.normalize.fold, stored in chunks.norm) folds NFKC
# compatibility forms and the marks of Latin and Greek letters.
CHUNK_SCHEME = 6
PARENT_MAX_CHARS = 4000  # a section an agent can read in one go without flooding its context
CHILD_MAX_TOKENS = 112  # leaves room for the prompt and specials under a 128-token encoder limit
CHILD_OVERLAP_TOKENS = 24  # a sentence cut at a window edge still appears whole in one child
BREADCRUMB_MAX_SHARE = 1 / 3  # longer breadcrumbs are elided from the middle
TABLE_HEADER_MAX_SHARE = 1 / 2  # a longer header is cut in children so rows keep some room
CODE_BLOCK_MAX_CHARS = 2000  # fenced code up to this stays one piece; longer is split by lines
ATOM_CACHE_SIZE = 1 << 17  # distinct word atoms memoised (a 12 MB corpus has ~110k)
CACHED_ATOM_MAX_CHARS = 64  # longer atoms (base64, URLs) rarely repeat and would pin memory

_WORD = re.compile(r"\S+\s*|\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")


@dataclass(frozen=True)
class Child:
    text: str  # breadcrumb + content
    location: Location
    ocr: bool = False


@dataclass(frozen=True)
class Section:
    text: str
    location: Location
    children: tuple[Child, ...]
    ocr: bool = False
    # helpers.text.hubs.hub_score(text), set by extract.document.build_document_text (so it is
    # computed in the extraction child for what the child reads); None: the writer computes it.
    hub: float | None = None


def build_sections(blocks: Iterable[TextBlock]) -> Iterator[Section]:
    """Group consecutive blocks of one unit into parents ≤ PARENT_MAX_CHARS, then cut children."""
    group: list[TextBlock] = []
    for block in blocks:
        if block.kind == BlockKind.NEEDS_OCR or not block.text.strip():
            continue
        if group and not group[-1].location.same_unit(block.location):
            yield from _emit_group(group)
            group = []
        group.append(block)
    if group:
        yield from _emit_group(group)


def _emit_group(group: list[TextBlock]) -> Iterator[Section]:
    pieces: list[TextBlock] = []
    size = 0
    for block in _split_oversized(group):
        extra = len(block.text) + 1 + (len(block.table_header or "") + 1 if not pieces else 0)
        if pieces and size + extra > PARENT_MAX_CHARS:
            yield _make_section(pieces)
            pieces, size = [], 0
            extra = len(block.text) + 1 + len(block.table_header or "") + 1
        pieces.append(block)
        size += extra
    if pieces:
        yield _make_section(pieces)


def _split_oversized(group: list[TextBlock]) -> Iterator[TextBlock]:
    """Blocks longer than a parent are cut at paragraphs, then sentences, then words."""
    for block in group:
        if len(block.text) <= PARENT_MAX_CHARS:
            yield block
            continue
        for part in _cut_text(block.text, PARENT_MAX_CHARS):
            yield replace(block, text=part)


def _cut_text(text: str, limit: int) -> list[str]:
    parts: list[str] = []
    current = ""
    for unit in _units(text):
        if len(unit) > limit:
            if current:
                parts.append(current)
                current = ""
            parts.extend(unit[i : i + limit] for i in range(0, len(unit), limit))
            continue
        if len(current) + len(unit) > limit:
            parts.append(current)
            current = ""
        current += unit
    if current.strip():
        parts.append(current)
    return [p for p in parts if p.strip()]


def _units(text: str) -> list[str]:
    """Paragraph-, then sentence-, then word-sized pieces whose concatenation is the text."""
    out: list[str] = []
    for paragraph in re.split(r"(?<=\n\n)", text):
        if len(paragraph) <= PARENT_MAX_CHARS:
            out.append(paragraph)
            continue
        for sentence in re.split(r"(?<=[.!?。])(?=\s)", paragraph):
            if len(sentence) <= PARENT_MAX_CHARS:
                out.append(sentence)
            else:
                out.extend(_WORD.findall(sentence))
    return out


def _make_section(pieces: list[TextBlock]) -> Section:
    lines: list[str] = []
    header_shown: str | None = None
    for block in pieces:
        if block.kind == BlockKind.TABLE_ROW and block.table_header:
            if header_shown != block.table_header:
                lines.append(block.table_header)
                header_shown = block.table_header
        else:
            header_shown = None
        lines.append(block.text.strip("\n"))
    location = _merge_locations([b.location for b in pieces])
    ocr = any(b.ocr for b in pieces)
    text = "\n".join(lines)
    return Section(text, location, tuple(_make_children(pieces, location, ocr)), ocr)


def _merge_locations(locations: list[Location]) -> Location:
    first, last = locations[0], locations[-1]
    cell_range = first.cell_range
    if first.cell_range and last.cell_range:
        start = first.cell_range.split(":")[0]
        end = last.cell_range.split(":")[-1]
        cell_range = start if start == end else f"{start}:{end}"
    line_ends = [loc.line_end or loc.line_start for loc in locations if loc.line_start]
    return replace(
        first,
        cell_range=cell_range,
        line_end=max(line_ends) if line_ends else first.line_end,
    )


def breadcrumb(heading_path: tuple[str, ...], budget_tokens: int) -> str:
    """'A > B > C', elided from the middle ('A > … > C') past BREADCRUMB_MAX_SHARE of budget."""
    if not heading_path:
        return ""
    limit = int(budget_tokens * BREADCRUMB_MAX_SHARE)
    parts = [p.strip() for p in heading_path if p.strip()]
    text = " > ".join(parts)
    while estimate_tokens(text) > limit and len(parts) > 2:
        del parts[len(parts) // 2]
        text = " > ".join(parts[: len(parts) // 2] + ["…"] + parts[len(parts) // 2 :])
    if estimate_tokens(text) > limit:
        words = text.split()
        while words and estimate_tokens(" ".join(words) + " …") > limit:
            words.pop()
        text = " ".join(words) + " …" if words else ""
    return text


def _make_children(pieces: list[TextBlock], location: Location, ocr: bool) -> Iterator[Child]:
    crumb = breadcrumb(location.heading_path, CHILD_MAX_TOKENS)
    # A heading block only repeats the breadcrumb's last part: leave it out of the windows.
    body = [b for b in pieces if not (b.kind == BlockKind.HEADING and crumb)]
    if not body:  # a heading with nothing under it: the breadcrumb alone is the child
        yield Child(crumb, location, ocr)
        return
    yield from _windows(body, crumb, location, ocr)


def _windows(pieces: list[TextBlock], crumb: str, location: Location, ocr: bool) -> Iterator[Child]:
    """Greedy windows of whole atoms (words, table rows, short code blocks) within the budget,
    each starting with the last CHILD_OVERLAP_TOKENS of the one before (never a table row).

    Per word only C-level work runs (the atom list, a memo lookup per atom, a running sum):
    a run of words that fits is taken at once by a binary search on the running sum, so the
    Python loop below turns once per child, table row and over-long atom, not once per word."""
    budget = CHILD_MAX_TOKENS - estimate_tokens(crumb)
    header_limit = int(CHILD_MAX_TOKENS * TABLE_HEADER_MAX_SHARE)
    run = _Atoms()
    for block in pieces:
        header = None
        if block.kind == BlockKind.TABLE_ROW and block.table_header:
            fitted = _fit_header(block.table_header, header_limit)
            block = block if fitted == block.table_header else replace(block, table_header=fitted)
            header = block.table_header
        atomic = block.kind == BlockKind.TABLE_ROW or (
            block.kind == BlockKind.CODE and len(block.text) <= CODE_BLOCK_MAX_CHARS
        )
        run.add(block, [block.text] if atomic else _word_atoms(block.text), header)
    prefix = run.prefix_sums()
    starts, blocks, headers = run.starts, run.blocks, run.headers
    start = 0  # the window is the atoms [start, at)
    used = 0  # tokens of the window's atoms and of the table headers it shows
    shown_header: str | None = None  # the header _child last put in the window
    emitted_any = False
    for piece, header in enumerate(headers):
        at, end = starts[piece], starts[piece + 1]
        header_tokens = _atom_tokens(header) if header else 0
        while at < end:
            if header is None:  # take every atom that still fits, at once
                fits = bisect_right(prefix, prefix[at] + budget - used, at, end + 1) - 1
                used += prefix[fits] - prefix[at]
                at = fits
                if at == end:
                    break
            tokens = prefix[at + 1] - prefix[at]
            cost = tokens + (header_tokens if header != shown_header else 0)
            if at > start and used + cost > budget:
                yield run.child(start, at, crumb, location, ocr)
                emitted_any = True
                start = run.overlap_start(start, at, prefix)  # no table row, so no header
                used = prefix[at] - prefix[start]
                shown_header = None
                cost = tokens + header_tokens
                if used + cost > budget:
                    start, used = at, 0
            if cost > budget:  # a single over-long row or word: hard cut to the budget
                for part in _hard_cut(run.words[at], max(budget - header_tokens, 8)):
                    yield _child([(part, blocks[piece])], crumb, location, ocr)
                    emitted_any = True
                at += 1
                start = at
                continue
            used += cost
            shown_header = header or shown_header
            at += 1
    if len(run.words) > start and (not emitted_any or prefix[-1] > prefix[start]):
        yield run.child(start, len(run.words), crumb, location, ocr)


class _Atoms:
    """The atoms of one section's windows, piece by piece: the words of all pieces in one list,
    where each piece starts in it, its block and the table header its row shows."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.starts: list[int] = [0]
        self.blocks: list[TextBlock] = []
        self.headers: list[str | None] = []
        self.offsets: list[int] = []  # where each atom starts in its piece's text
        self.rows: list[int] = []  # the atoms that are table rows (an overlap stops there)
        self._locations: dict[tuple[int, int], Location] = {}

    def add(self, block: TextBlock, words: list[str], header: str | None) -> None:
        """The piece's atoms; they concatenate to its text (so a child slices the text)."""
        if block.kind == BlockKind.TABLE_ROW:
            self.rows.append(len(self.words))
        self.words.extend(words)
        offsets = list(accumulate(map(len, words), initial=0))
        offsets.pop()
        self.offsets.extend(offsets)
        self.starts.append(len(self.words))
        self.blocks.append(block)
        self.headers.append(header)

    def prefix_sums(self) -> list[int]:
        """Running sum of the atoms' tokens: prefix[j] - prefix[i] is the tokens of atoms i..j-1."""
        tokens = list(map(_ATOM_TOKENS.get, self.words))
        if None in tokens:
            at = tokens.index(None)
            while True:
                tokens[at] = _atom_tokens(self.words[at])
                try:
                    at = tokens.index(None, at + 1)
                except ValueError:
                    break
        return list(accumulate(tokens, initial=0))  # type: ignore[arg-type]

    def overlap_start(self, start: int, end: int, prefix: list[int]) -> int:
        """Where the last CHILD_OVERLAP_TOKENS of atoms start..end-1 begin, after any table row."""
        first = bisect_left(prefix, prefix[end] - CHILD_OVERLAP_TOKENS, start, end)
        row = bisect_left(self.rows, end) - 1
        if row >= 0 and self.rows[row] >= first:
            return self.rows[row] + 1
        return first

    def child(self, start: int, end: int, crumb: str, location: Location, ocr: bool) -> Child:
        """The child of atoms start..end-1: what _child makes of them, with each piece's part
        sliced from its text instead of joined from its words."""
        starts, offsets = self.starts, self.offsets
        first = bisect_right(starts, start) - 1
        parts: list[tuple[str, TextBlock]] = []
        piece = first
        while starts[piece] < end:
            block = self.blocks[piece]
            low, high = max(start, starts[piece]), min(end, starts[piece + 1])
            piece += 1
            if low >= high:
                continue
            if block.kind == BlockKind.TABLE_ROW:  # one atom: the row
                parts.append((block.text, block))
            else:
                cut = offsets[high] if high < starts[piece] else len(block.text)
                parts.append((block.text[offsets[low] : cut], block))
        lines = _child_lines(parts, crumb)
        key = (first, piece - 1)  # the pieces of the first and the last atom
        child_location = self._locations.get(key)
        if child_location is None:
            first_block, last_block = self.blocks[first], self.blocks[piece - 1]
            child_location = _merge_locations([first_block.location, last_block.location])
            if not child_location.same_unit(location):
                child_location = location
            self._locations[key] = child_location
        return Child("\n".join(line for line in lines if line), child_location, ocr)


_ATOM_TOKENS: dict[str, int] = {}


def _atom_tokens(atom: str) -> int:
    """estimate_tokens of one word atom (a word and its trailing space), memoised: words repeat
    (Zipf), and the lookup costs a tenth of the estimate's own call (bench/bench_sync.py)."""
    tokens = _ATOM_TOKENS.get(atom)
    if tokens is None:
        tokens = estimate_tokens(atom)
        if len(atom) <= CACHED_ATOM_MAX_CHARS:
            if len(_ATOM_TOKENS) >= ATOM_CACHE_SIZE:
                _ATOM_TOKENS.clear()  # a bound on memory; the values never change
            _ATOM_TOKENS[atom] = tokens
    return tokens


def _fit_header(header: str, limit: int) -> str:
    """A table header within `limit` tokens: its first line, cut after whole words, with '…'."""
    if estimate_tokens(header) <= limit:
        return header
    words = header.splitlines()[0].split()
    while words and estimate_tokens(" ".join(words) + " …") > limit:
        words.pop()
    return " ".join(words + ["…"])


def _word_atoms(text: str) -> list[str]:
    if text.isascii() or not thai.THAI_RUN.search(text):
        return _WORD.findall(text)  # what the loop below gives a text without Thai
    atoms: list[str] = []
    for word in _WORD.findall(text):
        if not word.isascii() and thai.THAI_RUN.search(word) and estimate_tokens(word) > 8:
            atoms.extend(thai.segment_keep_spacing(word))
        else:
            atoms.append(word)
    return atoms


def _hard_cut(text: str, budget: int) -> list[str]:
    """Cut a space-less run (base64, long Thai run, a URL) into pieces within the budget."""
    parts: list[str] = []
    step = budget * 2  # a first guess, shrunk below until the estimate fits
    for start in range(0, len(text), step):
        piece = text[start : start + step]
        while estimate_tokens(piece) > budget and len(piece) > 1:
            piece = piece[: len(piece) * 3 // 4]
            # the remainder is picked up below rather than lost
        parts.append(piece)
        rest = text[start + len(piece) : start + step]
        if rest:
            parts.extend(_hard_cut(rest, budget))
    return [p for p in parts if p.strip()]


def _child_lines(parts: list[tuple[str, TextBlock]], crumb: str) -> list[str]:
    """A child's lines from its (text, block) pieces: the breadcrumb, a line per paragraph, a
    table row on its own line under its header (shown once per child)."""
    lines: list[str] = [crumb] if crumb else []
    header_shown: str | None = None
    current: list[str] = []
    previous: TextBlock | None = None
    for text, block in parts:
        if current and block is not previous:  # a new paragraph starts on its own line
            lines.append("".join(current).strip())
            current = []
        previous = block
        if block.kind == BlockKind.TABLE_ROW:
            if current:
                lines.append("".join(current).strip())
                current = []
            if block.table_header and header_shown != block.table_header:
                lines.append(block.table_header)
                header_shown = block.table_header
            lines.append(text.strip())
        else:
            current.append(text)
    if current:
        lines.append("".join(current).strip())
    return lines


def _child(window: list[tuple[str, TextBlock]], crumb: str, location: Location, ocr: bool) -> Child:
    """The child of a hard-cut piece of one atom (_Atoms.child makes the windows' children)."""
    lines = _child_lines(window, crumb)
    first_block = window[0][1]
    last_block = window[-1][1]
    child_location = _merge_locations([first_block.location, last_block.location])
    if not child_location.same_unit(location):
        child_location = location
    return Child("\n".join(line for line in lines if line), child_location, ocr)
