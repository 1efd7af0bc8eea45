"""DOCTYPE internal subsets in HTML and EPUB: no "]>" or entity text in the extracted text, and
entities are never expanded, so an external entity cannot pull a file outside the knowledge dir
into the index (XXE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from format_fixtures import XHTML, write_epub

import rag_service
from helpers.config import Config
from helpers.extract.blocks import ExtractContext, TextBlock
from helpers.extract.html_page import MAX_INTERNAL_SUBSET_CHARS, extract_html_chunks
from helpers.extract.registry import extractor_for

OUTSIDE_SECRET = "quokka-outside-7731"  # only in a file outside the knowledge dir


def extract(path: Path) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ExtractContext()))


def texts(blocks: list[TextBlock]) -> list[str]:
    return [b.text for b in blocks]


@pytest.fixture
def outside_file(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(f"{OUTSIDE_SECRET}\n", encoding="utf-8")
    return path


def subset_page(outside: Path) -> str:
    return (
        "<!DOCTYPE html [\n"
        '  <!ENTITY company "Acme > Widgets">\n'
        "  <!-- a comment with ]> inside -->\n"
        f'  <!ENTITY xxe SYSTEM "{outside.as_uri()}">\n'
        "]>\n"
        "<html><head><title>Quarterly report</title></head><body>\n"
        "<h1>Summary</h1><p>Revenue grew &xxe; for &company; this quarter &amp; beyond.</p>\n"
        "</body></html>\n"
    )


def test_an_internal_subset_leaves_no_markup_or_entity_text_in_html(outside_file: Path):
    blocks = list(extract_html_chunks([subset_page(outside_file)]))
    assert texts(blocks) == [
        "Quarterly report",
        "Summary",
        "Revenue grew for this quarter & beyond.",
    ]
    joined = " ".join(texts(blocks))
    for leaked in ("]>", "ENTITY", "Widgets", "&xxe;", OUTSIDE_SECRET):
        assert leaked not in joined


def test_the_subset_is_skipped_wherever_the_text_is_cut_into_chunks(outside_file: Path):
    page = subset_page(outside_file)
    whole = texts(list(extract_html_chunks([page])))
    for cut in range(1, 200):
        assert texts(list(extract_html_chunks([page[:cut], page[cut:]]))) == whole, cut


def test_doctypes_without_a_subset_and_broken_subsets_keep_the_page_text():
    public = '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0//EN" "x.dtd"><p>public doctype</p>'
    assert texts(list(extract_html_chunks([public]))) == ["public doctype"]
    never_closed = "<!DOCTYPE html [><p>text after a stray bracket</p>"
    assert texts(list(extract_html_chunks([never_closed]))) == ["text after a stray bracket"]
    cut_off = '<!DOCTYPE html [ <!ENTITY x "no end'
    assert texts(list(extract_html_chunks([cut_off]))) == []
    runaway = "<!DOCTYPE x [" + "a" * (MAX_INTERNAL_SUBSET_CHARS + 10) + "<p>body</p>"
    assert texts(list(extract_html_chunks([runaway[:5000], runaway[5000:]]))) == ["body"]


def make_epub_with_entities(path: Path, outside: Path) -> Path:
    """A small EPUB whose chapter and nav declare an internal and an external entity."""
    doctype = (
        f'<!DOCTYPE html [ <!ENTITY xxe SYSTEM "{outside.as_uri()}"> '
        '<!ENTITY author "Anna > Boris"> ]>'
    )
    nav = (
        f'<?xml version="1.0" encoding="utf-8"?>{doctype}'
        '<html xmlns="http://www.w3.org/1999/xhtml"><body><nav><ol>'
        '<li><a href="ch1.xhtml">Chapter &xxe;One</a></li></ol></nav></body></html>'
    )
    chapter = (
        f'<?xml version="1.0" encoding="utf-8"?>{doctype}'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>x</title></head><body>'
        "<h1>Opening</h1><p>Written by &author; with &xxe; notes.</p></body></html>"
    )
    return write_epub(
        path,
        [("nav", "nav.xhtml", XHTML), ("c1", "ch1.xhtml", XHTML)],
        ["c1"],
        {"nav.xhtml": nav, "ch1.xhtml": chapter},
    )


def test_epub_chapters_and_titles_never_expand_an_external_entity(
    tmp_path: Path, outside_file: Path
):
    blocks = extract(make_epub_with_entities(tmp_path / "book.epub", outside_file))
    assert [(b.text, b.location.heading_path) for b in blocks] == [
        ("Opening", ("Chapter One", "Opening")),
        ("Written by with notes.", ("Chapter One", "Opening")),
    ]
    shown = " ".join(t for b in blocks for t in (b.text, *b.location.heading_path))
    for leaked in ("]>", "ENTITY", "Boris", "&", OUTSIDE_SECRET):
        assert leaked not in shown


def test_an_indexed_html_file_with_an_external_entity_never_makes_the_outside_file_searchable(
    config: Config, knowledge: Path, outside_file: Path
):
    (knowledge / "report.html").write_text(subset_page(outside_file), encoding="utf-8")
    make_epub_with_entities(knowledge / "book.epub", outside_file)
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert view.state == "succeeded" and view.counts["added"] == 2
    assert rag_service.search(config, OUTSIDE_SECRET, mode="lexical").hits == []
    assert rag_service.search(config, "Revenue grew", mode="lexical").hits
    for path in ("report.html", "book.epub"):
        read = rag_service.read_document(config, path)
        assert OUTSIDE_SECRET not in str(read) and "]>" not in str(read)
