"""PDF structure: outline sections and printed page labels in locations, running lines per run.

The PDFs are written byte by byte here (catalog with /Outlines and /PageLabels), and one comes
from LibreOffice (DOCX headings become PDF bookmarks), so the outline is a real one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.extract.blocks import ExtractContext, Location, TextBlock
from helpers.extract.registry import extractor_for
from helpers.text.chunking import build_sections
from tests.format_fixtures import (
    PAGE_HEIGHT,
    PAGE_WIDTH,
    SOFFICE,
    _pdf_escape,
    _stream,
    soffice_convert,
)

REPO_DIR = Path(__file__).resolve().parents[1]


def extract(path: Path) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ExtractContext()))


def write_structured_pdf(
    path: Path,
    pages: list[list[str]],
    bookmarks: list[tuple[str, int, list[tuple[str, int]]]] = (),
    labels: bytes = b"",
    cycle: bool = False,
) -> Path:
    """Pages of text lines; `bookmarks` = [(title, page, [(child title, page)])] (0-based pages);
    `labels` = the /Nums array body of /PageLabels (empty: none); `cycle` points the last
    top-level bookmark's /Next back at the first (a damaged or hostile outline)."""
    objects: dict[int, bytes] = {
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    }
    next_id = 4
    page_ids: list[int] = []
    for lines in pages:
        ops = [b"BT /F1 11 Tf 14 TL 72 740 Td"] + [
            b"(" + _pdf_escape(line) + b") Tj T*" for line in lines
        ]
        objects[next_id] = _stream(b"\n".join([*ops, b"ET"]))
        objects[next_id + 1] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (PAGE_WIDTH, PAGE_HEIGHT, next_id)
        )
        page_ids.append(next_id + 1)
        next_id += 2
    catalog = b"<< /Type /Catalog /Pages 2 0 R"
    if bookmarks:
        root = next_id
        next_id += 1

        def items(entries: list, parent: int) -> list[int]:
            nonlocal next_id
            ids = list(range(next_id, next_id + len(entries)))
            next_id += len(entries)
            for i, (entry, oid) in enumerate(zip(entries, ids, strict=True)):
                title, page = entry[0], entry[1]
                body = b"<< /Title (%s) /Parent %d 0 R /Dest [%d 0 R /XYZ 0 %d 0]" % (
                    _pdf_escape(title),
                    parent,
                    page_ids[page],
                    PAGE_HEIGHT,
                )
                if i > 0:
                    body += b" /Prev %d 0 R" % ids[i - 1]
                if i + 1 < len(ids):
                    body += b" /Next %d 0 R" % ids[i + 1]
                elif cycle and parent == root and len(ids) > 1:
                    body += b" /Next %d 0 R" % ids[0]
                children = entry[2] if len(entry) > 2 else []
                if children:
                    kids = items(children, oid)
                    body += b" /First %d 0 R /Last %d 0 R /Count %d" % (
                        kids[0],
                        kids[-1],
                        len(kids),
                    )
                objects[oid] = body + b" >>"
            return ids

        top = items(list(bookmarks), root)
        objects[root] = b"<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count %d >>" % (
            top[0],
            top[-1],
            len(top),
        )
        catalog += b" /Outlines %d 0 R" % root
    if labels:
        catalog += b" /PageLabels << /Nums [" + labels + b"] >>"
    objects[1] = catalog + b" >>"
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_ids))
    with path.open("wb") as out:
        out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        offsets: dict[int, int] = {}
        for number in sorted(objects):
            offsets[number] = out.tell()
            out.write(b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n")
        xref = out.tell()
        size = max(objects) + 1
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % size)
        for number in range(1, size):
            out.write(b"%010d 00000 n \n" % offsets[number])
        out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref))
    return path


WORDS = ["valves", "gears", "springs", "levers", "pulleys", "axles", "cams", "chains", "belts"]
WORDS += ["bearings", "shafts"]


