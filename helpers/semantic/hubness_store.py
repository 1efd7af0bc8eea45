"""The hubness correction on a real index: per generation, a reference sample and the neighbour
means of the chunks that were candidates (helpers.semantic.hubness does the math). Reads the
rows it needs out of the generation's vector blocks (incremental BLOB I/O) through the caller's
connection; no ML import."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from helpers.semantic import hubness, vector_pack
from helpers.store.batched import rows_in


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
# reads every block's chunk ids and the sampled rows' vectors (never every vector), later ones
# read only the rows of candidates not seen before.
CACHE_SIZE = 4
# `_lock` guards the two dicts only (held for a lookup); each generation's own lock covers its
# build and its additions, so a first query on a large index (one pass over all its vectors)
# never holds up the searches of another index in the same process.
_lock = threading.Lock()
# Past this many wanted rows of one block a single read of its whole BLOB (768 KB) is cheaper
# than a seek and a read per row (a small index samples every row of every block).
WHOLE_BLOCK_ROWS = 64
_cache: dict[GenerationRef, _State] = {}
_building: dict[GenerationRef, threading.Lock] = {}


@dataclass(frozen=True)
class _State:
    index: hubness.HubnessIndex
    ids: np.ndarray  # every chunk id of the generation, sorted
    blocks: np.ndarray  # the block_no holding each of `ids`
    rows: np.ndarray  # its row within that block


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


def _block_ids(
    conn: sqlite3.Connection, generation: GenerationRef
) -> Iterator[tuple[int, np.ndarray]]:
    """(block_no, chunk ids) of every block: the id arrays only, never a vector BLOB."""
    for block_no, ids_blob in conn.execute(
        "SELECT block_no, chunk_ids FROM semantic_blocks WHERE generation_id = ? ORDER BY block_no",
        (generation.id,),
    ):
        yield block_no, vector_pack.unpack_ids(ids_blob)


def _read_rows(
    conn: sqlite3.Connection, generation: GenerationRef, rows: dict[int, list[int]]
) -> dict[tuple[int, int], np.ndarray]:
    """float16 vectors of the wanted (block_no, row) pairs, read with incremental BLOB I/O so
    only those rows' bytes leave the file, not their blocks' 1,024 vectors each."""
    width = generation.dim * vector_pack.VECTOR_DTYPE.itemsize
    found: dict[tuple[int, int], np.ndarray] = {}
    sql = (
        "SELECT block_no, rowid FROM semantic_blocks WHERE generation_id = ? "
        "AND block_no IN ({marks})"
    )
    located = list(rows_in(conn, sql, sorted(rows), before=(generation.id,)))
    for block_no, rowid in located:
        wanted = rows[block_no]
        with conn.blobopen("semantic_blocks", "vectors", rowid, readonly=True) as blob:
            if len(wanted) > WHOLE_BLOCK_ROWS:
                whole = np.frombuffer(blob.read(), dtype=vector_pack.VECTOR_DTYPE)
                block = whole.reshape(-1, generation.dim)
                found.update(((block_no, row), block[row]) for row in wanted)
                continue
            for row in wanted:
                blob.seek(row * width)
                found[(block_no, row)] = np.frombuffer(
                    blob.read(width), dtype=vector_pack.VECTOR_DTYPE
                )
    return found


def _state(conn: sqlite3.Connection, generation: GenerationRef) -> _State:
    """The stride sample (hubness.stride_sample's rows, read row by row) and where each chunk id
    lives: reads every id array but only the sampled vectors (~SAMPLE_SIZE of them)."""
    step = max(1, -(-generation.vector_count // hubness.SAMPLE_SIZE))
    ids_parts, block_parts, row_parts = [], [], []
    sampled: dict[int, list[int]] = {}
    offset = 0
    for block_no, ids in _block_ids(conn, generation):
        ids_parts.append(ids)
        block_parts.append(np.full(len(ids), block_no, dtype=np.int64))
        row_parts.append(np.arange(len(ids), dtype=np.int64))
        picked = list(range((-offset) % step, len(ids), step))
        if picked:
            sampled[block_no] = picked
        offset += len(ids)
    vectors = _read_rows(conn, generation, sampled)
    order_in_file = [vectors[(b, r)] for b in sorted(sampled) for r in sampled[b]]
    sample = (
        np.asarray(order_in_file, dtype=np.float32)
        if order_in_file
        else np.zeros((0, 0), dtype=np.float32)
    )
    ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=np.int64)
    where = np.concatenate(block_parts) if block_parts else np.zeros(0, dtype=np.int64)
    rows = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    return _State(hubness.HubnessIndex(sample), ids[order], where[order], rows[order])


def _candidate_vectors(
    conn: sqlite3.Connection, generation: GenerationRef, state: _State, wanted: list[int]
) -> tuple[list[int], np.ndarray]:
    """(ids, float32 vectors) of the wanted chunk ids the generation holds (their rows only)."""
    pos = np.clip(np.searchsorted(state.ids, wanted), 0, max(len(state.ids) - 1, 0))
    held = [
        (cid, int(state.blocks[p]), int(state.rows[p]))
        for cid, p in zip(wanted, pos, strict=True)
        if len(state.ids) and state.ids[p] == cid
    ]
    rows: dict[int, list[int]] = {}
    for _, block, row in held:
        rows.setdefault(block, []).append(row)
    vectors = _read_rows(conn, generation, rows)
    found_ids = [cid for cid, _, _ in held]
    matrix = (
        np.asarray([vectors[(block, row)] for _, block, row in held], dtype=np.float32)
        if held
        else np.zeros((0, generation.dim), np.float32)
    )
    return found_ids, matrix
