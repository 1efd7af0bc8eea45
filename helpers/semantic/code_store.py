"""The first pass's codes stored with their semantic generation (migration 13).

Codes are a derived cache of the vectors: one `semantic_codes` row per `semantic_blocks` row
(same block_no, count and row order), each row's codes a faiss RaBitQ code per vector
(helpers/semantic/rabitq.py), and one `semantic_code_sets` row per generation holding the
centroid every code was computed against. The sync writes them before it publishes the
generation (a killed build leaves an unpublished generation, deleted by the next build), and
deletes them with it. A warm worker loads them instead of encoding every vector; a block whose
row is missing or fails its checksum is encoded again from its stored vectors with the stored
centroid, which gives the same bytes, so results never depend on what was stored.

A code depends only on its vector and the centroid, so a new generation copies the codes of
the vectors it copies from the previous one and encodes only the new ones, keeping that
centroid until the vectors encoded since it was fit reach REFIT_SHARE of the generation.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from helpers.semantic import rabitq
from helpers.semantic.vector_pack import unpack_vectors
from helpers.store import connection
from helpers.store.codec import HASH_BYTES

log = logging.getLogger(__name__)

# Generations smaller than this get no stored codes: below it the worker scans every vector
# (helpers.semantic.first_pass.MIN_VECTORS; bench/notes/v-store.md).
STORE_MIN_VECTORS = 100_000
# Refit the centroid once this share of a generation's vectors was encoded after the fit: RaBitQ
# stays unbiased for any centroid, only its error grows as the centroid drifts from the mean.
REFIT_SHARE = 0.5
# SQLite's words for a table this file does not have (a schema-12 file opened read-only).
MISSING_TABLE = "no such table"

ShouldStop = Callable[[], bool]


class CodesDamaged(ValueError):
    """A stored code row or header that does not match its generation."""


@dataclass(frozen=True)
class Header:
    """A generation's `semantic_code_sets` row."""

    generation: int
    version: int
    dim: int
    code_size: int
    vector_count: int
    block_count: int
    centroid: np.ndarray  # float32 [dim]
    fit_count: int  # vectors the centroid was fit on
    drift: int  # vectors encoded against it since
    checksum: int


@dataclass(frozen=True)
class LoadedCodes:
    """Every code of a generation in block order, and how much of it had to be encoded now."""

    centroid: np.ndarray
    codes: np.ndarray  # uint8 [n, code_size]
    rebuilt_blocks: int  # blocks encoded from their vectors (missing or damaged rows)
    block_count: int
    header_ok: bool  # False: the centroid was fit again from the vectors


def _header_checksum(
    version: int, dim: int, code_size: int, count: int, blocks: int, centroid: bytes
) -> int:
    return zlib.crc32(f"{version}:{dim}:{code_size}:{count}:{blocks}:".encode() + centroid)


