"""Lexical channels end to end: real English, Russian and Thai files synced by the real worker,
searched through rag_service exactly as the MCP tool does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import make_config, synced_folder

import rag_search
import rag_service
from helpers.config import Config
from helpers.ranking import fusion
from helpers.ranking.constants import (
    HYBRID_LEXICAL_BASE,
    HYBRID_SHARE_BOUNDS,
    SEMANTIC_CHILD_COUNT,
)
from helpers.store import index_db

FILES = {
    "reports/sales-report-2026.txt": (
        "Отчёт о продажах за третий квартал 2026 года.\n"
        "Выручка выросла на 12 % по сравнению со вторым кварталом."
    ),
    "reports/annual_budget-Q1.csv": (
        "department,quarter,budget_usd\nEngineering,Q1,120000\nSupport,Q1,45000\n"
    ),
    "reports/yearly-overview.md": (
        "# Yearly overview\n\nThe budget grew every quarter; hiring slowed in the autumn.\n"
    ),
    "contracts/service-agreement.md": (
        "# Service Agreement\n\n## Payment terms\n\nInvoices are payable within 30 days. "
        "The payment terms of this agreement apply to every order.\n"
    ),
    "contracts/vendor-letter.md": (
        "# Vendor letter\n\nOur terms changed last year. A late payment accrues interest.\n"
    ),
    "contracts/reminder.md": "# Reminder\n\nPlease send the payment before Friday.\n",
    "notes/schema.md": (
        "# Schema notes\n\nThe data base schema keeps one table per customer and is backed up "
        "nightly.\n"
    ),
    "notes/warehouse.md": (
        "# Warehouse\n\nOur database replica lives in the second rack next to the router.\n"
    ),
    "notes/mail.md": "# Mail\n\nConfigure the e-mail relay before the migration weekend.\n",
    "dev/user-service.md": (
        "# User service\n\nCall get_user_name before rendering; parse-config reads the file.\n"
    ),
    "dev/languages.md": (
        '# Languages\n\nWe still compile the C++ core with templates. The NEAR("x" operator '
        "and foo-bar flags are documented elsewhere.\n"
    ),
    "ru/archive.md": (
        "# Архив\n\nСписок отчетов за прошлый год хранится у бухгалтерии. Ёлка стоит в холле.\n"
    ),
    "ru/other.md": "# Прочее\n\nКалендарь отпусков и график дежурств отдела поддержки.\n",
    "th/meeting.md": (
        "# บันทึกการประชุมทีมพัฒนา\n\nที่ประชุมอนุมัติงบประมาณสำหรับเซิร์ฟเวอร์ใหม่ "
        "การทดสอบกับเอกสารจริงจำนวน ๑๒๐ ไฟล์ผ่านทั้งหมด "
        "ส่งรายงานทางอีเมลถึงทุกคนในทีม\n"
    ),
    "th/rights.md": (
        "# สิทธิ\n\nบุคคลใดจะถูกยึดเป็นทาสมิได้ การค้าทาสเป็นสิ่งต้องห้าม และทุกคนมีความคิดเห็นโดยอิสระ\n"
    ),
    "th/privacy.md": "# ความเป็นส่วนตัว\n\nข้อมูลส่วนตัวของลูกค้าต้องเก็บเป็นความลับ\n",
    "th/heart.md": "# ใจดี\n\nสมชาย ใจดี เป็นเจ้าของงบประมาณฝ่ายการตลาด\n",
}


def _sync(config: Config) -> None:
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return synced_folder(tmp_path_factory.mktemp("search"), FILES)


def paths(config: Config, query: str, **kwargs: object) -> list[str]:
    hits = rag_service.search(config, query, mode="lexical", **kwargs).hits  # type: ignore[arg-type]
    return list(dict.fromkeys(h.path for h in hits))


@pytest.mark.parametrize(
    "query",
    [
        "sales-report-2026.txt",
        "SALES REPORT 2026",
        "sales_report_2026",
        "annual budget Q1",
        "annual_budget-q1.CSV",
        "service agreement",
        "what does contracts/service-agreement.md say about invoices",
    ],
)
def test_a_query_naming_a_file_puts_that_file_first(corpus: Config, query: str) -> None:
    expected = {
        "sales": "reports/sales-report-2026.txt",
        "annual": "reports/annual_budget-Q1.csv",
    }
    want = next((v for k, v in expected.items() if k in query.lower()), None)
    found = paths(corpus, query)
    assert found[0] == (want or "contracts/service-agreement.md")
    hit = rag_service.search(corpus, query, mode="lexical").hits[0]
    assert "filename" in hit.channels


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("C++", "dev/languages.md"),
        ("foo-bar", "dev/languages.md"),
        ('NEAR("x"', "dev/languages.md"),
        ('say "hello', None),  # no document has these words
        # As FTS5 syntax this would drop every document with "terms": the one holding both wins.
        ("payment AND NOT terms", "contracts/service-agreement.md"),
        ("(budget) ^ {title}: col:umn", "reports/yearly-overview.md"),
        ("*", None),
        ('"', None),
        ("-", None),
        ("'; DROP TABLE chunks; --", "notes/schema.md"),  # "table" is a word of schema.md
    ],
)
def test_fts5_syntax_in_a_query_is_searched_as_text_and_never_raises(
    corpus: Config, query: str, first: str | None
) -> None:
    found = paths(corpus, query)
    assert (found[0] if found else None) == first, found
    assert paths(corpus, "payment terms")[0] == "contracts/service-agreement.md"  # index intact


def test_symbols_and_operators_in_a_query_find_the_document_that_spells_them(
    corpus: Config,
) -> None:
    assert paths(corpus, "C++")[0] == "dev/languages.md"
    assert paths(corpus, 'NEAR("x"')[0] == "dev/languages.md"
    assert paths(corpus, "foo-bar")[0] == "dev/languages.md"


def test_exact_phrase_then_all_terms_outrank_documents_with_only_some(corpus: Config) -> None:
    found = paths(corpus, "payment terms")
    assert found[0] == "contracts/service-agreement.md"  # the exact phrase
    assert found.index("contracts/vendor-letter.md") < found.index("contracts/reminder.md")
    hit = rag_service.search(corpus, "payment terms", mode="lexical").hits[0]
    assert "exact" in hit.channels


def test_russian_inflections_case_and_yo_match_both_ways(corpus: Config) -> None:
    for query in ("отчетов о продажах", "ОТЧЁТ", "отчёта"):
        assert paths(corpus, query)[0] in ("reports/sales-report-2026.txt", "ru/archive.md")
    assert "ru/archive.md" in paths(corpus, "отчёт")
    assert "reports/sales-report-2026.txt" in paths(corpus, "отчетов")
    assert paths(corpus, "елка")[0] == "ru/archive.md"


def test_split_and_joined_english_words_find_each_other(corpus: Config) -> None:
    assert set(paths(corpus, "database")[:2]) == {"notes/schema.md", "notes/warehouse.md"}
    assert set(paths(corpus, "data base")[:2]) == {"notes/schema.md", "notes/warehouse.md"}
    assert paths(corpus, "email relay")[0] == "notes/mail.md"
    assert paths(corpus, "e-mail")[0] == "notes/mail.md"
    hit = rag_service.search(corpus, "database", mode="lexical").hits
    assert any("variants" in h.channels for h in hit if h.path == "notes/schema.md")


def test_identifiers_in_any_case_style_find_each_other(corpus: Config) -> None:
    for query in ("getUserName", "get-user-name", "GetUserName", "get_user_name"):
        assert paths(corpus, query)[0] == "dev/user-service.md", query
    assert paths(corpus, "parseConfig")[0] == "dev/user-service.md"


def test_plural_and_singular_match(corpus: Config) -> None:
    assert paths(corpus, "invoice")[0] == "contracts/service-agreement.md"
    assert paths(corpus, "replicas")[0] == "notes/warehouse.md"


def test_thai_queries_match_by_words_compounds_digits_and_spelling_variants(
    corpus: Config,
) -> None:
    assert paths(corpus, "อนุมัติงบประมาณ เซิร์ฟเวอร์")[0] == "th/meeting.md"
    assert paths(corpus, "ความเป็นทาส")[0] == "th/rights.md"  # compound: the doc says ทาส
    assert paths(corpus, "ส่วนตัว")[0] in ("th/privacy.md",)  # a word inside a compound
    assert paths(corpus, "120 ไฟล์")[0] == "th/meeting.md"  # Thai digits in the document
    assert paths(corpus, "อีเมล์")[0] == "th/meeting.md"  # alias table: อีเมล์ → อีเมล
    decomposed = "การประชุมทีม".replace("\u0e33", "\u0e4d\u0e32") + "\u200b"
    assert paths(corpus, decomposed)[0] == "th/meeting.md"


def test_one_and_two_character_queries_find_whole_words_in_any_script(corpus: Config) -> None:
    assert paths(corpus, "Q1")[0] == "reports/annual_budget-Q1.csv"
    assert paths(corpus, "ใจ")[0] == "th/heart.md"
    assert "ru/archive.md" in paths(corpus, "Ёл")
    hits = rag_service.search(corpus, "x", mode="lexical").hits
    assert all("short" in h.channels or "filename" in h.channels for h in hits)


def test_short_terms_next_to_long_ones_rerank_instead_of_emptying_the_query(
    corpus: Config,
) -> None:
    found = paths(corpus, "Q1 budget")
    assert found[0] == "reports/annual_budget-Q1.csv"
    assert "reports/yearly-overview.md" in found
    top = rag_service.search(corpus, "Q1 budget", mode="lexical").hits[0]
    assert "short" in top.channels


def test_fusion_is_deterministic_and_every_hit_explains_its_channels(corpus: Config) -> None:
    first = rag_service.search(corpus, "budget quarter", mode="lexical")
    second = rag_service.search(corpus, "budget quarter", mode="lexical")
    assert [(h.chunk_id, h.score) for h in first.hits] == [
        (h.chunk_id, h.score) for h in second.hits
    ]
    for hit in first.hits:
        assert hit.channels and set(hit.channels) <= set(rag_search.LEXICAL_CHANNELS)
        assert all(c.rank >= 1 for c in hit.channels.values())


def test_ties_are_broken_by_path_then_position() -> None:
    results = [
        rag_search.ChannelResult("a", [(30, 1.0), (10, 1.0)]),
        rag_search.ChannelResult("b", [(10, 1.0), (30, 1.0)]),
    ]
    keys = {10: ("b.md", 0, 0, 10), 30: ("a.md", 0, 0, 30)}
    fused = rag_search.rrf_fuse(results, {"a": 1.0, "b": 1.0}, keys.__getitem__)
    assert [cid for cid, _, _ in fused] == [30, 10]  # equal scores: a.md before b.md


def test_each_channel_can_be_switched_off_for_ablation(corpus: Config) -> None:
    for name in rag_search.LEXICAL_CHANNELS:
        others = [c for c in rag_search.LEXICAL_CHANNELS if c != name]
        result = rag_service.search(corpus, "budget Q1", mode="lexical", channels=others)
        assert all(name not in h.channels for h in result.hits)


def test_hits_of_deleted_files_are_dropped_and_changed_files_are_flagged_stale(
    tmp_path: Path,
) -> None:
    knowledge = tmp_path / "docs"
    knowledge.mkdir()
    (knowledge / "keep.md").write_text("# Keep\n\nquarterly revenue forecast\n", "utf-8")
    (knowledge / "gone.md").write_text("# Gone\n\nquarterly revenue archive\n", "utf-8")
    (knowledge / "edited.md").write_text("# Edited\n\nquarterly revenue draft\n", "utf-8")
    config = make_config(knowledge, tmp_path / "state")
    _sync(config)
    assert set(paths(config, "quarterly revenue")) == {"keep.md", "gone.md", "edited.md"}
    (knowledge / "gone.md").unlink()
    edited = knowledge / "edited.md"
    edited.write_text("# Edited\n\nquarterly revenue draft, now longer\n", "utf-8")
    os.utime(edited, ns=(1, 1))
    hits = rag_service.search(config, "quarterly revenue", mode="lexical").hits
    assert {h.path for h in hits} == {"keep.md", "edited.md"}
    assert {h.path: h.stale for h in hits} == {"keep.md": False, "edited.md": True}


def test_filters_apply_to_every_channel(corpus: Config) -> None:
    found = paths(corpus, "งบประมาณ budget", path_prefix="th")
    assert found and all(p.startswith("th/") for p in found)
    found = paths(corpus, "budget", path_prefix="reports")
    assert found and all(p.startswith("reports/") for p in found)
    found = paths(corpus, "annual budget Q1", file_types=["md"])
    assert "reports/annual_budget-Q1.csv" not in found


# -- hybrid fusion (pure: channel lists in, ranking out) -----------------------------------------
def _hybrid(lexical, semantic, sections):
    return rag_search.hybrid_fuse(
        [rag_search.ChannelResult(name, ranked) for name, ranked in lexical],
        rag_search.ChannelResult("semantic", semantic),
        lambda ids: {cid: sections[cid] for cid in ids if cid in sections},
    )


def test_hybrid_counts_agreement_on_one_section_even_when_the_sides_pick_different_chunks():
    # Section 1: lexical likes chunk 11, semantic likes chunk 12 (same passage). Section 2: only
    # lexical, slightly ahead of chunk 11. Section 3: only semantic, top cosine.
    sections = {11: 1, 12: 1, 21: 2, 31: 3}
    fused = _hybrid(
        [("words", [(21, 10.0), (11, 9.0)])],
        [(31, 0.90), (12, 0.89), (40, 0.70)],
        {**sections, 40: 4},
    )
    order = [cid for cid, _, _ in fused]
    assert order[0] == 11  # the section both sides found, shown by its lexical chunk
    assert set(fused[0][2]) == {"words", "semantic"}
    assert fused[0][2]["semantic"].rank == 2
    assert len(order) == len({sections.get(c, c) for c in order})  # one entry per section


def test_hybrid_keeps_the_lexical_margin_that_ranks_alone_would_throw_away():
    # A verbatim quotation: BM25 puts section 1 far ahead; the cosines barely separate 1 and 2,
    # with 2 first. Score-aware lexical evidence must keep section 1 on top.
    sections = {1: 1, 2: 2, 3: 3, 4: 4}
    fused = _hybrid(
        [("bm25", [(1, 56.8), (2, 22.4), (3, 20.9)])],
        [(2, 0.905), (1, 0.901), (3, 0.890), (4, 0.807)],
        sections,
    )
    assert [cid for cid, _, _ in fused][:2] == [1, 2]


def test_hybrid_without_lexical_hits_follows_the_cosines():
    sections = {1: 1, 2: 2, 3: 3}
    fused = _hybrid([("words", [])], [(3, 0.9), (1, 0.8), (2, 0.7)], sections)
    assert [cid for cid, _, _ in fused] == [3, 1, 2]


def test_hybrid_leans_on_the_side_whose_top_section_stands_out():
    decisive_words = fusion.hybrid_share([1.0, 0.2, 0.1], [1.0, 0.97, 0.95])
    decisive_meaning = fusion.hybrid_share([1.0, 0.98, 0.9], [1.0, 0.4, 0.3])
    assert decisive_words > HYBRID_LEXICAL_BASE > decisive_meaning
    low, high = HYBRID_SHARE_BOUNDS
    assert low <= fusion.hybrid_share([1.0], [1.0, 0.0]) <= high  # bounded either way
    assert fusion.hybrid_share([1.0, 0.0], [1.0, 1.0]) <= high


def test_hybrid_semantic_side_counts_a_sections_further_matching_children_a_little():
    # Section 1: one child, the best cosine by a hair. Section 2: three children that all
    # match (a long article whose every window is on topic). No lexical evidence.
    sections = {11: 1, 21: 2, 22: 2, 23: 2, 31: 3, 41: 4}
    semantic = [(11, 0.860), (21, 0.859), (22, 0.850), (23, 0.848), (31, 0.80), (41, 0.70)]
    fused = _hybrid([("words", [])], semantic, sections)
    assert [cid for cid, _, _ in fused] == [21, 11, 31, 41]
    assert fused[0][2]["semantic"].rank == 2  # shown by its best child, at that child's rank
    # ...but only a little: a clear single best still wins over many weak windows.
    clear = [(11, 0.90), (21, 0.85), (22, 0.85), (23, 0.85), (31, 0.80), (41, 0.70)]
    assert [cid for cid, _, _ in _hybrid([("words", [])], clear, sections)][:2] == [11, 21]
    # The count is bounded: children past SEMANTIC_CHILD_COUNT add nothing.
    many = {**sections, 24: 2, 25: 2}
    more = [*semantic[:4], (24, 0.847), (25, 0.846), *semantic[4:]]
    assert SEMANTIC_CHILD_COUNT == 2
    with_more = [(c, round(v, 12)) for c, v, _ in _hybrid([("words", [])], more, many)]
    assert with_more == [(c, round(v, 12)) for c, v, _ in fused]


def test_hybrid_gives_a_hubs_further_children_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Section 2 is a contents page: its many matching windows are its listing, not evidence.
    sections = {11: 1, 21: 2, 22: 2, 23: 2, 31: 3, 41: 4}
    semantic = [(21, 0.861), (11, 0.860), (22, 0.859), (23, 0.858), (31, 0.80), (41, 0.70)]

    def fused(hub: float) -> list[tuple[int, float]]:
        result = rag_search.hybrid_fuse(
            [rag_search.ChannelResult("words", [])],
            rag_search.ChannelResult("semantic", semantic),
            lambda ids: {cid: sections[cid] for cid in ids if cid in sections},
            lambda ids: {cid: hub for cid in ids if sections.get(cid) == 2},
        )
        return [(cid, round(score, 12)) for cid, score, _ in result]

    with_share = {hub: fused(hub) for hub in (0.0, 1.0)}
    monkeypatch.setattr(fusion, "SEMANTIC_CHILD_SHARE", 0.0)
    without_share = {hub: fused(hub) for hub in (0.0, 1.0)}
    assert with_share[1.0] == without_share[1.0]  # a full hub: its further windows add nothing
    assert with_share[0.0] != without_share[0.0]  # the same section as prose: they count


def test_hybrid_counts_the_share_of_a_sections_windows_that_match_not_their_number():
    # Sections 1 and 2 have the same three matching windows, section 1 first by a hair; section 2
    # is a long PDF page of nine windows, section 3 a short passage of three.
    sections = {11: 1, 12: 1, 13: 1, 21: 2, 22: 2, 23: 2, 41: 4}
    semantic = [(11, 0.861), (21, 0.860), (12, 0.859), (22, 0.858), (13, 0.857), (23, 0.856)]
    semantic.append((41, 0.70))

    def order(sizes: dict[int, int]) -> list[int]:
        result = rag_search.hybrid_fuse(
            [rag_search.ChannelResult("words", [])],
            rag_search.ChannelResult("semantic", semantic),
            lambda ids: {cid: sections[cid] for cid in ids if cid in sections},
            None,
            lambda sids: {sid: sizes[sid] for sid in sids if sid in sizes},
        )
        return [cid for cid, _, _ in result]

    assert order({1: 3, 2: 3})[:2] == [11, 21]  # equal evidence: the best window decides
    # Section 1 now has nine windows of which three match: a third of the share.
    semantic[0] = (11, 0.8605)
    assert order({1: 3, 2: 3})[:2] == [11, 21]
    assert order({1: 9, 2: 3})[:2] == [21, 11]


def _lexical_ranking(config: Config, query: str) -> list[tuple[str, float]]:
    result = rag_service.search(config, query, top_k=10, mode="lexical")
    return [(hit.path, round(hit.score, 9)) for hit in result.hits]


def test_a_resynced_index_ranks_exactly_like_a_fresh_one(tmp_path: Path) -> None:
    """N of the common-word rule is counted, not MAX(id): after every file was rewritten the
    ids of the deleted chunks are gone for good, and MAX(id) had doubled N, so a word in 3 of
    10 chunks stopped counting as common and the ranking moved."""

    def write(root: Path, version: str) -> None:
        for i in range(10):
            words = "invoice payment overdue" if i < 3 else "payment schedule"
            if i == 3:
                words = "payment reminder"
            (root / f"note-{i}.md").write_text(
                f"# Note {i} {version}\n\nThe {words} of account {i} was checked.\n",
                encoding="utf-8",
            )

    resynced_docs = tmp_path / "resynced"
    resynced_docs.mkdir()
    resynced = make_config(resynced_docs, tmp_path / "state-resynced")
    write(resynced_docs, "draft")
    _sync(resynced)
    write(resynced_docs, "final")
    _sync(resynced)
    fresh_docs = tmp_path / "fresh"
    fresh_docs.mkdir()
    fresh = make_config(fresh_docs, tmp_path / "state-fresh")
    write(fresh_docs, "final")
    _sync(fresh)
    conn = index_db.connect(resynced.db_path, readonly=True)
    try:
        ctx = rag_search.SearchContext(conn, rag_search.Query.parse("x"), rag_search.Filters())
        rows = conn.execute("SELECT COUNT(*), MAX(id) FROM chunks").fetchone()
        assert rows[1] > rows[0]  # the resync did delete and re-add rows
        assert ctx.chunk_count() == rows[0]
    finally:
        conn.close()
    for query in ("invoice payment", "overdue payment reminder", "payment"):
        assert _lexical_ranking(resynced, query) == _lexical_ranking(fresh, query)
