"""Taking rows and their text out of the index: batched discards, grouped deletes, the purge.

It stands apart from document_write (which writes a document's rows and moves a replaced or
removed one out of sight) because deleting is its own job with its own bounds: a hidden
document's rows go DISCARD_BATCH_CHUNKS per transaction so no reader or cancel waits behind
one long delete, a group's replaced rows go in one id-ordered statement per batch of
documents (helpers.store.batched: one FTS5 segment, not one per document), and a sync that
replaced text holding a secret rewrites the full-text indexes so that no deleted text
survives in them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from helpers.index.pacing import paced_write
from helpers.lexical.common import hidden_document_ids
from helpers.store.batched import in_batches
from helpers.store.connection import write_transaction
from helpers.store.units import drop_units

# Chunk rows deleted per transaction: as document_write.SINGLE_TRANSACTION_CHUNKS, ~1 s of
# write lock at most (0.3-0.7 ms per chunk row with its FTS entries, bench/faults/big_doc_lock.py).
DISCARD_BATCH_CHUNKS = 2_000
DISCARD_BATCH_SECTIONS = 5_000  # no FTS behind sections: cheaper rows


def discard_staging(conn: sqlite3.Connection, should_stop: Callable[[], bool] | None = None) -> int:
    """Discard every staging row (left by a killed worker or a long cancel); returns how many
    were removed."""
    removed = 0
    for doc_id in hidden_document_ids(conn):
        if not discard_document(conn, doc_id, should_stop):
            break
        removed += 1
    return removed


def discard_document(
    conn: sqlite3.Connection, doc_id: int, should_stop: Callable[[], bool] | None = None
) -> bool:
    """Delete a document and its rows in bounded transactions (the counts on its row stay
    true after every commit); False when `should_stop` asked to stop first."""
    while True:
        if should_stop is not None and should_stop():
            return False
        with paced_write(conn):
            drop_units(conn, [doc_id])  # usually none left: _retire dropped them
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM chunks WHERE document_id = ? ORDER BY id LIMIT ?",
                    (doc_id, DISCARD_BATCH_CHUNKS),
                )
            ]
            if ids:
                marks = ",".join("?" * len(ids))
                conn.execute(f"DELETE FROM chunks WHERE id IN ({marks})", ids)
                conn.execute(
                    "UPDATE documents SET chunk_count = chunk_count - ? WHERE id = ?",
                    (len(ids), doc_id),
                )
            else:
                gone = conn.execute(
                    "DELETE FROM sections WHERE id IN (SELECT id FROM sections "
                    "WHERE document_id = ? ORDER BY id LIMIT ?)",
                    (doc_id, DISCARD_BATCH_SECTIONS),
                ).rowcount
                if gone:
                    conn.execute(
                        "UPDATE documents SET section_count = section_count - ? WHERE id = ?",
                        (gone, doc_id),
                    )
                else:
                    conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
                    return True


def delete_document_rows(conn: sqlite3.Connection, doc_id: int) -> None:
    """Inside a write transaction: a small document's chunks and sections at once."""
    # The full-text rows leave with their chunks through triggers (migrations 2, 4 and 8); the
    # unit rows need the sections' text, so they go first (helpers.store.units).
    drop_units(conn, [doc_id])
    conn.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
    conn.execute("DELETE FROM sections WHERE document_id = ?", (doc_id,))


def delete_rows_of(
    conn: sqlite3.Connection,
    doc_ids: Sequence[int],
    chunks_upto: int | None = None,
    sections_upto: int | None = None,
) -> None:
    """Inside a write transaction: the chunks and sections of several documents (those with ids
    up to `chunks_upto` / `sections_upto` when given: the rows a group's new ones replace),
    chunks in one statement in id order. FTS5 writes its pending terms out as a new segment
    whenever the row id goes down, so per-document deletes between a group's inserts cost a
    segment each; this costs one. Without caps the documents' units go too; with them the
    caller dropped the old units before writing the new ones (group_write._write_items)."""
    if chunks_upto is None and sections_upto is None:
        drop_units(conn, doc_ids)
    chunk_cap = "" if chunks_upto is None else f" AND id <= {int(chunks_upto)}"
    section_cap = "" if sections_upto is None else f" AND id <= {int(sections_upto)}"
    for part, marks in in_batches(doc_ids):
        conn.execute(
            f"DELETE FROM chunks WHERE id IN (SELECT id FROM chunks WHERE document_id IN "
            f"({marks}){chunk_cap} ORDER BY id)",
            part,
        )
        conn.execute(f"DELETE FROM sections WHERE document_id IN ({marks}){section_cap}", part)


# FTS5 deletes only mark rows deleted: a removed row's terms stay in the older index segments
# until they are merged. 'optimize' merges every segment into one without them (with
# secure_delete, the freed pages are zeroed), and a TRUNCATE checkpoint empties the WAL.
PURGED_FTS_TABLES = ("chunks_fts", "chunks_words", "chunks_ocr_fts", "chunks_cjk", "units_fts")
PURGE_PENDING_KEY = "fts_purge_pending"  # meta row: a purge is owed (survives a cancel or kill)


def mark_purge_pending(conn: sqlite3.Connection) -> None:
    with write_transaction(conn):
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (PURGE_PENDING_KEY,),
        )


def purge_pending(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM meta WHERE key = ?", (PURGE_PENDING_KEY,)).fetchone()
    return row is not None


def purge_removed_text(conn: sqlite3.Connection) -> None:
    """Rewrite the full-text indexes so that no deleted text survives in them; run after a sync
    replaced documents whose older text held secrets (rare: costs one index rewrite)."""
    with write_transaction(conn):
        for table in PURGED_FTS_TABLES:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        conn.execute("DELETE FROM meta WHERE key = ?", (PURGE_PENDING_KEY,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
