"""A generation's rows without its vectors in memory: every chunk id in block order, and the
float16 vectors of just the rows a search rescores, read by incremental BLOB I/O.

A warm worker's first searches of a large generation are answered from its stored first-pass
codes (helpers/semantic/first_pass.py) while every vector is still being read into memory on a
background thread (helpers/semantic/vector_pack.py). The candidates' rows are read here, through
the search's own read transaction, as the same bytes the full read copies: the rescoring sees
the same float16 values, so it gives the same scores and order. numpy only.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.semantic.vector_pack import VECTOR_DTYPE, ScanError, unpack_ids, unpack_vectors

REBUILD_HINT = "run a sync so the semantic index is rebuilt"


@dataclass(frozen=True)
class RowMap:
    """Where a generation's rows live: its cache key, every chunk id in block order (the codes'
    row order) and the row number each block starts at."""

    key: tuple[Any, ...]  # vector_pack.open_generation's key
    ids: np.ndarray  # int64 [n]
    starts: np.ndarray  # int64 [blocks + 1]

    @property
    def counts(self) -> list[int]:
        return np.diff(self.starts).tolist()


def read_row_map(conn: sqlite3.Connection, key: tuple[Any, ...]) -> RowMap:
    """Every block's chunk ids (8 bytes a row; the vector BLOBs are not read)."""
    generation, count = int(key[1]), int(key[3])
    parts = []
    for n, ids_blob in conn.execute(
        "SELECT count, chunk_ids FROM semantic_blocks WHERE generation_id = ? ORDER BY block_no",
        (generation,),
    ):
        ids = unpack_ids(ids_blob)
        if len(ids) != n:
            raise ScanError(
                f"semantic generation {generation}: a block's ids do not match its count",
                REBUILD_HINT,
            )
        parts.append(ids)
    total = sum(len(p) for p in parts)
    if total != count:
        raise ScanError(
            f"semantic generation {generation} holds {total} vectors, its count says {count}",
            REBUILD_HINT,
        )
    ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    ids.flags.writeable = False
    starts = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    return RowMap(key, ids, starts)


def read_block(conn: sqlite3.Connection, generation: int, block: int, dim: int) -> np.ndarray:
    """float16 [count, dim] vectors of the generation's `block`-th block (in block_no order)."""
    row = conn.execute(
        "SELECT vectors, count FROM semantic_blocks WHERE generation_id = ? "
        "ORDER BY block_no LIMIT 1 OFFSET ?",
        (generation, block),
    ).fetchone()
    if row is None:
        raise ScanError(f"semantic generation {generation} has no block {block}", REBUILD_HINT)
    return unpack_vectors(row[0], row[1], dim)


class BlobRows:
    """Reads rows of one generation through `conn`, inside the caller's read transaction (the
    one its generation was checked in); `read` counts the rows read so far."""

    def __init__(self, conn: sqlite3.Connection, rows: RowMap) -> None:
        generation = int(rows.key[1])
        located = conn.execute(
            "SELECT rowid, count FROM semantic_blocks WHERE generation_id = ? ORDER BY block_no",
            (generation,),
        ).fetchall()
        if [int(n) for _, n in located] != rows.counts:
            raise ScanError(
                f"semantic generation {generation} changed while it was searched", "search again"
            )
        self.conn = conn
        self.rows = rows
        self.generation = generation
        self.rowids = [int(r) for r, _ in located]
        self.read = 0

    def gather(self, rows: np.ndarray, out: np.ndarray) -> None:
        """out[i] = the float16 vector of row rows[i] (rows ascending, out C-contiguous): one
        BLOB handle per block, one slice of one row's bytes per row, one copy per block."""
        dim = out.shape[1]
        width = dim * VECTOR_DTYPE.itemsize
        raw = out.view(np.uint8).reshape(len(rows), width)
        blocks = np.searchsorted(self.rows.starts, rows, side="right") - 1
        cuts = (np.flatnonzero(np.diff(blocks)) + 1).tolist()
        for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True):
            block = int(blocks[a])
            start = int(self.rows.starts[block])
            count = int(self.rows.starts[block + 1]) - start
            with self.conn.blobopen(
                "semantic_blocks", "vectors", self.rowids[block], readonly=True
            ) as blob:
                if len(blob) != count * width:
                    raise ScanError(
                        f"semantic generation {self.generation}: block {block}'s vectors have "
                        f"{len(blob)} bytes, expected {count * width}",
                        REBUILD_HINT,
                    )
                offsets = ((rows[a:b] - start) * width).tolist()
                data = b"".join([blob[at : at + width] for at in offsets])
                raw[a:b] = np.frombuffer(data, dtype=np.uint8).reshape(b - a, width)
        self.read += len(rows)
