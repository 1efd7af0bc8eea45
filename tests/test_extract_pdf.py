"""PDF extraction on real PDFs: hand-written text layers, LibreOffice exports, image-only scans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import SOFFICE_FIX, needs_soffice, require_tool

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, OcrText, TextBlock
from helpers.extract.common import ExtractionCancelled
from helpers.extract.registry import extractor_for
from tests.format_fixtures import (
    RUSSIAN,
    SOFFICE,
    THAI,
    encrypted_pdf_options,
    make_docx,
    render_pdf_page,
    soffice_convert,
    write_blank_pdf,
    write_image_pdf,
    write_scanned_pdf,
    write_text_pdf,
)


def extract(path: Path, ctx: ExtractContext | None = None) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ctx or ExtractContext()))


TOPICS = ["budget", "hiring", "travel", "servers", "security", "training", "marketing", "legal"]


def report_pages(count: int) -> list[list[str]]:
    """Pages with a running header, a page-number footer and different body text each."""
    return [
        [
            "ACME Corp - Annual Report 2024",
            f"The {TOPICS[n % 8]} review found {n * 7} open items, each with a hyphen-",
            f"ated note; marker zeta{n} closes the {TOPICS[(n + 3) % 8]} paragraph.",
            f"Page {n} of {count}",
        ]
        for n in range(1, count + 1)
    ]


def test_text_pdf_pages_keep_order_and_drop_running_headers_and_page_numbers(
    tmp_path: Path,
) -> None:
    path = write_text_pdf(tmp_path / "report.pdf", report_pages(6))
    blocks = extract(path)
    assert [b.location.page for b in blocks] == [1, 2, 3, 4, 5, 6]
    text = "\n".join(b.text for b in blocks)
    assert "ACME Corp" not in text and "Page 3 of 6" not in text
    assert all(f"zeta{n}" in blocks[n - 1].text for n in range(1, 7))
    assert "each with a hyphenated note;" in blocks[0].text
    assert "\r" not in text


def test_a_two_page_pdf_keeps_lines_that_repeat_on_both_pages(tmp_path: Path) -> None:
    pages = [["Same first line", f"Body {n}", "Same last line"] for n in (1, 2)]
    blocks = extract(write_text_pdf(tmp_path / "two.pdf", pages))
    assert blocks[0].text == "Same first line\nBody 1\nSame last line"


def test_image_only_pages_without_ocr_are_flagged_never_silently_empty(tmp_path: Path) -> None:
    path = write_scanned_pdf(tmp_path / "scan.pdf", pages=2, caption="12")
    blocks = extract(path)
    needs = [b for b in blocks if b.kind is BlockKind.NEEDS_OCR]
    assert [b.location.page for b in needs] == [1, 2]
    assert all(b.text == "" for b in needs)
    assert [b.text for b in blocks if b.kind is BlockKind.PARAGRAPH] == ["12", "12"]


def test_a_blank_page_yields_nothing_and_is_not_sent_to_ocr(tmp_path: Path) -> None:
    assert extract(write_blank_pdf(tmp_path / "blank.pdf")) == []


def test_scanned_pages_go_to_the_ocr_engine_rendered_at_300_dpi(tmp_path: Path) -> None:
    seen: list[tuple[int, int, Any]] = []

    def ocr(image: Any) -> OcrText:
        seen.append((image.width, image.height, image.mode))
        return OcrText(f"recognised page {len(seen)}", "test-engine")

    path = write_scanned_pdf(tmp_path / "scan.pdf", pages=2)
    blocks = extract(path, ExtractContext(ocr=ocr))
    assert len(seen) == 2
    for width, height, mode in seen:  # 8.5 x 11 in at 300 DPI, give or take rounding
        assert abs(width - 2550) <= 1 and abs(height - 3300) <= 1 and mode == "L"
    assert [(b.text, b.location.page, b.ocr) for b in blocks] == [
        ("recognised page 1", 1, True),
        ("recognised page 2", 2, True),
    ]


def test_an_ocr_failure_on_one_page_flags_that_page_and_keeps_the_rest(tmp_path: Path) -> None:
    calls = 0

    def ocr(image: Any) -> OcrText:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ExtractionError("tesseract timed out")
        return OcrText("second page text", "test-engine")

    blocks = extract(write_scanned_pdf(tmp_path / "s.pdf", pages=2), ExtractContext(ocr=ocr))
    assert [(b.kind, b.location.page) for b in blocks] == [
        (BlockKind.NEEDS_OCR, 1),
        (BlockKind.PARAGRAPH, 2),
    ]


@pytest.mark.slow
def test_a_real_scan_is_read_by_real_tesseract(tmp_path: Path) -> None:
    from helpers.ocr.engine import OcrConfig, make_ocr_function

    ocr = make_ocr_function(OcrConfig())
    require_tool(ocr is not None, "tesseract-ocr", "apt-get install tesseract-ocr")
    lines = ["The quick brown fox jumps over the lazy dog", "Invoice number 4711 is overdue"]
    source = write_text_pdf(tmp_path / "source.pdf", [lines])
    scan = write_image_pdf(tmp_path / "scan.pdf", render_pdf_page(source, scale=200 / 72))
    blocks = extract(scan, ExtractContext(ocr=ocr))
    assert all(b.ocr and b.location.page == 1 for b in blocks)
    text = " ".join(b.text for b in blocks)
    assert "quick brown fox" in text and "4711" in text


def test_cancellation_is_checked_between_pages(tmp_path: Path) -> None:
    path = write_text_pdf(tmp_path / "long.pdf", report_pages(5))
    ctx = ExtractContext(should_cancel=lambda: True)
    with pytest.raises(ExtractionCancelled):
        extract(path, ctx)


def test_garbage_with_a_pdf_header_is_a_corrupt_pdf_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.pdf"
    path.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 10)
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "PDF" in err.value.message and err.value.hint


def test_a_truncated_pdf_raises_only_extraction_error_or_reads_what_survives(
    tmp_path: Path,
) -> None:
    whole = write_text_pdf(tmp_path / "whole.pdf", report_pages(6))
    for fraction in (0.1, 0.5, 0.9):
        cut = tmp_path / f"cut{fraction}.pdf"
        cut.write_bytes(whole.read_bytes()[: int(whole.stat().st_size * fraction)])
        try:
            blocks = extract(cut)
        except ExtractionError as exc:
            assert exc.message
        else:
            assert all(b.location.page is not None for b in blocks)


@pytest.fixture(scope="module")
def office_pdfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_tool(SOFFICE is not None, "LibreOffice", SOFFICE_FIX)
    work = tmp_path_factory.mktemp("lo-pdf")
    source = make_docx(work / "multilingual.docx")
    plain = soffice_convert(source, "pdf", work / "plain")
    locked = soffice_convert(source, encrypted_pdf_options("secret"), work / "locked")
    return {"plain": plain, "locked": locked}


@needs_soffice
def test_thai_and_cyrillic_survive_a_libreoffice_pdf(office_pdfs: dict[str, Path]) -> None:
    blocks = extract(office_pdfs["plain"])
    text = "\n".join(b.text for b in blocks)
    assert RUSSIAN in text
    assert THAI in text
    assert blocks[0].location.page == 1


@needs_soffice
def test_a_password_protected_pdf_raises_with_a_hint(office_pdfs: dict[str, Path]) -> None:
    with pytest.raises(ExtractionError) as err:
        extract(office_pdfs["locked"])
    assert "password" in err.value.message and "qpdf" in err.value.hint
