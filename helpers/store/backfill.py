"""The backfills a migration needs: the steps its SQL cannot express, and the long rewrites of
existing rows it leaves to run batch by batch.

Resumable rewrites (migration 8's trigram rows, 9's compaction) take the write lock one short
batch at a time, keep their cursor in `meta`, and are advanced by whoever opens the index
(bounded) and finished by the sync worker. helpers.store.migrations registers them with their
migration; nothing here defines schema.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from helpers.store.codec import compact_chunks, compact_sections, section_text
from helpers.store.connection import write_transaction
from helpers.store.fold_sql import FOLDED_MARK, ascii_lower, fold_is_stable
from helpers.store.units import UNITS_REBUILD_KEY, prepare_rebuild, rebuild_batch, write_rebuild
from helpers.text.cjk import index_text
from helpers.text.hubs import hub_score
from helpers.text.normalize import fold

# Chunk rows indexed per backfill transaction: ~0.3 ms each (one trigram row), so well under a
# second of write lock, with BACKFILL_PAUSE_S between batches for a waiting cancel or heartbeat.
TRIGRAM_BACKFILL_ROWS = 2000
# Opening an index (a tool call, a worker before it claims its job) advances the resumable
# backfills for at most this long, a few batches (bench/RESULTS.md "Index size, migration 9").
# The sync worker finishes them after claiming its job, checking for cancel between budgets; a
# search on a writable index advances the trigram rows and a units rebuild too
# (helpers.store.open_index.read_conn).
OPEN_BACKFILL_BUDGET_S = 2.0
BACKFILL_PAUSE_S = (
    0.12  # as helpers.index.document_write.BATCH_PAUSE_S: SQLite retries a busy writer per 100 ms
)
BACKFILL_PAGE_ROWS = 2000  # chunks read per page while a migration backfills (bounded memory)
# Rows converted per migration-9 transaction: each batch ~0.1 s of write lock (bench/RESULTS.md
# "Index size, migration 9").
COMPACT_SECTION_ROWS = 200
COMPACT_CHUNK_ROWS = 2000
# The meta row migration 8 writes and index_db.index_new_chunks reads: trigram rows of chunks at
# or past its id are left to TRIGRAM_REBUILD.
TRIGRAM_BACKFILL_KEY = "trigram_backfill_next"
# Migration 12: chunks whose stored folded copy is replaced by '' or the fold mark, per batch:
# a fold and a row rewrite each (no full-text work: the triggers see the same norm).
FOLD_BACKFILL_KEY = "fold_chunks_next"
FOLD_BACKFILL_ROWS = 2000
COMPACT_SECTIONS_KEY = "compact_sections_next"
COMPACT_CHUNKS_KEY = "compact_chunks_next"

# One batch of a resumable backfill: (conn, first id) -> (next id, rows done), or None at the end.
_Batch = Callable[[sqlite3.Connection, int], "tuple[int, int] | None"]


@dataclass(frozen=True)
class Resumable:
    """A rewrite a migration leaves behind: `batch` from the id in meta `key`, which is deleted
    once no row is left. With `prepare` and `write`, a batch's slow part (`prepare`, reads only)
    runs before the write lock and `write` applies it under the lock; `batch` does both when
    another process moved the cursor in between."""

    key: str
    batch: _Batch
    prepare: Callable[[sqlite3.Connection, int], Any] | None = None
    write: Callable[[sqlite3.Connection, Any], tuple[int, int]] | None = None


def _pages(conn: sqlite3.Connection, sql: str) -> Iterator[list[Any]]:
    """The rows of `sql` (id > ? ORDER BY id LIMIT ?), BACKFILL_PAGE_ROWS at a time by id:
    bounded memory over a table of any size."""
    last = 0
    while rows := conn.execute(sql, (last, BACKFILL_PAGE_ROWS)).fetchall():
        yield rows
        last = rows[-1][0]


def backfill_cjk(conn: sqlite3.Connection) -> None:
    """Bigram rows for the chunks an older version indexed (bigrams need Python, not SQL)."""
    conn.execute("DELETE FROM chunks_cjk")
    for rows in _pages(conn, "SELECT id, norm FROM chunks WHERE id > ? ORDER BY id LIMIT ?"):
        grams = [(row[0], index_text(row[1])) for row in rows]
        conn.executemany(
            "INSERT INTO chunks_cjk(rowid, grams) VALUES (?, ?)", [g for g in grams if g[1]]
        )


def backfill_hubs(conn: sqlite3.Connection) -> None:
    """Hub scores for the sections an older version indexed, from their stored text (the same
    pure function of the text that a sync applies, so no re-extraction is needed)."""
    for rows in _pages(conn, "SELECT id, text FROM sections WHERE id > ? ORDER BY id LIMIT ?"):
        scores = [(score, row[0]) for row in rows if (score := hub_score(section_text(row[1]))) > 0]
        conn.executemany("UPDATE sections SET hub = ? WHERE id = ?", scores)


def _trigram_batch(conn: sqlite3.Connection, first_id: int) -> tuple[int, int] | None:
    """The trigram rows of TRIGRAM_BACKFILL_ROWS chunks from id `first_id` on."""
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM chunks WHERE id >= ? ORDER BY id LIMIT ?",
            (first_id, TRIGRAM_BACKFILL_ROWS),
        )
    ]
    if not ids:
        return None
    conn.execute(
        "INSERT INTO chunks_fts(rowid, norm) SELECT id, norm FROM chunks WHERE id >= ? AND id <= ?",
        (ids[0], ids[-1]),
    )
    return ids[-1] + 1, len(ids)


def _fold_batch(conn: sqlite3.Connection, first_id: int) -> tuple[int, int] | None:
    """Drop the stored copy of FOLD_BACKFILL_ROWS chunks from id `first_id` on where SQL gives
    the same norm (helpers.store.fold_sql.stored_norm); a copy an older fold() wrote stays, as
    it is what the full-text tables hold."""
    rows = conn.execute(
        "SELECT id, text, norm_stored FROM chunks WHERE id >= ? ORDER BY id LIMIT ?",
        (first_id, FOLD_BACKFILL_ROWS),
    ).fetchall()
    if not rows:
        return None
    updates: list[tuple[str, int]] = []
    for cid, text, stored in rows:
        if stored in ("", FOLDED_MARK):
            continue
        if stored == ascii_lower(text):
            updates.append(("", cid))
        elif fold_is_stable(text) and stored == fold(text):
            updates.append((FOLDED_MARK, cid))
    conn.executemany("UPDATE chunks SET norm_stored = ? WHERE id = ?", updates)
    return rows[-1][0] + 1, len(rows)


def _compact_sections_batch(conn: sqlite3.Connection, first_id: int) -> tuple[int, int] | None:
    return compact_sections(conn, first_id, COMPACT_SECTION_ROWS)


def _compact_chunks_batch(conn: sqlite3.Connection, first_id: int) -> tuple[int, int] | None:
    return compact_chunks(conn, first_id, COMPACT_CHUNK_ROWS)


# Migration 8: the trigram rows of every chunk, dropped with the old table.
TRIGRAM_REBUILD = Resumable(TRIGRAM_BACKFILL_KEY, _trigram_batch)
# Migration 9: the rows an older schema wrote, in its compact encodings (sections first).
COMPACT_SECTIONS = Resumable(COMPACT_SECTIONS_KEY, _compact_sections_batch)
COMPACT_CHUNKS = Resumable(COMPACT_CHUNKS_KEY, _compact_chunks_batch)
# Migration 12: the folded copies SQL can give instead.
FOLD_CHUNKS = Resumable(FOLD_BACKFILL_KEY, _fold_batch)
# Migration 14 (and a tokenizer change): every document's units, from its stored sections.
UNITS_REBUILD = Resumable(UNITS_REBUILD_KEY, rebuild_batch, prepare_rebuild, write_rebuild)


def _pending(conn: sqlite3.Connection, keys: Sequence[str]) -> bool:
    marks = ",".join("?" * len(keys))
    row = conn.execute(f"SELECT 1 FROM meta WHERE key IN ({marks})", tuple(keys)).fetchone()
    return row is not None


def trigram_backfill_pending(conn: sqlite3.Connection) -> bool:
    """Whether migration 8's trigram rows are still being rebuilt (a read, no lock)."""
    return _pending(conn, (TRIGRAM_BACKFILL_KEY,))


