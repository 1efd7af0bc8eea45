"""The lexical share of one hybrid query: the more decisive side leans the mix."""

from __future__ import annotations

from helpers.ranking.constants import (
    HYBRID_LEXICAL_BASE,
    HYBRID_MARGIN_GAIN,
    HYBRID_SHARE_BOUNDS,
)


def hybrid_share(lexical: list[float], semantic: list[float]) -> float:
    """Lexical share for one query from each side's 0-1 section scores: the more decisive
    side (larger gap between its top two) gets more weight."""

    def margin(values: list[float]) -> float:
        top = sorted(values, reverse=True)[:2]
        return top[0] - top[1] if len(top) == 2 else float(bool(top))

    share = HYBRID_LEXICAL_BASE + HYBRID_MARGIN_GAIN * (margin(lexical) - margin(semantic))
    low, high = HYBRID_SHARE_BOUNDS
    return min(high, max(low, share))
