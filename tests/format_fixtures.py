"""Real documents for the extractor tests and bench, made with the real libraries.

PDFs with ASCII text are written by hand (a valid file with a Helvetica text layer: pypdfium2
cannot author text); PDFs with Thai/Cyrillic and legacy Office files come from LibreOffice.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

PAGE_WIDTH, PAGE_HEIGHT = 612, 792  # US Letter in points
SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")


def _pdf_escape(text: str) -> bytes:
    raw = text.encode("cp1252", errors="replace")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _write_pdf(path: Path, objects: list[bytes], page_ids: list[int]) -> None:
    """Objects 1 and 2 are the catalog and page tree; `objects[i]` is object i + 3."""
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    all_objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_ids)),
        *objects,
    ]
    with path.open("wb") as out:
        out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for number, body in enumerate(all_objects, start=1):
            offsets.append(out.tell())
            out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
        xref = out.tell()
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(all_objects) + 1))
        for offset in offsets:
            out.write(b"%010d 00000 n \n" % offset)
        out.write(
            b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n"
            % (len(all_objects) + 1, xref)
        )


def _stream(content: bytes, extra: bytes = b"") -> bytes:
    data = zlib.compress(content)
    return (
        b"<< /Length %d /Filter /FlateDecode %s>>\nstream\n" % (len(data), extra)
        + data
        + (b"\nendstream")
    )


def write_text_pdf(path: Path, pages: Sequence[Sequence[str]]) -> Path:
    """A PDF whose page i shows `pages[i]` lines in Helvetica 11 pt (cp1252 text only)."""
    font_id = 3
    objects: list[bytes] = [
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    ]
    page_ids: list[int] = []
    for lines in pages:
        ops = [b"BT /F1 11 Tf 14 TL 72 740 Td"]
        for line in lines:
            ops.append(b"(" + _pdf_escape(line) + b") Tj T*")
        ops.append(b"ET")
        objects.append(_stream(b"\n".join(ops)))
        content_id = len(objects) + 2
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>"
            % (PAGE_WIDTH, PAGE_HEIGHT, content_id, font_id)
        )
        page_ids.append(len(objects) + 2)
    _write_pdf(path, objects, page_ids)
    return path


def write_scanned_pdf(path: Path, pages: int = 1, caption: str | None = None) -> Path:
    """Image-only pages (a gray noise-free 'scan' with black bars, no text layer).

    `caption` adds a few text-layer characters (a stamped page number, say) on top of the image.
    """
    width, height = 200, 260
    rows = []
    for y in range(height):
        dark = (y // 10) % 3 == 0
        rows.append(bytes([40 if dark and 20 < x < 180 else 235 for x in range(width)]))
    pixels = b"".join(rows)
    objects: list[bytes] = [
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        _stream(
            pixels,
            b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
            b"/BitsPerComponent 8 " % (width, height),
        ),
    ]
    page_ids: list[int] = []
    for _ in range(pages):
        ops = b"q 540 0 0 700 36 46 cm /Im1 Do Q"
        if caption:
            ops += b" BT /F1 9 Tf 300 20 Td (" + _pdf_escape(caption) + b") Tj ET"
        objects.append(_stream(ops))
        content_id = len(objects) + 2
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R "
            b"/Resources << /XObject << /Im1 4 0 R >> /Font << /F1 3 0 R >> >> >>"
            % (PAGE_WIDTH, PAGE_HEIGHT, content_id)
        )
        page_ids.append(len(objects) + 2)
    _write_pdf(path, objects, page_ids)
    return path


def write_blank_pdf(path: Path) -> Path:
    objects = [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"]
    _write_pdf(path, objects, [3])
    return path


# -- LibreOffice ---------------------------------------------------------------------------------


_PROFILE: list[str] = []  # one private LibreOffice profile per test process: later runs start fast


def _profile_dir() -> str:
    if not _PROFILE:
        path = tempfile.mkdtemp(prefix="lo-fixture-profile-")
        atexit.register(shutil.rmtree, path, True)
        _PROFILE.append(path)
    return _PROFILE[0]


def soffice_convert(source: Path, target_format: str, out_dir: Path) -> Path:
    """Convert with a private LibreOffice profile (other soffice users may be running)."""
    if SOFFICE is None:
        raise RuntimeError("LibreOffice is not installed")
    profile = _profile_dir()
    subprocess.run(
        [
            SOFFICE,
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--norestore",
            "--convert-to",
            target_format,
            "--outdir",
            str(out_dir),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=180,
        env={**os.environ, "HOME": profile},
    )
    ext = target_format.split(":", 1)[0]
    result = out_dir / f"{source.stem}.{ext}"
    if not result.exists():
        raise RuntimeError(f"LibreOffice did not write {result}")
    return result


def encrypted_pdf_options(password: str) -> str:
    return (
        'pdf:writer_pdf_Export:{"EncryptFile":{"type":"boolean","value":"true"},'
        f'"DocumentOpenPassword":{{"type":"string","value":"{password}"}}}}'
    )


# -- zip bombs and broken archives ---------------------------------------------------------------


def write_zip_bomb(path: Path, inflated_bytes: int, member: str = "word/document.xml") -> Path:
    """A zip whose one member inflates from ~kilobytes to `inflated_bytes` of zeros."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open(member, "w", force_zip64=True) as handle:
            block = b"\0" * (1024 * 1024)
            for _ in range(inflated_bytes // len(block)):
                handle.write(block)
    return path


def write_many_member_zip(path: Path, members: int) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for index in range(members):
            archive.writestr(f"m/{index}.xml", b"")
    return path


def truncate(source: Path, target: Path, keep_fraction: float = 0.5) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * keep_fraction)])
    return target


