"""On the lexical side alone, a query whose words no chunk holds together and whose first passage
holds under half of them gives the units channel a sharper RRF constant: the page that holds every
word in its title, headings and body beats pages whose one passage holds half of them, which the
passage channels vote for together (bench/notes/k-spread.md)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest
from conftest import synced_written

import rag_search
from helpers.config import Config
from helpers.lexical import units
from helpers.lexical.common import ChannelResult, Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.ranking.constants import RRF_K, UNIT_RRF_K_SPREAD, UNIT_SPREAD_COVERAGE_BELOW
from helpers.store.open_index import read_conn

# Each of the herb page's sections is a chunk of its own and names one herb; each recipe's first
# passage names two of them, twice.
HERBS = (
    "# Herbs of the garden\n\n"
    + "A note on the garden and the kitchen, the beds and the paths. " * 30
    + "Fennel grows tall.\n\n## Threads\n\n"
    + "The threads are picked by hand in the autumn, one by one. " * 30
    + "Saffron is dear.\n\n## Leaves\n\n"
    + "Dried leaves keep their scent for a year or more. " * 30
    + "Marjoram is mild.\n\n## Jars\n\n"
    + "Keep every jar closed and away from the light. " * 30
    + "Storage matters.\n"
)
SPREAD_QUERY = "fennel saffron marjoram storage"


def _write(docs: Path) -> None:
    docs.mkdir(parents=True)
    (docs / "herbs.md").write_text(HERBS, "utf-8")
    for i in range(8):
        (docs / f"recipe{i}.md").write_text(
            f"# Recipe {i}\n\nFennel and saffron soup number {i}: fennel, saffron, water and "
            f"salt.\n\n## Serving\n\nServe it warm with bread {i}.\n",
            "utf-8",
        )


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def _paths(config: Config, query: str) -> list[str]:
    with closing(read_conn(config)) as conn:
        result = rag_search.search(conn, query, rag_search.SearchOptions(top_k=5))
    return [hit.path for hit in result.hits]


def test_an_own_constant_keeps_a_channels_rank_one_and_lowers_its_other_ranks() -> None:
    ranked = ChannelResult("units", [(1, 9.0), (2, 8.0), (3, 7.0)])
    other = ChannelResult("words", [(3, 5.0), (2, 4.0)])
    plain = {cid: score for cid, score, _ in rag_search.rrf_fuse([ranked, other], {})}
    sharp = {
        cid: score
        for cid, score, _ in rag_search.rrf_fuse([ranked, other], {}, constants={"units": 3})
    }
    assert sharp[1] == pytest.approx(plain[1]) == pytest.approx(1 / (RRF_K + 1))
    assert sharp[2] == pytest.approx((4 / (RRF_K + 1)) / 5 + 1 / (RRF_K + 2))
    assert sharp[3] == pytest.approx((4 / (RRF_K + 1)) / 6 + 1 / (RRF_K + 1))
    assert sharp[2] < plain[2] and sharp[3] < plain[3]


def test_the_page_holding_every_word_beats_passages_holding_half(synced: Config) -> None:
    with closing(read_conn(synced)) as conn:
        ctx = SearchContext(conn, Query.parse(SPREAD_QUERY), Filters())
        weight = units.unit_weight(ctx)  # no chunk holds all four words
    assert weight.spread_k == UNIT_RRF_K_SPREAD
    assert weight.cover_below == UNIT_SPREAD_COVERAGE_BELOW
    assert _paths(synced, SPREAD_QUERY)[0] == "herbs.md"


def test_without_the_sharper_constant_the_half_passages_win(
    synced: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(units, "UNIT_RRF_K_SPREAD", None)
    assert _paths(synced, SPREAD_QUERY)[0].startswith("recipe")


def test_a_first_passage_holding_most_words_keeps_the_plain_constant(
    synced: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "fennel saffron soup marjoram"  # a recipe's first passage holds three of the four
    with closing(read_conn(synced)) as conn:
        ctx = SearchContext(conn, Query.parse(query), Filters())
        weight = units.unit_weight(ctx)
        first = rag_search.search(conn, query, rag_search.SearchOptions(top_k=5)).hits[0]
        covered = units.section_coverage(conn, ctx.query, first.chunk_id)
        weak = units.first_passage_weak(weight, lambda: first.chunk_id, lambda _: covered)
    assert weight.spread_k == UNIT_RRF_K_SPREAD
    assert covered == pytest.approx(3 / 4)
    assert not weak
    sharp = _paths(synced, query)
    assert sharp[0].startswith("recipe")
    monkeypatch.setattr(units, "UNIT_RRF_K_SPREAD", None)
    assert _paths(synced, query) == sharp
    monkeypatch.setattr(units, "UNIT_RRF_K_SPREAD", UNIT_RRF_K_SPREAD)
    monkeypatch.setattr(units, "UNIT_SPREAD_COVERAGE_BELOW", 1.01)  # no gate: the page wins
    assert _paths(synced, query)[0] == "herbs.md"
