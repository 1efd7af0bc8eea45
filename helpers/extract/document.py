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


def read_document(
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


# -- across the sandbox pipe (JSON): every field of Section and Child, whatever they hold --------
# Locations are sent once per document and referred to by number: the children of a page share
# one, so the message stays near the size of the text and the decoded records share them again.
class _Codec:
    def __init__(self, locations: list[Location] | None = None) -> None:
        self.locations: list[Location] = locations or []
        self._numbers: dict[Location, int] = {}

    def encode(self, value: Any) -> Any:
        if isinstance(value, Location):
            number = self._numbers.get(value)
            if number is None:
                number = self._numbers[value] = len(self.locations)
                self.locations.append(value)
            return {"__loc": number}
        if isinstance(value, Child):
            return {"__child": self.fields(value)}
        if isinstance(value, tuple):
            return {"__tuple": [self.encode(v) for v in value]}
        return value

    def decode(self, value: Any) -> Any:
        if isinstance(value, dict):
            if "__loc" in value:
                return self.locations[value["__loc"]]
            if "__child" in value:
                return Child(**{k: self.decode(v) for k, v in value["__child"].items()})
            if "__tuple" in value:
                return tuple(self.decode(v) for v in value["__tuple"])
        return value

    def fields(self, record: Any) -> dict[str, Any]:
        return {f.name: self.encode(getattr(record, f.name)) for f in fields(record)}


def encode_document(doc: DocumentText) -> dict[str, Any]:
    codec = _Codec()
    out = codec.fields(replace(doc, sections=[]))
    out["sections"] = [codec.fields(s) for s in doc.sections]
    out["locations"] = [loc.to_dict() for loc in codec.locations]
    return out


def decode_document(data: dict[str, Any]) -> DocumentText:
    codec = _Codec([Location.from_dict(d) for d in data["locations"]])
    sections = [Section(**{k: codec.decode(v) for k, v in s.items()}) for s in data["sections"]]
    rest = {k: v for k, v in data.items() if k not in ("sections", "locations")}
    return DocumentText(sections=sections, **rest)
