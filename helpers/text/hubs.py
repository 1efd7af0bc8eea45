"""Hub sections: contents pages, back-of-book indexes, question lists, link lists, navigation.

A hub mentions every topic and answers none, so it matches almost any query (lexically and in
meaning) and takes rank 1 from the section that holds the answer. It is recognised here from its
structure alone, never from a file name or from query words: the text is cut into *entries* at
structural boundaries (line breaks, a question mark, an outline number such as `4.2.`, a dot
leader or trailing page numbers, a link, a `|` or bullet separator), and the score is the share
of the text that sits in list-like entries rather than in running prose.

Signals (each an entry property; the score is a share of characters, so a long page is judged
by its bulk, not by one line):
  question   the entry ends with ? (a FAQ index lists questions; an answer asks few)
  outline    the entry starts with a dotted outline number: `1.2.`, `8.2 `, `3. `
  pageref    the entry ends in a page number after a dot leader or blank (`Install . . . 17`),
             or in page lists (`apt-get, 12, 45-47`): contents pages and back-of-book indexes
  link       the entry is a link (`[text](url)`, a bare URL)
  bullet     a short entry after a list bullet or `|` / `»` separator (navigation bars)
  title      a short line without closing punctuation (a list of headings; needs line breaks)
Prose is an entry of some length that is none of these; its share counts against the score.
Because splitting never needs a line break (questions, outline numbers, page references and
links cut a flattened contents page as well as a multi-line one), a contents page extracted as
one long line still scores as a hub. Languages without sentence punctuation (Thai) and man
pages' option lists (short option names, each followed by its description) form long entries
without markers: they count as prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Below this many characters of text a section is not judged (a title, a one-line answer).
MIN_TEXT_CHARS = 120
# A listing has at least this many list-like entries; the score is scaled down linearly below
# it and is 0 for two or fewer (a page with a pair of questions or a prev/next footer).
MIN_ENTRIES = 6
# An entry up to this many characters without closing punctuation reads as a title (line mode).
TITLE_MAX_CHARS = 80
# A bullet / separator entry counts as navigation up to this length; longer is prose after a
# bullet (a list of explanations, e.g. a man page's option descriptions).
BULLET_MAX_CHARS = 100
# A line at least this long that does not close a sentence is a soft wrap of running text.
WRAP_MIN_CHARS = 50
# A piece between separators up to this length is a navigation item (`next`, `previous`).
NAV_ITEM_MAX_CHARS = 32
# An entry with a marker but longer than this is an answer that happens to start with a number
# or end with a question (a numbered step with its explanation): prose.
ENTRY_MAX_CHARS = 240
# The list share is mapped linearly from this floor (0) to this ceiling (1): a prose page with a
# few questions or a short list stays at 0, a page that is two-thirds list or more is a full hub.
SHARE_FLOOR = 0.35
SHARE_CEIL = 0.75

_OUTLINE = r"\d{1,3}(?:\.\d{1,3})*\.?(?:\d{1,3})?"
# Where a new entry starts (zero-width split points; text is never lost).
_BOUNDARY = re.compile(
    r"(?=\s)(?:"  # every boundary starts at a blank: other positions are rejected at once
    r"\n+"  # a line break
    r"|(?<=[?？])\s+"  # after a question
    # (whitespace runs are matched from their start only and possessively: a page of blanks
    # stays linear)
    r"|(?<!\s)\s++(?:"  # a blank run (taken once for the three below: it is possessive)
    r"(?=\d{1,3}(?:\.\d{1,3})+\.?\s+\D)"  # before a dotted outline number: 1.2
    r"|(?=\d{1,3}\.\s+[^\d\s])"  # before a numbered item: "3. Title"
    r"|[|»•·▪►◦]\s+"  # a separator between blanks (`next | previous`, `A » B`)
    r"))"
)
# A dot leader (or an ellipsis run) before a page number, anywhere: splits flattened contents.
# Possessive runs and a start only where a run begins keep a page of 4,000 dots linear.
# (The lookahead on the first character only speeds the scan: bench/RESULTS.md, "Lexical sync
# CPU outside SQLite".)
_LEADER_PAGE = re.compile(r"(?=[._…])(?<![.…_])(?<!\.\s)(?:(?:\.\s?){3,}+|…++|_{3,}+)\s*+\d{1,4}\b")
# Page numbers closing an entry: `Install 17`, `apt-get, 12, 45-47`, `Index 113–117`.
_PAGEREF_END = re.compile(r"(?=[\s,])(?:[\s,]+\d{1,4}(?:\s?[-–]\s?\d{1,4})?)+\s*$")
# Back-of-book index entries run together on one line: `aptitude, 13 archive, 4, 5-7 ...`.
_INDEX_RUN = re.compile(
    r"(?<![^\s,])[^\W\d_][^\s,]*+,\s?\d{1,4}(?:\s?[-–]\s?\d{1,4})?(?:,\s?\d{1,4}(?:\s?[-–]\s?\d{1,4})?)*"
)
_LEADER_CUE = re.compile(r"\.\s?\.\s?\.|…|___")
_INDEX_CUE = re.compile(r",\s?\d")
_LINK_CUE = re.compile(r"\]\(|https?:|www\.")
_OUTLINE_START = re.compile(rf"^(?:{_OUTLINE})\s+\S")
_LINK = re.compile(r"\[[^\]\n]{1,200}\]\([^)\s]{1,500}\)|https?://\S+|www\.\S+")
# A list bullet (`- item`, `* item`); `-a` (an option name) has no blank after the dash.
_BULLET = re.compile(r"^[-*+•·▪►◦]\s+")
_BULLET_CHARS = frozenset("-*+•·▪►◦")
_CLOSING = re.compile(r"[.!。！;；:：,，]\s*$")
_QUESTION_END = re.compile(r"[?？]\s*[)\"'”»]?\s*$")
_HARD_END = re.compile(r"[.!。！?？:：]|\d")  # matched on the last character of a stripped line
_LETTER = re.compile(r"[^\W\d_]")
_SENTENCE_INSIDE = re.compile(r"(?<=[^\d\s])[.!。！]\s+\S")  # (only searched for: found or not)


@dataclass(frozen=True)
class HubSignals:
    """What the score was made of (for tests and --explain)."""

    entries: int  # list-like entries
    list_chars: int  # characters in list-like entries
    prose_chars: int  # characters in the other entries
    score: float


def hub_signals(text: str) -> HubSignals:
    """Entries, list/prose character counts and the 0-1 hub score of one section's text."""
    total = len(text.strip())
    if total < MIN_TEXT_CHARS:
        return HubSignals(0, 0, total, 0.0)
    multiline = text.count("\n") >= 3
    entries = 0
    list_chars = 0
    prose_chars = 0
    for entry in _entries(text):
        size = len(entry)
        if _is_list_entry(entry, multiline):
            entries += 1
            list_chars += size
        else:
            prose_chars += size
    judged = list_chars + prose_chars
    if judged == 0:
        return HubSignals(0, 0, 0, 0.0)
    share = list_chars / judged
    score = (share - SHARE_FLOOR) / (SHARE_CEIL - SHARE_FLOOR)
    score = min(1.0, max(0.0, score)) * min(1.0, max(0, entries - 2) / (MIN_ENTRIES - 2))
    return HubSignals(entries, list_chars, prose_chars, round(score, 4))


