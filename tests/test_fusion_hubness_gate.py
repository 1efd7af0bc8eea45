"""The hubness correction's gate (helpers.semantic.hubness.weight_for): it re-ranks the semantic
side only for a query with no real match anywhere, i.e. below the confidence band's weak
semantic evidence (COSINE_MIN), so a query with a match is ranked by its cosines alone."""

from __future__ import annotations

from helpers.ranking.constants import COSINE_MIN
from helpers.semantic import hubness


def test_a_query_with_weak_semantic_evidence_or_better_is_never_corrected():
    assert hubness.STRONG_COSINE == COSINE_MIN
    assert hubness.weight_for(COSINE_MIN) == 0.0
    assert hubness.weight_for(0.86) == 0.0  # a typical keyword query in another language


def test_a_query_far_from_every_text_gets_the_whole_correction():
    assert hubness.weight_for(hubness.WEAK_COSINE) == hubness.WEIGHT
    assert hubness.weight_for(0.70) == hubness.WEIGHT


def test_the_weight_rises_steadily_between_the_two_bounds():
    steps = [hubness.WEAK_COSINE + i * 0.01 for i in range(5)]
    weights = [hubness.weight_for(c) for c in steps]
    assert weights == sorted(weights, reverse=True)
    assert 0.0 < weights[2] < hubness.WEIGHT
