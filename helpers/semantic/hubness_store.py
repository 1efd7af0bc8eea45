"""The hubness correction on a real index: per generation, a reference sample and the neighbour
means of the chunks that were candidates (helpers.semantic.hubness does the math). Reads the
generation's vector blocks through the caller's read-only connection; no ML import."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from helpers.semantic import hubness, vector_pack


@dataclass(frozen=True)
class GenerationRef:
    """A ready generation (immutable): the cache key."""

    db: str
    id: int
    fingerprint: str
    vector_count: int
    dim: int


# Per generation (immutable once ready): the hubness reference sample and the neighbour means
# of the chunks that were candidates so far (helpers.semantic.hubness), kept for the process's
# next queries. Only a query with no close match (hubness.weight_for > 0) pays: the first one
# reads every block once for the sample (bench/bench_hubness.py: about one bare read of the
# vectors), later ones read only the blocks of candidates not seen before.
CACHE_SIZE = 4
# `_lock` guards the two dicts only (held for a lookup); each generation's own lock covers its
# build and its additions, so a first query on a large index (one pass over all its vectors)
# never holds up the searches of another index in the same process.
_lock = threading.Lock()
_cache: dict[GenerationRef, _State] = {}
_building: dict[GenerationRef, threading.Lock] = {}


@dataclass(frozen=True)
class _State:
    index: hubness.HubnessIndex
    ids: np.ndarray  # every chunk id of the generation, sorted
    blocks: np.ndarray  # the block_no holding each of `ids`


def corrected(
    conn: sqlite3.Connection, generation: GenerationRef, hits: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """`hits` re-ranked by cosine - weight x the chunk's hubness, for a query far from every
    text; unchanged (and nothing read) for a query with a close match."""
    weight = hubness.weight_for(max((cos for _, cos in hits), default=1.0))
    if weight == 0:
        return hits
    key = generation
    while True:
        with _lock:
            own = _building.setdefault(key, threading.Lock())
        with own:
            with _lock:
                if _building.get(key) is not own:
                    continue  # evicted while this thread waited: take the current lock
                state = _cache.get(key)
            if state is None:
                try:
                    state = _state(conn, generation)
                except BaseException:
                    with _lock:
                        if key not in _cache and _building.get(key) is own:
                            del _building[key]  # no lock left behind for a failed build
                    raise
                with _lock:
                    while len(_cache) >= CACHE_SIZE:
                        _building.pop(old := next(iter(_cache)), None)
                        _cache.pop(old)
                    _cache[key] = state
            missing = state.index.missing(cid for cid, _ in hits)
            if missing:
                ids, vectors = _candidate_vectors(conn, generation, state, missing)
                state.index.add(ids, vectors)
            return state.index.correct(hits, weight)


def _block_rows(
    conn: sqlite3.Connection, generation: GenerationRef, where: str = "", params: tuple = ()
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    for block_no, ids_blob, vec_blob, n in conn.execute(
        "SELECT block_no, chunk_ids, vectors, count FROM semantic_blocks "
        f"WHERE generation_id = ? {where} ORDER BY block_no",
        (generation.id, *params),
    ):
        vectors = vector_pack.unpack_vectors(vec_blob, n, generation.dim)
        yield block_no, vector_pack.unpack_ids(ids_blob), vectors


def _state(conn: sqlite3.Connection, generation: GenerationRef) -> _State:
    """One pass over the generation: the stride sample and where each chunk id lives."""
    ids_parts, block_parts = [], []

    def blocks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for block_no, ids, vectors in _block_rows(conn, generation):
            ids_parts.append(ids)
            block_parts.append(np.full(len(ids), block_no, dtype=np.int64))
            yield ids, vectors

    sample = hubness.stride_sample(blocks(), generation.vector_count, hubness.SAMPLE_SIZE)
    ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=np.int64)
    where = np.concatenate(block_parts) if block_parts else np.zeros(0, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    return _State(hubness.HubnessIndex(sample), ids[order], where[order])


def _candidate_vectors(
    conn: sqlite3.Connection, generation: GenerationRef, state: _State, wanted: list[int]
) -> tuple[list[int], np.ndarray]:
    """(ids, float32 vectors) of the wanted chunk ids the generation holds."""
    pos = np.clip(np.searchsorted(state.ids, wanted), 0, max(len(state.ids) - 1, 0))
    held = [
        (cid, int(state.blocks[p]))
        for cid, p in zip(wanted, pos, strict=True)
        if len(state.ids) and state.ids[p] == cid
    ]
    needed = sorted({block for _, block in held})
    wanted_set = {cid for cid, _ in held}
    found_ids: list[int] = []
    found: list[np.ndarray] = []
    if needed:
        marks = ",".join("?" * len(needed))
        for _, ids, vectors in _block_rows(
            conn, generation, f"AND block_no IN ({marks})", tuple(needed)
        ):
            for row, cid in enumerate(ids.tolist()):
                if cid in wanted_set:
                    found_ids.append(cid)
                    found.append(vectors[row])
    matrix = (
        np.asarray(found, dtype=np.float32) if found else np.zeros((0, generation.dim), np.float32)
    )
    return found_ids, matrix
