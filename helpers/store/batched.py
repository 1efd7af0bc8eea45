"""Statements over a list of ids longer than SQLite's parameter limit: one `IN (...)` per batch."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# Ids per `IN (...)`: under SQLite's oldest default of 999 host parameters, with room for the
# statement's other parameters.
SQL_PARAMS = 500


def in_batches(ids: Sequence[T], size: int = SQL_PARAMS) -> Iterator[tuple[list[T], str]]:
    """Each batch of `ids` with its `?,?,...` marks, in order."""
    for start in range(0, len(ids), size):
        batch = list(ids[start : start + size])
        yield batch, ",".join("?" * len(batch))


def rows_in(
    conn: sqlite3.Connection,
    sql: str,
    ids: Sequence[Any],
    before: Sequence[Any] = (),
    after: Sequence[Any] = (),
    size: int = SQL_PARAMS,
) -> Iterator[sqlite3.Row | tuple[Any, ...]]:
    """Every row of `sql` (whose one `{marks}` stands for the batch) over all of `ids`;
    `before`/`after` are the statement's other parameters around the batch."""
    for batch, marks in in_batches(ids, size):
        yield from conn.execute(sql.format(marks=marks), [*before, *batch, *after])