def read_header(conn: sqlite3.Connection, generation: int) -> Header | None:
    """The generation's header, or None when it has none (a table an older schema lacks too)."""
    try:
        row = conn.execute(
            "SELECT version, dim, code_size, vector_count, block_count, centroid, fit_count, "
            "drift, checksum FROM semantic_code_sets WHERE generation_id = ?",
            (generation,),
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if MISSING_TABLE in str(exc):  # a schema-12 file opened read-only: no codes table
            return None
        raise  # a locked or unreadable file is no "no codes": the caller reports it
    if row is None:
        return None
    version, dim, code_size, count, blocks, centroid, fit_count, drift, checksum = tuple(row)
    return Header(
        generation,
        version,
        dim,
        code_size,
        count,
        blocks,
        np.frombuffer(centroid, dtype="<f4"),
        fit_count,
        drift,
        checksum,
    )


def header_problem(header: Header, dim: int, count: int, blocks: int) -> str | None:
    """Why the header cannot be used for this generation, or None."""
    if header.version != rabitq.CODES_VERSION:
        return f"codes version {header.version}, this program writes {rabitq.CODES_VERSION}"
    if (header.dim, header.vector_count, header.block_count) != (dim, count, blocks):
        return (
            f"codes for {header.vector_count} vectors of dimension {header.dim} in "
            f"{header.block_count} blocks, the generation has {count} x {dim} in {blocks}"
        )
    if header.code_size != rabitq.code_size(dim) or header.centroid.shape != (dim,):
        return "codes of another size"
    expected = _header_checksum(
        header.version, dim, header.code_size, count, blocks, header.centroid.tobytes()
    )
    if header.checksum != expected:
        return "header checksum mismatch"
    return None


def _code_rows(conn: sqlite3.Connection, generation: int) -> Iterator[tuple[int, int, bytes, int]]:
    yield from conn.execute(
        "SELECT block_no, count, codes, checksum FROM semantic_codes WHERE generation_id = ? "
        "ORDER BY block_no",
        (generation,),
    )


def _valid_rows(
    conn: sqlite3.Connection, header: Header, counts: Sequence[int]
) -> Iterator[tuple[int, np.ndarray]]:
    """(block_no, codes) of each intact code row of the generation (damaged or misfit rows are
    left out)."""
    for block_no, count, blob, checksum in _code_rows(conn, header.generation):
        if not 0 <= block_no < len(counts) or count != counts[block_no]:
            continue
        if len(blob) != count * header.code_size or zlib.crc32(blob) != checksum:
            continue
        yield block_no, np.frombuffer(blob, dtype=np.uint8).reshape(count, header.code_size)


def stored_blocks(
    conn: sqlite3.Connection, header: Header, counts: Sequence[int]
) -> dict[int, np.ndarray]:
    """The intact code rows of the generation by block_no."""
    return dict(_valid_rows(conn, header, counts))


def load(
    conn: sqlite3.Connection,
    generation: int,
    vectors: np.ndarray,
    counts: Sequence[int],
    threads: int,
) -> LoadedCodes:
    """The generation's codes: stored rows where valid, the rest encoded from `vectors` (every
    vector of the generation in block order; `counts` per block) and logged."""
    n, dim = vectors.shape
    header = usable_header(conn, generation, dim, n, len(counts))
    if isinstance(header, str):
        log.warning(
            "first-pass codes of generation %s not usable (%s): rebuilt from the stored vectors",
            generation,
            header,
        )
        centroid = rabitq.fit_centroid(vectors)
        codes = rabitq.encode(vectors, centroid, threads)
        return LoadedCodes(centroid, codes, len(counts), len(counts), False)
    return load_rows(conn, header, counts, threads, lambda _, at, end: vectors[at:end])


def usable_header(
    conn: sqlite3.Connection, generation: int, dim: int, count: int, blocks: int
) -> Header | str:
    """The generation's header, or why it cannot be used (then every code must be encoded, from
    a centroid fit on all the vectors)."""
    header = read_header(conn, generation)
    if header is None:
        return "no stored codes"
    return header_problem(header, dim, count, blocks) or header


# (block, first row, end row) -> float16 vectors of that block: the vectors in memory, or one
# block read on demand (helpers/semantic/lazy_rows.py).
BlockVectors = Callable[[int, int, int], np.ndarray]


def load_rows(
    conn: sqlite3.Connection,
    header: Header,
    counts: Sequence[int],
    threads: int,
    vectors_of: BlockVectors,
) -> LoadedCodes:
    """Every code of a generation with a usable header: stored rows where intact, the blocks of
    missing or damaged ones encoded from `vectors_of` with the stored centroid (the same bytes)."""
    n = int(sum(counts))
    codes = np.empty((n, header.code_size), dtype=np.uint8)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int).tolist()
    loaded = np.zeros(len(counts), dtype=bool)
    for block_no, block in _valid_rows(conn, header, counts):  # one BLOB in memory at a time
        codes[starts[block_no] : starts[block_no + 1]] = block
        loaded[block_no] = True
    missing = np.nonzero(~loaded)[0].tolist()
    for block_no in missing:
        at, end = starts[block_no], starts[block_no + 1]
        codes[at:end] = rabitq.encode(vectors_of(block_no, at, end), header.centroid, threads)
    rebuilt = len(missing)
    if rebuilt:
        log.warning(
            "first-pass codes of generation %s: %d of %d blocks missing or damaged, rebuilt "
            "from the stored vectors",
            header.generation,
            rebuilt,
            len(counts),
        )
    return LoadedCodes(header.centroid, codes, rebuilt, len(counts), True)


