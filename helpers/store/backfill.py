"""The batched backfills a migration leaves behind, and the steps its SQL cannot express.

They stand apart from rag_db's schema and connections because they are a different job: long,
resumable rewrites of existing rows (migration 4's bigrams, 5's hub scores, 8's trigram rows, 9's
compaction) that take the write lock one short batch at a time, keep their cursor in `meta`, and
are advanced by whoever opens the index (bounded) and finished by the sync worker. index_db.migrate
calls MIGRATION_BACKFILLS and run_backfills; nothing here defines schema.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

from helpers.store.codec import compact_chunks, compact_sections, section_text
from helpers.store.index_db import TRIGRAM_BACKFILL_KEY, write_transaction
from helpers.text.cjk import index_text
from helpers.text.hubs import hub_score

# Chunk rows indexed per backfill transaction: ~0.3 ms each (one trigram row), so well under a
# second of write lock, with BACKFILL_PAUSE_S between batches for a waiting cancel or heartbeat.
TRIGRAM_BACKFILL_ROWS = 2000
# Opening an index (a tool call, a worker before it claims its job) advances the trigram backfill
# for at most this long: ~5 batches of 2,000 rows at the measured 0.3-0.75 s per batch (51k
# chunks in 21 s). The sync worker finishes it after claiming its job, checking for cancel
# between budgets; a search on a writable index advances it too (rag_storage.read_conn).
OPEN_BACKFILL_BUDGET_S = 2.0
BACKFILL_PAUSE_S = (
    0.12  # as helpers.index.document_write.BATCH_PAUSE_S: SQLite retries a busy writer per 100 ms
)
BACKFILL_PAGE_ROWS = 2000  # chunks read per page while a migration backfills (bounded memory)
# One batch of a backfill: (conn, first id, rows) -> (next id, rows done), or None at the end.
_Batch = Callable[[sqlite3.Connection, int, int], "tuple[int, int] | None"]


def _pages(conn: sqlite3.Connection, sql: str) -> Iterator[list[Any]]:
    """The rows of `sql` (id > ? ORDER BY id LIMIT ?), BACKFILL_PAGE_ROWS at a time by id:
    bounded memory over a table of any size."""
    last = 0
    while rows := conn.execute(sql, (last, BACKFILL_PAGE_ROWS)).fetchall():
        yield rows
        last = rows[-1][0]


def _backfill_cjk(conn: sqlite3.Connection) -> None:
    """Bigram rows for the chunks an older version indexed (bigrams need Python, not SQL)."""
    conn.execute("DELETE FROM chunks_cjk")
    for rows in _pages(conn, "SELECT id, norm FROM chunks WHERE id > ? ORDER BY id LIMIT ?"):
        grams = [(row[0], index_text(row[1])) for row in rows]
        conn.executemany(
            "INSERT INTO chunks_cjk(rowid, grams) VALUES (?, ?)", [g for g in grams if g[1]]
        )


def _backfill_hubs(conn: sqlite3.Connection) -> None:
    """Hub scores for the sections an older version indexed, from their stored text (the same
    pure function of the text that rag_sync_write applies, so no re-extraction is needed)."""
    for rows in _pages(conn, "SELECT id, text FROM sections WHERE id > ? ORDER BY id LIMIT ?"):
        scores = [(score, row[0]) for row in rows if (score := hub_score(section_text(row[1]))) > 0]
        conn.executemany("UPDATE sections SET hub = ? WHERE id = ?", scores)


# Steps a migration's SQL cannot express, run in the same transaction right after it.
MIGRATION_BACKFILLS: dict[int, Callable[[sqlite3.Connection], None]] = {
    4: _backfill_cjk,
    5: _backfill_hubs,
}


def trigram_backfill_pending(conn: sqlite3.Connection) -> bool:
    """Whether migration 8's trigram rows are still being rebuilt (a read, no lock)."""
    row = conn.execute("SELECT 1 FROM meta WHERE key = ?", (TRIGRAM_BACKFILL_KEY,)).fetchone()
    return row is not None


