"""ODT, ODS and ODP made with odfpy, read back with their structure and locations."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, TextBlock
from helpers.extract.ods import column_letter
from helpers.extract.registry import extractor_for
from tests.format_fixtures import THAI, make_odp, make_ods, make_odt


def extract(path: Path) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ExtractContext()))


def test_odt_headings_by_outline_level_and_notes_after_their_paragraph(tmp_path: Path) -> None:
    blocks = extract(make_odt(tmp_path / "doc.odt"))
    summary = [(b.kind, b.text, b.location.heading_path) for b in blocks]
    assert summary[:8] == [
        (BlockKind.HEADING, "Глава первая", ("Глава первая",)),
        (BlockKind.PARAGRAPH, "Body with a note and more words.", ("Глава первая",)),
        (BlockKind.NOTE, "The footnote text", ("Глава первая",)),
        (BlockKind.HEADING, "ส่วนที่สอง", ("Глава первая", "ส่วนที่สอง")),
        (BlockKind.PARAGRAPH, THAI, ("Глава первая", "ส่วนที่สอง")),
        (BlockKind.PARAGRAPH, "- alpha item", ("Глава первая", "ส่วนที่สอง")),
        (BlockKind.PARAGRAPH, "- beta item", ("Глава первая", "ส่วนที่สอง")),
        (BlockKind.TABLE_ROW, "| спутник | 1957 |", ("Глава первая", "ส่วนที่สอง")),
    ]
    assert blocks[7].table_header == "| Key | Value |\n|---|---|"
    assert "a   b" in [b.text for b in blocks]  # <text:s text:c="3"/> is three spaces
    notes = [(b.location.heading_path, b.text) for b in blocks[-2:]]
    assert notes == [(("Header",), "ODT running header"), (("Footer",), "ODT running footer")]


def test_ods_repeated_padding_is_counted_not_expanded(tmp_path: Path) -> None:
    path = make_ods(tmp_path / "sheet.ods")
    tracemalloc.start()
    blocks = extract(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [(b.location.sheet, b.location.cell_range, b.text) for b in blocks] == [
        ("Продажи", "B3:C3", "| North | 100 |"),
        ("Продажи", "B4:C6", "| ภาคใต้ | 200 |"),  # one block for three identical rows
        ("Notes", "A1:A1", "| just a header |"),
    ]
    assert blocks[0].table_header == "| Region | Total |\n|---|---|"
    assert blocks[2].table_header is None
    assert peak < 20 * 1024 * 1024, f"peak traced memory {peak}"


def test_column_letters_match_spreadsheet_names() -> None:
    assert [column_letter(i) for i in (0, 25, 26, 701, 702, 16383)] == [
        "A",
        "Z",
        "AA",
        "ZZ",
        "AAA",
        "XFD",
    ]


def test_odp_slides_read_title_first_then_shapes_top_down_then_notes(tmp_path: Path) -> None:
    blocks = extract(make_odp(tmp_path / "deck.odp"))
    assert [(b.location.slide, b.kind, b.text) for b in blocks] == [
        (1, BlockKind.HEADING, "Первый слайд"),
        (1, BlockKind.PARAGRAPH, "Body of slide one"),
        (1, BlockKind.PARAGRAPH, "Bottom text"),
        (1, BlockKind.NOTE, "Notes for one"),
        (2, BlockKind.HEADING, "สไลด์ที่สอง"),
        (2, BlockKind.PARAGRAPH, "Second body line A\nSecond body line B"),
        (2, BlockKind.PARAGRAPH, "Bottom text"),
    ]
    assert blocks[5].location.heading_path == ("สไลด์ที่สอง",)
