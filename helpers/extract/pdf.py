"""PDF (pypdfium2): text per page, running headers/footers removed, scans OCRed or flagged.

A page with almost no text layer but drawn content is a scan: with an OCR engine it is rendered at
300 DPI and recognised; without one it becomes a NEEDS_OCR block so it is never silently empty.
Every block carries its printed page label and its outline section (`pdf_structure`); a page on
which a section starts is cut where its heading is printed.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import ExtractionCancelled, ParagraphBuffer
from helpers.extract.pdf_structure import (
    EDGE_LINES,
    RunningLines,
    edge_key,
    edge_keys,
    find_heading,
    outline,
    page_labels,
    section_starts,
)

log = logging.getLogger(__name__)

OCR_DPI = 300  # tesseract's accuracy peaks around 300 DPI on body text
# A huge page (a poster, a 5 m drawing) rendered at 300 DPI would need gigabytes: cap the pixels.
MAX_RENDER_PIXELS = 60_000_000
# Running headers are short; a long line that repeats is body text (a template, a disclaimer).
MAX_RUNNING_LINE_CHARS = 100
PDFIUM_PASSWORD_ERROR = 4  # FPDF_ERR_PASSWORD

_PAGE_NUMBER = re.compile(
    r"^[\s\-–—|.]*(?:(?:page|p\.|seite|стр\.?|страница|หน้า)\s*)?"
    r"(?:\d{1,5}|[ivxlcdm]{1,7})(?:\s*(?:of|/|из|จาก)\s*\d{1,5})?[\s\-–—|.]*$",
    re.IGNORECASE,
)
# Soft hyphen at a line end (pdfium reports it as \x02 or U+FFFE or U+00AD): join the word.
_SOFT_HYPHEN_BREAK = re.compile(r"[\x02\ufffe\u00ad]\n")
# A hard hyphen at a line end followed by a lower-case letter continues the same word.
_HYPHEN_BREAK = re.compile(r"([^\W\d_])-\n(?=[^\W\d_])(?=[a-zа-яё])")
PASSWORD_HINT = "remove the password (e.g. `qpdf --decrypt --password=... in.pdf out.pdf`)"
CORRUPT_HINT = "the PDF is damaged; re-export or repair it (e.g. `qpdf in.pdf repaired.pdf`)"


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    pdf = _open(path)
    try:
        page_count = len(pdf)
        ctx.on_progress(0, page_count)
        texts: dict[int, str] = {}  # pages read ahead by the running-line window
        labels = page_labels(pdf)
        starts = section_starts(outline(pdf))

        def text_of(index: int) -> str:
            if index not in texts:
                texts[index] = _page_text(pdf, index)
            return texts[index]

        running = RunningLines(page_count, lambda i: edge_keys(_lines(text_of(i))))
        current: tuple[str, ...] = ()  # the outline section the next page starts in
        for index in range(page_count):
            if ctx.should_cancel():
                raise ExtractionCancelled("extraction cancelled")
            page = _PageInfo(
                index,
                labels[index],
                current,
                starts.get(index, []),
                running.at(index, MAX_RUNNING_LINE_CHARS),
            )
            text = text_of(index)
            texts.pop(index, None)
            yield from _page_blocks(pdf, page, text, ctx)
            if page.starts:
                current = page.starts[-1]
            ctx.on_progress(index + 1, page_count)
    finally:
        pdf.close()


@dataclass(frozen=True)
class _PageInfo:
    index: int  # 0-based
    label: str | None  # printed page label when it differs from index + 1
    carried: tuple[str, ...]  # the section the page starts in (from earlier pages)
    starts: list[tuple[str, ...]]  # sections whose bookmark points at this page
    running: frozenset[str]  # masked running lines to drop at the page edges


def _open(path: Path) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == PDFIUM_PASSWORD_ERROR:
            raise ExtractionError("password-protected PDF", PASSWORD_HINT) from exc
        raise ExtractionError(f"corrupt or unreadable PDF: {exc}", CORRUPT_HINT) from exc


def _page_text(pdf: pdfium.PdfDocument, index: int) -> str:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            return textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()


def _lines(text: str) -> list[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [line.strip() for line in text.split("\n")]


def clean_page_text(text: str, running: frozenset[str]) -> str:
    """Drop running headers/footers (masked lines, pdf_structure.RunningLines) and bare page
    numbers at the edges; join hyphenated words."""
    lines = _lines(text)
    content_idx = [i for i, line in enumerate(lines) if line]
    edge = set(content_idx[:EDGE_LINES] + content_idx[-EDGE_LINES:])
    kept = [
        line
        for i, line in enumerate(lines)
        if not (i in edge and (edge_key(line) in running or _PAGE_NUMBER.match(line)))
    ]
    joined = "\n".join(kept).strip()
    # The regexes scan every character; most pages have no hyphen at a line end at all.
    soft = "\x02" in joined or "\ufffe" in joined or "\u00ad" in joined
    if soft:
        joined = _SOFT_HYPHEN_BREAK.sub("", joined)
    if "-\n" in joined:
        joined = _HYPHEN_BREAK.sub(r"\1", joined)
    return joined.replace("\x02", "").replace("\ufffe", "") if soft else joined


def _page_blocks(
    pdf: pdfium.PdfDocument, page: _PageInfo, text: str, ctx: ExtractContext
) -> Iterator[TextBlock]:
    index = page.index
    layer_chars = len("".join(text.split())) - text.count("\x02") - text.count("\ufffe")
    if layer_chars < ctx.ocr_min_chars and _has_drawn_content(pdf, index):
        location = _location(page, page.starts[0] if page.starts else page.carried)
        yield from _scanned_page(pdf, index, text, ctx, location)
        return
    lines = clean_page_text(text, page.running).split("\n")
    for path, part, titles, starts_here in _split_sections(lines, page):
        location = _location(page, path)
        if starts_here:
            # The section starts on this page: its title heads every child of this part (and
            # only here), so the start page is what a search for the title finds.
            location = replace(location, heading_path=path[-1:])
        for title in titles[:-1] if starts_here else titles:
            yield TextBlock(title, location)  # an unprinted bookmark title, indexed once, here
        buffer = ParagraphBuffer()
        for span in buffer.add("\n".join(part).strip()):
            yield TextBlock(span.text, location)
        span = buffer.flush()
        if span is not None and span.text.strip():
            yield TextBlock(span.text, location)


def _location(page: _PageInfo, path: tuple[str, ...]) -> Location:
    return Location(page=page.index + 1, page_label=page.label, section_path=path)


def _split_sections(
    lines: list[str], page: _PageInfo
) -> Iterator[tuple[tuple[str, ...], list[str], list[str], bool]]:
    """(section path, its lines, unprinted titles, starts here) per section on the page.

    The page is cut where a bookmark's heading is printed; text above the first heading belongs
    to the section carried over from earlier pages. A bookmark whose heading is not printed
    starts where the previous one did, and its title is returned to be indexed there.
    """
    path, cut, titles, starts_here = page.carried, 0, [], False
    for start in page.starts:
        found = find_heading(lines, start[-1], cut)
        if found is None:
            path, starts_here = start, True
            titles.append(start[-1])
            continue
        if titles or any(line for line in lines[cut:found]):
            yield path, lines[cut:found], titles, starts_here
        path, cut, titles, starts_here = start, found, [], True
    yield path, lines[cut:], titles, starts_here


def _has_drawn_content(pdf: pdfium.PdfDocument, index: int) -> bool:
    """A blank page has no page objects; a scan has an image, outlined text has paths."""
    page = pdf[index]
    try:
        return pdfium_raw.FPDFPage_CountObjects(page.raw) > 0
    finally:
        page.close()


def _scanned_page(
    pdf: pdfium.PdfDocument, index: int, text: str, ctx: ExtractContext, location: Location
) -> Iterator[TextBlock]:
    number = index + 1
    if ctx.ocr is None:
        if text.strip():
            yield TextBlock(text.strip(), location)
        yield TextBlock("", location, BlockKind.NEEDS_OCR)
        return
    page = pdf[index]
    try:
        width, height = page.get_size()
        scale = OCR_DPI / 72
        pixels = width * scale * height * scale
        if pixels > MAX_RENDER_PIXELS:
            scale *= math.sqrt(MAX_RENDER_PIXELS / pixels)
        bitmap = page.render(scale=scale, grayscale=True)
        try:
            image = bitmap.to_pil()
            image.info["dpi"] = (round(scale * 72), round(scale * 72))
        finally:
            bitmap.close()
    finally:
        page.close()
    try:
        result = ctx.ocr(image)
    except ExtractionError as exc:
        # One page that cannot be recognised must not lose the rest of the document.
        log.warning("OCR failed on page %d: %s", number, exc)
        if text.strip():
            yield TextBlock(text.strip(), location)
        yield TextBlock("", location, BlockKind.NEEDS_OCR)
        return
    finally:
        image.close()
    # An empty OCR block still tells the caller this page was recognised (and found blank).
    yield TextBlock(result.text.strip(), location, ocr=True)
