"""An extractor's blocks -> a document's sections: clean, redact, cap, chunk, score hubs.

One function for both sides of the sandbox: the sync worker runs it on blocks read in process
(text formats), the extraction child on the blocks it reads itself (PDF and other binary
formats), so the child hands back whole sections and the cleaning and chunking run on the
child's core while the worker writes the previous document (the hub score of each section
too: it reads the whole section text, helpers.text.hubs). Secrets are redacted here, where
every format's blocks pass, before anything is chunked, stored or embedded (helpers.secrets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

from helpers.extract.blocks import BlockKind, Location, TextBlock
from helpers.secrets import SKIP_MESSAGE, BlockRedactor, MostlySecret
from helpers.text.chunking import Child, Section, build_sections
from helpers.text.hubs import hub_score
from helpers.text.normalize import clean_text

TITLE_SCAN_BLOCKS = 40  # a heading this early in the file is taken as its title
TITLE_MAX_CHARS = 200


@dataclass(frozen=True)
class DocumentText:
    title: str | None  # the first early heading, if any
    sections: list[Section]
    needs_ocr_pages: list[int]
    ocr_pages: list[int]
    any_ocr: bool  # some text came from OCR (a single image has no page numbers)
    truncated: bool
    redactions: int


def build_document_text(
    source: Iterable[TextBlock], max_text_chars: int, check_cancel: Callable[[], None]
) -> DocumentText:
    """Sections of the blocks; MostlySecret when the text is mostly secret material."""
    needs_ocr: list[int] = []
    ocr_pages: set[int] = set()
    any_ocr = False
    title: str | None = None
    budget = max_text_chars
    truncated = False
    redactor = BlockRedactor()
    headings: dict[tuple[str, ...], tuple[str, ...]] = {}

    def blocks() -> Iterator[TextBlock]:
        nonlocal title, budget, truncated, any_ocr
        for index, block in enumerate(source):
            check_cancel()
            if block.kind == BlockKind.TRUNCATED:
                truncated = True  # the extractor stopped at max_text_chars
                continue
            if block.kind == BlockKind.NEEDS_OCR:
                needs_ocr.append(block.location.page or 1)
                continue
            text = clean_text(block.text)
            if not text.strip():
                continue
            if block.table_header and block.kind == BlockKind.TABLE_ROW:
                text = redactor.table_row(text, block.table_header)
            else:
                text = redactor.text(text)
            header = redactor.extra(block.table_header) if block.table_header else None
            location = _redacted_headings(block.location, redactor, headings)
            any_ocr |= block.ocr
            if block.ocr and block.location.page is not None:
                ocr_pages.add(block.location.page)
            if title is None and index < TITLE_SCAN_BLOCKS and block.kind == BlockKind.HEADING:
                title = text.strip()[:TITLE_MAX_CHARS]
            budget -= len(text)
            if budget < 0:
                truncated = True
                return
            yield TextBlock(text, location, block.kind, header, block.ocr)

    sections = [replace(s, hub=hub_score(s.text)) for s in build_sections(blocks())]
    if redactor.mostly_secret:
        raise MostlySecret(SKIP_MESSAGE.format(kinds=redactor.kinds_label()))
    return DocumentText(
        title=title,
        sections=sections,
        needs_ocr_pages=sorted(set(needs_ocr)),
        ocr_pages=sorted(ocr_pages),
        any_ocr=any_ocr,
        truncated=truncated,
        redactions=redactor.redactions,
    )


def _redacted_headings(
    location: Location, redactor: BlockRedactor, seen: dict[tuple[str, ...], tuple[str, ...]]
) -> Location:
    """The location with its heading breadcrumb redacted (computed once per distinct path)."""
    if not location.heading_path:
        return location
    path = seen.get(location.heading_path)
    if path is None:
        path = tuple(redactor.extra(h, counted=False) for h in location.heading_path)
        seen[location.heading_path] = path
    return location if path == location.heading_path else replace(location, heading_path=path)


# -- across the sandbox pipe (JSON) ----------------------------------------------------------
# A section is [text, location, children, ocr, hub], a child [text, location, ocr]: lists in the
# fields' order, not objects with their names (the message of the python3.11 manual's 51,434
# children: 1.2 s of CPU to encode and decode with named fields, 0.4 s so). Locations are sent
# once per document and referred to by number: the children of a page share one, so the message
# stays near the size of the text and the decoded records share them again. Every field of
# Section and Child is sent (tests/test_extract_sandbox_documents.py round-trips them all).
def encode_document(doc: DocumentText) -> dict[str, Any]:
    numbers: dict[Location, int] = {}
    locations: list[Location] = []
    last: list[Any] = [None, 0]  # children of one place repeat its location: skip the hash

    def number(location: Location) -> int:
        if location is last[0]:
            return int(last[1])
        found = numbers.get(location)
        if found is None:
            found = numbers[location] = len(locations)
            locations.append(location)
        last[0], last[1] = location, found
        return found

    out: dict[str, Any] = {f.name: getattr(doc, f.name) for f in fields(doc)}
    out["sections"] = [
        [
            s.text,
            number(s.location),
            [[c.text, number(c.location), c.ocr] for c in s.children],
            s.ocr,
            s.hub,
        ]
        for s in doc.sections
    ]
    out["locations"] = [location.to_dict() for location in locations]
    return out


def decode_document(data: dict[str, Any]) -> DocumentText:
    places = [Location.from_dict(d) for d in data["locations"]]
    sections = [
        Section(text, places[at], tuple([Child(t, places[a], o) for t, a, o in kids]), ocr, hub)
        for text, at, kids, ocr, hub in data["sections"]
    ]
    rest = {k: v for k, v in data.items() if k not in ("sections", "locations")}
    return DocumentText(sections=sections, **rest)
