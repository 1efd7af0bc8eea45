"""Vector search that does not score everything: RaBitQ codes first, exact float16 rescoring.

A warm worker holding a large generation derives compact codes of its vectors when it loads
them (faiss `IndexRaBitQFastScan`: one bit a dimension of each vector minus the centroid, with
RaBitQ's inner-product estimator; Gao & Long, SIGMOD 2024). A search ranks every code, takes
the best `candidates(k, n)` rows and scores those exactly with the same scorer as the exact
scan, so every returned score is exact and the order is the exact order of the rows it holds.
The codes live only in the worker's memory, built from the generation's own stored vectors,
so there is no second file that could be stale or half-written, and they go with the
generation. Filtered searches do not come here: they score exactly the rows the filter allows
(helpers/semantic/allowed.py).

faiss is imported when the first index is built, never at import time, so processes that never
search a large generation never load it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.semantic.vector_pack import TopK, WarmGeneration

log = logging.getLogger(__name__)

# Off unless asked for (`--first-pass-min-vectors N`): the codes are built when a worker loads a
# generation, ~9 s at 1M vectors, and a warm worker exits after 5 idle minutes, so a burst of
# agent searches pays more than it saves until the codes are stored with their generation. From
# 100k on a search costs 0.11-0.27x the exact scan once they are built; below 100k the exact
# scan takes a few ms and the saving is small (bench/notes/v-index.md).
MIN_VECTORS: int | None = None
# Candidates rescored per requested hit: at least CANDIDATES_PER_HIT, and more as the generation
# grows, PER_HIT_PER_SQRT_N * sqrt(n) (the candidates that held recall@400 >= 0.99 grew like
# sqrt(n) from 13k real to 1M synthetic vectors: bench/notes/v-index.md, section 2).
CANDIDATES_PER_HIT = 8
PER_HIT_PER_SQRT_N = 0.06
# faiss factory string: RaBitQ fast-scan codes, one bit a dimension (two bits need far fewer
# candidates but build several times slower: bench/notes/v-index.md "Rejected on the way").
FACTORY = "RaBitQfs"
QUERY_BITS = 8  # the query's own quantisation in the estimator (faiss's qb)
TRAIN_SAMPLE = 16_384  # RaBitQ trains only the centroid: an evenly spaced sample of rows
ENCODE_ROWS = 16_384  # rows converted to float32 and encoded at a time (25 MB at 384 dims)
# Candidates gathered and scored at a time, into one reused buffer: the rescore allocates
# nothing per search, and the scorer never grows its arena past 4,096 rows (6 MB in float32).
RESCORE_ROWS = 4_096


@dataclass(frozen=True)
class FirstPassHits:
    hits: list[tuple[int, float]]  # (chunk id, exact score), best first, ties to the lower id
    candidates: int  # rows rescored exactly
    first_pass_ms: float
    rescore_ms: float


def candidates(k: int, n: int) -> int:
    """Rows to rescore for the best k of n."""
    per_hit = max(CANDIDATES_PER_HIT, PER_HIT_PER_SQRT_N * math.sqrt(n))
    return min(n, math.ceil(per_hit * k))


def available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


class FirstPass:
    """The codes of one warm generation; `search` is deterministic for the same generation."""

    def __init__(self, warm: WarmGeneration, index: Any, build_s: float) -> None:
        self.warm = warm
        self.index = index
        self.build_s = build_s
        rows = min(RESCORE_ROWS, len(warm.ids))
        self._buffer = np.empty((rows, warm.vectors.shape[1]), dtype=warm.vectors.dtype)

    @classmethod
    def build(cls, warm: WarmGeneration, threads: int, factory: str = FACTORY) -> FirstPass:
        # faiss's loader logs every CPU-specific build it looks for and does not ship, at INFO.
        logging.getLogger("faiss.loader").setLevel(logging.WARNING)
        import faiss

        t0 = time.perf_counter()
        n, dim = warm.vectors.shape
        index = faiss.index_factory(dim, factory.format(dim=dim), faiss.METRIC_INNER_PRODUCT)
        step = max(1, n // TRAIN_SAMPLE)
        faiss.omp_set_num_threads(1)  # the centroid: one summation order, whatever the machine
        index.train(np.ascontiguousarray(warm.vectors[::step][:TRAIN_SAMPLE], dtype=np.float32))
        faiss.omp_set_num_threads(threads)  # each row's code is computed on its own
        for at in range(0, n, ENCODE_ROWS):
            index.add(np.ascontiguousarray(warm.vectors[at : at + ENCODE_ROWS], dtype=np.float32))
        _codes(index).qb = QUERY_BITS
        faiss.omp_set_num_threads(1)  # one query at a time: faiss splits work by query
        return cls(warm, index, time.perf_counter() - t0)

    @property
    def code_bytes(self) -> int:
        return int(_codes(self.index).codes.size())

    def search(
        self, query: np.ndarray, k: int, score: Callable[[np.ndarray], np.ndarray]
    ) -> FirstPassHits:
        """The best k rows among the first pass's candidates, scored by `score(vectors)`."""
        n = len(self.warm.ids)
        want = candidates(k, n)
        t0 = time.perf_counter()
        _, found = self.index.search(np.asarray(query, dtype=np.float32).reshape(1, -1), want)
        rows = np.sort(found[0][found[0] >= 0])  # row order: the gather reads memory forwards
        t1 = time.perf_counter()
        top = TopK(k)
        for at in range(0, len(rows), len(self._buffer)):
            part = rows[at : at + len(self._buffer)]
            gathered = self._buffer[: len(part)]
            np.take(self.warm.vectors, part, axis=0, out=gathered)
            top.add(self.warm.ids[part], score(gathered))
        t2 = time.perf_counter()
        return FirstPassHits(top.result(), len(rows), (t1 - t0) * 1000, (t2 - t1) * 1000)


def _codes(index: Any) -> Any:
    """The RaBitQ index itself, under a pre-transform (a rotation) when there is one."""
    import faiss

    return faiss.downcast_index(index.index if hasattr(index, "index") else index)


class FirstPassCache:
    """At most one FirstPass: the one of the warm generation last searched."""

    def __init__(self, threads: int, min_vectors: int | None = MIN_VECTORS) -> None:
        self.threads = threads
        self.min_vectors = min_vectors
        self.current: FirstPass | None = None
        self._warned = False

    def get(self, warm: WarmGeneration) -> FirstPass | None:
        """The generation's first pass (built now if needed); None when it is small or faiss
        is not installed (then the exact scan answers)."""
        if self.min_vectors is None or len(warm.ids) < self.min_vectors:
            self.current = None
            return None
        if self.current is not None and self.current.warm.key == warm.key:
            return self.current
        self.current = None  # the old codes go before the new ones are built
        if not available():
            if not self._warned:
                log.warning("faiss-cpu is not installed: every search scans all vectors")
                self._warned = True
            return None
        self.current = FirstPass.build(warm, self.threads)
        log.info(
            "first pass built for %d vectors in %.1f s (%d code bytes)",
            len(warm.ids),
            self.current.build_s,
            self.current.code_bytes,
        )
        return self.current