def block_counts(n: int, block_size: int) -> list[int]:
    return [min(block_size, n - at) for at in range(0, n, block_size)]


def _previous_codes(
    conn: sqlite3.Connection, previous: int, dim: int
) -> tuple[Header, dict[bytes, bytes]] | None:
    """(header, text hash -> code) of the previous generation's valid stored codes."""
    header = read_header(conn, previous)
    if header is None:
        return None
    rows = conn.execute(
        "SELECT block_no, count, text_hashes FROM semantic_blocks WHERE generation_id = ? "
        "ORDER BY block_no",
        (previous,),
    ).fetchall()
    counts = [int(r[1]) for r in rows]
    if header_problem(header, dim, sum(counts), len(counts)) is not None:
        return None
    valid = stored_blocks(conn, header, counts)
    by_hash: dict[bytes, bytes] = {}
    for block_no, count, hashes in rows:
        block = valid.get(block_no)
        if block is None:
            continue
        for row in range(count):
            by_hash[hashes[row * HASH_BYTES : (row + 1) * HASH_BYTES]] = block[row].tobytes()
    return header, by_hash


def build(
    conn: sqlite3.Connection,
    generation: int,
    vectors: np.ndarray,
    hashes: Sequence[bytes],
    *,
    block_size: int,
    previous: int | None,
    reusable: np.ndarray | None,
    threads: int,
    should_stop: ShouldStop | None = None,
) -> bool:
    """Write the codes of the unpublished `generation` (vectors and hashes in its row order).

    `previous` is the ready generation whose vectors were copied (same model), `reusable` the
    mask of rows copied from it: their codes are copied too while its centroid holds. Each block
    is its own short transaction and the header is written with the last one. False when
    `should_stop` said stop (the caller discards the generation).
    """
    n, dim = vectors.shape
    counts = block_counts(n, block_size)
    codes = np.empty((n, rabitq.code_size(dim)), dtype=np.uint8)
    inherited = None
    if previous is not None and reusable is not None:
        inherited = _previous_codes(conn, previous, dim)
    centroid, fit_count, drift, todo = _plan(vectors, hashes, codes, reusable, inherited)
    t0 = time.perf_counter()
    for at in range(0, n, rabitq.ENCODE_ROWS):
        if should_stop and should_stop():
            return False
        part = np.nonzero(todo[at : at + rabitq.ENCODE_ROWS])[0] + at
        if len(part):
            codes[part] = rabitq.encode(vectors[part], centroid, threads)
    encoded = int(todo.sum())
    write(conn, generation, centroid, codes, counts, fit_count, drift, should_stop)
    log.info(
        "first-pass codes of generation %s: %d encoded, %d copied in %.1f s",
        generation,
        encoded,
        n - encoded,
        time.perf_counter() - t0,
    )
    return not (should_stop and should_stop())


def _plan(
    vectors: np.ndarray,
    hashes: Sequence[bytes],
    codes: np.ndarray,
    reusable: np.ndarray | None,
    inherited: tuple[Header, dict[bytes, bytes]] | None,
) -> tuple[np.ndarray, int, int, np.ndarray]:
    """(centroid, fit_count, drift, rows to encode): the previous centroid and the codes of the
    copied rows (written into `codes`) while the drift stays under REFIT_SHARE, else a refit."""
    n = len(vectors)
    todo = np.ones(n, dtype=bool)
    if inherited is not None and reusable is not None:
        header, by_hash = inherited
        for index in np.nonzero(reusable)[0].tolist():
            code = by_hash.get(hashes[index])
            if code is not None:
                codes[index] = np.frombuffer(code, dtype=np.uint8)
                todo[index] = False
        drift = header.drift + int(todo.sum())
        if drift <= REFIT_SHARE * n:
            return header.centroid, header.fit_count, drift, todo
    return rabitq.fit_centroid(vectors), n, 0, np.ones(n, dtype=bool)  # refit: encode all


