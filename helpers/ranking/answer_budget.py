"""An answer sized for an agent: copies collapsed, sections cut to windows, one character budget.

rag_service.search calls `fit` when a face asks for a budget (the MCP default); it reads
nothing: each hit carries its matched child (rag_search). The budget counts
the serialised structured content (compact JSON, UTF-8 characters not escaped, as FastMCP sends
it). Hits keep rank order; the best-ranked hit gets its window first: pass 1 gives every hit
the sentences around its matched child, pass 2 widens windows (best first) towards the whole
section. A cut lands on a sentence end, else a line break, else a space, never inside a
`**mark**`, a surrogate pair or before a combining mark, and is shown as `…`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from helpers.results import Hit, MatchedChild, Omitted, SearchResult

CUT_MARK = "…"
# Sentence ends (Latin, CJK and the Thai/Khmer spaced style), then line breaks, then spaces.
_SENTENCE_END = re.compile(r"(?<=[.!?;:。！？…])\s+|\n\s*")
_SPACE = re.compile(r"\s+")
_MARKED = re.compile(r"\*\*[^*\n]{1,200}?\*\*")
# Pass 1 widens a child to whole sentences only this far on each side; a longer sentence is cut
# at a space instead (a 2,000-character table row is not one "sentence" an agent must read).
CORE_WIDEN_MAX_CHARS = 300
REFILL_ROUNDS = 3  # each round hands back what the worst-case reservation did not need
MIN_WINDOW_CHARS = 120  # a shorter scrap of a section is worth less than the snippet it replaces


@dataclass(frozen=True)
class _Window:
    start: int
    end: int


def json_len(value: Any) -> int:
    """Characters of `value` as FastMCP serialises it (compact JSON, no ASCII escaping)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def fit(result: SearchResult, max_chars: int) -> SearchResult:
    """The result within `max_chars`, saying in `omitted` and `more` what it left out."""
    hits = _collapse_copies(result.hits, result.sections)
    texts = {h.section_id: result.sections[h.section_id] for h in hits}
    copies = len(result.hits) - len(hits)  # listed in other_paths, not lost
    if copies:
        note = f"{copies} copies of documents above are listed in their hit's other_paths"
        result = result.with_changes(warnings=[*result.warnings, note])
    spans = {h.section_id: _child_span(texts[h.section_id], h.child) for h in hits}

    def render(windows: dict[int, _Window], kept: list[Hit], omitted: Omitted) -> SearchResult:
        sections = {sid: _show(texts[sid], w) for sid, w in windows.items()}
        return result.with_changes(
            hits=kept, sections=sections, omitted=omitted, more=_more(omitted, max_chars)
        )

    # Reserve room for the worst case of the bookkeeping fields (every section cut, or every
    # section left out and its snippet shown instead), then fill with text.
    kept = list(hits)
    while True:
        ids = tuple(h.section_id for h in kept)
        worst = Omitted(hits=len(hits), cut_sections=ids, left_out_sections=ids)
        empty = {sid: _Window(0, 0) for sid in ids}
        skeleton = max(
            json_len(render(empty, kept, worst).to_dict()),
            json_len(render({}, kept, worst).to_dict()),
        )
        if skeleton <= max_chars or len(kept) == 1:
            break
        kept.pop()
    lost_hits = len(hits) - len(kept)

    def omitted_of(windows: dict[int, _Window]) -> Omitted:
        # Hits whose section got no room keep their snippet; a left-out section costs no key.
        return Omitted(
            hits=lost_hits,
            cut_sections=tuple(
                sid for sid, w in windows.items() if (w.start, w.end) != (0, len(texts[sid]))
            ),
            left_out_sections=tuple(h.section_id for h in kept if h.section_id not in windows),
        )

    windows: dict[int, _Window] = {}
    _fill(kept, texts, spans, windows, max_chars - skeleton)
    # The reservation was the worst case: hand what it did not need back, best hits first.
    for _ in range(REFILL_ROUNDS):
        used = json_len(render(windows, kept, omitted_of(windows)).to_dict())
        before = dict(windows)
        _fill(kept, texts, spans, windows, max_chars - used)
        if windows == before:
            break
    return _enforce(render(windows, kept, omitted_of(windows)), max_chars)


