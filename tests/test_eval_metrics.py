"""Document-level retrieval metrics on hand-made rankings with exact expected values."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.eval import metrics as eval_metrics
from helpers.eval.metrics import (
    QueryOutcome,
    distinct_documents,
    first_relevant_rank,
    mrr_at,
    percentile,
    recall_at,
    summarize,
    summarize_by_lang,
)


def outcome(qid: str, rank: int | None, lang: str = "en", latency: float = 10.0) -> QueryOutcome:
    top = ("a.md", "b.md", "c.md") if rank is not None or qid.startswith("miss") else ()
    return QueryOutcome(qid, lang, rank, top, latency)


def test_sections_of_one_document_collapse_to_its_first_position():
    hits = ["a.md", "a.md", "b.md", "a.md", "c.md", "b.md"]
    assert distinct_documents(hits) == ["a.md", "b.md", "c.md"]


def test_first_relevant_rank_is_one_based_and_takes_the_best_of_several_relevant():
    docs = ["x.md", "y.md", "z.md", "w.md"]
    assert first_relevant_rank(docs, ["z.md"]) == 3
    assert first_relevant_rank(docs, ["w.md", "y.md"]) == 2
    assert first_relevant_rank(docs, ["x.md"]) == 1


def test_first_relevant_rank_is_none_when_no_relevant_document_was_retrieved():
    assert first_relevant_rank(["x.md", "y.md"], ["q.md"]) is None
    assert first_relevant_rank([], ["q.md"]) is None


def test_recall_counts_queries_with_a_relevant_document_within_the_cut_off():
    ranks = [1, 2, 5, None]
    assert recall_at(ranks, 1) == 0.25
    assert recall_at(ranks, 3) == 0.5
    assert recall_at(ranks, 5) == 0.75
    assert recall_at(ranks, 8) == 0.75


def test_mrr_averages_reciprocal_ranks_and_scores_ranks_beyond_the_cut_off_as_zero():
    ranks = [1, 2, 5, None, 12]
    assert mrr_at(ranks, 10) == pytest.approx((1 + 0.5 + 0.2 + 0 + 0) / 5)
    assert mrr_at([10], 10) == pytest.approx(0.1)
    assert mrr_at([11], 10) == 0.0


def test_metrics_of_an_empty_ranking_list_are_zero_not_a_division_error():
    assert recall_at([], 8) == 0.0
    assert mrr_at([], 10) == 0.0
    assert percentile([], 50) == 0.0


def test_percentile_interpolates_linearly_between_closest_ranks():
    values = [40.0, 10.0, 30.0, 20.0]
    assert percentile(values, 50) == pytest.approx(25.0)
    assert percentile(values, 95) == pytest.approx(38.5)
    assert percentile(values, 0) == 10.0
    assert percentile(values, 100) == 40.0
    assert percentile([7.0], 95) == 7.0


def test_percentile_outside_0_to_100_is_refused():
    with pytest.raises(ValueError, match="0..100"):
        percentile([1.0], 101)


def test_summary_reports_every_metric_under_its_wire_name():
    outcomes = [
        outcome("q1", 1, latency=10.0),
        outcome("q2", 3, latency=20.0),
        outcome("q3", 9, latency=30.0),
        outcome("q4", None, latency=40.0),  # no results at all
        outcome("miss5", None, latency=50.0),  # results, none relevant
    ]
    report = summarize(outcomes).to_dict()
    assert report == {
        "queries": 5,
        "recall@1": 0.2,
        "recall@3": 0.4,
        "recall@8": 0.4,
        "mrr@10": round((1 + 1 / 3 + 1 / 9) / 5, 4),
        "zero_results": 1,
        "latency_ms": {"p50": 30.0, "p95": 48.0},
    }


def test_an_extra_cut_off_adds_its_recall_key():
    report = summarize([outcome("q1", 4), outcome("q2", 6)], extra_cutoffs=(5,)).to_dict()
    assert report["recall@5"] == 0.5
    assert report["recall@3"] == 0.0
    assert report["recall@8"] == 1.0


def test_languages_are_summarised_separately_in_sorted_order():
    outcomes = [outcome("e1", 1, "en"), outcome("t1", None, "th"), outcome("e2", 2, "en")]
    by_lang = summarize_by_lang(outcomes)
    assert list(by_lang) == ["en", "th"]
    assert by_lang["en"].queries == 2
    assert by_lang["en"].mrr == pytest.approx(0.75)
    assert by_lang["en"].recall[1] == 0.5
    assert by_lang["th"].queries == 1
    assert by_lang["th"].recall[8] == 0.0
    assert by_lang["th"].zero_results == 1


def test_a_byte_identical_copy_of_the_relevant_document_counts_as_it(tmp_path: Path) -> None:
    (tmp_path / "latin1.7.md").write_text("ISO 8859-1 character set", encoding="utf-8")
    (tmp_path / "iso_8859-1.7.md").write_text("ISO 8859-1 character set", encoding="utf-8")
    (tmp_path / "iso_8859-2.7.md").write_text("ISO 8859-2 character set", encoding="utf-8")
    ranking = ["iso_8859-2.7.md", "iso_8859-1.7.md", "latin1.7.md"]
    assert eval_metrics.first_relevant_rank(ranking, ["latin1.7.md"]) == 3
    assert eval_metrics.copy_rank(tmp_path, ranking, ["latin1.7.md"]) == 2
    assert eval_metrics.copy_rank(tmp_path, ranking[:1], ["latin1.7.md"]) is None
    (tmp_path / "iso_8859-1.7.md").write_text("ISO 8859-1, edited", encoding="utf-8")
    assert eval_metrics.copy_rank(tmp_path, ranking, ["latin1.7.md"]) == 3  # no longer a copy
    assert eval_metrics.copy_rank(tmp_path, ["gone.md", "latin1.7.md"], ["latin1.7.md"]) == 2
