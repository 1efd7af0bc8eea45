"""Semantic channel: build vector generations from the chunks, query them, report health.

No ML import here: embedding happens in `semantic_worker.py`, a subprocess driven through
`helpers.semantic.client.SemanticWorker` (re-exported here with its errors). A generation becomes
visible (ready = 1) only when every vector is written, so a cancelled, failed or killed build
never changes what search sees.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from helpers.semantic import code_store, vector_pack
from helpers.semantic.client import (
    DEFAULT_THREADS,
    DEFAULT_TIMEOUT_S,
    Embedding,
    SemanticError,
    SemanticWorker,
    WorkerCrashed,
    WorkerError,
    WorkerInfo,
    WorkerTimeout,
)
from helpers.semantic.model import (
    CACHE_SUBDIR,
    FETCH_HINT,
    ModelError,
    ModelInfo,
    check_availability,
    discover_model_dir,
    hf_hub_cache_root,
    load_model_info,
)
from helpers.store import connection
from helpers.store.batched import rows_in
from helpers.store.codec import text_digest

if TYPE_CHECKING:
    from helpers.config import Config
    from helpers.semantic.allowed import AllowedRanges
    from helpers.semantic.fetch import FetchResult


__all__ = [
    "CACHE_SUBDIR",
    "BuildResult",
    "Embedding",
    "Generation",
    "NotReadyError",
    "SemanticError",
    "SemanticState",
    "SemanticWorker",
    "WorkerCrashed",
    "WorkerError",
    "WorkerInfo",
    "WorkerTimeout",
    "build_generation",
    "fetch_model",
    "latest_ready_generation",
    "query",
    "generation_state",
    "sync_phase",
]

log = logging.getLogger(__name__)

DEFAULT_QUERY_TIMEOUT_S = 30.0  # spawn + load + embed + scan of 100k vectors: 0.5-0.7 s measured
# Texts per embed request: the build checks should_cancel() and reports progress between
# requests, so this bounds cancel latency (~1 s) and the size of one JSON line.
EMBED_REQUEST_TEXTS = 64
BUILD_HINT = "run a sync (sync_kb) to build the semantic index"
WORKER_LOG = "semantic_worker.log"  # under the logs dir


class PrewarmedWorker(Protocol):
    """A worker spawned ahead of a build (helpers.semantic.prewarm.WorkerPrewarm), as the build
    uses it: the prewarm module builds on this one, so it is named by what it does."""

    def wait_for_hashes(self) -> None: ...

    def take(self, model_dir: Path, threads: int, timeout_s: float) -> SemanticWorker | None: ...


class NotReadyError(SemanticError):
    """No usable generation: never built, or built with another model."""


@dataclass(frozen=True)
class Generation:
    id: int
    fingerprint: str
    model_name: str
    dim: int
    ready: bool
    vector_count: int


@dataclass(frozen=True)
class BuildResult:
    status: Literal["built", "unchanged", "cancelled"]
    generation_id: int | None  # the ready generation after the call
    fingerprint: str
    vector_count: int
    embedded: int  # texts sent to the model
    reused: int  # vectors copied from the previous generation


@dataclass(frozen=True)
class SemanticState:
    state: Literal["off", "unavailable", "not_built", "outdated", "ready"]
    reason: str
    hint: str
    model_name: str | None
    fingerprint: str | None  # of the current model (None when unavailable/off)
    vector_count: int  # in the newest ready generation
    generation_id: int | None
    # What `query(..., state=)` needs, so a search reads the model folder and the newest
    # generation once instead of twice.
    model: ModelInfo | None = None
    generation: Generation | None = None


# --- generations -----------------------------------------------------------------------------


def latest_ready_generation(conn: sqlite3.Connection) -> Generation | None:
    row = conn.execute(
        "SELECT id, fingerprint, model_name, dim, ready, vector_count FROM semantic_generations "
        "WHERE ready = 1 ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return Generation(row[0], row[1], row[2], row[3], bool(row[4]), row[5]) if row else None


def _chunk_keys(conn: sqlite3.Connection) -> tuple[np.ndarray, list[bytes]]:
    """(chunk ids, 16-byte text hashes) of every chunk, ordered by id (hashed from the text:
    reading 64-character stored hashes took 0.03 s of the 0.05 s per 51,000 chunks)."""
    ids: list[int] = []
    hashes: list[bytes] = []
    for cid, text in conn.execute("SELECT id, text FROM chunks ORDER BY id"):
        ids.append(cid)
        hashes.append(text_digest(text))
    return np.asarray(ids, dtype=np.int64), hashes


def _generation_keys(conn: sqlite3.Connection, generation: int) -> tuple[np.ndarray, list[bytes]]:
    """(chunk ids, hashes) stored in a generation; selecting them skips the vector BLOBs."""
    ids: list[np.ndarray] = []
    hashes: list[bytes] = []
    for ids_blob, hash_blob in conn.execute(
        "SELECT chunk_ids, text_hashes FROM semantic_blocks WHERE generation_id = ? "
        "ORDER BY block_no",
        (generation,),
    ):
        ids.append(vector_pack.unpack_ids(ids_blob))
        hashes.extend(vector_pack.unpack_hashes(hash_blob))
    all_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    return all_ids, hashes


def _same_keys(a: tuple[np.ndarray, list[bytes]], b: tuple[np.ndarray, list[bytes]]) -> bool:
    return bool(np.array_equal(a[0], b[0])) and a[1] == b[1]


def _reusable_vectors(
    conn: sqlite3.Connection, source: Generation, wanted: list[bytes], dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Vectors of `source` for each wanted hash: (float16 [n, dim], found mask [n])."""
    positions: dict[bytes, list[int]] = {}
    for index, digest in enumerate(wanted):
        positions.setdefault(digest, []).append(index)
    vectors = np.zeros((len(wanted), dim), dtype=np.float16)
    found = np.zeros(len(wanted), dtype=bool)
    for hash_blob, vec_blob, count in conn.execute(
        "SELECT text_hashes, vectors, count FROM semantic_blocks WHERE generation_id = ? "
        "ORDER BY block_no",
        (source.id,),
    ):
        block = None
        for row, digest in enumerate(vector_pack.unpack_hashes(hash_blob)):
            targets = positions.pop(digest, None)
            if targets is None:
                continue
            if block is None:
                block = vector_pack.unpack_vectors(vec_blob, count, dim)
            vectors[targets] = block[row]
            found[targets] = True
    return vectors, found