def trigram_backfill_left(conn: sqlite3.Connection) -> int:
    """Chunks the trigram rebuild of migration 8 has not reached yet (0 when none is pending)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (TRIGRAM_BACKFILL_KEY,)).fetchone()
    if row is None:
        return 0
    return conn.execute("SELECT COUNT(*) FROM chunks WHERE id >= ?", (int(row[0]),)).fetchone()[0]


def _trigram_batch(conn: sqlite3.Connection, first_id: int, limit: int) -> tuple[int, int] | None:
    """Inside a write transaction: the trigram rows of `limit` chunks from id `first_id` on;
    (next id, rows done), or None when no chunk is left."""
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM chunks WHERE id >= ? ORDER BY id LIMIT ?", (first_id, limit)
        )
    ]
    if not ids:
        return None
    conn.execute(
        "INSERT INTO chunks_fts(rowid, norm) SELECT id, norm FROM chunks WHERE id >= ? AND id <= ?",
        (ids[0], ids[-1]),
    )
    return ids[-1] + 1, len(ids)


def _batched(conn: sqlite3.Connection, key: str, step: _Batch, rows: int, budget: float) -> int:
    """Run `step` from the id in meta `key`, one write transaction per batch with
    BACKFILL_PAUSE_S between, until it is done (the key is deleted) or `budget` seconds have
    passed (at least one batch); returns the rows done. The cursor is read under the write lock,
    so two processes opening the index at once share the work instead of doing a row twice, and
    a killed backfill resumes where its last commit left it."""
    done = 0
    started = time.monotonic()
    while True:
        with write_transaction(conn):
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            batch = None if row is None else step(conn, int(row[0]), rows)
            if batch is None:
                conn.execute("DELETE FROM meta WHERE key = ?", (key,))
                return done
            conn.execute("UPDATE meta SET value = ? WHERE key = ?", (str(batch[0]), key))
            done += batch[1]
        if time.monotonic() - started >= budget:
            return done
        time.sleep(BACKFILL_PAUSE_S)


def backfill_trigram(conn: sqlite3.Connection, bounded: bool = False) -> int:
    """Index the chunks migration 8 left to the trigram backfill, TRIGRAM_BACKFILL_ROWS per
    transaction; returns rows indexed. `bounded` stops after the batch that passes
    OPEN_BACKFILL_BUDGET_S, so opening an index never waits out the whole rebuild."""
    if not trigram_backfill_pending(conn):  # the usual case: no write lock taken
        return 0
    budget = OPEN_BACKFILL_BUDGET_S if bounded else math.inf
    return _batched(conn, TRIGRAM_BACKFILL_KEY, _trigram_batch, TRIGRAM_BACKFILL_ROWS, budget)


COMPACT_SECTIONS_KEY = "compact_sections_next"
COMPACT_CHUNKS_KEY = "compact_chunks_next"
# Rows converted per migration-9 transaction. Measured on the Python manual (3,097 sections,
# 51,434 chunks): 200 sections (~700 KB of text to compress) or 2,000 chunks take ~0.1 s each.
COMPACT_SECTION_ROWS = 200
COMPACT_CHUNK_ROWS = 2000


def backfill_compact(
    conn: sqlite3.Connection, bounded: bool = False, budget_s: float | None = None
) -> int:
    """Convert the rows an older schema wrote to migration 9's encodings, sections first, in
    batches as backfill_trigram; returns the rows visited. Rows written since the migration are
    already compact and are left as they are."""
    if not compact_backfill_pending(conn):
        return 0
    started = time.monotonic()
    budget = (OPEN_BACKFILL_BUDGET_S if budget_s is None else budget_s) if bounded else math.inf
    done = 0
    if compact_backfill_pending(conn, COMPACT_SECTIONS_KEY):
        done = _batched(conn, COMPACT_SECTIONS_KEY, compact_sections, COMPACT_SECTION_ROWS, budget)
        left = budget - (time.monotonic() - started)
        if compact_backfill_pending(conn, COMPACT_SECTIONS_KEY) or (done and left <= 0):
            return done  # the caller comes back for the chunks
    left = budget - (time.monotonic() - started)
    return done + _batched(conn, COMPACT_CHUNKS_KEY, compact_chunks, COMPACT_CHUNK_ROWS, left)


def compact_backfill_pending(conn: sqlite3.Connection, *keys: str) -> bool:
    """Whether migration 9 still has rows of an older schema to convert (a read, no lock)."""
    keys = keys or (COMPACT_SECTIONS_KEY, COMPACT_CHUNKS_KEY)
    marks = ",".join("?" * len(keys))
    row = conn.execute(f"SELECT 1 FROM meta WHERE key IN ({marks})", keys).fetchone()
    return row is not None


def run_backfills(conn: sqlite3.Connection, bounded: bool = False) -> int:
    """Every batched backfill a migration left: migration 8's trigram rows first (searches miss
    the chunks it has not reached), then migration 9's compaction (only the size waits on it).
    Bounded, one OPEN_BACKFILL_BUDGET_S for both; returns the rows done (0 once none is left)."""
    started = time.monotonic()
    done = backfill_trigram(conn, bounded=bounded)
    if trigram_backfill_pending(conn) or (
        bounded and done and time.monotonic() - started >= OPEN_BACKFILL_BUDGET_S
    ):
        return done
    left = OPEN_BACKFILL_BUDGET_S - (time.monotonic() - started)  # what the trigram rows left
    return done + backfill_compact(conn, bounded=bounded, budget_s=left)