def manual_pages() -> list[list[str]]:
    """Two front pages (i, ii), then chapters with per-chapter odd/even running headers."""
    pages = [["Copyright notice of the handbook"], ["Contents", "1 Alpha . . . 1", "2 Beta . . 4"]]
    chapters = [("1", "Alpha Widgets", 4), ("2", "Beta Gadgets", 5)]
    printed = 1
    for number, name, count in chapters:
        for k in range(count):
            # odd printed pages: "Chapter N: Name <page>"; even ones: "<page> The Handbook"
            head = f"Chapter {number}: {name} {printed}" if printed % 2 else f"{printed} Handbook"
            body = [f"{number} {name}"] if k == 0 else []
            if number == "1" and k == 2:
                body += ["text before the subsection marker mid3", "1.1 Alpha Details"]
            body += [f"Body text on {WORDS[printed]} marker q{printed}x, then {WORDS[-printed]}."]
            pages.append([head, *body])
            printed += 1
    return pages


BOOKMARKS = [
    ("1 Alpha Widgets", 2, [("Alpha Details", 4), ("Alpha Unprinted Appendix", 5)]),
    ("2 Beta Gadgets", 6, []),
]
LABELS = b"0 << /S /r >> 2 << /S /D >>"


def by_marker(blocks: list[TextBlock], marker: str) -> TextBlock:
    found = [b for b in blocks if marker in b.text]
    assert len(found) == 1, (marker, [b.text for b in blocks])
    return found[0]


