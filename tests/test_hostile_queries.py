"""Hostile queries (issue 26 item 4): a run of one common trigram, a pasted Thai paragraph. Their
trigram phrases are bounded by a rule on the query (TRIGRAM_FORM_MAX_CHARS, PHRASE_MAX_CHARS),
and the response names every channel the bound cut short. The work bound is checked on the FTS5
statements SQLite really ran (trace callback), not on a clock."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import REPO, server_args, synced_folder

import rag_search
import rag_service
from helpers.config import Config
from helpers.lexical.channels import PHRASE_MAX_CHARS
from helpers.lexical.query_terms import TRIGRAM_FORM_MAX_CHARS, Query
from helpers.store.open_index import read_conn
from helpers.text.normalize import fold

RUN = "ing" * 333  # 999 characters, ~1,000 trigrams of three of the commonest ones
THAI = "ทุกคนมีสิทธิในการศึกษา การศึกษาจะต้องให้เปล่าอย่างน้อยในชั้นประถมศึกษาและชั้นพื้นฐาน "
FILES = {
    "english.md": "# Testing\n\nThe testing of sing-along recordings during spring.\n",
    "long.md": f"# Run\n\n{'ing' * 30} is a long word kept here for the substring search.\n",
    "thai.md": f"# สิทธิ\n\n{THAI * 3}\n",
    "plain.md": "# Invoices\n\nPayable invoices are approved by the finance team.\n",
}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return synced_folder(tmp_path_factory.mktemp("hostile"), FILES)


def traced_search(config: Config, query: str) -> tuple[rag_search.SearchResult, list[str]]:
    """rag_search.search on a real read connection, with every statement SQLite ran."""
    conn = read_conn(config)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        result = rag_search.search(conn, query, rag_search.SearchOptions(top_k=8, mode="lexical"))
    finally:
        conn.close()
    return result, statements


def trigram_phrases(statements: list[str]) -> list[str]:
    """The quoted phrases of every MATCH sent to the trigram table (chunks_fts)."""
    phrases: list[str] = []
    for sql in statements:
        if "chunks_fts MATCH" in sql:
            match = re.search(r"MATCH '((?:[^']|'')*)'", sql)
            assert match is not None, sql
            phrases += re.findall(r'"((?:[^"]|"")*)"', match.group(1).replace("''", "'"))
    return phrases


def test_a_run_of_a_common_trigram_is_searched_by_a_bounded_phrase_and_says_so(
    config: Config,
) -> None:
    result, statements = traced_search(config, RUN)
    phrases = trigram_phrases(statements)
    assert phrases, "the trigram channel should search the run"
    assert max(len(p) for p in phrases) <= TRIGRAM_FORM_MAX_CHARS
    assert "bm25" in result.truncated_channels
    assert any(w.startswith("bm25:") and "characters" in w for w in result.warnings)
    # still a real answer: the file holding a long run of "ing" is found by its first 64
    assert result.hits and result.hits[0].path == "long.md"


def test_a_pasted_thai_paragraph_is_looked_for_as_a_bounded_phrase_and_says_so(
    config: Config,
) -> None:
    paragraph = (THAI * 12)[:1000]
    result, statements = traced_search(config, paragraph)
    phrases = trigram_phrases(statements)
    assert max(len(p) for p in phrases) <= PHRASE_MAX_CHARS
    assert "exact" in result.truncated_channels
    assert result.hits and result.hits[0].path == "thai.md"


def test_an_ordinary_query_reports_no_truncated_channel(config: Config) -> None:
    result, _ = traced_search(config, "payable invoices")
    assert result.truncated_channels == []
    assert result.hits[0].path == "plain.md"


def test_the_service_and_the_cli_json_carry_the_truncated_channels(config: Config) -> None:
    result = rag_service.search(config, RUN, mode="lexical")
    assert result.to_dict()["truncated_channels"] == ["bm25"]
    compact = result.with_changes(detail="compact").to_dict()
    assert compact["truncated_channels"] == ["bm25"]
    command = [sys.executable, *server_args(config), "search", RUN, "--mode", "lexical"]
    as_json = subprocess.run(
        [*command, "--json"], capture_output=True, text=True, cwd=REPO, timeout=120, check=True
    )
    assert json.loads(as_json.stdout)["truncated_channels"] == ["bm25"]
    as_text = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, timeout=120, check=True
    )
    assert "warning: bm25: a term over" in as_text.stderr  # the terminal shows why


def test_a_long_real_identifier_keeps_its_whole_substring_form() -> None:
    """A real identifier is under the bound: its trigram form goes through whole, uncut."""
    name = "test.support.bytecode_helper.BytecodeTestCase"
    group = Query.parse(name).groups[0]
    assert fold(name) in group.substrings()
    assert not group.cut
    assert Query.parse(RUN).groups[0].cut