# -- Office Open XML -----------------------------------------------------------------------------

RUSSIAN = "Съешь же ещё этих мягких французских булок, да выпей чаю."
THAI = "ภาษาไทยเป็นภาษาราชการของประเทศไทย"


def make_docx(path: Path) -> Path:
    """Title, headings, Cyrillic/Thai paragraphs, a list, a table, a content control, notes."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    document.add_paragraph("Annual Report", style="Title")
    document.add_heading("Введение", level=1)
    intro = document.add_paragraph(RUSSIAN)
    document.add_heading("ภาษาไทย", level=2)
    document.add_paragraph(THAI)
    document.add_paragraph("first bullet", style="List Bullet")
    document.add_paragraph("second bullet", style="List Bullet")
    document.add_heading("Figures", level=1)
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate(
        [("Name", "City", "Amount"), ("Иван", "Москва", "10"), ("Somchai", "กรุงเทพ", "20")]
    ):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("After the table.")
    sdt = parse_xml(
        f"<w:sdt {nsdecls('w')}><w:sdtContent><w:p><w:r><w:t>Text inside a content control"
        "</w:t></w:r></w:p></w:sdtContent></w:sdt>"
    )
    document.element.body.insert(len(document.element.body) - 1, sdt)
    section = document.sections[0]
    section.header.paragraphs[0].text = "Confidential header"
    section.footer.paragraphs[0].text = "Footer line"
    document.add_comment(intro.runs, text="Reviewer comment here", author="QA")
    document.save(str(path))
    return path


def make_xlsx(path: Path, rows: int = 3) -> Path:
    """Sheet `Prices` with its header at B3, a gap row, a date, an uncalculated formula."""
    import datetime as dt

    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Prices"
    sheet["B3"], sheet["C3"], sheet["D3"] = "Item", "Price", "Date"
    sheet["B4"], sheet["C4"], sheet["D4"] = "Tea", 3.5, dt.date(2024, 5, 1)
    sheet["B6"], sheet["C6"], sheet["D6"] = "Чай", 4, dt.datetime(2024, 5, 2, 10, 30)
    sheet["B7"], sheet["C7"] = "ชา", "=C4+C6"
    for index in range(rows - 3):
        sheet.append([None, f"Extra {index}", index])
    only_header = workbook.create_sheet("Пусто")
    only_header.append(["Header", "Only"])
    workbook.create_sheet("Empty")
    workbook.save(str(path))
    return path


def make_big_xlsx(path: Path, rows: int) -> Path:
    import openpyxl

    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet("Data")
    sheet.append(["id", "name", "city", "amount", "note"])
    for index in range(rows):
        sheet.append([index, f"name {index}", "Москва", index * 1.5, "some note text"])
    workbook.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    """Title slide; a slide with bullets, a table and notes; an untitled slide with a group."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "Quarterly Review"
    first.placeholders[1].text = "Подзаголовок"
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "ตัวเลข"
    body = second.placeholders[1].text_frame
    body.text = "Top bullet"
    sub = body.add_paragraph()
    sub.text = "Nested bullet"
    sub.level = 1
    table = second.shapes.add_table(2, 2, Inches(1), Inches(5), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Metric", "Value"
    table.cell(1, 0).text, table.cell(1, 1).text = "Выручка", "42"
    second.notes_slide.notes_text_frame.text = "Speaker notes: mention the growth"
    third = deck.slides.add_slide(deck.slide_layouts[6])
    low = third.shapes.add_textbox(Inches(1), Inches(5), Inches(3), Inches(1))
    low.text_frame.text = "Lower text"
    group = third.shapes.add_group_shape()
    high = group.shapes.add_textbox(Inches(1), Inches(1), Inches(3), Inches(1))
    high.text_frame.text = "Upper text in a group"
    deck.save(str(path))
    return path


# -- OpenDocument (odfpy) ------------------------------------------------------------------------


def make_odt(path: Path) -> Path:
    from odf import style, table, text
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    page_layout = style.PageLayout(name="pm1")
    document.automaticstyles.addElement(page_layout)
    master = style.MasterPage(name="Standard", pagelayoutname=page_layout)
    header = style.Header()
    header.addElement(text.P(text="ODT running header"))
    master.addElement(header)
    footer = style.Footer()
    footer.addElement(text.P(text="ODT running footer"))
    master.addElement(footer)
    document.masterstyles.addElement(master)
    document.text.addElement(text.H(outlinelevel=1, text="Глава первая"))
    paragraph = text.P(text="Body with a note")
    note = text.Note(id="ftn1", noteclass="footnote")
    note.addElement(text.NoteCitation(text="1"))
    body = text.NoteBody()
    body.addElement(text.P(text="The footnote text"))
    note.addElement(body)
    paragraph.addElement(note)
    paragraph.addText(" and more words.")
    document.text.addElement(paragraph)
    document.text.addElement(text.H(outlinelevel=2, text="ส่วนที่สอง"))
    document.text.addElement(text.P(text=THAI))
    items = text.List()
    for value in ("alpha item", "beta item"):
        item = text.ListItem()
        item.addElement(text.P(text=value))
        items.addElement(item)
    document.text.addElement(items)
    grid = table.Table(name="T1")
    grid.addElement(table.TableColumn(numbercolumnsrepeated=2))
    for row_values in (("Key", "Value"), ("спутник", "1957")):
        row = table.TableRow()
        for value in row_values:
            cell = table.TableCell()
            cell.addElement(text.P(text=value))
            row.addElement(cell)
        grid.addElement(row)
    document.text.addElement(grid)
    document.text.addElement(text.P(text="Spaces:" + " "))
    spaced = text.P(text="a")
    spaced.addElement(text.S(c=3))
    spaced.addText("b")
    document.text.addElement(spaced)
    document.save(str(path))
    return path


def make_ods(path: Path) -> Path:
    """A sheet with LibreOffice-style padding: 16,384 repeated empty cells, 1M empty rows."""
    from odf import table, text
    from odf.opendocument import OpenDocumentSpreadsheet

    document = OpenDocumentSpreadsheet()

    def row_of(values: Sequence[str | None], repeat_rows: int = 1) -> object:
        row = (
            table.TableRow(numberrowsrepeated=repeat_rows) if repeat_rows > 1 else table.TableRow()
        )
        for value in values:
            cell = table.TableCell()
            if value is not None:
                cell.addElement(text.P(text=value))
            row.addElement(cell)
        row.addElement(table.TableCell(numbercolumnsrepeated=16384 - len(values)))
        return row

    sheet = table.Table(name="Продажи")
    sheet.addElement(row_of([None, None]))
    sheet.addElement(row_of([None, "Region", "Total"]))
    sheet.addElement(row_of([None, "North", "100"]))
    sheet.addElement(row_of([None, "ภาคใต้", "200"], repeat_rows=3))
    sheet.addElement(row_of([], repeat_rows=1_048_000))
    document.spreadsheet.addElement(sheet)
    second = table.Table(name="Notes")
    second.addElement(row_of(["just a header"]))
    document.spreadsheet.addElement(second)
    document.save(str(path))
    return path


def make_odp(path: Path) -> Path:
    from odf import draw, presentation, style, text
    from odf.namespaces import PRESENTATIONNS as PRESENTATION_NS
    from odf.opendocument import OpenDocumentPresentation

    document = OpenDocumentPresentation()
    layout = style.PageLayout(name="PM1")
    document.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)

    def frame(cls: str, y: str, lines: Sequence[str]) -> object:
        shape = draw.Frame(width="20cm", height="3cm", x="2cm", y=y)
        if cls:
            shape.setAttrNS(PRESENTATION_NS, "class", cls)
        box = draw.TextBox()
        for line in lines:
            box.addElement(text.P(text=line))
        shape.addElement(box)
        return shape

    for number, (title, body, notes) in enumerate(
        [
            ("Первый слайд", ["Body of slide one"], "Notes for one"),
            ("สไลด์ที่สอง", ["Second body line A", "Second body line B"], ""),
        ],
        start=1,
    ):
        page = draw.Page(name=f"page{number}", masterpagename=master)
        page.addElement(frame("", "12cm", ["Bottom text"]))
        page.addElement(frame("title", "1cm", [title]))
        page.addElement(frame("outline", "5cm", body))
        if notes:
            note = presentation.Notes()
            note.addElement(frame("notes", "15cm", [notes]))
            page.addElement(note)
        document.presentation.addElement(page)
    document.save(str(path))
    return path


