"""How much the units channel counts per query: more when no single chunk holds every content
word (the words stand together only in the whole page), and beside the semantic side as a
bounded lift of the lexical evidence that keeps the order inside a document
(bench/notes/k-fuse.md)."""

from __future__ import annotations

import math
from contextlib import closing
from pathlib import Path

import pytest
from conftest import synced_written
from format_fixtures import write_text_pdf

import rag_search
from helpers.config import Config
from helpers.lexical.channels import passage_holds_all
from helpers.lexical.common import ChannelResult, Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.lexical.units import corrected_maxp, tail_factors, unit_counts, unit_weight
from helpers.ranking import fusion
from helpers.ranking.constants import (
    CHANNEL_WEIGHTS,
    UNIT_HYBRID_LIFT,
    UNIT_HYBRID_TAIL,
    UNIT_LIFT_SPREAD,
    UNIT_LIFT_TOGETHER,
    UNIT_WEIGHT_SPREAD,
)
from helpers.store.open_index import read_conn

# Each section holds one of the query's words; no passage holds all three.
SPREAD_PAGE = """# Osprey reports

Reports list every run of the week.

## Columns

Each report table takes its columns from the template.

## Totals

A report adds its totals at the foot of the table.
"""
# Each distractor repeats one of the words in one passage.
DISTRACTORS = {
    "birds.md": "# Birds\n\n" + "The osprey is a bird. The osprey dives for fish. " * 8,
    "layout.md": "# Layout\n\n" + "A column holds values; the column width and column order. " * 8,
    "sums.md": "# Sums\n\n" + "A total is a sum; the total of a total row. " * 8,
}


def _write(docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "reports.md").write_text(SPREAD_PAGE, "utf-8")
    for name, text in DISTRACTORS.items():
        (docs / name).write_text(text, "utf-8")
    write_text_pdf(
        docs / "handbook.pdf",
        [
            ["Filing", "Each osprey report goes to the archive."],
            ["Archive", "The archive keeps reports for a year."],
            ["Retention", "Old reports are shredded in spring."],
            ["Access", "Staff read reports in the library."],
            ["Copies", "A copy of a report costs a coin."],
            ["Errors", "A wrong report is sent back to its author."],
        ],
    )


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def _context(config: Config, query: str) -> SearchContext:
    return SearchContext(read_conn(config), Query.parse(query), Filters())


def test_no_chunk_holds_every_word_of_a_query_spread_over_a_page(synced: Config) -> None:
    ctx = _context(synced, "osprey columns totals")
    with closing(ctx.conn):
        assert not passage_holds_all(ctx)
        weight = unit_weight(ctx)
    assert (weight.rrf, weight.lift, weight.hybrid_lift) == (
        UNIT_WEIGHT_SPREAD,
        UNIT_LIFT_SPREAD,
        UNIT_HYBRID_LIFT,
    )


def test_a_chunk_that_holds_every_word_keeps_the_default_weight(synced: Config) -> None:
    ctx = _context(synced, "report totals foot")
    with closing(ctx.conn):
        assert passage_holds_all(ctx)
        weight = unit_weight(ctx)
    assert (weight.rrf, weight.lift) == (CHANNEL_WEIGHTS["units"], UNIT_LIFT_TOGETHER)


def test_a_question_keeps_the_plain_channel_in_both_modes(synced: Config) -> None:
    ctx = _context(synced, "Where do osprey columns and totals go?")
    with closing(ctx.conn):
        weight = unit_weight(ctx)
    assert (weight.rrf, weight.lift, weight.hybrid_lift) == (CHANNEL_WEIGHTS["units"], 0, 0)


def test_a_word_no_index_serves_does_not_make_a_query_spread(synced: Config) -> None:
    ctx = _context(synced, "report totals x")  # one letter: not searched, so not required
    with closing(ctx.conn):
        assert passage_holds_all(ctx)


def test_a_spread_keyword_query_finds_its_page_first_in_both_modes(synced: Config) -> None:
    query = "osprey columns totals"
    with closing(read_conn(synced)) as conn:
        lexical = rag_search.search(conn, query, rag_search.SearchOptions(top_k=8))
        assert lexical.hits[0].path == "reports.md"
        # Flat cosines for every chunk: the lexical side decides the hybrid order.
        every = [row[0] for row in conn.execute("SELECT id FROM chunks ORDER BY id")]
        semantic = [(cid, 0.8) for cid in every]
        options = rag_search.SearchOptions(top_k=8, mode="hybrid", semantic=semantic)
        hybrid = rag_search.search(conn, query, options)
    assert hybrid.hits[0].path == "reports.md"


