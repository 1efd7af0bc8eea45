"""Parents follow the document's units; children are small, overlapping and carry breadcrumbs."""

from __future__ import annotations

from pathlib import Path

import rag_service
import rag_sync
from helpers import chunking, thai
from helpers.blocks import BlockKind, Location, TextBlock
from helpers.chunking import (
    CHILD_MAX_TOKENS,
    PARENT_MAX_CHARS,
    breadcrumb,
    build_sections,
    estimate_tokens,
)
from rag_config import Config
from rag_db import connect

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
]


def para(text: str, heading: tuple[str, ...] = (), **loc: object) -> TextBlock:
    return TextBlock(text, Location(heading_path=heading, **loc))  # type: ignore[arg-type]


def test_units_become_separate_parents_and_long_units_are_split():
    long_text = " ".join(WORDS[i % len(WORDS)] for i in range(3000))
    blocks = [
        para("intro text", page=1),
        para(long_text, page=2),
        para("closing words", page=3),
    ]
    sections = list(build_sections(blocks))
    assert [s.location.page for s in sections][0] == 1
    assert {s.location.page for s in sections} == {1, 2, 3}
    assert all(len(s.text) <= PARENT_MAX_CHARS for s in sections)
    page2 = [s for s in sections if s.location.page == 2]
    assert len(page2) >= 4
    assert "".join(s.text for s in page2).split() == long_text.split()


def test_children_stay_within_the_token_budget_and_overlap():
    text = " ".join(f"{WORDS[i % len(WORDS)]}{i}" for i in range(600))
    section = next(build_sections([para(text, ("Guide", "Setup"))]))
    children = section.children
    assert len(children) > 3
    for child in children:
        assert estimate_tokens(child.text) <= CHILD_MAX_TOKENS
        assert child.text.startswith("Guide > Setup\n")
    first_words = children[0].text.split()
    second_words = children[1].text.split()
    assert first_words[-1] in second_words  # the window edge is repeated in the next child


def test_table_rows_are_never_split_and_every_child_repeats_the_header():
    header = "| name | amount |\n|---|---|"
    rows = [
        TextBlock(
            f"| item {i} {' '.join(WORDS)} | {i * 10} |",
            Location(sheet="Prices", cell_range=f"A{i + 2}:B{i + 2}"),
            BlockKind.TABLE_ROW,
            header,
        )
        for i in range(60)
    ]
    sections = list(build_sections(rows))
    assert sections[0].location.cell_range == "A2:" + sections[0].location.cell_range.split(":")[1]
    for section in sections:
        assert section.text.startswith(header)
        for child in section.children:
            assert header in child.text
            for line in child.text.splitlines():
                if line.startswith("| item"):
                    assert line.endswith("|")  # whole rows only


def test_thai_text_without_spaces_is_cut_at_word_boundaries():
    thai_text = "ระบบค้นหาเอกสารภาษาไทยทำงานได้ดีมากสำหรับผู้ใช้งานทุกคน" * 20
    section = next(build_sections([para(thai_text)]))
    assert len(section.children) > 1
    for child in section.children:
        assert estimate_tokens(child.text) <= CHILD_MAX_TOKENS
    words = set(thai.segment(thai_text))
    for child in section.children:
        assert thai.segment(child.text)[-1] in words  # cut after a whole word, not mid-word


def test_long_breadcrumbs_are_elided_from_the_middle():
    path = tuple(f"Heading level {i} with several words" for i in range(12))
    crumb = breadcrumb(path, CHILD_MAX_TOKENS)
    assert crumb.startswith("Heading level 0") and crumb.endswith(
        "Heading level 11 with several words"
    )
    assert "…" in crumb
    assert estimate_tokens(crumb) <= CHILD_MAX_TOKENS / 3


def test_a_new_chunking_scheme_marks_documents_stale_and_the_next_sync_re_extracts(
    config: Config, knowledge: Path, monkeypatch
):
    (knowledge / "a.md").write_text("# A\n\nalpha beta\n", encoding="utf-8")
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    conn = connect(config.db_path)
    conn.execute("UPDATE documents SET chunk_scheme = chunk_scheme - 1")
    conn.close()
    report = rag_service.health(config)
    assert report["stale_documents"] == 1
    assert any("older chunking scheme" in w for w in report["warnings"])
    assert rag_service.list_documents(config, status="stale")["total"] == 1
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert view.counts["updated"] == 1
    assert rag_service.health(config)["stale_documents"] == 0
    assert rag_sync.CHUNK_SCHEME == chunking.CHUNK_SCHEME
