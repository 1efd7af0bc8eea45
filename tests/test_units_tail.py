"""The units channel's gate counts words, not a CJK run's overlapping bigrams, and its lift on
the lexical side alone reads a document's unit score on the tail's scale
(bench/notes/lex-gap.md)."""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import synced_written

from helpers.config import Config
from helpers.lexical.common import ChannelResult, Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.lexical.units import (
    UNIT_MAX_TERMS,
    UnitWeight,
    channel_units,
    content_tokens,
    lift_applies,
    query_terms,
    section_coverage,
    tail_factors,
    unit_weight,
)
from helpers.ranking import fusion
from helpers.ranking.constants import (
    UNIT_LIFT_SPREAD,
    UNIT_SPREAD_COVERAGE_BELOW,
    UNIT_TAIL_MIN_DOCUMENTS,
)
from helpers.store.open_index import read_conn

# A Korean help page whose title and body hold a two-word index term, and a distractor; an
# English page whose one passage holds two of three words, and one that holds one.
PAGES = {
    "import.md": "# 데이터베이스 가져오기\n\n데이터베이스를 열고 표를 가져오기 합니다.\n",
    "print.md": "# 인쇄\n\n문서를 인쇄합니다. 데이터베이스 보고서도 인쇄합니다.\n",
    "osprey.md": "# Osprey\n\nThe osprey report is filed weekly.\n",
    "birds.md": "# Birds\n\nThe osprey dives for fish.\n",
}


def _write(docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    for name, text in PAGES.items():
        (docs / name).write_text(text, "utf-8")


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def test_a_korean_term_counts_its_words_and_a_japanese_one_its_character_pairs() -> None:
    query = Query.parse("데이터베이스 가져오기")
    assert len(content_tokens(query)) == 8  # 5 + 3 overlapping bigrams: over the gate
    assert query_terms(query) == 2  # Korean writes a space between words
    assert query_terms(Query.parse("데이터베이스 가져오기/내보내기")) == 3  # was 3 + 2 + 2
    assert query_terms(Query.parse("条件式の作成")) == 3  # no spaces: one word per pair
    assert query_terms(Query.parse("OKT.TILL.BIN, funktion")) == 4  # an identifier's parts


def test_the_units_channel_runs_for_a_korean_two_word_term(synced: Config) -> None:
    query = Query.parse("데이터베이스 가져오기")
    assert len(content_tokens(query)) > UNIT_MAX_TERMS  # the old count gated it out
    with closing(read_conn(synced)) as conn:
        result = channel_units(SearchContext(conn, query, Filters()))
        paths = dict(conn.execute("SELECT id, path FROM documents").fetchall())
        first = conn.execute(
            "SELECT document_id FROM chunks WHERE id = ?", (result.ranked[0][0],)
        ).fetchone()[0]
    assert paths[first] == "import.md"


def _ranked(scores: list[float]) -> ChannelResult:
    """One chunk per document scored `scores` (chunk ids from 1), best first."""
    return ChannelResult("units", [(i, score) for i, score in enumerate(scores, start=1)])


def test_the_tail_lift_gives_the_top_document_the_whole_lift_and_keeps_its_chunks_order() -> None:
    # Twelve documents scored 12, 11, ..., 1 (the first one's two chunks): mean excess over the
    # last 5.5; a second chunk of the top document shares its factor.
    scores = [float(s) for s in range(12, 0, -1)]
    units = ChannelResult("units", [(0, 12.0), *_ranked(scores).ranked])
    assert len(scores) >= UNIT_TAIL_MIN_DOCUMENTS
    factors = tail_factors(units, 0.5)
    assert factors[0] == factors[1] == pytest.approx(1.5)
    assert factors[2] == pytest.approx(1 + 0.5 * math.exp(-1 / 5.5))
    assert factors[12] == pytest.approx(1 + 0.5 * math.exp(-11 / 5.5))
    assert all(factors[i] > factors[i + 1] > 1 for i in range(1, 12))


def test_the_tail_lift_is_blind_to_the_scores_magnitude() -> None:
    # score / top would lift 112 and 111 alike; on the tail's scale they stand apart as 12, 11.
    small = tail_factors(_ranked([float(s) for s in range(12, 0, -1)]), 1.0)
    large = tail_factors(_ranked([float(s) for s in range(112, 100, -1)]), 1.0)
    assert small == pytest.approx(large)
    assert large[2] < 1 + 111 / 112  # the relative score's factor


def test_under_ten_documents_the_lift_falls_back_to_the_relative_score() -> None:
    few = _ranked([9.0, 6.0, 3.0])  # three manuals: no tail to estimate
    assert tail_factors(few, 0.5) == fusion.unit_factors(few, 0.5)


def test_no_tail_lift_without_a_second_document_or_a_lift() -> None:
    assert tail_factors(ChannelResult("units", [(1, 3.0), (2, 3.0)]), 0.5) == {}
    assert tail_factors(ChannelResult("units", [(1, 3.0), (2, 1.0)]), 0.0) == {}


def _first_chunk(conn: sqlite3.Connection, path: str) -> int:
    sql = "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = ?"
    return conn.execute(sql, (path,)).fetchone()[0]


def test_a_spread_query_gets_the_lift_gated_by_its_first_passage(synced: Config) -> None:
    ctx = SearchContext(read_conn(synced), Query.parse("osprey report archive"), Filters())
    with closing(ctx.conn):
        weight = unit_weight(ctx)  # no chunk holds "archive"
    assert (weight.lift, weight.cover_below) == (UNIT_LIFT_SPREAD, UNIT_SPREAD_COVERAGE_BELOW)


def test_the_spread_lift_applies_only_when_the_first_passage_holds_few_words(
    synced: Config,
) -> None:
    query = Query.parse("osprey report archive")
    gated = UnitWeight(1.5, 0.5, 0.0, cover_below=0.6)
    with closing(read_conn(synced)) as conn:
        osprey, birds = _first_chunk(conn, "osprey.md"), _first_chunk(conn, "birds.md")

        def covered(cid: int) -> float:
            return section_coverage(conn, query, cid)

        assert covered(osprey) == pytest.approx(2 / 3)
        assert covered(birds) == pytest.approx(1 / 3)
        assert lift_applies(gated, lambda: birds, covered)
        assert not lift_applies(gated, lambda: osprey, covered)
        assert lift_applies(UnitWeight(1.5, 0.5, 0.0), lambda: osprey, covered)  # ungated
        assert not lift_applies(UnitWeight(1.5, 0.0, 0.0), lambda: birds, covered)