def test_the_hybrid_lift_keeps_the_order_and_ratio_of_a_documents_chunks() -> None:
    evidence = {1: 1.0, 2: 0.5, 3: 0.9, 4: 0.3}  # chunks 1, 2 in one document; 3, 4 in another
    units = ChannelResult("units", [(3, 10.0), (4, 10.0), (1, 5.0), (2, 5.0)])
    lifted = fusion.unit_lift(evidence, units, 0.5)
    assert lifted[3] == 1.0  # 0.9 x 1.5 beats 1.0 x 1.25
    assert lifted[4] / lifted[3] == pytest.approx(0.3 / 0.9)
    assert lifted[2] / lifted[1] == pytest.approx(0.5 / 1.0)
    assert lifted[1] == pytest.approx(1.25 / 1.35)


def test_the_hybrid_lift_reads_the_unit_score_on_the_tails_scale(synced: Config) -> None:
    # Twelve documents whose unit scores are within 10 % of each other (12.0, 11.9, ... 10.9):
    # relative to the best, the second's factor is 99 % of the first's; on the tail's scale
    # (mean excess over the last: 0.55) it is 1 + L x exp(-0.1 / 0.55) against 1 + L.
    ctx = _context(synced, "osprey columns totals")
    with closing(ctx.conn):
        weight = unit_weight(ctx, beside_semantic=True)
    assert weight.hybrid_tail is UNIT_HYBRID_TAIL is True
    scores = [12.0 - i / 10 for i in range(12)]
    units = ChannelResult("units", [(i + 1, score) for i, score in enumerate(scores)])
    evidence = {cid: 1.0 for cid in range(1, 13)}  # the passages cannot tell them apart
    relative = fusion.unit_lift(evidence, units, weight.hybrid_lift)
    tail = fusion.unit_lift(evidence, units, weight.hybrid_lift, tail_factors)
    assert relative[2] > 0.99 * relative[1]
    lift = weight.hybrid_lift
    assert tail[1] == 1.0
    assert tail[2] == pytest.approx((1 + lift * math.exp(-0.1 / 0.55)) / (1 + lift))
    assert tail[12] < tail[2] < 0.99 * tail[1]


def test_no_lift_leaves_the_lexical_evidence_as_it_was() -> None:
    evidence = {1: 1.0, 2: 0.5}
    units = ChannelResult("units", [(2, 10.0)])
    assert fusion.unit_lift(evidence, units, 0.0) == evidence
    assert fusion.unit_lift(evidence, ChannelResult("units", []), 0.5) == evidence


def _document_ids(config: Config) -> dict[str, int]:
    with closing(read_conn(config)) as conn:
        return {path: doc for doc, path in conn.execute("SELECT id, path FROM documents")}


def test_a_best_unit_among_many_is_lowered_by_what_a_maximum_gains_by_chance(
    synced: Config,
) -> None:
    docs = _document_ids(synced)
    pdf, page = docs["handbook.pdf"], docs["reports.md"]
    with closing(read_conn(synced)) as conn:
        counts = unit_counts(conn, [pdf, page])
        assert counts == {pdf: 6, page: 1}
        # Equal best scores: the document of one unit is the stronger evidence.
        best = {pdf: (1, 5.0), page: (2, 5.0)}
        scores = [5.0, 5.0, 4.0, 3.0, 1.0]  # the ranked units: mean excess over the last 2.6
        lowered = corrected_maxp(conn, best, scores)
    assert list(lowered) == [page, pdf]
    assert lowered[page] == (2, 5.0)
    harmonic_gain = sum(1 / i for i in range(2, 7))  # H_6 - 1
    assert lowered[pdf][1] == pytest.approx(5.0 - 2.6 * harmonic_gain)


def test_documents_of_one_unit_each_keep_their_maxp_order(synced: Config) -> None:
    docs = _document_ids(synced)
    best = {docs["birds.md"]: (1, 4.0), docs["reports.md"]: (2, 5.0)}
    with closing(read_conn(synced)) as conn:
        assert corrected_maxp(conn, best, [5.0, 4.0, 1.0]) == best
