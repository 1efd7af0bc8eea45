"""The worker's vector stage: the best rows of one generation for one query vector.

A filtered search scores exactly the rows its filter allows (helpers/semantic/allowed.py). An
unfiltered search of a large warm generation ranks the first pass's codes and rescores their
best candidates (helpers/semantic/first_pass.py); anything else scans every vector. Every
returned score comes from `score`, the same scorer on every path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from helpers.semantic import allowed, vector_pack
from helpers.semantic.first_pass import FirstPassCache

Score = Callable[[np.ndarray], np.ndarray]  # float16 [n, dim] -> float32 [n]


@dataclass(frozen=True)
class StageResult:
    hits: list[tuple[int, float]]  # (chunk id, score), best first, ties to the lower id
    summary: str  # for the worker's log: which path, how many rows, how long


def top_hits(
    scanner: vector_pack.GenerationScanner,
    codes: FirstPassCache | None,
    request: Mapping[str, object],
    target: tuple[str, int, str | None, int],  # db, generation, fingerprint, dim
    query: np.ndarray,
    score: Score,
    top_k: int,
) -> StageResult:
    """`score(vectors)` must score rows against `query` (the first pass ranks codes by it)."""
    t0 = time.perf_counter()
    if codes is not None and allowed.from_request(request) is None:
        fp = codes.get(scanner.load(*target, before_read=codes.prefetch))  # None: small
        if fp is not None:
            found = fp.search(query, top_k, score)
            return StageResult(
                found.hits,
                f"first pass {found.first_pass_ms:.0f} ms ({len(fp.warm.ids)} vectors), "
                f"rescore {found.rescore_ms:.0f} ms ({found.candidates} candidates)",
            )
    top = vector_pack.TopK(top_k)
    # With a search filter only the rows it allows are scored.
    blocks = scanner.scan(*target, allowed.restricted(request, lambda i, v: top.add(i, score(v))))
    took = (time.perf_counter() - t0) * 1000
    return StageResult(top.result(), f"read+scan {took:.0f} ms ({blocks} blocks)")