# -- EPUB and notebooks --------------------------------------------------------------------------


EPUB_CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" '
    'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
    '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)
XHTML = "application/xhtml+xml"


def write_epub(
    path: Path, manifest: list[tuple[str, str, str]], spine: list[str], files: dict[str, str]
) -> Path:
    """An EPUB zip: `manifest` (id, href, media type; id "nav" is the navigation document),
    `spine` (ids in reading order) and `files` (name under OEBPS/ -> content)."""
    items = "".join(
        f'<item id="{i}" href="{href}" media-type="{media}"'
        + (' properties="nav"' if i == "nav" else "")
        + "/>"
        for i, href, media in manifest
    )
    itemrefs = "".join(f'<itemref idref="{i}"/>' for i in spine)
    opf = (
        '<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" '
        f'version="3.0"><metadata/><manifest>{items}</manifest><spine>{itemrefs}</spine></package>'
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/container.xml", EPUB_CONTAINER)
        archive.writestr("OEBPS/content.opf", opf)
        for name, content in files.items():
            archive.writestr(f"OEBPS/{name}", content)
    return path


def make_epub(path: Path) -> Path:
    nav = (
        '<html xmlns="http://www.w3.org/1999/xhtml"><body><nav><ol>'
        '<li><a href="text/ch1.xhtml">Chapter One</a></li>'
        '<li><a href="text/ch%202.xhtml#start">Глава вторая</a></li></ol></nav></body></html>'
    )
    chapter = (
        '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
        "<head><title>x</title></head><body><section><header><h1>{h1}</h1></header>"
        "<p>{body}</p><h2>{h2}</h2><p>{tail}</p></section></body></html>"
    )
    return write_epub(
        path,
        [
            ("nav", "nav.xhtml", XHTML),
            ("c2", "text/ch%202.xhtml", XHTML),
            ("c1", "text/ch1.xhtml", XHTML),
            ("css", "style.css", "text/css"),
        ],
        ["c1", "c2"],
        {
            "nav.xhtml": nav,
            "style.css": "p { margin: 0 }",
            "text/ch1.xhtml": chapter.format(
                h1="Opening", body="First chapter text.", h2="Details", tail="Deep."
            ),
            "text/ch 2.xhtml": chapter.format(h1="Начало", body=RUSSIAN, h2="ไทย", tail=THAI),
        },
    )


def make_ipynb(path: Path) -> Path:
    import base64
    import json

    png = base64.b64encode(b"\x89PNG" + bytes(2000)).decode()
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": ["# Analysis\n", "\n", "Intro text."],
            },
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": 1,
                "source": ["import math\n", "print(math.pi)"],
                "outputs": [
                    {
                        "output_type": "stream",
                        "name": "stdout",
                        "text": ["OUTPUT-SHOULD-NOT-APPEAR"],
                    },
                    {"output_type": "display_data", "data": {"image/png": png}, "metadata": {}},
                ],
            },
            {"cell_type": "markdown", "metadata": {}, "source": "## Results\nВыводы здесь."},
            {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": []},
        ],
    }
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


