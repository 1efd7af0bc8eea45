"""bench/build_keyword_eval.py on the installed Debian help packages, the ligature/width set and
bench/textbook_bm25.py: every query points at one page that exists, the pages carry no hidden
keyword list, two builds are identical, and the yardstick folds what it says it folds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parents[1]
SCRIPT = REPO_DIR / "bench" / "build_keyword_eval.py"
sys.path.insert(0, str(REPO_DIR / "bench"))
sys.path.insert(0, str(REPO_DIR / "bench" / "keyword_eval"))
import build_keyword_eval  # noqa: E402
import make_ligature_width  # noqa: E402
import textbook_bm25  # noqa: E402

from helpers.eval.golden import load_golden  # noqa: E402

LANG = "sv"  # any LibreOffice language the builder knows; Swedish is small and has marks
QUERIES = 60
LIBREOFFICE_INSTALLED = all(
    (build_keyword_eval.LIBREOFFICE_HELP / lang / "bookmarks.js").is_file()
    for lang in (LANG, "en-US")
)
PYTHON_INSTALLED = (build_keyword_eval.PYTHON_HTML / "genindex-all.html").is_file()


def _need(installed: bool, lang: str) -> None:
    if not installed and not os.environ.get("CI"):
        pytest.skip(f"not installed: {build_keyword_eval.install_hint(lang)}")


def _build(out: Path, lang: str, *extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--lang", lang, "--queries", str(QUERIES), *extra],
        capture_output=True,
        text=True,
        cwd=REPO_DIR,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "golden.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def libreoffice_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need(LIBREOFFICE_INSTALLED, LANG)
    out = tmp_path_factory.mktemp("lohelp")
    _build(out, LANG)
    return out


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_every_query_of_a_help_set_points_at_one_existing_page_and_is_unique(libreoffice_set):
    golden = json.loads((libreoffice_set / "golden.json").read_text(encoding="utf-8"))
    queries = golden["queries"]
    assert len(queries) == QUERIES
    assert len({q["id"] for q in queries}) == QUERIES
    assert len({q["query"].casefold() for q in queries}) == QUERIES
    assert all(len(q["relevant"]) == 1 and q["lang"] == LANG for q in queries)
    parsed = load_golden(libreoffice_set / "golden.json", libreoffice_set / "docs")
    assert len(parsed.queries) == QUERIES  # the eval's own parser: every relevant file exists


def test_help_pages_lose_their_hidden_keyword_list_and_chrome_but_keep_their_text(
    libreoffice_set,
):
    pages = sorted((libreoffice_set / "docs").rglob("*.html"))
    assert len(pages) > 1000
    sources = list((build_keyword_eval.LIBREOFFICE_HELP / LANG / "text").rglob("*.html"))
    assert len(pages) == len(sources)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert 'itemprop="keywords"' not in text and 'id="Bookmarks"' not in text
    golden = json.loads((libreoffice_set / "golden.json").read_text(encoding="utf-8"))
    first = libreoffice_set / "docs" / golden["queries"][0]["relevant"][0]
    assert "<h1" in first.read_text(encoding="utf-8")


def test_no_query_is_an_untranslated_english_index_entry_of_its_page(libreoffice_set):
    english = {
        (page, build_keyword_eval.query_text(text).casefold())
        for page, text in build_keyword_eval.read_bookmarks(
            build_keyword_eval.LIBREOFFICE_HELP / "en-US"
        )
    }
    golden = json.loads((libreoffice_set / "golden.json").read_text(encoding="utf-8"))
    assert len(english) > 1000
    for query in golden["queries"]:
        assert (query["relevant"][0], query["query"].casefold()) not in english


def test_two_builds_of_a_help_set_are_byte_identical(libreoffice_set, tmp_path):
    _build(tmp_path, LANG)
    assert _tree(tmp_path) == _tree(libreoffice_set)


def test_the_accent_free_variant_has_the_same_queries_with_marks_stripped(
    libreoffice_set, tmp_path
):
    stripped = _build(tmp_path, LANG, "--strip-marks")
    original = json.loads((libreoffice_set / "golden.json").read_text(encoding="utf-8"))
    assert [q["id"] for q in stripped["queries"]] == [q["id"] for q in original["queries"]]
    assert stripped["name"].endswith("-nomarks")
    changed = 0
    for plain, marked in zip(stripped["queries"], original["queries"], strict=True):
        assert plain["relevant"] == marked["relevant"]
        assert not any(
            unicodedata.combining(c) for c in unicodedata.normalize("NFD", plain["query"])
        )
        assert plain["query"] == build_keyword_eval.strip_marks(marked["query"])
        changed += plain["query"] != marked["query"]
    assert changed > 0  # Swedish index terms carry å, ä, ö


def test_the_python_index_set_points_at_content_pages_only(tmp_path):
    _need(PYTHON_INSTALLED, build_keyword_eval.PYINDEX)
    golden = _build(tmp_path, build_keyword_eval.PYINDEX)
    parsed = load_golden(tmp_path / "golden.json", tmp_path / "docs")
    assert len(parsed.queries) == QUERIES
    names = {p.name for p in (tmp_path / "docs").rglob("*.html")}
    assert not any(n.startswith("genindex") for n in names) and "search.html" not in names
    assert all("(" not in q["query"] for q in golden["queries"])


def test_the_committed_ligature_width_set_is_what_its_generator_writes(tmp_path):
    make_ligature_width.build(tmp_path)
    assert _tree(tmp_path) == _tree(make_ligature_width.HERE)


def test_ligature_width_targets_hold_the_query_words_only_in_compatibility_forms():
    golden = json.loads((make_ligature_width.HERE / "golden.json").read_text(encoding="utf-8"))
    assert 20 <= len(golden["queries"]) <= 40
    assert {q["group"] for q in golden["queries"]} == {"ligature", "fullwidth", "halfwidth-kana"}
    for query in golden["queries"]:
        target = (make_ligature_width.HERE / "docs" / query["relevant"][0]).read_text("utf-8")
        folded = unicodedata.normalize("NFKC", target).casefold()
        for word in query["query"].casefold().split():
            assert word in folded
        # lower(), not casefold(): full case folding already maps U+FB01 to "fi"
        assert any(word not in target.lower() for word in query["query"].lower().split())


def test_textbook_bm25_folds_compatibility_forms_and_finds_every_ligature_width_target():
    golden = json.loads((make_ligature_width.HERE / "golden.json").read_text(encoding="utf-8"))
    docs = {
        p.name: p.read_text(encoding="utf-8") for p in (make_ligature_width.HERE / "docs").iterdir()
    }
    report = textbook_bm25.evaluate(golden, docs, "en")
    assert report["queries"] == len(golden["queries"])
    assert report["recall@1"] == 1.0


def test_textbook_bm25_stems_folds_marks_and_splits_scripts_without_spaces():
    czech = textbook_bm25.tokenizer("cs")
    assert czech("Příliš") and czech("PŘÍLIŠ") == czech("příliš")
    korean = textbook_bm25.tokenizer("ko")("데이터베이스")
    assert korean[:2] == ["데이", "이터"] and len(korean) == 5
    assert textbook_bm25.tokenizer("en")("ﬁles") == ["file"]
    docs = {"a.txt": "Nastavení tiskárny a papíru", "b.txt": "Tisk dokumentu do souboru PDF"}
    golden = {"queries": [{"query": "nastaveni tiskarny", "relevant": ["a.txt"], "lang": "cs"}]}
    assert textbook_bm25.evaluate(golden, docs, "cs")["mrr@10"] == 1.0
