"""bench/build_pdf_eval.py on the real Debian manuals: the committed page-level set is what the
installed packages give, mechanically (index terms and bookmarks), with the outline-free copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pypdfium2 as pdfium
import pytest

REPO_DIR = Path(__file__).resolve().parents[1]
SCRIPT = REPO_DIR / "bench" / "build_pdf_eval.py"
sys.path.insert(0, str(REPO_DIR / "bench"))
import build_pdf_eval  # noqa: E402

INSTALLED = all(m.source.is_file() for m in build_pdf_eval.MANUALS)
if not INSTALLED and not os.environ.get("CI"):
    pytest.skip(
        f"the manuals are not installed: {build_pdf_eval.INSTALL_HINT}", allow_module_level=True
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pdfset")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr  # --check: identical to the committed golden file
    return out


def test_the_set_has_200_plus_queries_at_least_half_from_back_of_book_indexes(built: Path):
    golden = json.loads((built / "golden.json").read_text(encoding="utf-8"))
    groups = [q["group"] for q in golden["queries"]]
    assert len(groups) >= 200
    assert groups.count("index") >= len(groups) / 2 and groups.count("bookmark") > 0
    pages = {m["path"]: m["pages"] for m in golden["manuals"]}
    hubs = {(h["path"], h["location"]["page"]) for h in golden["hubs"]}
    assert {h["kind"] for h in golden["hubs"]} == {"contents", "index"}
    for query in golden["queries"]:
        for rel in query["relevant"]:
            assert 1 <= rel["location"]["page"] <= pages[rel["path"]]
            assert (rel["path"], rel["location"]["page"]) not in hubs or query["group"] == "index"


def test_the_outline_free_copy_has_the_same_pages_and_no_bookmarks(built: Path):
    for manual in build_pdf_eval.MANUALS:
        full = pdfium.PdfDocument(str(built / "docs" / manual.name))
        bare = pdfium.PdfDocument(str(built / "docs-nooutline" / manual.name))
        try:
            assert len(full) == len(bare)
            assert list(full.get_toc()) and not list(bare.get_toc())
            assert not (built / "docs" / manual.name).is_symlink()
        finally:
            full.close()
            bare.close()


def test_index_entries_parse_texinfo_leaders_and_makeindex_ranges():
    line = build_pdf_eval._INDEX_LINE
    m = line.match("answers, incorrect. . . . . . . . . 1079, 1081")
    assert m and m.group("term") == "answers, incorrect" and m.group("pages") == "1079, 1081"
    m = line.match("errorbars, 65–67, 70")
    assert m and m.group("term") == "errorbars"
    assert build_pdf_eval._expand(m.group("pages")) == ["65", "66", "67", "70"]
    assert line.match("Plain prose that ends the sentence.") is None
