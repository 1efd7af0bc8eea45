"""Legacy Office through LibreOffice, LibreOffice-made DOCX footnotes, EPUB and notebooks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from conftest import SOFFICE_FIX, needs_soffice, require_tool

from helpers.extract import legacy as extract_legacy
from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, TextBlock
from helpers.extract.registry import extractor_for
from tests.format_fixtures import (
    RUSSIAN,
    SOFFICE,
    THAI,
    make_docx,
    make_epub,
    make_ipynb,
    make_odt,
    make_pptx,
    make_xlsx,
    soffice_convert,
)


def extract(path: Path, ctx: ExtractContext | None = None) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ctx or ExtractContext()))


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_tool(SOFFICE is not None, "LibreOffice", SOFFICE_FIX)
    work = tmp_path_factory.mktemp("legacy")
    return {
        "doc": soffice_convert(make_docx(work / "report.docx"), "doc", work / "doc"),
        "xls": soffice_convert(make_xlsx(work / "prices.xlsx"), "xls", work / "xls"),
        "ppt": soffice_convert(make_pptx(work / "deck.pptx"), "ppt", work / "ppt"),
        "odt-as-docx": soffice_convert(make_odt(work / "notes.odt"), "docx", work / "docx"),
    }


@pytest.fixture(autouse=True)
def private_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's conversions work under a folder of its own, so the leftover check below sees
    only them, never another test's or another program's LibreOffice running at the same time."""
    folder = tmp_path / "conversions"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def soffice_leftovers() -> list[str]:
    """Processes still running a conversion of this test (their command line names its profile
    under the test's private temp folder; found through /proc whoever their parent is now)."""
    mark = os.path.join(tempfile.gettempdir(), "ragdoc-soffice-").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if mark in cmdline:
                found.append(entry.name)
    return found


@needs_soffice
def test_a_legacy_doc_is_converted_and_read_like_docx(legacy: dict[str, Path]) -> None:
    blocks = extract(legacy["doc"])
    text = "\n".join(b.text for b in blocks)
    assert RUSSIAN in text and THAI in text
    heading = next(b for b in blocks if b.text == "Figures")
    assert heading.kind is BlockKind.HEADING
    rows = [b.text for b in blocks if b.kind is BlockKind.TABLE_ROW]
    assert "| Иван | Москва | 10 |" in rows
    assert soffice_leftovers() == []


@needs_soffice
def test_a_legacy_xls_keeps_sheets_and_cell_ranges(legacy: dict[str, Path]) -> None:
    blocks = extract(legacy["xls"])
    tea = next(b for b in blocks if "Tea" in b.text)
    assert (tea.location.sheet, tea.location.cell_range) == ("Prices", "B4:D4")
    assert tea.table_header == "| Item | Price | Date |\n|---|---|---|"


@needs_soffice
def test_a_legacy_ppt_keeps_slides_and_notes(legacy: dict[str, Path]) -> None:
    blocks = extract(legacy["ppt"])
    notes = [b for b in blocks if b.kind is BlockKind.NOTE]
    assert [(b.location.slide, b.text) for b in notes] == [(2, "Speaker notes: mention the growth")]
    assert blocks[0].text == "Quarterly Review" and blocks[0].location.slide == 1


@needs_soffice
def test_docx_footnotes_written_by_libreoffice_are_notes(legacy: dict[str, Path]) -> None:
    blocks = extract(legacy["odt-as-docx"])
    notes = [(b.location.heading_path, b.text) for b in blocks if b.kind is BlockKind.NOTE]
    assert (("Footnotes",), "The footnote text") in notes
    assert any(b.text == "Глава первая" and b.kind is BlockKind.HEADING for b in blocks)


@needs_soffice
def test_a_conversion_past_the_timeout_is_killed_with_its_process_group(
    legacy: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extract_legacy, "CONVERT_TIMEOUT_S", 0.3)
    with pytest.raises(ExtractionError) as err:
        extract(legacy["doc"])
    assert "took over" in err.value.message
    assert soffice_leftovers() == []


def test_without_libreoffice_legacy_files_name_the_debian_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.doc"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "libreoffice-writer libreoffice-calc libreoffice-impress" in err.value.hint


@needs_soffice
def test_a_doc_that_is_not_an_ole_file_is_refused_before_conversion(tmp_path: Path) -> None:
    path = tmp_path / "fake.doc"
    path.write_text("just text pretending", encoding="utf-8")
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "OLE2" in err.value.message


@needs_soffice
def test_a_corrupt_ole_doc_fails_with_an_extraction_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.doc"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + os.urandom(4096))
    with pytest.raises(ExtractionError):
        extract(path)
    assert soffice_leftovers() == []


def test_epub_chapters_follow_the_spine_under_their_toc_titles(tmp_path: Path) -> None:
    blocks = extract(make_epub(tmp_path / "book.epub"))
    assert [(b.kind, b.text, b.location.heading_path) for b in blocks] == [
        (BlockKind.HEADING, "Opening", ("Chapter One", "Opening")),
        (BlockKind.PARAGRAPH, "First chapter text.", ("Chapter One", "Opening")),
        (BlockKind.HEADING, "Details", ("Chapter One", "Opening", "Details")),
        (BlockKind.PARAGRAPH, "Deep.", ("Chapter One", "Opening", "Details")),
        (BlockKind.HEADING, "Начало", ("Глава вторая", "Начало")),
        (BlockKind.PARAGRAPH, RUSSIAN, ("Глава вторая", "Начало")),
        (BlockKind.HEADING, "ไทย", ("Глава вторая", "Начало", "ไทย")),
        (BlockKind.PARAGRAPH, THAI, ("Глава вторая", "Начало", "ไทย")),
    ]


def test_notebook_cells_keep_markdown_headings_and_code_but_drop_outputs(
    tmp_path: Path,
) -> None:
    blocks = extract(make_ipynb(tmp_path / "analysis.ipynb"))
    assert [(b.kind, b.text, b.location.heading_path) for b in blocks] == [
        (BlockKind.HEADING, "Analysis", ("Analysis", "cell 1")),
        (BlockKind.PARAGRAPH, "Intro text.", ("Analysis", "cell 1")),
        (BlockKind.CODE, "import math\nprint(math.pi)", ("Analysis", "cell 2")),
        (BlockKind.HEADING, "Results", ("Analysis", "Results", "cell 3")),
        (BlockKind.PARAGRAPH, "Выводы здесь.", ("Analysis", "Results", "cell 3")),
        (BlockKind.CODE, "x = 1", ("Analysis", "Results", "cell 4")),
    ]


def test_a_json_file_that_is_not_a_notebook_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fake.ipynb"
    path.write_text('{"hello": "world"}', encoding="utf-8")
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "cells" in err.value.message
