"""Answers sized for an agent (helpers.ranking.answer_budget, helpers.ranking.confidence, citations)
on real synced indexes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_config, server_args, synced_folder
from format_fixtures import RUSSIAN, THAI, make_docx, make_pptx, make_xlsx, write_text_pdf
from web_fixtures import sync_now

import rag_service
from helpers.config import Config
from helpers.errors import InvalidArgument
from helpers.ranking.answer_budget import CUT_MARK, json_len
from helpers.results import HIT, SEARCH, SearchResult

WORDS = [
    "ledger",
    "audit",
    "invoice",
    "quarter",
    "revenue",
    "forecast",
    "margin",
    "supplier",
    "contract",
    "clause",
]


def _long_section(seed: int, term: str, sentences: int = 40) -> str:
    """About 3,500 characters of sentences, `term` in a few of them."""
    out = []
    for i in range(sentences):
        words = [WORDS[(seed + i * 3 + j) % len(WORDS)] for j in range(9)]
        if i % 13 == 5:
            words.insert(4, term)
        out.append(" ".join(words).capitalize() + f" {seed * 100 + i}.")
    return " ".join(out)


def _unmarked(window: str) -> str:
    return window.removeprefix(CUT_MARK + " ").removesuffix(" " + CUT_MARK)


def _check_windows(config: Config, result: SearchResult) -> None:
    """Every shown window is a piece of its section, cut only where a cut mark says so."""
    by_id = {h.section_id: h for h in result.hits}
    for sid, window in result.sections.items():
        whole = rag_service.read_document(
            config, by_id[sid].path, section_id=sid, before=0, after=0
        )
        text = whole["sections"][0]["text"]
        piece = _unmarked(window)
        assert piece.strip() and piece.strip() in text
        cut = window != text
        assert cut == (sid in result.omitted.cut_sections)
        if cut:
            assert window.startswith(CUT_MARK) or window.endswith(CUT_MARK)
        window.encode("utf-8")  # no lone surrogate
        assert window.count("**") % 2 == 0


def test_budget_holds_for_long_sections_and_many_hits(tmp_path: Path) -> None:
    files = {f"notes/n{i:02d}.md": _long_section(i, "zephyr") + "\n" for i in range(40)}
    config = synced_folder(tmp_path, files)
    full = rag_service.search(config, "zephyr ledger", top_k=40, mode="lexical")
    assert len(full.hits) == 40 and json_len(full.to_dict()) > 60_000
    for max_chars in (1_000, 2_500, 8_000, 20_000, 60_000):
        for detail in ("compact", "full"):
            if detail == "full" and max_chars < 2_500:
                continue  # abs_path, channels and sources of one hit alone take ~1,100
            result = rag_service.search(
                config,
                "zephyr ledger",
                top_k=40,
                mode="lexical",
                max_chars=max_chars,
                detail=detail,
            )
            body = result.to_dict()
            assert json_len(body) <= max_chars, (max_chars, detail)
            assert body["truncated"] is True
            assert "rag_read(path, section_id)" in body["more"]
            _check_windows(config, result)
            ranks = [h.section_id for h in result.hits]
            shown = [sid for sid in ranks if sid in result.sections]
            assert shown == ranks[: len(shown)], "best-ranked hits get their window first"
            assert set(body) == set(SEARCH.keys(detail))
    small = rag_service.search(config, "zephyr", top_k=40, mode="lexical", max_chars=1_000)
    assert small.omitted.hits > 0 and str(small.omitted.hits) in (small.more or "")


def test_window_holds_the_matched_child_and_whole_sentences(tmp_path: Path) -> None:
    text = _long_section(3, "ledger") + " The quokka clause settles every dispute in Perth. "
    config = synced_folder(tmp_path, {"a.md": text + _long_section(5, "ledger") + "\n"})
    result = rag_service.search(config, "quokka", mode="lexical", max_chars=2_000)
    window = result.sections[result.hits[0].section_id]
    assert "The quokka clause settles every dispute in Perth." in window
    assert window.startswith(CUT_MARK + " ") and window.endswith(" " + CUT_MARK)
    inner = _unmarked(window)
    assert inner[0].isupper() and inner.rstrip()[-1] == "."  # whole sentences
    assert json_len(result.to_dict()) <= 2_000


def test_budget_with_thai_russian_and_tables(tmp_path: Path) -> None:
    thai = "\n".join(f"{THAI} ข้อที่ {i} การประชุมประจำปี ผู้ถือหุ้น" for i in range(80))
    russian = " ".join(f"{RUSSIAN} Пункт {i}: годовой отчёт акционеров." for i in range(60))
    rows = "\n".join(f"row{i},Москва,{i * 3},ประชุม,annual report line {i}" for i in range(300))
    config = synced_folder(
        tmp_path,
        {
            "th.txt": thai + "\n",
            "ru.md": russian + "\n",
            "table.csv": "id,city,amount,thai,note\n" + rows + "\n",
        },
    )
    make_xlsx(config.knowledge_dir / "prices.xlsx", rows=400)
    sync_now(config)
    for query in ("ผู้ถือหุ้น", "годовой отчёт", "annual report", "Москва", "Extra"):
        for max_chars in (1_000, 3_000, 8_000):
            result = rag_service.search(
                config, query, top_k=20, mode="lexical", max_chars=max_chars, detail="compact"
            )
            assert result.hits, query
            assert json_len(result.to_dict()) <= max_chars
            _check_windows(config, result)
            for window in result.sections.values():
                inner = _unmarked(window)
                assert not re.match(r"[\u0e31\u0e34-\u0e3a\u0e47-\u0e4e]", inner), "Thai mark cut"


def test_a_cut_never_splits_a_mark_or_a_surrogate_pair(tmp_path: Path) -> None:
    parts = []
    for i in range(120):
        parts.append(f"Item {i} is **very important text {i}** and 😀𝐀 emoji 𝄞 follow")
    text = " ".join(parts)  # no sentence end: cuts fall on spaces
    config = synced_folder(tmp_path, {"marks.md": text + "\n"})
    for max_chars in range(1_000, 4_000, 137):
        result = rag_service.search(
            config, "important", mode="lexical", max_chars=max_chars, detail="compact"
        )
        assert json_len(result.to_dict()) <= max_chars
        for window in result.sections.values():
            assert window.count("**") % 2 == 0
            inner = _unmarked(window)
            assert not inner.startswith("*") or inner.startswith("**very")
            json.dumps(window).encode("ascii")  # astral characters escape as whole pairs
            window.encode("utf-8")


def test_copies_collapse_into_one_hit_with_other_paths(tmp_path: Path) -> None:
    text = "# Travel policy\n\nEconomy class for flights under six hours.\n"
    config = synced_folder(tmp_path, {"policy.md": text, "archive/policy-copy.md": text})
    full = rag_service.search(config, "economy flights", mode="lexical")
    assert sorted(h.path for h in full.hits) == ["archive/policy-copy.md", "policy.md"]
    lean = rag_service.search(config, "economy flights", mode="lexical", max_chars=8_000)
    assert len(lean.hits) == 1
    assert lean.hits[0].path == full.hits[0].path
    assert lean.hits[0].other_paths == (full.hits[1].path,)
    compact = rag_service.search(
        config, "economy flights", mode="lexical", max_chars=8_000, detail="compact"
    ).to_dict()
    assert compact["hits"][0]["other_paths"] == [full.hits[1].path]
    assert not compact["truncated"] and compact["more"] is None


def test_citations_for_every_format_with_a_location(tmp_path: Path) -> None:
    knowledge = tmp_path / "docs"
    knowledge.mkdir()
    (knowledge / "guide.md").write_text(
        "# Install\n\n## Linux\n\nRun the zanzibar installer as root.\n", encoding="utf-8"
    )
    write_text_pdf(knowledge / "q3.pdf", [["Intro page"], ["The zanzibar revenue rose."]])
    make_xlsx(knowledge / "budget.xlsx")
    make_pptx(knowledge / "deck.pptx")
    make_docx(knowledge / "report.docx")
    config = make_config(knowledge, tmp_path / "state")
    sync_now(config)
    expected = {
        ("zanzibar installer", "guide.md"): r"guide\.md, Install > Linux, lines? \d+",
        ("zanzibar revenue", "q3.pdf"): r"q3\.pdf, p\. 2$",
        ("Tea", "budget.xlsx"): r"budget\.xlsx, Prices!B\d:D\d+$",
        ("Nested bullet", "deck.pptx"): r"deck\.pptx, slide 2",
        ("Somchai", "report.docx"): r"report\.docx, .*Figures",
    }
    for (query, path), pattern in expected.items():
        result = rag_service.search(config, query, mode="lexical", max_chars=8_000)
        hit = next(h for h in result.hits if h.path == path)
        assert re.match(pattern, hit.citation), (query, hit.citation)
        assert hit.citation == f"{hit.path}, {hit.location_label}"
        for detail in ("compact", "full"):
            shown = rag_service.search(config, query, mode="lexical", detail=detail).to_dict()
            assert hit.citation in [h["citation"] for h in shown["hits"]]


def test_compact_is_a_strict_subset_of_full() -> None:
    for shape in (HIT, SEARCH):
        assert set(shape.compact) < set(shape.full)
    assert {"abs_path", "channels", "display_path"} <= set(HIT.full) - set(HIT.compact)


def test_confidence_low_when_nothing_matches_and_high_on_a_clear_hit(tmp_path: Path) -> None:
    files = {f"n{i}.md": _long_section(i, "ledger", 6) + "\n" for i in range(10)}
    files["quokka.md"] = "# Quokka\n\nThe quokka lives on Rottnest Island near Perth.\n"
    config = synced_folder(tmp_path, files)
    assert rag_service.search(config, "volcano eruption seismology", mode="lexical").confidence == (
        "low"
    )
    clear = rag_service.search(config, "quokka Rottnest Island", mode="lexical")
    assert clear.hits[0].path == "quokka.md" and clear.confidence == "high"


@pytest.mark.parametrize("bad", [0, 999, 60_001, True, "8000"])
def test_max_chars_out_of_range_is_a_plain_error(config: Config, bad: object) -> None:
    with pytest.raises(InvalidArgument, match="max_chars must be between 1000 and 60000"):
        rag_service.search(config, "x", max_chars=bad)  # type: ignore[arg-type]


def test_unknown_detail_is_a_plain_error(config: Config) -> None:
    with pytest.raises(InvalidArgument, match="unknown detail"):
        rag_service.search(config, "x", detail="tiny")


def test_cli_prints_citation_and_confidence_and_honours_max_chars(tmp_path: Path) -> None:
    files = {f"n{i:02d}.md": _long_section(i, "zephyr") + "\n" for i in range(12)}
    config = synced_folder(tmp_path, files)
    base = [
        sys.executable,
        *server_args(config),
        "search",
        "zephyr",
    ]
    run = subprocess.run(
        [*base, "--json", "--max-chars", "3000"], capture_output=True, text=True, check=True
    )
    body = json.loads(run.stdout)
    assert json_len(body) <= 3_000 and body["truncated"] is True
    text = subprocess.run(base, capture_output=True, text=True, check=True).stdout
    first = rag_service.search(config, "zephyr").hits[0]
    assert f"1. {first.citation}" in text and "confidence: " in text