def _fill(
    kept: list[Hit],
    texts: dict[int, str],
    spans: dict[int, _Window],
    windows: dict[int, _Window],
    room: int,
) -> None:
    """Pass 1 gives each hit without a window its matched child, widened to whole sentences;
    pass 2 widens the windows, best-ranked first, towards the whole section."""
    for hit in kept:
        sid = hit.section_id
        if sid in windows:
            continue
        text = texts[sid]
        core = _widen(text, spans[sid], CORE_WIDEN_MAX_CHARS)
        for candidate in (core, spans[sid]):
            cost = _cost(text, candidate)
            if cost <= room:
                windows[sid] = candidate
                room -= cost
                break
        else:
            squeezed = _squeeze(text, spans[sid], room)
            if squeezed is not None:
                windows[sid] = squeezed
                room -= _cost(text, squeezed)
    for hit in kept:
        sid = hit.section_id
        if sid not in windows:
            continue
        text = texts[sid]
        current = windows[sid]
        if current == _Window(0, len(text)):
            continue
        grown = _grow(text, current, room + _cost(text, current))
        room -= _cost(text, grown) - _cost(text, current)
        windows[sid] = grown


def _enforce(result: SearchResult, max_chars: int) -> SearchResult:
    """Last guard: the reservation above is an upper bound, but a warning or a renumbered
    omission could still tip it over; drop text from the lowest-ranked window."""
    while json_len(result.to_dict()) > max_chars and len(result.hits) > 1:
        last = result.hits[-1]
        omitted = replace(
            result.omitted,
            hits=result.omitted.hits + 1,
            cut_sections=tuple(s for s in result.omitted.cut_sections if s != last.section_id),
            left_out_sections=tuple(
                s for s in result.omitted.left_out_sections if s != last.section_id
            ),
        )
        sections = {k: v for k, v in result.sections.items() if k != last.section_id}
        result = result.with_changes(
            hits=result.hits[:-1],
            sections=sections,
            omitted=omitted,
            more=_more(omitted, max_chars),
        )
    return result


def _more(omitted: Omitted, max_chars: int) -> str | None:
    if not omitted:
        return None
    parts = []
    if omitted.cut_sections or omitted.left_out_sections:
        parts.append("rag_read(path, section_id) returns a section whole, with its neighbours")
    if omitted.hits:
        parts.append(f"{omitted.hits} more hits: raise max_chars (now {max_chars})")
    return "; ".join(parts)


def _collapse_copies(hits: list[Hit], sections: dict[int, str]) -> list[Hit]:
    """One hit per document text: the same bytes (sha256), or the same section text at the
    same place, under another path become that hit's other_paths."""
    kept: list[Hit] = []
    for hit in hits:
        sha = hit.child.sha256 if hit.child else ""
        for i, first in enumerate(kept):
            first_sha = first.child.sha256 if first.child else ""
            same_text = (
                sections.get(first.section_id) == sections.get(hit.section_id)
                and first.location_label == hit.location_label
            )
            if first.path != hit.path and ((sha and sha == first_sha) or same_text):
                if hit.path not in first.other_paths:
                    kept[i] = replace(first, other_paths=(*first.other_paths, hit.path))
                break
        else:
            kept.append(hit)
    return [replace(h, rank=n) for n, h in enumerate(kept, start=1)]


def child_body(child_text: str, breadcrumb: str) -> str:
    """The child without the heading breadcrumb chunking put on its first line."""
    if breadcrumb and child_text.startswith(breadcrumb):
        return child_text[len(breadcrumb) :].lstrip("\n")
    return child_text


def _child_span(text: str, child: MatchedChild | None) -> _Window:
    """Where the matched child sits in its section (whole lines of it, if not verbatim)."""
    if child is None:
        return _Window(0, min(len(text), MIN_WINDOW_CHARS))
    body = child_body(child.text, child.breadcrumb)
    at = text.find(body)
    if at >= 0:
        return _Window(at, at + len(body))
    found = [(text.find(line), line) for line in body.splitlines() if line.strip()]
    found = [(pos, line) for pos, line in found if pos >= 0]
    if not found:
        return _Window(0, min(len(text), len(body)))
    return _Window(min(p for p, _ in found), max(p + len(line) for p, line in found))


