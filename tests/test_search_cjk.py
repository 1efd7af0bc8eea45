"""Chinese, Japanese and Korean keyword search: two-character words at any corpus size, longer
words and whole questions, through a real sync and the service boundary; the bigram index follows
every write and delete and is backfilled for an index built before it existed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import make_config, undo_migration_4

import rag_search
import rag_service
from helpers.config import Config
from helpers.lexical import channels as lexical_channels
from helpers.lexical import cjk_pairs as lexical_cjk
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query, parse_query
from helpers.lexical.snippet import make_snippet
from helpers.store import index_db
from helpers.text import cjk

DOCS = {
    "zh/service-contract.md": "# 服务合同\n\n本合同自双方签字之日起生效。付款期限为三十天。\n",
    "zh/travel.md": "# 差旅制度\n\n员工出差前须提交申请，报销须在返回后十天内完成。\n",
    "zh/security.md": "# 信息安全\n\n密码必须每九十天更换一次，不得与他人共享。\n",
    "ja/contract.md": "# 契約書\n\n本契約は両当事者の署名により発効する。"
    "支払期限は三十日とする。\n",
    "ja/meeting.md": "# 会議録\n\n次回の会議は来週の月曜日に開催される予定です。\n",
    "ko/contract.md": "# 서비스계약서\n\n본 계약은 양 당사자가 서명한 날부터 효력이 발생한다.\n",
    "ko/holiday.md": "# 휴가 규정\n\n직원은 연간 십오 일의 유급 휴가를 사용할 수 있다.\n",
    "en/contract.md": "# Contract\n\nThe payment term is thirty days from the invoice date.\n",
}


def _sync(config: Config) -> None:
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert view.state == "succeeded", view.to_dict()


@pytest.fixture
def cjk_config(config: Config, knowledge: Path) -> Config:
    for rel, text in DOCS.items():
        path = knowledge / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    _sync(config)
    return config


def _top(config: Config, query: str, **kwargs: object) -> str | None:
    hits = rag_service.search(config, query, mode="lexical", **kwargs).hits  # type: ignore[arg-type]
    return hits[0].path if hits else None


def test_a_cjk_run_is_one_group_and_mixed_tokens_split_at_the_script_boundary() -> None:
    groups = parse_query("python编程语言 教程 계약서").groups
    assert [(g.text, g.kind) for g in groups] == [
        ("python", "word"),
        ("编程语言", "cjk"),
        ("教程", "cjk"),
        ("계약서", "cjk"),
    ]
    assert parse_query("付款期限是多少天？").question
    assert cjk.index_text("本合同 ok 付款") == "本合 合同 付款"
    assert cjk.bigrams("合") == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("付款期限", "zh/service-contract.md"),  # 4 characters: found nothing before
        ("付款期限是多少天？", "zh/service-contract.md"),  # a whole question, no spaces
        ("报销", "zh/travel.md"),  # a two-character word inside a clause
        ("密码更换", "zh/security.md"),  # two words the text holds apart
        ("支払期限はいつですか", "ja/contract.md"),
        ("会議 予定", "ja/meeting.md"),
        ("계약", "ko/contract.md"),  # inside the compound 서비스계약서 and before a particle
        ("유급 휴가", "ko/holiday.md"),
    ],
)
def test_cjk_words_and_questions_find_their_document(
    cjk_config: Config, query: str, expected: str
) -> None:
    assert _top(cjk_config, query) == expected


def test_the_snippet_marks_the_matched_pairs_of_a_question(cjk_config: Config) -> None:
    hit = rag_service.search(cjk_config, "付款期限是多少天？", mode="lexical").hits[0]
    assert "**付款期限**" in hit.snippet, hit.snippet
    assert "cjk" in hit.channels


def test_a_two_character_word_is_found_outside_the_short_term_scan_window(
    config: Config, knowledge: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short-term scan reads only the newest chunks; the bigram index has no such limit."""
    (knowledge / "old").mkdir()
    (knowledge / "old" / "contract.md").write_text(DOCS["zh/service-contract.md"], "utf-8")
    _sync(config)
    for i in range(40):
        (knowledge / f"new-{i:02d}.md").write_text(f"# 通知 {i}\n\n今天下午三点开会。\n", "utf-8")
    _sync(config)
    monkeypatch.setattr(lexical_channels, "SHORT_SCAN_WINDOW", 20)
    assert rag_service.search(config, "合同", mode="lexical", channels=["short"]).hits == []
    assert _top(config, "合同") == "old/contract.md"


def test_bigram_rows_follow_edits_and_deletes(cjk_config: Config, knowledge: Path) -> None:
    (knowledge / "zh" / "travel.md").write_text("# 差旅制度\n\n出差需要经理批准。\n", "utf-8")
    (knowledge / "zh" / "security.md").unlink()
    _sync(cjk_config)
    assert _top(cjk_config, "报销") is None
    assert _top(cjk_config, "经理批准") == "zh/travel.md"
    assert _top(cjk_config, "密码") is None
    conn = index_db.connect(cjk_config.db_path)
    try:
        with_cjk = {
            row[0] for row in conn.execute("SELECT id, norm FROM chunks") if cjk.index_text(row[1])
        }
        assert {row[0] for row in conn.execute("SELECT rowid FROM chunks_cjk")} == with_cjk
        conn.execute("INSERT INTO chunks_cjk(chunks_cjk) VALUES ('integrity-check')")
    finally:
        conn.close()


def _as_version_3(db_path: Path) -> None:
    """The index as the version before the bigram index wrote it."""
    conn = index_db.connect(db_path)
    with index_db.write_transaction(conn):
        undo_migration_4(conn)
    conn.close()


