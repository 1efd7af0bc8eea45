"""Pack float16 vectors, chunk ids and text hashes into BLOB blocks, read them back, score them.

numpy only: the search path and the sync worker use it without any ML runtime.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helpers.errors import RagError
from helpers.store.codec import HASH_BYTES
from helpers.store.read_only import connect_read_only  # also opens a read-only data dir

log = logging.getLogger(__name__)

# Vectors per semantic_blocks row. Packed 1,024-vector rows scanned twice as fast as one row per
# vector (199 vs 397 ms for 200k x 384 with numpy, stack-facts), and a block stays under 1 MB
# (1,024 x 384 x 2 bytes = 768 KB), so a scan streams in bounded memory.
BLOCK_SIZE = 1024
VECTOR_DTYPE = np.dtype("<f2")
ID_DTYPE = np.dtype("<i8")


@dataclass(frozen=True)
class Block:
    """One decoded semantic_blocks row (arrays are read-only views of the BLOBs)."""

    chunk_ids: np.ndarray  # int64 [count]
    text_hashes: tuple[bytes, ...]  # HASH_BYTES each
    vectors: np.ndarray  # float16 [count, dim]


def hash_digest(text_hash: str) -> bytes:
    """The 16-byte key stored beside a vector: the first bytes of a hex sha256, else its sha256."""
    if len(text_hash) == 64:
        try:
            return bytes.fromhex(text_hash)[:HASH_BYTES]
        except ValueError:
            pass
    return hashlib.sha256(text_hash.encode("utf-8")).digest()[:HASH_BYTES]


def pack_vectors(vectors: np.ndarray) -> bytes:
    if vectors.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {vectors.shape}")
    return np.ascontiguousarray(vectors, dtype=VECTOR_DTYPE).tobytes()


def unpack_vectors(blob: bytes, count: int, dim: int) -> np.ndarray:
    expected = count * dim * VECTOR_DTYPE.itemsize
    if len(blob) != expected:
        raise ValueError(f"vector blob has {len(blob)} bytes, expected {expected}")
    return np.frombuffer(blob, dtype=VECTOR_DTYPE).reshape(count, dim)


def pack_ids(ids: Sequence[int] | np.ndarray) -> bytes:
    return np.asarray(ids, dtype=ID_DTYPE).tobytes()


def unpack_ids(blob: bytes) -> np.ndarray:
    if len(blob) % ID_DTYPE.itemsize:
        raise ValueError(f"id blob length {len(blob)} is not a multiple of 8")
    return np.frombuffer(blob, dtype=ID_DTYPE)


def pack_hashes(hashes: Iterable[bytes]) -> bytes:
    items = list(hashes)
    for item in items:
        if len(item) != HASH_BYTES:
            raise ValueError(f"text hash must be {HASH_BYTES} bytes, got {len(item)}")
    return b"".join(items)


def unpack_hashes(blob: bytes) -> tuple[bytes, ...]:
    if len(blob) % HASH_BYTES:
        raise ValueError(f"hash blob length {len(blob)} is not a multiple of {HASH_BYTES}")
    return tuple(blob[i : i + HASH_BYTES] for i in range(0, len(blob), HASH_BYTES))


def decode_block(chunk_ids: bytes, text_hashes: bytes, vectors: bytes, dim: int) -> Block:
    ids = unpack_ids(chunk_ids)
    hashes = unpack_hashes(text_hashes)
    if len(hashes) != len(ids):
        raise ValueError(f"block has {len(ids)} ids but {len(hashes)} hashes")
    return Block(ids, hashes, unpack_vectors(vectors, len(ids), dim))


def vectors_to_b64(vectors: np.ndarray) -> str:
    """Row-major float16 as base64: the worker protocol's vector payload."""
    return base64.b64encode(pack_vectors(vectors)).decode("ascii")