def write_image_pdf(path: Path, image: object) -> Path:
    """One US-Letter page showing a grayscale PIL image and nothing else (a real 'scan')."""
    gray = image.convert("L")  # type: ignore[attr-defined]
    width, height = gray.size
    objects: list[bytes] = [
        _stream(
            gray.tobytes(),
            b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
            b"/BitsPerComponent 8 " % (width, height),
        ),
        _stream(b"q %d 0 0 %d 0 0 cm /Im1 Do Q" % (PAGE_WIDTH, PAGE_HEIGHT)),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R "
        b"/Resources << /XObject << /Im1 3 0 R >> >> >>" % (PAGE_WIDTH, PAGE_HEIGHT),
    ]
    _write_pdf(path, objects, [5])
    return path


def render_pdf_page(path: Path, scale: float = 300 / 72) -> object:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        page = pdf[0]
        image = page.render(scale=scale, grayscale=True).to_pil()
        page.close()
        return image
    finally:
        pdf.close()


# -- damaged documents -------------------------------------------------------------------------
NOT_XML = b"this is not XML \x00\xff"


def rewrite_member(source: Path, target: Path, member: str, data: bytes) -> Path:
    """A copy of the zip `source` with `member` replaced by `data` (a damaged part)."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        assert member in zin.namelist(), f"{member} not in {source.name}"
        for info in zin.infolist():
            zout.writestr(info, data if info.filename == member else zin.read(info.filename))
    return target


def write_damaged_documents(folder: Path) -> dict[str, Path]:
    """One damaged file per way real files break, in several formats: a part that is not XML,
    XML of the wrong shape, a cut-off archive or PDF, a notebook that is not JSON."""
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / "good"
    good.mkdir(exist_ok=True)
    docx, xlsx, pptx = (
        make_docx(good / "a.docx"),
        make_xlsx(good / "a.xlsx"),
        make_pptx(good / "a.pptx"),
    )
    odt, epub = make_odt(good / "a.odt"), make_epub(good / "a.epub")
    pdf = write_text_pdf(good / "a.pdf", [["alpha page"], ["beta page"]])
    made = {
        "docx-not-xml": rewrite_member(docx, folder / "not-xml.docx", "word/document.xml", NOT_XML),
        "docx-wrong-xml": rewrite_member(
            docx, folder / "wrong-xml.docx", "word/document.xml", b"<note>not a body</note>"
        ),
        "xlsx-not-xml": rewrite_member(
            xlsx, folder / "not-xml.xlsx", "xl/worksheets/sheet1.xml", NOT_XML
        ),
        "pptx-not-xml": rewrite_member(
            pptx, folder / "not-xml.pptx", "ppt/slides/slide1.xml", NOT_XML
        ),
        "odt-not-xml": rewrite_member(odt, folder / "not-xml.odt", "content.xml", NOT_XML),
        "epub-not-xml": rewrite_member(epub, folder / "not-xml.epub", "OEBPS/content.opf", NOT_XML),
        "xlsx-cut": truncate(xlsx, folder / "cut.xlsx"),
        "pdf-cut": truncate(pdf, folder / "cut.pdf"),
    }
    (folder / "not-json.ipynb").write_text('{"cells": [', encoding="utf-8")
    made["ipynb-not-json"] = folder / "not-json.ipynb"
    shutil.rmtree(good)
    return made