def test_an_index_built_before_the_bigram_index_is_backfilled_on_open(
    cjk_config: Config,
) -> None:
    expected = _top(cjk_config, "报销")
    _as_version_3(cjk_config.db_path)
    old = index_db.connect(cjk_config.db_path)
    try:  # an older index read as it is (a read-only mount): the channel stays quiet
        result = rag_search.search(old, "报销", rag_search.SearchOptions(channels=("cjk",)))
        assert result.hits == []
    finally:
        old.close()
    assert _top(cjk_config, "报销") == expected == "zh/travel.md"  # the service migrates
    conn = index_db.connect(cjk_config.db_path)
    try:
        assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION
        assert conn.execute("SELECT COUNT(*) FROM chunks_cjk").fetchone()[0] >= 7
    finally:
        conn.close()


def test_a_read_only_copy_of_an_older_index_still_answers_cjk_queries(
    cjk_config: Config, tmp_path: Path
) -> None:
    _as_version_3(cjk_config.db_path)
    data = cjk_config.data_dir
    os.chmod(data, 0o555)
    try:
        readonly = make_config(cjk_config.knowledge_dir, data, read_only=True)
        assert _top(readonly, "付款期限") == "zh/service-contract.md"  # trigram, no bigrams
    finally:
        os.chmod(data, 0o755)


@pytest.mark.parametrize("query", ["報告", "報告書", "月次報告"])
def test_a_cjk_word_in_a_file_name_finds_the_file(
    cjk_config: Config, knowledge: Path, query: str
) -> None:
    """Two or three CJK characters name something; Latin substrings need four."""
    (knowledge / "reports").mkdir()
    (knowledge / "reports" / "月次報告書 2026.txt").write_text("revenue up 12 percent\n", "utf-8")
    _sync(cjk_config)
    hits = rag_service.search(cjk_config, query, mode="lexical").hits
    assert hits[0].path == "reports/月次報告書 2026.txt", [h.path for h in hits]
    assert "filename" in hits[0].channels


def test_common_pairs_are_left_out_past_the_postings_budget(
    config: Config, knowledge: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rarest pairs first: a pair in every chunk costs the most and ranks nothing."""
    for i in range(30):
        (knowledge / f"n{i:02d}.md").write_text(f"# 通知{i}\n\n我们明天开会。\n", "utf-8")
    (knowledge / "claim.md").write_text("# 报销\n\n我们的报销流程。\n", "utf-8")
    _sync(config)
    monkeypatch.setattr(lexical_cjk, "PAIR_POSTINGS_BUDGET", 5)
    conn = index_db.connect(config.db_path)
    try:
        ctx = SearchContext(conn, Query.parse("我们报销"), Filters())
        ranked = lexical_cjk.channel_cjk(ctx).ranked
        marks = ",".join("?" * len(ranked))
        sql = (
            "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.document_id "
            f"WHERE c.id IN ({marks})"
        )
        paths = {row[0] for row in conn.execute(sql, [cid for cid, _ in ranked])}
        assert paths == {"claim.md"}  # 我们 (in every chunk) was dropped, 报销 kept
        common = lexical_cjk.channel_cjk(SearchContext(conn, Query.parse("我们"), Filters()))
        assert len(common.ranked) == 31 and {score for _, score in common.ranked} == {0.0}
    finally:
        conn.close()


def test_when_every_word_is_common_only_chunks_holding_all_of_them_are_ranked(
    config: Config, knowledge: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the budget no word is dropped: the words' rarest pairs are AND-ed instead."""
    for i in range(10):
        (knowledge / f"a{i}.md").write_text(f"# 甲{i}\n\n我们明天开会。\n", "utf-8")
        (knowledge / f"b{i}.md").write_text(f"# 乙{i}\n\n报销流程很长。\n", "utf-8")
    for i in range(3):
        (knowledge / f"both{i}.md").write_text(f"# 丙{i}\n\n我们的报销。\n", "utf-8")
    _sync(config)
    monkeypatch.setattr(lexical_cjk, "PAIR_POSTINGS_BUDGET", 5)
    hits = rag_service.search(config, "我们 报销", mode="lexical", channels=["cjk"], top_k=20).hits
    assert {h.path for h in hits} == {"both0.md", "both1.md", "both2.md"}


def test_korean_keeps_its_word_prefixes_and_exact_phrases_and_small_folders_are_ranked(
    config: Config, knowledge: Path
) -> None:
    docs = {
        "a.md": "# 규정\n\n유급 휴가는 연간 십오 일이다.\n",
        "b.md": "# 안내\n\n휴가 신청은 미리 한다.\n",
        "c.md": "# 규정집\n\n유급 휴가 규정은 인사팀이 관리한다.\n",
        "d.md": "# 메모\n\n휴가 휴가 휴가 유급 유급 유급\n",
    }
    for name, text in docs.items():
        (knowledge / name).write_text(text, "utf-8")
    _sync(config)
    assert _top(config, "유급 휴가 규정") == "c.md"
    exact = rag_service.search(config, "유급 휴가", mode="lexical", channels=["exact"]).hits
    assert {h.path for h in exact} >= {"a.md", "c.md"}  # spaced phrase, particles after it
    words = rag_service.search(config, "휴가", mode="lexical", channels=["words"]).hits
    assert {h.path for h in words} == set(docs)  # 휴가* also matches 휴가는
    cjk_hits = rag_service.search(config, "유급 휴가 규정", mode="lexical", channels=["cjk"]).hits
    assert cjk_hits and all(h.channels["cjk"].score != 0.0 for h in cjk_hits)  # BM25, not newest


def test_single_cjk_characters_are_not_marked_next_to_longer_terms() -> None:
    snippet = make_snippet("本合同的付款期限的规定的说明", ["付款期限", "付款", "的"])
    assert "**付款期限**" in snippet and "**的**" not in snippet