def vectors_from_b64(payload: str, count: int, dim: int) -> np.ndarray:
    return unpack_vectors(base64.b64decode(payload), count, dim)


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Unit rows in float32 (a zero row stays zero instead of becoming NaN)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class TopK:
    """Exact running top-k over scored blocks; ties go to the lower chunk id (deterministic)."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError("top_k must be at least 1")
        self.k = k
        self._heap: list[tuple[float, int]] = []  # (score, -chunk_id): the root is the worst

    def add(self, chunk_ids: np.ndarray, scores: np.ndarray) -> None:
        scores = np.asarray(scores, dtype=np.float32).reshape(-1)
        if len(scores) > self.k:
            # Keep every row tied with the k-th best so the id tie-break stays exact.
            kth = np.partition(scores, len(scores) - self.k)[len(scores) - self.k]
            keep = np.nonzero(scores >= kth)[0]
        else:
            keep = np.arange(len(scores))
        for index in keep:
            item = (float(scores[index]), -int(chunk_ids[index]))
            if len(self._heap) < self.k:
                heapq.heappush(self._heap, item)
            elif item > self._heap[0]:
                heapq.heapreplace(self._heap, item)

    def result(self) -> list[tuple[int, float]]:
        ordered = sorted(self._heap, reverse=True)
        return [(-neg_id, score) for score, neg_id in ordered]


def exact_top_k(
    query: np.ndarray, blocks: Iterable[tuple[np.ndarray, np.ndarray]], k: int
) -> list[tuple[int, float]]:
    """Cosine top-k of a unit query over (chunk_ids, float16 unit vectors) blocks, with numpy."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    top = TopK(k)
    for ids, vectors in blocks:
        top.add(ids, vectors.astype(np.float32) @ q)
    return top.result()


class ScanError(RagError, ValueError):
    """A generation that cannot be scanned; `hint` says what to do."""

    code = "vectors_unreadable"


# Read-only scans map the file instead of copying every page through SQLite's cache: 60 vs
# 100 ms to read 100k x 384 vectors. Only address space; the kernel pages it in and out.
SCAN_MMAP_BYTES = 256 * 1024 * 1024

