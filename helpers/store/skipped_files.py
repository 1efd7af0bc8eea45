"""The skipped_files table (schema 7): every file the last sync saw and did not index, and why.

Written by the sync worker (refreshed for the synced scope at every plan, one row per skipped
file or folder); read by rag_list(status="skipped") and rag_health. An index older than schema 7
has no table: readers answer "nothing recorded" instead of failing.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from helpers.safety import scope_like_pattern
from helpers.skips import SKIP_REASON_LABELS, SkipReason, SkipRecord

TOP_EXTENSIONS = 10  # unsupported suffixes rag_health lists (the long tail is summed)
INSERT_BATCH = 5000  # rows per executemany: 50,000 skipped files stay one short transaction


def has_table(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'skipped_files'"
    ).fetchone()
    return row is not None


def replace_scope(
    conn: sqlite3.Connection, scope: str, records: Iterable[SkipRecord], job_id: str | None
) -> None:
    """Forget what was skipped under `scope` and store the fresh list (caller's transaction)."""
    scope = scope.strip("/")
    if scope:
        conn.execute(
            "DELETE FROM skipped_files WHERE path = ? OR path LIKE ? ESCAPE '\\'",
            (scope, scope_like_pattern(scope)),
        )
    else:
        conn.execute("DELETE FROM skipped_files")
    rows = [_row(r, job_id) for r in records]
    for i in range(0, len(rows), INSERT_BATCH):
        conn.executemany(
            "INSERT OR REPLACE INTO skipped_files(path, reason, detail, ext, is_dir, job_id, "
            "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows[i : i + INSERT_BATCH],
        )


def add(conn: sqlite3.Connection, record: SkipRecord, job_id: str | None) -> None:
    """One file skipped after reading (e.g. secret material); caller's transaction."""
    conn.execute(
        "INSERT OR REPLACE INTO skipped_files(path, reason, detail, ext, is_dir, job_id, "
        "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        _row(record, job_id),
    )


def _row(record: SkipRecord, job_id: str | None) -> tuple[object, ...]:
    return (
        record.rel_path,
        str(record.reason),
        record.detail,
        record.extension,
        int(record.is_dir),
        job_id,
        time.time(),
    )


def list_skipped(
    conn: sqlite3.Connection,
    knowledge_dir: Path,
    path_prefix: str,
    contains: str,
    limit: int,
    offset: int,
    descending: bool = False,
) -> dict[str, Any]:
    """rag_list(status="skipped"): paged rows shaped like indexed files, plus skip_reason."""
    if not has_table(conn):
        return {"total": 0, "offset": offset, "limit": limit, "items": [], "next_offset": None}
    clauses, params = ["1"], []
    if path_prefix:
        clauses.append("(path = ? OR path LIKE ? ESCAPE '\\')")
        params += [path_prefix, scope_like_pattern(path_prefix)]
    if contains:
        clauses.append("instr(lower(path), ?) > 0")
        params.append(contains.lower())
    where = " AND ".join(clauses)
    total = conn.execute(f"SELECT COUNT(*) FROM skipped_files WHERE {where}", params).fetchone()[0]
    direction = "DESC" if descending else "ASC"
    rows = conn.execute(
        f"SELECT * FROM skipped_files WHERE {where} ORDER BY path {direction} LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    items = [_item(row, knowledge_dir) for row in rows]
    end = offset + len(items)
    return {
        "total": total,
        "offset": offset,
        "limit": limit,
        "items": items,
        "next_offset": end if end < total else None,
    }


def _item(row: sqlite3.Row, knowledge_dir: Path) -> dict[str, Any]:
    path = row["path"]
    reason = row["reason"]
    return {
        "path": path,
        "display_path": path + ("/" if row["is_dir"] else ""),
        "abs_path": str(knowledge_dir / path),
        "title": path.rsplit("/", 1)[-1],
        "format": (row["ext"] or "").lstrip("."),
        "size": 0,
        "modified_ns": 0,
        "sections": 0,
        "chunks": 0,
        "status": "skipped",
        "error": row["detail"] or _label(reason),
        "ocr": False,
        "ocr_engine": None,
        "ocr_pages": [],
        "needs_ocr_pages": [],
        "indexed_at": row["recorded_at"],
        "redactions": 0,
        "skip_reason": reason,
    }


def _label(reason: str) -> str:
    try:
        return SKIP_REASON_LABELS[SkipReason(reason)]
    except ValueError:
        return reason


def summary(conn: sqlite3.Connection) -> dict[str, Any]:
    """rag_health's view: counts per reason and the most common unsupported suffixes."""
    if not has_table(conn):
        return {"total": 0, "by_reason": {}, "top_unsupported_extensions": [], "recorded": False}
    by_reason = {
        row["reason"]: row["n"]
        for row in conn.execute(
            "SELECT reason, COUNT(*) AS n FROM skipped_files "
            "GROUP BY reason ORDER BY n DESC, reason"
        )
    }
    top = [
        {"extension": row["ext"] or "(none)", "count": row["n"]}
        for row in conn.execute(
            "SELECT ext, COUNT(*) AS n FROM skipped_files WHERE reason = ? "
            "GROUP BY ext ORDER BY n DESC, ext LIMIT ?",
            (str(SkipReason.UNSUPPORTED), TOP_EXTENSIONS),
        )
    ]
    return {
        "total": sum(by_reason.values()),
        "by_reason": by_reason,
        "top_unsupported_extensions": top,
        "recorded": True,
    }
