"""Records every extractor yields: text plus the exact place it came from.

Extractors are generators (`extract(path, ctx) -> Iterator[TextBlock]`) so memory stays bounded
however large the document is; the chunker turns blocks into parent sections and child chunks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from helpers.errors import RagError


class BlockKind(StrEnum):
    HEADING = "heading"  # starts a new heading level; text is the heading itself
    PARAGRAPH = "paragraph"
    TABLE_ROW = "table_row"  # one Markdown row; `table_header` holds the header row(s)
    CODE = "code"  # fenced code kept whole up to a bound
    NOTE = "note"  # speaker notes, footnotes, comments
    NEEDS_OCR = "needs_ocr"  # a page/image with no text layer and no OCR engine: text is ""
    # The extractor guard stopped at max_text_chars: the rest of the file was not read; text is "".
    TRUNCATED = "truncated"


@dataclass(frozen=True)
class Location:
    """Where a block sits in its file; only the fields the format has are set."""

    page: int | None = None  # 1-based page (PDF, image page of a TIFF)
    page_label: str | None = None  # printed page label (PDF /PageLabels) when it is not `page`
    section_path: tuple[str, ...] = ()  # PDF outline: the bookmarks this place lies under
    sheet: str | None = None  # spreadsheet sheet name
    cell_range: str | None = None  # "A1:D40" within `sheet`
    slide: int | None = None  # 1-based slide number
    heading_path: tuple[str, ...] = ()  # breadcrumb of headings above the block
    line_start: int | None = None  # 1-based line range for text-like formats
    line_end: int | None = None
    # Inside a mail container: 1-based message of an mbox, and the attachment (nested ones
    # joined by " / ") the block comes from; the fields above then describe the attachment.
    message: int | None = None
    attachment: str | None = None

    def label(self) -> str:
        """Human-readable place, e.g. 'p. 3', 'p. 23 (printed 17), 4 Factors', 'slide 4'."""
        parts: list[str] = []
        if self.message is not None:
            parts.append(f"message {self.message}")
        if self.attachment is not None:
            parts.append(f"attachment {self.attachment}")
        if self.page is not None:
            printed = f" (printed {self.page_label})" if self.page_label else ""
            parts.append(f"p. {self.page}{printed}")
        if self.section_path:
            parts.append(" > ".join(self.section_path))
        if self.sheet is not None:
            parts.append(f"{self.sheet}!{self.cell_range}" if self.cell_range else self.sheet)
        if self.slide is not None:
            parts.append(f"slide {self.slide}")
        # a PDF section's start page also carries its title as the heading: name it once
        if self.heading_path and self.section_path[-len(self.heading_path) :] != self.heading_path:
            parts.append(" > ".join(self.heading_path))
        if self.line_start is not None:
            end = self.line_end if self.line_end is not None else self.line_start
            parts.append(
                f"line {end}" if end == self.line_start else f"lines {self.line_start}-{end}"
            )
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in (
            "page",
            "page_label",
            "sheet",
            "cell_range",
            "slide",
            "line_start",
            "line_end",
            "message",
            "attachment",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.section_path:
            out["section_path"] = list(self.section_path)
        if self.heading_path:
            out["heading_path"] = list(self.heading_path)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Location:
        return cls(
            page=data.get("page"),
            page_label=data.get("page_label"),
            section_path=tuple(data.get("section_path") or ()),
            sheet=data.get("sheet"),
            cell_range=data.get("cell_range"),
            slide=data.get("slide"),
            heading_path=tuple(data.get("heading_path") or ()),
            line_start=data.get("line_start"),
            line_end=data.get("line_end"),
            message=data.get("message"),
            attachment=data.get("attachment"),
        )

    def same_unit(self, other: Location) -> bool:
        """True when both lie in the same page/sheet/slide/heading section (one parent)."""
        return (
            self.page == other.page
            and self.section_path == other.section_path
            and self.sheet == other.sheet
            and self.slide == other.slide
            and self.heading_path == other.heading_path
            and self.message == other.message
            and self.attachment == other.attachment
        )


@dataclass(frozen=True)
class TextBlock:
    text: str
    location: Location
    kind: BlockKind = BlockKind.PARAGRAPH
    table_header: str | None = None  # for TABLE_ROW: header row(s) repeated in every chunk
    ocr: bool = False  # the text came from OCR (the OCR-fuzzy channel applies to it)


# The one size-cap rule: --max-file-mb (RAGDOC_MAX_FILE_MB) counts MB of 2**20 bytes, and every
# message about the cap uses the same unit.
MB = 1024 * 1024
DEFAULT_MAX_FILE_MB = 200  # a 200 MB PDF is a big manual; larger files are reported, not read


def max_file_bytes(megabytes: int) -> int:
    return megabytes * MB


def file_too_large(size: int, limit_bytes: int) -> ExtractionError:
    return ExtractionError(
        f"file is {size / MB:.1f} MB, over the {limit_bytes / MB:.0f} MB limit",
        "raise --max-file-mb (RAGDOC_MAX_FILE_MB) or split the file",
    )


@dataclass(frozen=True)
class ExtractLimits:
    max_file_bytes: int = max_file_bytes(DEFAULT_MAX_FILE_MB)  # larger files are reported
    max_decompressed_bytes: int = 512 * 1024 * 1024  # zip-bomb guard for OOXML/ODF/EPUB
    max_text_chars: int = 20_000_000  # stop extracting a single document past this
    max_line_chars: int = 1_000_000  # a single "line" longer than this is cut into pieces


class ExtractionError(RagError):
    """A file that cannot be extracted; `hint` says what the user can do about it."""

    code = "extraction_failed"


# Renders a PIL image of one page to OCR text; None when no OCR engine is configured.
OcrFunction = Callable[[Any], "OcrText"]


@dataclass(frozen=True)
class OcrText:
    text: str
    engine: str  # e.g. "tesseract 5.3.0 eng+tha+rus"
    note: str = ""  # e.g. why a vision-model correction was rejected


@dataclass(frozen=True)
class ExtractContext:
    limits: ExtractLimits = field(default_factory=ExtractLimits)
    ocr: OcrFunction | None = None  # set when an OCR engine is available
    ocr_unavailable_hint: str = ""  # what to install when `ocr` is None
    ocr_min_chars: int = 16  # a page with fewer text-layer characters is treated as scanned
    should_cancel: Callable[[], bool] = lambda: False  # checked inside long extractions
    # (pages done, pages in the file): multi-page formats call it with 0 first (the count is
    # known up front) and after each page, so a long PDF or scan shows progress inside the file.
    on_progress: Callable[[int, int], None] = lambda done, total: None
