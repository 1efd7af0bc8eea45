"""The service's semantic query side: one warm worker per model, candidates the filters allow.

It stands apart from helpers.semantic.generations (which builds generations, answers one query
and reports health) because keeping workers alive between searches is the server's concern, not
the channel's: a warm query worker per model serves a burst of searches (~50 ms each instead of
~1 s cold) and exits by itself when idle, the ML runtime never enters the server, and the
search filters become the chunk ids the worker may score (helpers.semantic.allowed), so a
filtered search gets the best hits within the filter, however small the folder.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.lexical.common import STAGING_RANGE, Filters, not_staging_sql
from helpers.ranking.constants import SEMANTIC_DEPTH  # rag_search keeps SEMANTIC_DISTINCT of them
from helpers.semantic.allowed import AllowedRanges
from helpers.semantic.folder_marks import with_folder_marks
from helpers.semantic.generations import (
    CACHE_SUBDIR,
    NotReadyError,
    SemanticWorker,
    generation_state,
    query,
)
from helpers.store.batched import rows_in

if TYPE_CHECKING:
    from helpers.config import Config

# A warm query worker per model serves a burst of searches (~50 ms each instead of ~1 s cold)
# and exits by itself after this many idle seconds; the ML runtime never enters the server.
WARM_IDLE_S = 300.0
# Warm workers give generations of at least this many vectors a first pass; None leaves the
# worker's own threshold (helpers.semantic.first_pass.MIN_VECTORS). Benches lower it to run the
# eval sets through the first pass (bench/bench_first_pass_eval.py).
FIRST_PASS_MIN_VECTORS: int | None = None
_warm_lock = threading.Lock()
_warm_workers: dict[Path, SemanticWorker] = {}


def query_candidates(
    config: Config,
    conn: sqlite3.Connection,
    query_text: str,
    model_dir: Path,
    filters: Filters,
    log_path: Path,
) -> list[tuple[int, float]]:
    """(chunk id, cosine) candidates the filters allow, from this model's warm worker.

    Raises NotReadyError when the vectors of the current model are not built, and the model's,
    worker's or vector store's RagError otherwise."""
    cache_dir = config.data_dir / CACHE_SUBDIR
    state = generation_state(
        conn, config.semantic_model_dir, config.semantic, cache_dir, check_chunks=False
    )
    if state.state not in ("ready", "outdated"):
        raise NotReadyError(f"semantic search {state.state}", state.hint)
    within = _filter_ranges(conn, filters)
    if within is not None and within.count == 0:
        return []
    with _warm_lock:
        worker = _warm_workers.get(model_dir)
        if worker is None or not worker.is_running:
            worker = SemanticWorker(
                model_dir,
                log_path=log_path,
                cache_dir=cache_dir,
                idle_seconds=WARM_IDLE_S,
                first_pass_min_vectors=FIRST_PASS_MIN_VECTORS,
            )
            _warm_workers[model_dir] = worker
        hits = query(
            config.db_path,
            model_dir,
            with_folder_marks(conn, query_text),  # the model reads marks as other tokens
            SEMANTIC_DEPTH,
            cache_dir=cache_dir,
            log_path=log_path,
            worker=worker,
            state=state,  # the model and generation just read: not read twice
            allowed=within,
        )
    return _allowed(conn, hits, filters)


def _filter_ranges(conn: sqlite3.Connection, filters: Filters) -> AllowedRanges | None:
    """The chunk ids a narrowing filter allows (staging documents never), None without one:
    then the whole generation is scanned and only staging rows are dropped afterwards.

    Read per document (first id, last id, count), not per chunk: a sync writes a document's
    chunks with consecutive ids, so a filter over a million chunks is a few thousand rows; a
    document whose ids have gaps has its ids listed."""
    if not (filters.path_prefix or filters.file_types or filters.modified_after_ns is not None):
        return None
    where, params = filters.sql()
    spans: list[tuple[int, int]] = []
    gapped: list[int] = []
    for doc_id, first, last, count in conn.execute(
        "SELECT d.id, MIN(c.id), MAX(c.id), COUNT(*) FROM documents d "
        "JOIN chunks c ON c.document_id = d.id "
        f"WHERE {where} AND {not_staging_sql('d')} GROUP BY d.id",
        (*params, *STAGING_RANGE),
    ):
        if last - first + 1 == count:
            spans.append((first, last + 1))
        else:
            gapped.append(doc_id)
    for (cid,) in rows_in(conn, "SELECT id FROM chunks WHERE document_id IN ({marks})", gapped):
        spans.append((cid, cid + 1))
    return AllowedRanges.from_spans(spans)


def _allowed(
    conn: sqlite3.Connection, hits: list[tuple[int, float]], filters: Filters
) -> list[tuple[int, float]]:
    """Keep the candidates the filters allow, never a staging document (a big one being
    swapped in, or its old version being deleted, since the worker's scan began)."""
    if not hits:
        return hits
    where, params = filters.sql()
    ids = [cid for cid, _ in hits]
    allowed = {
        row[0]
        for row in conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
            f"WHERE c.id IN ({','.join('?' * len(ids))}) AND {where} "
            f"AND {not_staging_sql('d')}",
            (*ids, *params, *STAGING_RANGE),
        )
    }
    return [(cid, score) for cid, score in hits if cid in allowed]
