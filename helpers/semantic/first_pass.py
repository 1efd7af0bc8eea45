"""Vector search that does not score everything: RaBitQ codes first, exact float16 rescoring.

A warm worker holding a large generation ranks every vector's RaBitQ code (helpers/semantic/
rabitq.py: one bit a dimension of x - centroid with RaBitQ's inner-product estimator; Gao &
Long, SIGMOD 2024), takes the best `candidates(k, n)` rows and scores those exactly with the
same scorer as the exact scan, so every returned score is exact and the order is the exact
order of the rows it holds. The codes come from the index, stored with their generation by the
sync (helpers/semantic/code_store.py); missing or damaged ones are encoded from the stored
vectors with the stored centroid, which gives the same codes. Filtered searches do not come
here: they score exactly the rows the filter allows (helpers/semantic/allowed.py).

Until a generation's vectors are all in memory, its first pass can be made from the stored codes
alone (`FirstPass.from_stored`, `FirstPassCache.lazy`): the candidates' rows are then read on
demand (helpers/semantic/lazy_rows.py), the same bytes, so the answer is the same.

faiss is imported when the first index is built, never at import time, so processes that never
search a large generation never load it.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helpers.semantic import code_store, lazy_rows, rabitq
from helpers.semantic.lazy_rows import RowMap
from helpers.semantic.vector_pack import TopK, WarmGeneration
from helpers.store.read_only import connect_read_only

log = logging.getLogger(__name__)

# From 100k vectors on a search costs 0.11-0.27x the exact scan, and with the codes stored in
# the index the first search after a worker start loads them instead of encoding every vector
# (bench/notes/v-store.md); below it the exact scan takes a few ms and the saving is small.
MIN_VECTORS: int | None = 100_000
# Candidates rescored per requested hit: at least CANDIDATES_PER_HIT, and more as the generation
# grows, PER_HIT_PER_SQRT_N * sqrt(n) (the candidates that held recall@400 >= 0.99 grew like
# sqrt(n) from 13k real to 1M synthetic vectors: bench/notes/v-index.md, section 2).
CANDIDATES_PER_HIT = 8
PER_HIT_PER_SQRT_N = 0.06
FACTORY = rabitq.FACTORY
# Candidates gathered and scored at a time, into one reused buffer: the rescore allocates
# nothing per search, and the scorer never grows its arena past 4,096 rows (6 MB in float32).
RESCORE_ROWS = 4_096

# (ascending row numbers, float16 [len, dim] out): fills out with those rows' vectors.
Gather = Callable[[np.ndarray, np.ndarray], None]


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


class FirstPass:
    """The codes of one generation; `search` is deterministic for the same generation. `rows`
    is the generation in memory, or only its chunk ids (RowMap: the candidates' vectors are then
    gathered by the caller's reader)."""

    def __init__(self, rows: WarmGeneration | RowMap, index: Any, build_s: float) -> None:
        self.rows = rows
        self.index = index
        self.build_s = build_s
        self._buffer = np.empty((min(RESCORE_ROWS, len(rows.ids)), index.d), dtype="<f2")

    @property
    def in_memory(self) -> bool:
        return isinstance(self.rows, WarmGeneration)

    def with_vectors(self, warm: WarmGeneration) -> FirstPass:
        """The same codes over the generation now in memory (nothing is encoded again)."""
        if warm.key != self.rows.key:
            raise ValueError("the vectors of another generation")
        return FirstPass(warm, self.index, self.build_s)

    @classmethod
    def build(cls, warm: WarmGeneration, threads: int, factory: str = FACTORY) -> FirstPass:
        """Codes encoded now from the vectors (benches; `factory` other faiss codes)."""
        t0 = time.perf_counter()
        if factory != FACTORY:
            return cls(warm, _factory_index(warm, threads, factory), time.perf_counter() - t0)
        centroid = rabitq.fit_centroid(warm.vectors)
        codes = rabitq.encode(warm.vectors, centroid, threads)
        index = rabitq.index_from_codes(codes, centroid, warm.vectors)
        return cls(warm, index, time.perf_counter() - t0)

    @classmethod
    def from_stored(
        cls, conn: sqlite3.Connection, rows: RowMap, dim: int, threads: int
    ) -> tuple[FirstPass, code_store.LoadedCodes] | str:
        """Codes read from the index through `conn` (one read transaction), a missing or damaged
        row encoded from its block's vectors read now; or why the stored codes cannot answer
        without every vector in memory (no usable header: the centroid must be fit on all of
        them; a faiss that packs codes its own way: it must `add` every vector)."""
        t0 = time.perf_counter()
        generation = int(rows.key[1])
        header = code_store.usable_header(conn, generation, dim, len(rows.ids), len(rows.counts))
        if isinstance(header, str):
            return header

        def block_vectors(block: int, at: int, end: int) -> np.ndarray:
            return lazy_rows.read_block(conn, generation, block, dim)

        # read before faiss is needed: its import (prefetched on a thread) overlaps the rows
        loaded = code_store.load_rows(conn, header, rows.counts, threads, block_vectors)
        if not rabitq.available():
            return "faiss-cpu is not installed"
        if not rabitq.layout_matches(dim):
            return "this faiss lays codes out its own way"
        index = rabitq.index_from_codes(loaded.codes, loaded.centroid, None)
        return cls(rows, index, time.perf_counter() - t0), loaded

    @classmethod
    def load(cls, warm: WarmGeneration, threads: int) -> tuple[FirstPass, code_store.LoadedCodes]:
        """Codes read from the index where stored and intact, the rest encoded now."""
        t0 = time.perf_counter()
        db, generation = warm.key[0], warm.key[1]
        counts = [len(ids) for ids, _ in warm.blocks]
        try:
            conn = connect_read_only(Path(db))
            try:
                # one snapshot: a sync rewriting the codes meanwhile (code_store.ensure) cannot
                # pair the header read first with rows written against another centroid
                conn.execute("BEGIN")
                loaded = code_store.load(conn, generation, warm.vectors, counts, threads)
            finally:
                conn.close()
        except sqlite3.Error as exc:  # the codes are a cache: a bad read costs time, not a search
            log.warning(
                "first-pass codes of generation %s unreadable (%s): encoded now", generation, exc
            )
            centroid = rabitq.fit_centroid(warm.vectors)
            codes = rabitq.encode(warm.vectors, centroid, threads)
            loaded = code_store.LoadedCodes(centroid, codes, len(counts), len(counts), False)
        index = rabitq.index_from_codes(loaded.codes, loaded.centroid, warm.vectors)
        return cls(warm, index, time.perf_counter() - t0), loaded

    @property
    def code_bytes(self) -> int:
        return rabitq.code_bytes(_codes(self.index))

    def search(
        self,
        query: np.ndarray,
        k: int,
        score: Callable[[np.ndarray], np.ndarray],
        gather: Gather | None = None,
    ) -> FirstPassHits:
        """The best k rows among the first pass's candidates, scored by `score(vectors)`; the
        candidates' vectors come from memory, or from `gather` (needed without them)."""
        n = len(self.rows.ids)
        want = candidates(k, n)
        t0 = time.perf_counter()
        _, found = self.index.search(np.asarray(query, dtype=np.float32).reshape(1, -1), want)
        rows = np.sort(found[0][found[0] >= 0])  # row order: the gather reads memory forwards
        t1 = time.perf_counter()
        fill = self._from_memory if gather is None else gather
        top = TopK(k)
        for at in range(0, len(rows), len(self._buffer)):
            part = rows[at : at + len(self._buffer)]
            gathered = self._buffer[: len(part)]
            fill(part, gathered)
            top.add(self.rows.ids[part], score(gathered))
        t2 = time.perf_counter()
        return FirstPassHits(top.result(), len(rows), (t1 - t0) * 1000, (t2 - t1) * 1000)

    def _from_memory(self, rows: np.ndarray, out: np.ndarray) -> None:
        if not isinstance(self.rows, WarmGeneration):
            raise ValueError("the vectors are not in memory: pass a gather")
        np.take(self.rows.vectors, rows, axis=0, out=out)


def _codes(index: Any) -> Any:
    """The RaBitQ index itself, under a pre-transform (a rotation) when there is one."""
    import faiss

    return faiss.downcast_index(index.index if hasattr(index, "index") else index)


def _factory_index(warm: WarmGeneration, threads: int, factory: str) -> Any:
    """Another faiss code over every vector (the benches compare them)."""
    import faiss

    n, dim = warm.vectors.shape
    index = faiss.index_factory(dim, factory.format(dim=dim), faiss.METRIC_INNER_PRODUCT)
    step = max(1, n // rabitq.TRAIN_SAMPLE)
    faiss.omp_set_num_threads(1)
    index.train(np.ascontiguousarray(warm.vectors[::step][: rabitq.TRAIN_SAMPLE], np.float32))
    faiss.omp_set_num_threads(threads)
    for at in range(0, n, rabitq.ENCODE_ROWS):
        part = warm.vectors[at : at + rabitq.ENCODE_ROWS]
        index.add(np.ascontiguousarray(part, dtype=np.float32))
    _codes(index).qb = rabitq.QUERY_BITS
    faiss.omp_set_num_threads(1)  # one query at a time: faiss splits work by query
    return index


class FirstPassCache:
    """At most one FirstPass: the one of the warm generation last searched."""

    def __init__(self, threads: int, min_vectors: int | None = MIN_VECTORS) -> None:
        self.threads = threads
        self.min_vectors = min_vectors
        self.current: FirstPass | None = None
        self._warned = False
        self._prefetched = False
        self._not_lazy: tuple[Any, ...] | None = None  # a generation whose codes need its vectors

    def prefetch(self, count: int) -> None:
        """Import faiss on another thread while a generation that will need it is read (its
        0.5 s import then overlaps the vectors' read instead of following it)."""
        if self.min_vectors is not None and count >= self.min_vectors and not self._prefetched:
            self._prefetched = True
            threading.Thread(target=rabitq.available, name="faiss-import", daemon=True).start()

    def get(self, warm: WarmGeneration) -> FirstPass | None:
        """The generation's first pass (built now if needed); None when it is small or faiss
        is not installed (then the exact scan answers)."""
        if self.min_vectors is None or len(warm.ids) < self.min_vectors:
            self.current = None
            return None
        if self.current is not None and self.current.rows.key == warm.key:
            if not self.current.in_memory:
                self.current = self.current.with_vectors(warm)
            return self.current
        self.current = None  # the old codes go before the new ones are built
        if not self._faiss():
            return None
        self.current, loaded = FirstPass.load(warm, self.threads)
        log.info(
            "first pass ready for %d vectors in %.2f s (%d code bytes; %s)",
            len(warm.ids),
            self.current.build_s,
            self.current.code_bytes,
            _source(loaded),
        )
        return self.current

    def lazy(self, conn: sqlite3.Connection, key: tuple[Any, ...], dim: int) -> FirstPass | None:
        """The first pass of the generation of `key` (vector_pack.open_generation's, checked in
        `conn`'s transaction) from its stored codes alone, made now if needed; None when it is
        small, faiss is missing or its codes need every vector (the caller reads them first)."""
        count = int(key[3])
        if self.min_vectors is None or count < self.min_vectors or self._not_lazy == key:
            return None
        if self.current is not None and self.current.rows.key == key:
            return self.current
        self.current = None  # the old codes go before the new ones are read
        self.prefetch(count)  # faiss imports while the ids and codes are read
        rows = lazy_rows.read_row_map(conn, key)
        try:
            made = FirstPass.from_stored(conn, rows, dim, self.threads)
        except sqlite3.Error as exc:
            made = f"codes unreadable ({exc})"
        except ImportError:  # a damaged row to encode and no faiss to do it
            made = "faiss-cpu is not installed"
        if isinstance(made, str):
            log.info(
                "first search of generation %s waits for every vector to be read: %s",
                key[1],
                made,
            )
            self._not_lazy = key
            return None
        self.current, loaded = made
        log.info(
            "first pass ready for %d vectors in %.2f s (%d code bytes; %s; candidates' rows read "
            "on demand until the vectors are in memory)",
            count,
            self.current.build_s,
            self.current.code_bytes,
            _source(loaded),
        )
        return self.current

    def _faiss(self) -> bool:
        if rabitq.available():
            return True
        if not self._warned:
            log.warning("faiss-cpu is not installed: every search scans all vectors")
            self._warned = True
        return False


def _source(loaded: code_store.LoadedCodes) -> str:
    if not loaded.header_ok:
        return "every code rebuilt from the stored vectors"
    if loaded.rebuilt_blocks:
        return f"{loaded.rebuilt_blocks} of {loaded.block_count} blocks rebuilt, the rest stored"
    return "stored codes"