def write(
    conn: sqlite3.Connection,
    generation: int,
    centroid: np.ndarray,
    codes: np.ndarray,
    counts: Sequence[int],
    fit_count: int,
    drift: int,
    should_stop: ShouldStop | None = None,
) -> None:
    """Replace the generation's code rows, one transaction per block; the header goes with the
    last one, so a reader sees either every row or no header (and encodes what it needs)."""
    n, size = codes.shape
    dim = centroid.shape[0]
    with connection.write_transaction(conn):
        delete(conn, generation)
    at = 0
    centroid_blob = np.ascontiguousarray(centroid, dtype="<f4").tobytes()
    for block_no, count in enumerate(counts):
        if should_stop and should_stop():
            return
        blob = np.ascontiguousarray(codes[at : at + count]).tobytes()
        at += count
        with connection.write_transaction(conn):
            conn.execute(
                "INSERT INTO semantic_codes(generation_id, block_no, count, codes, checksum) "
                "VALUES (?, ?, ?, ?, ?)",
                (generation, block_no, count, blob, zlib.crc32(blob)),
            )
            if block_no == len(counts) - 1:
                version = rabitq.CODES_VERSION
                conn.execute(
                    "INSERT INTO semantic_code_sets(generation_id, version, dim, code_size, "
                    "vector_count, block_count, centroid, fit_count, drift, checksum) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        generation,
                        version,
                        dim,
                        size,
                        n,
                        len(counts),
                        centroid_blob,
                        fit_count,
                        drift,
                        _header_checksum(version, dim, size, n, len(counts), centroid_blob),
                    ),
                )


def delete(conn: sqlite3.Connection, generation: int) -> None:
    """Drop a generation's codes (inside the caller's transaction)."""
    conn.execute("DELETE FROM semantic_code_sets WHERE generation_id = ?", (generation,))
    conn.execute("DELETE FROM semantic_codes WHERE generation_id = ?", (generation,))


def complete(conn: sqlite3.Connection, generation: int, dim: int) -> bool:
    """Whether every code row of a ready generation is stored and intact."""
    header = read_header(conn, generation)
    rows = conn.execute(
        "SELECT count FROM semantic_blocks WHERE generation_id = ? ORDER BY block_no",
        (generation,),
    ).fetchall()
    counts = [int(r[0]) for r in rows]
    if header is None or header_problem(header, dim, sum(counts), len(counts)) is not None:
        return False
    return sum(1 for _ in _valid_rows(conn, header, counts)) == len(counts)


def wanted(count: int, min_vectors: int) -> bool:
    """Whether a generation of `count` vectors gets stored codes (never without faiss)."""
    if count < max(1, min_vectors):
        return False
    if not rabitq.available():
        log.info("faiss-cpu is not installed: no first-pass codes are stored")
        return False
    return True


def ensure(
    conn: sqlite3.Connection,
    generation: int,
    dim: int,
    threads: int,
    should_stop: ShouldStop | None = None,
) -> None:
    """Codes for a ready generation that lacks them or holds damaged ones (an index from before
    migration 13), from its stored vectors. The header goes in last, so a search meanwhile
    encodes what it needs itself; a stop leaves the rest to the next sync."""
    if complete(conn, generation, dim):
        return
    rows = conn.execute(
        "SELECT vectors, count FROM semantic_blocks WHERE generation_id = ? ORDER BY block_no",
        (generation,),
    ).fetchall()
    vectors = np.concatenate([unpack_vectors(blob, count, dim) for blob, count in rows])
    block_size = int(rows[0][1])  # every block but the last is full
    hashes = [b""] * len(vectors)  # only a copy from another generation reads them
    build(
        conn,
        generation,
        vectors,
        hashes,
        block_size=block_size,
        previous=None,
        reusable=None,
        threads=threads,
        should_stop=should_stop,
    )