def hub_score(text: str) -> float:
    """0 (running prose) .. 1 (a contents page, an index, a list of links or questions)."""
    return hub_signals(text).score


def _entries(text: str) -> list[str]:
    pieces: list[str] = []
    for part in _split_index_runs(_join_wrapped(text)):
        for piece in _BOUNDARY.split(part):
            piece = piece.strip()
            if piece[:1] in _BULLET_CHARS:
                piece = _BULLET.sub("", piece)
            if piece:
                pieces.append(piece)
    return pieces


def _join_wrapped(text: str) -> str:
    """Undo soft line wraps (PDF and plain-text prose is broken into ~70-character lines): a
    long line that does not close a sentence, a question or a page reference continues on the
    next line. Short lines (titles, contents entries) keep their breaks."""
    lines = text.split("\n")
    if len(lines) < 2 or max(map(len, lines)) < WRAP_MIN_CHARS:
        return text  # nothing long enough to be a wrapped line
    out: list[str] = []
    joined: list[str] = []  # the stripped parts of the line being joined, if any
    line = lines[0]
    end = line.rstrip()
    long_enough, last = len(end) >= WRAP_MIN_CHARS, end[-1:]  # of the line being built
    for following in lines[1:]:
        if long_enough and not _HARD_END.match(last):
            part = following.strip()
            if part:
                if not joined:
                    joined.append(end)
                joined.append(part)
                last = part[-1]  # a joined line is long enough
                continue
        out.append(" ".join(joined) if joined else line)
        joined = []
        line = following
        end = line.rstrip()
        long_enough, last = len(end) >= WRAP_MIN_CHARS, end[-1:]
    out.append(" ".join(joined) if joined else line)
    return "\n".join(out)


def _split_index_runs(text: str) -> list[str]:
    """Cut after every dot-leader page number, page list and link, so a flattened contents
    page or index falls apart into its entries."""
    cuts: list[int] = []
    for pattern, cue in ((_LEADER_PAGE, _LEADER_CUE), (_INDEX_RUN, _INDEX_CUE), (_LINK, _LINK_CUE)):
        if cue.search(text):  # a cheap scan first: most prose has none of these
            cuts.extend(m.end() for m in pattern.finditer(text))
    if not cuts:
        return [text]
    out: list[str] = []
    start = 0
    for cut in sorted(set(cuts)):
        if cut > start:
            out.append(text[start:cut])
            start = cut
    out.append(text[start:])
    return out


def _is_list_entry(entry: str, multiline: bool) -> bool:
    size = len(entry)
    if size > ENTRY_MAX_CHARS:
        return False
    if size > TITLE_MAX_CHARS and _SENTENCE_INSIDE.search(entry):
        return False  # several sentences: an explanation, whatever marker it carries
    if _QUESTION_END.search(entry):
        return True
    link_chars = 0
    if "](" in entry or "http" in entry or "www." in entry:  # what every _LINK holds
        link_chars = sum(len(m.group()) for m in _LINK.finditer(entry))
    if link_chars * 2 >= size:
        return True  # mostly link: a link list (or a bare list of URLs)
    if _LEADER_PAGE.search(entry) or _INDEX_RUN.fullmatch(entry):
        return True
    if size <= TITLE_MAX_CHARS and _PAGEREF_END.search(entry) and _LETTER.search(entry):
        return True
    if _OUTLINE_START.match(entry) and not _CLOSING.search(entry):
        return True
    if size <= TITLE_MAX_CHARS and not _CLOSING.search(entry) and _titlelike(entry):
        # A short unpunctuated piece: a title in a list of titles (only where lines exist) or
        # a navigation item between separators.
        return multiline or size <= NAV_ITEM_MAX_CHARS
    return False


def _titlelike(entry: str) -> bool:
    """Starts like a title: a capital, a digit or a letter of a script without case. A piece
    starting in lower case continues a sentence or describes the term above it (a definition
    list, a man page's options); one starting with `-` or `--` is an option name."""
    first = entry[0]
    return first.isalnum() and not first.islower()