class _Cancelled(Exception):
    pass


def build_generation(
    conn: sqlite3.Connection,
    model_dir: Path | None,
    *,
    cache_dir: Path | None,
    log_path: Path,
    progress: Callable[[int, int], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    threads: int = DEFAULT_THREADS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    prewarm: PrewarmedWorker | None = None,
    codes_min_vectors: int = code_store.STORE_MIN_VECTORS,
) -> BuildResult:
    """Embed the current chunks into a new generation and publish it; see the module docstring.

    Vectors of unchanged texts (same 16-byte text hash, same model fingerprint) are copied from
    the newest ready generation, so only new or changed texts reach the model. `progress(done,
    total)` counts texts to embed. One build at a time per index (the sync lock guarantees it).
    A started `prewarm` worker of the same model is used (and closed) instead of a new one.
    A generation of at least `codes_min_vectors` vectors gets its first-pass codes
    (helpers/semantic/code_store.py) before it is published; an unchanged one gets them if
    they are missing or damaged.
    Raises ModelError / SemanticError; the previous ready generation survives any failure.
    """
    info = _model_info(model_dir, cache_dir)
    chunk_ids, hashes = _chunk_keys(conn)
    current = latest_ready_generation(conn)
    with connection.write_transaction(conn):  # leftovers of builds that crashed or were killed
        unpublished = "(SELECT id FROM semantic_generations WHERE ready = 0)"
        conn.execute(f"DELETE FROM semantic_codes WHERE generation_id IN {unpublished}")
        conn.execute(f"DELETE FROM semantic_code_sets WHERE generation_id IN {unpublished}")
        conn.execute(f"DELETE FROM semantic_blocks WHERE generation_id IN {unpublished}")
        conn.execute("DELETE FROM semantic_generations WHERE ready = 0")
    if (
        current is not None
        and current.fingerprint == info.fingerprint
        and _same_keys((chunk_ids, hashes), _generation_keys(conn, current.id))
    ):
        if code_store.wanted(current.vector_count, codes_min_vectors):
            code_store.ensure(conn, current.id, current.dim, threads, should_cancel)
        return BuildResult("unchanged", current.id, info.fingerprint, current.vector_count, 0, 0)

    reuse = (
        current is not None and current.fingerprint == info.fingerprint and current.dim == info.dim
    )
    if current is not None and reuse:
        vectors, found = _reusable_vectors(conn, current, hashes, info.dim)
    else:
        vectors = np.zeros((len(chunk_ids), info.dim), dtype=np.float16)
        found = np.zeros(len(chunk_ids), dtype=bool)
    pending, copies = _unique_pending(found, hashes)
    with connection.write_transaction(conn):
        generation = conn.execute(
            "INSERT INTO semantic_generations(fingerprint, model_name, dim, ready, vector_count, "
            "created_at) VALUES (?, ?, ?, 0, 0, ?)",
            (info.fingerprint, info.name, info.dim, time.time()),
        ).lastrowid
    assert generation is not None
    # Spawned by its first request (a build that reuses every vector loads no model), unless
    # the sync spawned it ahead and it has loaded while the lexical phase ran.
    worker = prewarm.take(info.model_dir, threads, timeout_s) if prewarm else None
    if worker is None:
        worker = SemanticWorker(
            info.model_dir,
            log_path=log_path,
            cache_dir=cache_dir,
            threads=threads,
            timeout_s=timeout_s,
            preload_passages=True,
        )
    requests = [
        pending[at : at + EMBED_REQUEST_TEXTS] for at in range(0, len(pending), EMBED_REQUEST_TEXTS)
    ]
    in_flight = 0

    def send(batch: list[int]) -> None:
        nonlocal in_flight
        texts = _texts_for(conn, [int(chunk_ids[i]) for i in batch], [hashes[i] for i in batch])
        worker.send_embed(texts, "passage")
        in_flight += 1

    try:
        writer = _BlockWriter(conn, generation, chunk_ids, hashes, vectors)
        if progress:
            progress(0, len(pending))
        done = 0
        for number, batch in enumerate(requests):
            if should_cancel and should_cancel():
                raise _Cancelled
            # One request ahead: the worker embeds the next texts while this process decodes,
            # copies and writes the last ones (the worker sat idle for that time before).
            if number == 0:
                send(batch)
            if number + 1 < len(requests):
                send(requests[number + 1])
            embedded = worker.receive_embed().vectors
            in_flight -= 1
            if embedded.shape[1] != info.dim:
                raise SemanticError(
                    f"worker returned dimension {embedded.shape[1]}, expected {info.dim}",
                    "check 1_Pooling/config.json of the model folder",
                )
            vectors[batch] = embedded
            for index in batch:
                vectors[copies.get(index, [])] = vectors[index]
            done += len(batch)
            # Rows before the next text to embed are final (duplicates follow their original).
            writer.flush_until(pending[done] if done < len(pending) else len(chunk_ids))
            if progress:
                progress(done, len(pending))
        writer.flush_until(len(chunk_ids))
        if should_cancel and should_cancel():
            raise _Cancelled
        if code_store.wanted(len(chunk_ids), codes_min_vectors) and not code_store.build(
            conn,
            generation,
            vectors,
            hashes,
            block_size=vector_pack.BLOCK_SIZE,
            previous=current.id if current is not None and reuse else None,
            reusable=found,
            threads=threads,
            should_stop=should_cancel,
        ):
            raise _Cancelled
        _publish(conn, generation, len(chunk_ids))
    except _Cancelled:
        _discard(conn, generation)
        kept = latest_ready_generation(conn)
        kept_id, kept_count = (kept.id, kept.vector_count) if kept else (None, 0)
        return BuildResult("cancelled", kept_id, info.fingerprint, kept_count, 0, 0)
    except BaseException:
        _discard(conn, generation)
        raise
    finally:
        if in_flight:  # nobody waits for that answer: do not wait for the worker to finish it
            worker.kill()
        worker.close()
    reused = int(found.sum())
    return BuildResult("built", generation, info.fingerprint, len(chunk_ids), len(pending), reused)


def _unique_pending(
    found: np.ndarray, hashes: list[bytes]
) -> tuple[list[int], dict[int, list[int]]]:
    """Positions to embed (first of each text) and, per such position, its later duplicates."""
    first: dict[bytes, int] = {}
    pending: list[int] = []
    copies: dict[int, list[int]] = {}
    for index in np.nonzero(~found)[0].tolist():
        original = first.setdefault(hashes[index], index)
        if original == index:
            pending.append(index)
        else:
            copies.setdefault(original, []).append(index)
    return pending, copies


def _publish(conn: sqlite3.Connection, generation: int, count: int) -> None:
    """Make the generation visible and drop every other one, in one transaction."""
    with connection.write_transaction(conn):
        conn.execute(
            "UPDATE semantic_generations SET ready = 1, vector_count = ?, finished_at = ? "
            "WHERE id = ?",
            (count, time.time(), generation),
        )
        conn.execute("DELETE FROM semantic_codes WHERE generation_id != ?", (generation,))
        conn.execute("DELETE FROM semantic_code_sets WHERE generation_id != ?", (generation,))
        conn.execute("DELETE FROM semantic_blocks WHERE generation_id != ?", (generation,))
        conn.execute("DELETE FROM semantic_generations WHERE id != ?", (generation,))


class _BlockWriter:
    """Writes BLOCK_SIZE rows at a time, each block in its own short transaction."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        generation: int,
        chunk_ids: np.ndarray,
        hashes: list[bytes],
        vectors: np.ndarray,
    ) -> None:
        self.conn, self.generation = conn, generation
        self.chunk_ids, self.hashes, self.vectors = chunk_ids, hashes, vectors
        self.next_block = 0

    def flush_until(self, ready_before: int) -> None:
        """Write every block whose rows all lie before position `ready_before`."""
        total = len(self.chunk_ids)
        while True:
            start = self.next_block * vector_pack.BLOCK_SIZE
            end = min(start + vector_pack.BLOCK_SIZE, total)
            if start >= total or end > ready_before:
                return
            with connection.write_transaction(self.conn):
                self.conn.execute(
                    "INSERT INTO semantic_blocks(generation_id, block_no, count, chunk_ids, "
                    "text_hashes, vectors) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        self.generation,
                        self.next_block,
                        end - start,
                        vector_pack.pack_ids(self.chunk_ids[start:end]),
                        vector_pack.pack_hashes(self.hashes[start:end]),
                        vector_pack.pack_vectors(self.vectors[start:end]),
                    ),
                )
            self.next_block += 1


def _texts_for(conn: sqlite3.Connection, ids: list[int], hashes: list[bytes]) -> list[str]:
    rows = dict(rows_in(conn, "SELECT id, text FROM chunks WHERE id IN ({marks})", ids))
    texts = []
    for cid, digest in zip(ids, hashes, strict=True):
        text = rows.get(cid)
        if text is None or text_digest(text) != digest:
            raise SemanticError(
                f"chunk {cid} changed during the semantic build", "run the sync again"
            )
        texts.append(text)
    return texts


def _discard(conn: sqlite3.Connection, generation: int) -> None:
    """Remove a generation that will never be published (best effort: the next build retries)."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        with connection.write_transaction(conn):
            code_store.delete(conn, generation)
            conn.execute("DELETE FROM semantic_blocks WHERE generation_id = ?", (generation,))
            conn.execute(
                "DELETE FROM semantic_generations WHERE id = ? AND ready = 0", (generation,)
            )
    except sqlite3.Error as exc:
        log.warning("could not discard semantic generation %s: %s", generation, exc)


def _model_info(model_dir: Path | None, cache_dir: Path | None) -> ModelInfo:
    found = discover_model_dir(model_dir)
    if found is None:
        raise ModelError("no semantic model folder found", FETCH_HINT)
    return load_model_info(found, cache_dir)


def sync_phase(
    conn: sqlite3.Connection,
    config: Config,
    *,
    progress: Callable[[int, int], None] | None = None,
    should_cancel: Callable[[], bool | None] | None = None,
    prewarm: PrewarmedWorker | None = None,
) -> BuildResult | None:
    """The sync job's semantic step: build when enabled and available, else log why and skip.

    `should_cancel` may also raise (the job's own cancel exception): the partial generation is
    discarded and the exception propagates. Build failures raise SemanticError / ModelError.
    `prewarm` (from `prewarm_for_sync`) is the worker spawned ahead; the caller closes it.
    """
    cache_dir = config.data_dir / CACHE_SUBDIR
    if prewarm is not None:
        prewarm.wait_for_hashes()
    availability = check_availability(
        config.semantic_model_dir, enabled=config.semantic, cache_dir=cache_dir
    )
    if availability.state != "ready" or availability.model is None:
        log.info("semantic build skipped: %s (%s)", availability.reason, availability.hint)
        return None
    return build_generation(
        conn,
        availability.model.model_dir,
        cache_dir=cache_dir,
        log_path=config.logs_dir / WORKER_LOG,
        progress=progress,
        should_cancel=(lambda: bool(should_cancel())) if should_cancel else None,
        prewarm=prewarm,
    )


# --- search and health -----------------------------------------------------------------------


def query(
    db_path: Path,
    model_dir: Path | None,
    query: str,
    top_k: int,
    *,
    cache_dir: Path | None,
    log_path: Path,
    timeout_s: float = DEFAULT_QUERY_TIMEOUT_S,
    threads: int = DEFAULT_THREADS,
    worker: SemanticWorker | None = None,
    state: SemanticState | None = None,
    allowed: AllowedRanges | None = None,
) -> list[tuple[int, float]]:
    """Top-k (chunk id, cosine) for `query`; cold (spawn, answer, exit) unless a worker is given.

    A `state` from `generation_state` supplies the model and the newest generation already read
    (model_dir and cache_dir are then not consulted); `allowed` limits the scan to those chunk
    ids (an exact search filter). Raises NotReadyError when no generation
    of the current model is ready, ModelError for a broken model folder and
    WorkerError/WorkerCrashed/WorkerTimeout for worker failures.
    """
    if state is not None:
        if state.model is None:
            raise NotReadyError(f"semantic search {state.state}: {state.reason}", state.hint)
        info, generation = state.model, state.generation
    else:
        info = _model_info(model_dir, cache_dir)
        conn = connection.connect(Path(db_path), readonly=True)
        try:
            generation = latest_ready_generation(conn)
        finally:
            conn.close()
    if generation is None:
        raise NotReadyError("the semantic index has not been built yet", BUILD_HINT)
    if generation.fingerprint != info.fingerprint:
        raise NotReadyError(
            "the semantic index was built with another model or model version", BUILD_HINT
        )
    if worker is not None:
        return worker.search(
            db_path, generation.id, query, top_k, fingerprint=info.fingerprint, allowed=allowed
        )
    with SemanticWorker(
        info.model_dir,
        log_path=log_path,
        cache_dir=cache_dir,
        threads=threads,
        timeout_s=timeout_s,
    ) as cold:
        return cold.search(
            db_path, generation.id, query, top_k, fingerprint=info.fingerprint, allowed=allowed
        )


def generation_state(
    conn: sqlite3.Connection,
    model_dir: Path | None,
    enabled: bool,
    cache_dir: Path | None,
    *,
    check_chunks: bool = True,
) -> SemanticState:
    """Health summary: off / unavailable / not_built / outdated / ready, with the fix as a hint.

    `check_chunks` compares every chunk id and text hash with the generation (~0.1 s per 100k
    chunks); without it only a model change is reported as outdated. Pass a cache_dir: without
    one the model file is re-hashed on every call. Pass the result to `query(state=...)`.
    """
    generation = latest_ready_generation(conn)
    count, gen_id = (generation.vector_count, generation.id) if generation else (0, None)
    availability = check_availability(model_dir, enabled=enabled, cache_dir=cache_dir)
    model = availability.model
    if availability.state != "ready" or model is None:
        state = "off" if availability.state == "off" else "unavailable"
        return SemanticState(
            state,
            availability.reason,
            availability.hint,
            None,
            None,
            count,
            gen_id,
            None,
            generation,
        )
    state, reason, hint = "ready", availability.reason, ""
    if generation is None:
        state, reason, hint = "not_built", "no semantic generation has been built", BUILD_HINT
    elif generation.fingerprint != model.fingerprint:
        reason = f"vectors were built with another model ({generation.model_name})"
        state = "outdated"
        hint = BUILD_HINT
    elif check_chunks and not _same_keys(_chunk_keys(conn), _generation_keys(conn, gen_id)):
        state, reason, hint = "outdated", "chunks changed since the last semantic build", BUILD_HINT
    return SemanticState(
        state, reason, hint, model.name, model.fingerprint, count, gen_id, model, generation
    )


def fetch_model(
    cache_dir: Path | None, base_url: str, progress: Callable[[str, int, int | None], None]
) -> FetchResult:
    """Download the default model into the Hugging Face cache: the only code path that
    downloads anything, and only on `rag_server.py model fetch`. FetchError on failure."""
    from helpers.semantic import fetch

    root = cache_dir or hf_hub_cache_root()
    return fetch.download_repo(root, base_url=base_url, progress=progress)