def test_outline_sections_and_printed_labels_reach_every_location_and_label(tmp_path: Path):
    path = write_structured_pdf(tmp_path / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    blocks = extract(path)
    first = by_marker(blocks, "q1x")
    assert first.location.page == 3 and first.location.page_label == "1"
    assert first.location.section_path == ("1 Alpha Widgets",)
    assert first.location.label() == "p. 3 (printed 1), 1 Alpha Widgets"
    # a page inside the chapter with no bookmark of its own carries the chapter
    assert by_marker(blocks, "q2x").location.section_path == ("1 Alpha Widgets",)
    # front matter: roman labels, before any bookmark: no section
    front = by_marker(blocks, "Copyright notice")
    assert front.location.label() == "p. 1 (printed i)"
    assert front.location.section_path == ()
    beta = by_marker(blocks, "q5x")
    assert beta.location.section_path == ("2 Beta Gadgets",)
    assert Location.from_dict(json.loads(json.dumps(beta.location.to_dict()))) == beta.location


def test_a_page_is_cut_where_a_section_heading_is_printed(tmp_path: Path):
    path = write_structured_pdf(tmp_path / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    blocks = extract(path)
    before = by_marker(blocks, "mid3")
    after = by_marker(blocks, "1.1 Alpha Details")
    assert before.location.page == after.location.page == 5
    assert before.location.section_path == ("1 Alpha Widgets",)
    assert after.location.section_path == ("1 Alpha Widgets", "Alpha Details")
    assert after.text.startswith("1.1 Alpha Details")
    sections = list(build_sections(blocks))
    on_page = [s for s in sections if s.location.page == 5]
    assert [s.location.section_path[-1] for s in on_page] == ["1 Alpha Widgets", "Alpha Details"]


def test_a_bookmark_title_is_indexed_once_on_its_start_page_not_on_every_page(tmp_path: Path):
    path = write_structured_pdf(tmp_path / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    blocks = extract(path)
    # "Alpha Unprinted Appendix" is not printed anywhere: it heads the children of page 6 only
    q4 = by_marker(blocks, "q4x")
    assert q4.location.section_path[-1] == "Alpha Unprinted Appendix"
    assert q4.location.label() == "p. 6 (printed 4), 1 Alpha Widgets > Alpha Unprinted Appendix"
    children = [c for s in build_sections(blocks) for c in s.children]
    assert {c.location.page for c in children if "Alpha Unprinted Appendix" in c.text} == {6}
    # the chapter title heads its start page only, not the later pages of the chapter
    assert {c.location.page for c in children if "Alpha Widgets" in c.text} == {3}


def test_per_chapter_and_odd_even_running_headers_with_page_numbers_are_removed(tmp_path: Path):
    path = write_structured_pdf(tmp_path / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    text = "\n".join(b.text for b in extract(path))
    # "Chapter 1: Alpha Widgets 1/3" sit on 2 of 12 pages, far below the whole-file share
    assert "Chapter 1:" not in text and "Chapter 2:" not in text
    assert "Handbook" not in text.replace("handbook", "")
    for printed in range(1, 10):
        assert f"q{printed}x" in text  # the body of every page survives


def test_a_pdf_without_outline_or_labels_keeps_plain_page_locations(tmp_path: Path):
    path = write_structured_pdf(tmp_path / "plain.pdf", manual_pages())
    blocks = extract(path)
    assert all(b.location.section_path == () and b.location.page_label is None for b in blocks)
    assert by_marker(blocks, "q1x").location.label() == "p. 3"
    assert "Chapter 1:" not in "\n".join(b.text for b in blocks)


def test_lines_repeated_on_two_nearby_pages_only_are_kept(tmp_path: Path):
    pages = [[f"Unique opening line {n}", f"body {n}"] for n in range(12)]
    pages[3][0] = pages[5][0] = "Warning: isolate the mains first"
    text = "\n".join(b.text for b in extract(write_structured_pdf(tmp_path / "w.pdf", pages)))
    assert text.count("Warning: isolate the mains first") == 2


@pytest.mark.skipif(SOFFICE is None, reason="LibreOffice is not installed")
def test_libreoffice_headings_become_sections_of_the_hits(tmp_path: Path):
    import docx

    document = docx.Document()
    document.add_heading("Installing the pump", level=1)
    document.add_paragraph("Bolt the pump frame to the floor plate with four anchors.")
    document.add_heading("Priming", level=2)
    document.add_paragraph("Fill the casing with water before the first start quokka.")
    document.save(tmp_path / "guide.docx")
    pdf = soffice_convert(tmp_path / "guide.docx", "pdf", tmp_path / "out")
    blocks = extract(pdf)
    priming = by_marker(blocks, "quokka")
    assert priming.location.section_path == ("Installing the pump", "Priming")
    assert priming.location.label() == "p. 1, Installing the pump > Priming"


def test_search_hits_cite_the_outline_section_and_printed_page(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    write_structured_pdf(docs / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    base = [sys.executable, str(REPO_DIR / "rag_server.py"), "--knowledge-dir", str(docs)]
    base += ["--data-dir", str(tmp_path / "state"), "--semantic", "off"]
    subprocess.run([*base, "sync"], check=True, capture_output=True, cwd=REPO_DIR)
    out = subprocess.run(
        [*base, "search", "q5x", "--json"], check=True, capture_output=True, text=True
    )
    hit = json.loads(out.stdout)["hits"][0]
    assert hit["location_label"] == "p. 7 (printed 5), 2 Beta Gadgets"
    assert hit["location"]["section_path"] == ["2 Beta Gadgets"]


def test_a_cyclic_outline_is_read_once_and_the_text_is_all_there(tmp_path: Path):
    path = write_structured_pdf(tmp_path / "c.pdf", manual_pages(), BOOKMARKS, LABELS, cycle=True)
    blocks = extract(path)
    assert by_marker(blocks, "q1x").location.section_path == ("1 Alpha Widgets",)
    assert by_marker(blocks, "q5x").location.section_path == ("2 Beta Gadgets",)
    assert all(f"q{n}x" in "\n".join(b.text for b in blocks) for n in range(1, 10))


def test_rag_read_finds_a_pdf_section_by_its_outline_heading(tmp_path: Path):
    import rag_service
    from tests.conftest import make_config

    docs = tmp_path / "docs"
    docs.mkdir()
    write_structured_pdf(docs / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    config = make_config(docs, tmp_path / "state")
    view = rag_service.start_sync(config)
    assert rag_service.wait_for_job(config, view.job_id, lambda v: None).state == "succeeded"
    read = rag_service.read_document(
        config, "m.pdf", location={"heading": "Beta Gadgets"}, before=0, after=0
    )
    first = read["sections"][0]
    assert first["location"]["page"] == 7 and "q5x" in first["text"]
    # a later page of the section has no heading of its own: its outline section matches
    later = rag_service.read_document(
        config, "m.pdf", location={"heading": "Beta Gadgets", "page": 8}, before=0, after=0
    )
    assert [s["location"]["page"] for s in later["sections"]] == [8]
    assert "q6x" in later["sections"][0]["text"]