Blocks = Iterable[tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class WarmGeneration:
    """A ready generation held in memory: every id and vector in block order, contiguous (one
    array each, so a first pass can gather any rows), and the blocks as views of them."""

    key: tuple[Any, ...]  # (db, id, fingerprint, count, created_at)
    ids: np.ndarray  # int64 [n]
    vectors: np.ndarray  # float16 [n, dim]
    blocks: tuple[tuple[np.ndarray, np.ndarray], ...]


class _BackgroundRead:
    """One generation being read into memory on a daemon thread; `stop` ends it within a block
    (a search of another generation must not wait for, nor sit beside, a whole read)."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()


class GenerationScanner:
    """Streams a ready generation's blocks; a warm worker keeps the last one in memory.

    Cold workers stream: holding 100k x 384 fresh blocks cost 50 ms (page faults) versus 20 ms
    reading block by block into reused buffers. Generations are immutable once ready, so the
    warm cache is keyed by (db, id, fingerprint, count, created_at). A warm worker can also read
    a generation on a background thread (`start_read`) while its first searches are answered
    from the stored first-pass codes (helpers/semantic/vector_stage.py); at most one generation
    is held or being read at a time.
    """

    def __init__(self, keep_in_memory: bool) -> None:
        self.keep_in_memory = keep_in_memory
        self.warm: WarmGeneration | None = None
        self._reading: _BackgroundRead | None = None
        self._lock = threading.Lock()  # guards `warm` and `_reading` between the two threads

    @property
    def blocks(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        return () if self.warm is None else self.warm.blocks

    def held(self, key: tuple[Any, ...]) -> WarmGeneration | None:
        """The generation of `key` if every vector of it is in memory (never waits)."""
        warm = self.warm
        return warm if warm is not None and warm.key == key else None

    def keep_only(self, key: tuple[Any, ...]) -> None:
        """Drop the held generation and stop a background read unless they are `key`'s: memory
        never holds two generations' vectors."""
        with self._lock:
            other = self._reading if self._reading and self._reading.key != key else None
            if other is not None:
                self._reading = None
            if self.warm is not None and self.warm.key != key:
                self.warm = None
        if other is not None:
            other.stop.set()
            other.wait()  # within one block: its arrays are freed before anything new is read

    def start_read(
        self,
        db: str,
        generation: int,
        expected_fingerprint: str | None,
        dim: int,
        before_read: Callable[[int], None] | None = None,
    ) -> None:
        """Read the generation into memory on a background thread, unless it is held or already
        being read. `load` of the same generation waits for that read instead of a second one.
        Searches are answered meanwhile, so it maps no file pages: off their path the mapping's
        few per cent of speed are not worth up to SCAN_MMAP_BYTES of mapped pages beside the
        arrays and the codes (peak RSS)."""
        conn = self._connect(db)
        try:
            checked = self._check(conn, generation, expected_fingerprint, dim)
        finally:
            conn.close()
        key = (str(Path(db)), *checked)
        self.keep_only(key)
        with self._lock:
            if self.held(key) is not None or self._reading is not None:
                return
            reading = self._reading = _BackgroundRead(key)
        if before_read is not None:
            before_read(int(checked[2]))
        reading.thread = threading.Thread(
            target=self._read_in_background,
            args=(reading, db, generation, expected_fingerprint, dim),
            name="vector-read",
            daemon=True,  # a quit or an idle exit never waits for it: nothing is written
        )
        reading.thread.start()

    def _read_in_background(
        self,
        reading: _BackgroundRead,
        db: str,
        generation: int,
        expected_fingerprint: str | None,
        dim: int,
    ) -> None:
        t0 = time.perf_counter()
        warm = None
        try:
            warm = self._read_checked(
                db, generation, expected_fingerprint, dim, reading.key, reading.stop.is_set
            )
        except (RagError, sqlite3.Error, ValueError, OSError) as exc:
            log.warning(
                "background read of semantic generation %s failed (%s): the next search "
                "reads it again",
                generation,
                exc,
            )
        finally:
            warm = self._publish(reading, warm)
        if warm is not None:
            log.info(
                "vectors of generation %s read into memory in the background in %.2f s (%d "
                "vectors): later searches rescore from memory",
                generation,
                time.perf_counter() - t0,
                len(warm.ids),
            )
        elif reading.stop.is_set():
            log.info(
                "background read of generation %s stopped: another one was asked for", generation
            )

    def _publish(
        self, reading: _BackgroundRead, warm: WarmGeneration | None
    ) -> WarmGeneration | None:
        """The read's generation held if it is still the one wanted (else dropped: never two);
        whatever happened, the read is no longer under way."""
        with self._lock:
            if self._reading is not reading:
                return None
            self._reading = None
            if warm is not None:
                self.warm = warm
            return warm

    def _read_checked(
        self,
        db: str,
        generation: int,
        expected_fingerprint: str | None,
        dim: int,
        key: tuple[Any, ...],
        stop: Callable[[], bool],
    ) -> WarmGeneration | None:
        """The generation read in one snapshot, if it is still the one of `key`."""
        conn = self._connect(db)
        try:
            conn.execute("BEGIN")  # the check and every block from one snapshot
            checked = self._check(conn, generation, expected_fingerprint, dim)
            if (str(Path(db)), *checked) != key:
                raise ScanError(
                    f"semantic generation {generation} changed before it was read",
                    "search again",
                )
            return self._read_all(conn, key, generation, dim, int(checked[2]), stop)
        finally:
            conn.close()

    def scan(
        self,
        db: str,
        generation: int,
        expected_fingerprint: str | None,
        dim: int,
        visit: Callable[[np.ndarray, np.ndarray], None],
    ) -> int:
        """Call visit(chunk_ids, vectors) per block; returns the number of blocks."""
        if self.keep_in_memory:
            blocks: Blocks = self.load(db, generation, expected_fingerprint, dim).blocks
            count = 0
            for ids, vectors in blocks:
                visit(ids, vectors)
                count += 1
            return count
        conn = self._connect(db)
        try:
            self._check(conn, generation, expected_fingerprint, dim)
            conn.execute(f"PRAGMA mmap_size = {SCAN_MMAP_BYTES}")
            count = 0
            for ids, vectors in self._read(conn, generation, dim):
                visit(ids, vectors)
                count += 1
            return count
        finally:
            conn.close()

    def load(
        self,
        db: str,
        generation: int,
        expected_fingerprint: str | None,
        dim: int,
        before_read: Callable[[int], None] | None = None,
    ) -> WarmGeneration:
        """The generation in memory, read now unless it is the one already held (the checks
        run on every call: a generation that stopped being ready is never served). A background
        read of it is waited for. `before_read(count)` runs before a generation is read."""
        conn = self._connect(db)
        try:
            checked = self._check(conn, generation, expected_fingerprint, dim)
            key = (str(Path(db)), *checked)
            held = self.held(key) or self._wait_for_read(key)
            if held is not None:
                return held
            self.keep_only(key)
            self.warm = None  # never a half-read cache, and never two generations at once
            if before_read is not None:
                before_read(int(checked[2]))
            conn.execute(f"PRAGMA mmap_size = {SCAN_MMAP_BYTES}")
            warm = self._read_all(conn, key, generation, dim, count=int(checked[2]))
            assert warm is not None  # no stop was asked for
            self.warm = warm
            return warm
        finally:
            conn.close()

    def _wait_for_read(self, key: tuple[Any, ...]) -> WarmGeneration | None:
        """The generation of `key` once its background read ends (None: none, or it failed)."""
        reading = self._reading
        if reading is None or reading.key != key:
            return None
        reading.wait()
        return self.held(key)

    @staticmethod
    def _connect(db: str) -> sqlite3.Connection:
        path = Path(db)
        if not path.is_absolute() or not path.is_file():
            raise ScanError(f"index not found: {db}", "pass the absolute path of the index")
        return connect_read_only(path)

    @classmethod
    def _read_all(
        cls,
        conn: sqlite3.Connection,
        key: tuple[Any, ...],
        generation: int,
        dim: int,
        count: int,
        stop: Callable[[], bool] | None = None,
    ) -> WarmGeneration | None:
        """Every block copied into two preallocated arrays: peak memory is the arrays plus one
        block, not the blocks twice. None when `stop()` turned true (checked per block)."""
        ids = np.empty(count, dtype=ID_DTYPE)
        vectors = np.empty((count, dim), dtype=VECTOR_DTYPE)
        spans = []
        at = 0
        for block_ids, block_vectors in cls._read(conn, generation, dim):
            if stop is not None and stop():
                return None
            end = at + len(block_ids)
            if end > count:
                raise ScanError(
                    f"semantic generation {generation} holds more vectors than its count",
                    "run a sync so the semantic index is rebuilt",
                )
            ids[at:end], vectors[at:end] = block_ids, block_vectors
            spans.append((at, end))
            at = end
        if at != count:
            raise ScanError(
                f"semantic generation {generation} holds {at} vectors, its count says {count}",
                "run a sync so the semantic index is rebuilt",
            )
        ids.flags.writeable = False
        vectors.flags.writeable = False
        blocks = tuple((ids[a:b], vectors[a:b]) for a, b in spans)
        return WarmGeneration(key, ids, vectors, blocks)

    @staticmethod
    def _check(
        conn: sqlite3.Connection, generation: int, expected_fingerprint: str | None, dim: int
    ) -> tuple[Any, ...]:
        row = conn.execute(
            "SELECT fingerprint, dim, ready, vector_count, created_at "
            "FROM semantic_generations WHERE id = ?",
            (generation,),
        ).fetchone()
        if row is None or not row[2]:
            raise ScanError(
                f"semantic generation {generation} is not ready",
                "run a sync so the semantic index is built",
            )
        fingerprint, gen_dim, _, count, created = row
        if expected_fingerprint and fingerprint != expected_fingerprint:
            raise ScanError(
                "the semantic index was built with another model",
                "run a sync to rebuild the semantic index for the current model",
            )
        if gen_dim != dim:
            raise ScanError(
                f"index dimension {gen_dim} differs from the model's {dim}",
                "run a sync to rebuild the semantic index for the current model",
            )
        return (generation, fingerprint, count, created)

    @staticmethod
    def _read(
        conn: sqlite3.Connection, generation: int, dim: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for ids_blob, vec_blob, n in conn.execute(
            "SELECT chunk_ids, vectors, count FROM semantic_blocks "
            "WHERE generation_id = ? ORDER BY block_no",
            (generation,),
        ):
            yield unpack_ids(ids_blob), unpack_vectors(vec_blob, n, dim)


@contextmanager
def open_generation(
    db: str, generation: int, expected_fingerprint: str | None, dim: int
) -> Iterator[tuple[sqlite3.Connection, tuple[Any, ...]]]:
    """A read-only connection inside one read transaction, with the generation checked in it,
    and its cache key: rows read through it belong to that generation even if a sync publishes
    another meanwhile."""
    conn = GenerationScanner._connect(db)
    try:
        conn.execute("BEGIN")
        checked = GenerationScanner._check(conn, generation, expected_fingerprint, dim)
        yield conn, (str(Path(db)), *checked)
    finally:
        conn.close()
