"""OCR-fuzzy channel: misread words are recovered inside OCR chunks only, with bounded work.

The index is real (helpers.store.index_db + rag_sync.write_document); the OCR chunks carry typical
tesseract misreadings (rn for m, 0 for o, 1 for l, Latin letters inside Cyrillic words)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rag_search
from helpers.extract.blocks import Location
from helpers.lexical.common import SearchContext
from helpers.lexical.ocr_fuzzy import (
    bounded_levenshtein,
    channel_fuzzy,
    close_words,
    max_distance,
    skeleton,
)
from helpers.lexical.query_terms import parse_query
from helpers.safety import FileEntry
from helpers.store.index_db import open_index
from helpers.text.chunking import Child, Section
from rag_sync import DocumentContent, write_document

DOCS = {
    "scans/minutes.pdf": (
        True,
        [
            "Minutes of the rnanagement board: the 0ffice rent was approved.",
            "The board discussed the Moskva branch and the warehouse 1ease.",
        ],
    ),
    "scans/letter.pdf": (True, ["Дoговор поставки подписан в Мoскве директором."]),
    "typed/notes.md": (
        False,
        ["Typed notes: the rnanagement of typos here is not OCR and must not be fuzzed."],
    ),
    "typed/office.md": (False, ["The office plan for the new building is attached."]),
}


def _write(conn, rel: str, ocr: bool, texts: list[str]) -> None:  # type: ignore[no-untyped-def]
    children = tuple(Child(t, Location(page=i + 1), ocr) for i, t in enumerate(texts))
    sections = [Section(c.text, c.location, (c,), ocr) for c in children]
    content = DocumentContent(
        rel, sections, [], [1] if ocr else [], "tesseract" if ocr else None, False
    )
    write_document(conn, FileEntry(rel, Path("/absent") / rel, 10, 1), "0" * 64, content)


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    db = open_index(tmp_path_factory.mktemp("fuzzy") / "index.sqlite3")
    for rel, (ocr, texts) in DOCS.items():
        _write(db, rel, ocr, texts)
    yield db
    db.close()


def _paths(conn, query: str, channels: tuple[str, ...] | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    result = rag_search.search(conn, query, rag_search.SearchOptions(top_k=10, channels=channels))
    return list(dict.fromkeys(h.path for h in result.hits))


def test_ocr_skeleton_maps_common_confusions_to_one_form() -> None:
    assert skeleton("rnanagement") == skeleton("management")
    assert skeleton("0ffice") == skeleton("office")
    assert skeleton("1ease") == skeleton("lease")
    assert skeleton("мoскве") == skeleton("москве")  # Latin o inside a Cyrillic word


def test_bounded_levenshtein_stops_at_the_limit() -> None:
    assert bounded_levenshtein("kitten", "sitting", 3) == 3
    assert bounded_levenshtein("kitten", "sitting", 1) == 2  # limit + 1: gave up early
    assert bounded_levenshtein("abc", "abcdef", 2) == 3
    assert (
        max_distance("cat") == 0 and max_distance("lease") == 1 and max_distance("warehouse") == 2
    )


def test_misread_words_in_ocr_chunks_are_found_by_the_fuzzy_channel(conn) -> None:  # type: ignore[no-untyped-def]
    result = rag_search.search(conn, "management office", rag_search.SearchOptions(top_k=10))
    fuzzy_hits = [h for h in result.hits if "fuzzy" in h.channels]
    assert fuzzy_hits and fuzzy_hits[0].path == "scans/minutes.pdf"
    assert all(h.ocr for h in fuzzy_hits)
    assert _paths(conn, "warehouse lease", ("fuzzy",)) == ["scans/minutes.pdf"]
    assert _paths(conn, "договор москве", ("fuzzy",)) == ["scans/letter.pdf"]


def test_typed_text_with_the_same_misspelling_is_never_fuzzed(conn) -> None:  # type: ignore[no-untyped-def]
    assert "typed/notes.md" not in _paths(conn, "management", ("fuzzy",))
    assert "typed/office.md" in _paths(conn, "office")  # exact matches still come from words


def test_without_the_fuzzy_channel_the_misread_scan_is_missed(conn) -> None:  # type: ignore[no-untyped-def]
    others = tuple(c for c in rag_search.LEXICAL_CHANNELS if c != "fuzzy")
    assert "scans/minutes.pdf" not in _paths(conn, "lease", others)
    assert _paths(conn, "lease") == ["scans/minutes.pdf"]


def test_fuzzy_work_is_capped_per_query(conn) -> None:  # type: ignore[no-untyped-def]
    texts = [" ".join(f"w{i:04d}abcde" for i in range(j, j + 400)) for j in range(0, 4000, 400)]
    budget = [50]
    found = close_words("w0000abcdf", texts, budget)
    assert budget[0] <= 0  # stopped by the budget, not by running out of words
    assert len(found) <= 50
    long_query = " ".join(["rnisread", "warehovse", "0ffices", "managernent"] * 8)
    ctx = SearchContext(conn, parse_query(long_query), rag_search.Filters())
    assert channel_fuzzy(ctx).ranked  # still answers, within the same caps


def test_an_index_without_ocr_chunks_skips_the_fuzzy_channel(tmp_path: Path) -> None:
    db = open_index(tmp_path / "index.sqlite3")
    _write(db, "typed.md", False, ["rnanagement of 0ffice plans"])
    ctx = SearchContext(db, parse_query("management office"), rag_search.Filters())
    assert channel_fuzzy(ctx).ranked == []
    db.close()
