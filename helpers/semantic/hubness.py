"""Hubness of index vectors: how close each chunk sits to the rest of the index.

In embedding spaces some points (short, generic texts) are near almost everything and show up
in the top candidates of unrelated queries: hubness. CSLS (Conneau et al. 2018) scores a pair
by 2 cos(q, d) - r_q - r_d, r_d = the mean cosine of d to its k nearest neighbours; for one
query r_q is a constant, so the ranking correction is cos(q, d) - r_d. Here the neighbours are
the index's own chunks (a deterministic stride sample, so the cost is bounded), and texts that
are (near) copies of d are not its neighbours: a duplicated page must not count as a hub.
Pure numpy, no I/O: the caller streams the vector blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from helpers.ranking.constants import COSINE_MIN

# Vectors closer than this are the same text (fp16 round trip: cosine error <= 4e-5): a chunk
# and its byte-identical copies are not each other's neighbours.
SAME_TEXT_COSINE = 0.999


def stride_sample(
    blocks: Iterable[tuple[np.ndarray, np.ndarray]], total: int, size: int
) -> np.ndarray:
    """Every ceil(total / size)-th vector in block order as float32 [m, dim] (m <= size):
    deterministic, spread over the whole index, and all of it for a small index."""
    step = max(1, -(-total // size))
    picked: list[np.ndarray] = []
    offset = 0
    for _ids, vectors in blocks:
        n = len(vectors)
        first = (-offset) % step
        if first < n:
            picked.append(np.asarray(vectors[first::step], dtype=np.float32))
        offset += n
    if not picked:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(picked)


def neighbour_means(vectors: np.ndarray, sample: np.ndarray, k: int) -> np.ndarray:
    """Per row of `vectors`: the mean cosine to its k nearest rows of `sample` (k <= 0: to all
    of them), copies of the same text left out (float32 [n]); 0 when the sample has no other
    text."""
    if len(vectors) == 0 or len(sample) == 0:
        return np.zeros(len(vectors), dtype=np.float32)
    sims = np.asarray(vectors, dtype=np.float32) @ sample.T
    sims[sims >= SAME_TEXT_COSINE] = -np.inf
    width = sims.shape[1]
    kk = width if k <= 0 else min(k, width)
    top = sims if kk == width else np.partition(sims, width - kk, axis=1)[:, width - kk :]
    valid = np.isfinite(top)
    counts = valid.sum(axis=1)
    sums = np.where(valid, top, 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), 0.0).astype(np.float32)


# CSLS correction, measured in bench/RESULTS.md ("Hubness correction"): k = 10 neighbours
# among a stride sample of at most 1,024 vectors, the whole centred r_d, gated below.
NEIGHBOURS = 10
SAMPLE_SIZE = 1024
WEIGHT = 1.0
# The correction applies in full when the query's best cosine is at most WEAK_COSINE and not at
# all from STRONG_COSINE up, linearly between: hubs take the first places when a query is far
# from every text (nothing matches it well), while a query with any real match is ranked by it.
# STRONG_COSINE is the confidence band's weak semantic evidence: above it the semantic side has
# a match and the correction only reshuffles it. Weight and lower bound chosen leave-one-set-out
# over five cross-lingual sets (bench/notes/x-fuse.md "Hubness gate").
WEAK_COSINE = 0.80
STRONG_COSINE = COSINE_MIN


def weight_for(top_cosine: float, weight: float | None = None) -> float:
    """The correction's weight for a query whose best candidate has `top_cosine` (0: none)."""
    base = WEIGHT if weight is None else weight
    span = STRONG_COSINE - WEAK_COSINE
    return base * min(1.0, max(0.0, (STRONG_COSINE - top_cosine) / span))


class HubnessIndex:
    """One generation's reference sample; each chunk's neighbour mean is computed the first
    time it is a candidate of a query that needs the correction, then kept (centred by the
    sample's own mean, so a chunk of average hubness keeps its cosine)."""

    def __init__(self, sample: np.ndarray, neighbours: int | None = None) -> None:
        self.sample = sample
        self.k = NEIGHBOURS if neighbours is None else neighbours
        own = neighbour_means(sample, sample, self.k) if len(sample) else np.zeros(0)
        self.centre = float(own.mean()) if len(own) else 0.0
        self.values: dict[int, float] = {}

    def missing(self, chunk_ids: Iterable[int]) -> list[int]:
        return [cid for cid in chunk_ids if cid not in self.values]

    def add(self, chunk_ids: Sequence[int], vectors: np.ndarray) -> None:
        r = neighbour_means(vectors, self.sample, self.k)
        for cid, value in zip(chunk_ids, r, strict=True):
            self.values[int(cid)] = float(value) - self.centre

    def correct(self, hits: list[tuple[int, float]], weight: float) -> list[tuple[int, float]]:
        """(chunk id, cosine - weight x centred r) re-sorted best first (stable); a chunk
        never added counts as average (0)."""
        if not hits or weight == 0:
            return hits
        scored = [(cid, round(cos - weight * self.values.get(cid, 0.0), 6)) for cid, cos in hits]
        return sorted(scored, key=lambda h: -h[1])