def _cost(text: str, window: _Window) -> int:
    return json_len(_show(text, window))


def _show(text: str, window: _Window) -> str:
    window = _Window(_safe(text, window.start, False), _safe(text, window.end, True))
    piece = text[window.start : window.end]
    if window.start > 0:
        piece = CUT_MARK + " " + piece.lstrip()
    if window.end < len(text):
        piece = piece.rstrip() + " " + CUT_MARK
    return piece


def _boundaries(text: str) -> list[int]:
    """Offsets where a cut may fall: sentence ends first, else whitespace (see _widen)."""
    return sorted({0, len(text), *(m.end() for m in _SENTENCE_END.finditer(text))})


@lru_cache(maxsize=256)
def _marks(text: str) -> tuple[tuple[int, int], ...]:
    """**mark** spans, paired from the start of the text (pairing from a cut would be wrong)."""
    return tuple((m.start(), m.end()) for m in _MARKED.finditer(text))


def _safe(text: str, at: int, forward: bool) -> int:
    """Move a cut out of a **mark**, a surrogate pair or a base + combining-mark cluster."""
    for start, end in _marks(text):
        if start < at < end:
            at = end if forward else start
    step = 1 if forward else -1
    while 0 < at < len(text) and (
        unicodedata.combining(text[at])
        or unicodedata.category(text[at]) == "Mc"
        or ("\ud800" <= text[at - 1] <= "\udbff" and "\udc00" <= text[at] <= "\udfff")
    ):
        at += step
    return at


def _widen(text: str, span: _Window, limit: int) -> _Window:
    """The span grown to sentence ends at most `limit` characters away, else to a space."""
    marks = _boundaries(text)
    start = max((b for b in marks if b <= span.start), default=0)
    end = min((b for b in marks if b >= span.end), default=len(text))
    if span.start - start > limit:
        start = _space_at_or_after(text, span.start - limit, span.start)
    if end - span.end > limit:
        end = _space_at_or_before(text, span.end + limit, span.end)
    return _Window(_safe(text, start, forward=False), _safe(text, end, forward=True))


def _space_at_or_after(text: str, at: int, limit: int) -> int:
    match = _SPACE.search(text, at, limit)
    return match.end() if match else limit


def _space_at_or_before(text: str, at: int, limit: int) -> int:
    last = None
    for match in _SPACE.finditer(text, limit, at):
        last = match.start()
    return last if last is not None else limit


def _grow(text: str, window: _Window, budget: int) -> _Window:
    """Add whole sentences after, then before, alternately, while the window costs ≤ budget."""
    if _cost(text, _Window(0, len(text))) <= budget:
        return _Window(0, len(text))
    marks = _boundaries(text)
    current = window
    moved = True
    while moved:
        moved = False
        after = min((b for b in marks if b > current.end), default=None)
        if after is not None:
            trial = _Window(current.start, _safe(text, after, forward=True))
            if _cost(text, trial) <= budget:
                current, moved = trial, True
        before = max((b for b in marks if b < current.start), default=None)
        if before is not None:
            trial = _Window(_safe(text, before, forward=False), current.end)
            if _cost(text, trial) <= budget:
                current, moved = trial, True
    return current


def _squeeze(text: str, span: _Window, budget: int) -> _Window | None:
    """The start of the child cut at a space to fit `budget`, or None when too little fits."""
    if budget < MIN_WINDOW_CHARS:
        return None
    end = span.end
    while end > span.start:
        window = _Window(span.start, end)
        if _cost(text, window) <= budget:
            return window if end - span.start >= MIN_WINDOW_CHARS // 2 else None
        cut = _space_at_or_before(text, end - 1, span.start)
        if cut <= span.start:  # no space left (a Thai or CJK run): a quarter shorter
            cut = end - max(1, (end - span.start) // 4)
        end = _safe(text, cut, forward=False)
    return None
