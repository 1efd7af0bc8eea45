"""DOCX, XLSX and PPTX made with python-docx, openpyxl and python-pptx, read back block by block."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.extract.blocks import BlockKind, ExtractContext, TextBlock
from helpers.extract.registry import extractor_for
from tests.format_fixtures import RUSSIAN, THAI, make_docx, make_pptx, make_xlsx


def extract(path: Path) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ExtractContext()))


@pytest.fixture(scope="module")
def docx_blocks(tmp_path_factory: pytest.TempPathFactory) -> list[TextBlock]:
    return extract(make_docx(tmp_path_factory.mktemp("docx") / "report.docx"))


def test_docx_headings_by_style_build_the_heading_path(docx_blocks: list[TextBlock]) -> None:
    headings = [
        (b.text, b.location.heading_path) for b in docx_blocks if b.kind is BlockKind.HEADING
    ]
    assert headings == [
        ("Annual Report", ("Annual Report",)),
        ("Введение", ("Annual Report", "Введение")),
        ("ภาษาไทย", ("Annual Report", "Введение", "ภาษาไทย")),
        ("Figures", ("Annual Report", "Figures")),
    ]


def test_docx_body_keeps_document_order_lists_and_scripts(docx_blocks: list[TextBlock]) -> None:
    body = [b.text for b in docx_blocks if b.kind is BlockKind.PARAGRAPH]
    assert body == [
        RUSSIAN,
        THAI,
        "- first bullet",
        "- second bullet",
        "After the table.",
        "Text inside a content control",
    ]
    thai = next(b for b in docx_blocks if b.text == THAI)
    assert thai.location.heading_path == ("Annual Report", "Введение", "ภาษาไทย")


def test_docx_table_rows_carry_the_header_row(docx_blocks: list[TextBlock]) -> None:
    rows = [b for b in docx_blocks if b.kind is BlockKind.TABLE_ROW]
    assert [r.text for r in rows] == ["| Иван | Москва | 10 |", "| Somchai | กรุงเทพ | 20 |"]
    assert {r.table_header for r in rows} == {"| Name | City | Amount |\n|---|---|---|"}
    assert rows[0].location.heading_path == ("Annual Report", "Figures")


def test_docx_headers_footers_and_comments_come_last_as_notes(
    docx_blocks: list[TextBlock],
) -> None:
    notes = [(b.location.heading_path, b.text) for b in docx_blocks if b.kind is BlockKind.NOTE]
    assert notes == [
        (("Header",), "Confidential header"),
        (("Footer",), "Footer line"),
        (("Comments",), "Reviewer comment here"),
    ]
    assert docx_blocks[-1].kind is BlockKind.NOTE


def test_xlsx_rows_have_sheet_cell_ranges_and_the_repeated_header(tmp_path: Path) -> None:
    blocks = extract(make_xlsx(tmp_path / "prices.xlsx"))
    prices = [b for b in blocks if b.location.sheet == "Prices"]
    assert [(b.text, b.location.cell_range) for b in prices] == [
        ("| Tea | 3.5 | 2024-05-01 |", "B4:D4"),
        ("| Чай | 4 | 2024-05-02 10:30:00 |", "B6:D6"),
        ("| ชา |  |  |", "B7:D7"),  # a formula never calculated reads as empty
    ]
    assert {b.table_header for b in prices} == {"| Item | Price | Date |\n|---|---|---|"}
    assert all(b.kind is BlockKind.TABLE_ROW for b in blocks)
    header_only = [b for b in blocks if b.location.sheet == "Пусто"]
    assert [(b.text, b.location.cell_range) for b in header_only] == [
        ("| Header | Only |", "A1:B1")
    ]
    assert not [b for b in blocks if b.location.sheet == "Empty"]


def test_xlsx_rows_starting_left_of_the_header_widen_their_range(tmp_path: Path) -> None:
    blocks = extract(make_xlsx(tmp_path / "wide.xlsx", rows=5))
    extra = [b for b in blocks if "Extra" in b.text]
    assert [(b.text, b.location.cell_range) for b in extra] == [
        ("| Extra 0 | 0 |  |", "B8:D8"),
        ("| Extra 1 | 1 |  |", "B9:D9"),
    ]


def test_pptx_slides_give_titles_text_tables_and_notes_in_order(tmp_path: Path) -> None:
    blocks = extract(make_pptx(tmp_path / "deck.pptx"))
    summary = [(b.location.slide, b.kind, b.text) for b in blocks]
    assert summary == [
        (1, BlockKind.HEADING, "Quarterly Review"),
        (1, BlockKind.PARAGRAPH, "Подзаголовок"),
        (2, BlockKind.HEADING, "ตัวเลข"),
        (2, BlockKind.PARAGRAPH, "Top bullet\n  Nested bullet"),
        (2, BlockKind.TABLE_ROW, "| Выручка | 42 |"),
        (2, BlockKind.NOTE, "Speaker notes: mention the growth"),
        (3, BlockKind.PARAGRAPH, "Upper text in a group"),
        (3, BlockKind.PARAGRAPH, "Lower text"),
    ]
    table_row = next(b for b in blocks if b.kind is BlockKind.TABLE_ROW)
    assert table_row.table_header == "| Metric | Value |\n|---|---|"
    assert table_row.location.heading_path == ("ตัวเลข",)
    assert blocks[-1].location.heading_path == ()


def _numbered_deck(path: Path) -> Path:
    """Slide titles as converters and templates leave them: the slide number, a year, a
    decorated number, and a real title."""
    from pptx import Presentation

    deck = Presentation()
    for title, body in (
        ("1", "Take a look at the sources.list file to see the distribution."),
        ("2024", "Revenue grew in every quarter."),
        ("- 3 -", "The third field names the release."),
        ("Итоги 2024", "Выручка выросла."),
    ):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(str(path))
    return path


def test_a_slide_title_without_a_letter_is_no_heading(tmp_path: Path) -> None:
    from helpers.text.chunking import build_sections

    blocks = extract(_numbered_deck(tmp_path / "numbered.pptx"))
    assert [(b.location.slide, b.kind, b.text) for b in blocks] == [
        (1, BlockKind.PARAGRAPH, "Take a look at the sources.list file to see the distribution."),
        (2, BlockKind.PARAGRAPH, "2024"),  # not the slide number: kept, as slide text
        (2, BlockKind.PARAGRAPH, "Revenue grew in every quarter."),
        (3, BlockKind.PARAGRAPH, "The third field names the release."),
        (4, BlockKind.HEADING, "Итоги 2024"),
        (4, BlockKind.PARAGRAPH, "Выручка выросла."),
    ]
    assert [b.location.heading_path for b in blocks[:4]] == [()] * 4
    children = [c.text for s in build_sections(blocks) for c in s.children]
    assert children[0].startswith("Take a look")  # no "1" breadcrumb above the slide's text
    assert children[-1].startswith("Итоги 2024")


def test_xlsx_rows_of_one_long_text_cell_are_paragraphs_without_the_header(
    tmp_path: Path,
) -> None:
    import openpyxl

    answer = (
        "They are not Debian; they are Debian based. Though there are many similarities "
        "between them, there are also crucial differences, and each of them is suited to a "
        "specific set of users. Read the list of derivatives on the Debian website."
    )
    workbook = openpyxl.Workbook()
    prose = workbook.active
    prose.title = "FAQ"
    prose.append(["Section", "Text"])
    prose.append([None, answer])
    prose.append([None, answer.replace("Debian", "Devuan")])
    mixed = workbook.create_sheet("Log")
    mixed.append(["Date", "Note"])
    mixed.append(["2024-05-01", "short note"])
    mixed.append([None, answer])
    untitled = workbook.create_sheet("Text")
    untitled.append([answer])
    workbook.save(str(tmp_path / "faq.xlsx"))
    blocks = extract(tmp_path / "faq.xlsx")
    summary = [(b.location.sheet, b.location.cell_range, b.kind, b.table_header) for b in blocks]
    assert summary == [
        ("FAQ", "A1:B1", BlockKind.TABLE_ROW, None),  # the column names, once, at the top
        ("FAQ", "B2", BlockKind.PARAGRAPH, None),
        ("FAQ", "B3", BlockKind.PARAGRAPH, None),
        ("Log", "A2:B2", BlockKind.TABLE_ROW, "| Date | Note |\n|---|---|"),
        ("Log", "B3", BlockKind.PARAGRAPH, None),
        ("Text", "A1", BlockKind.PARAGRAPH, None),  # a long first cell is no header
    ]
    assert blocks[1].text == answer
    assert "Devuan" in blocks[2].text
