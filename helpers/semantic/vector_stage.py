"""The worker's vector stage: the best rows of one generation for one query vector.

A filtered search scores exactly the rows its filter allows (helpers/semantic/allowed.py). An
unfiltered search of a large warm generation ranks the first pass's codes and rescores their
best candidates (helpers/semantic/first_pass.py); anything else scans every vector. Every
returned score comes from `score`, the same scorer on every path.

A warm worker's first searches of a large generation do not wait for its vectors (768 MB at 1M):
they are answered from the stored codes plus the candidates' rows read on demand
(helpers/semantic/lazy_rows.py), the same rows and bytes, hence the same answer, while every
vector is read into memory on a background thread; later searches use that. `prepare` loads
the codes before the query is embedded, so that overlaps the model's load after a start.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from helpers.semantic import allowed, lazy_rows, vector_pack
from helpers.semantic.first_pass import FirstPass, FirstPassCache, FirstPassHits

Score = Callable[[np.ndarray], np.ndarray]  # float16 [n, dim] -> float32 [n]
Target = tuple[str, int, str | None, int]  # db, generation, fingerprint, dim


@dataclass(frozen=True)
class StageResult:
    hits: list[tuple[int, float]]  # (chunk id, score), best first, ties to the lower id
    summary: str  # for the worker's log: which path, how many rows, how long


def prepare(
    scanner: vector_pack.GenerationScanner,
    codes: FirstPassCache | None,
    request: Mapping[str, object],
    target: Target,
) -> None:
    """Before the query is embedded (the model may still be loading): an unfiltered search's
    first pass made from the stored codes. Only saves time: `top_hits` does whatever this did
    not, and reports what fails here. Any other search reads every vector after the model, as
    before: started on a thread beside the model's load, the 1M read was slower (exact first
    search 7.0-7.7 s against 4.3-5.7 s, bench/notes/lazy-first.md)."""
    if codes is None or allowed.from_request(request) is not None:
        return
    try:
        with vector_pack.open_generation(*target) as (conn, key):
            scanner.keep_only(key)
            if scanner.held(key) is None:
                codes.lazy(conn, key, target[3])
    except (vector_pack.ScanError, sqlite3.Error):
        return


def top_hits(
    scanner: vector_pack.GenerationScanner,
    codes: FirstPassCache | None,
    request: Mapping[str, object],
    target: Target,
    query: np.ndarray,
    score: Score,
    top_k: int,
) -> StageResult:
    """`score(vectors)` must score rows against `query` (the first pass ranks codes by it)."""
    t0 = time.perf_counter()
    if codes is not None and allowed.from_request(request) is None:
        staged = _first_pass(scanner, codes, target, query, score, top_k)
        if staged is not None:
            return staged
    top = vector_pack.TopK(top_k)
    # With a search filter only the rows it allows are scored.
    blocks = scanner.scan(*target, allowed.restricted(request, lambda i, v: top.add(i, score(v))))
    took = (time.perf_counter() - t0) * 1000
    return StageResult(top.result(), f"read+scan {took:.0f} ms ({blocks} blocks)")


def _first_pass(
    scanner: vector_pack.GenerationScanner,
    codes: FirstPassCache,
    target: Target,
    query: np.ndarray,
    score: Score,
    top_k: int,
) -> StageResult | None:
    """The first pass's answer (None: the generation is small or faiss is missing)."""
    staged = _on_demand(scanner, codes, target, query, score, top_k)
    if staged is not None:
        return staged
    fp = codes.get(scanner.load(*target, before_read=codes.prefetch))
    if fp is None:
        return None
    found = fp.search(query, top_k, score)
    return StageResult(found.hits, _summary(fp, found, ""))


def _on_demand(
    scanner: vector_pack.GenerationScanner,
    codes: FirstPassCache,
    target: Target,
    query: np.ndarray,
    score: Score,
    top_k: int,
) -> StageResult | None:
    """Answered from the stored codes and the candidates' rows read now, while the vectors are
    not all in memory; None once they are, or when the codes cannot answer alone."""
    with vector_pack.open_generation(*target) as (conn, key):
        if scanner.held(key) is not None:
            return None
        scanner.keep_only(key)
        fp = codes.lazy(conn, key, target[3])
        if fp is None:
            return None
        reader = lazy_rows.BlobRows(conn, fp.rows) if not fp.in_memory else None
        found = fp.search(query, top_k, score, None if reader is None else reader.gather)
    scanner.start_read(*target, before_read=codes.prefetch)  # no-op once it is under way
    read = "" if reader is None else f": stored codes + {reader.read} rows read on demand"
    return StageResult(found.hits, _summary(fp, found, read))


def _summary(fp: FirstPass, found: FirstPassHits, read: str) -> str:
    return (
        f"first pass {found.first_pass_ms:.0f} ms ({len(fp.rows.ids)} vectors), "
        f"rescore {found.rescore_ms:.0f} ms ({found.candidates} candidates{read})"
    )