def compact_backfill_pending(conn: sqlite3.Connection) -> bool:
    """Whether migration 9 still has rows of an older schema to convert (a read, no lock)."""
    return _pending(conn, (COMPACT_SECTIONS_KEY, COMPACT_CHUNKS_KEY))


def units_rebuild_pending(conn: sqlite3.Connection) -> bool:
    """Whether the units are being rebuilt (helpers.store.units.start_rebuild; a read, no lock):
    then they cover only some documents, and their BM25 would rank those above the rest."""
    return _pending(conn, (UNITS_REBUILD_KEY,))


def trigram_backfill_left(conn: sqlite3.Connection) -> int:
    """Chunks the trigram rebuild of migration 8 has not reached yet (0 when none is pending)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (TRIGRAM_BACKFILL_KEY,)).fetchone()
    if row is None:
        return 0
    return conn.execute("SELECT COUNT(*) FROM chunks WHERE id >= ?", (int(row[0]),)).fetchone()[0]


def _batched(conn: sqlite3.Connection, step: Resumable, budget: float) -> int:
    """Run `step` from the id in its meta key, one write transaction per batch with
    BACKFILL_PAUSE_S between, until it is done (the key is deleted) or `budget` seconds have
    passed (at least one batch); returns the rows done. The cursor is read under the write lock,
    so two processes opening the index at once share the work instead of doing a row twice, and
    a killed backfill resumes where its last commit left it."""
    done = 0
    started = time.monotonic()
    while True:
        ahead = _read_ahead(conn, step)
        with write_transaction(conn):
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (step.key,)).fetchone()
            if row is None:
                batch = None
            elif ahead is not None and ahead[0] == int(row[0]) and step.write is not None:
                batch = None if ahead[1] is None else step.write(conn, ahead[1])
            else:
                batch = step.batch(conn, int(row[0]))
            if batch is None:
                conn.execute("DELETE FROM meta WHERE key = ?", (step.key,))
                return done
            conn.execute("UPDATE meta SET value = ? WHERE key = ?", (str(batch[0]), step.key))
            done += batch[1]
        if time.monotonic() - started >= budget:
            return done
        time.sleep(BACKFILL_PAUSE_S)


def _read_ahead(conn: sqlite3.Connection, step: Resumable) -> tuple[int, Any] | None:
    """(cursor, step.prepare of it) read without a lock, or None for a step without one."""
    if step.prepare is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (step.key,)).fetchone()
    return None if row is None else (int(row[0]), step.prepare(conn, int(row[0])))


def run_resumable(
    conn: sqlite3.Connection, steps: Sequence[Resumable], bounded: bool = False
) -> int:
    """Advance `steps` in order, each to its end before the next; returns the rows done (0 once
    none is left). `bounded` shares one OPEN_BACKFILL_BUDGET_S among them, so opening an index
    never waits out a whole rewrite; a step not finished in it stops the run (the caller comes
    back). A step with nothing pending takes no write lock."""
    started = time.monotonic()
    done = 0
    for step in steps:
        if not _pending(conn, (step.key,)):
            continue
        left = OPEN_BACKFILL_BUDGET_S - (time.monotonic() - started) if bounded else math.inf
        if done and left <= 0:
            return done
        done += _batched(conn, step, left)
        if _pending(conn, (step.key,)):
            return done
    return done
