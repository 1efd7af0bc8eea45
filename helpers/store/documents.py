"""Listing indexed files and reading their sections back (no search involved)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.extract.blocks import Location
from helpers.lexical.common import NOT_STAGING, STAGING_RANGE
from helpers.results import DOCUMENT, LIST, READ, SECTION, UNTRUSTED_NOTICE
from helpers.safety import scope_like_pattern
from helpers.store.codec import section_text
from helpers.text.chunking import CHUNK_SCHEME

LIST_SORT_COLUMNS = {
    "path": "path",
    "size": "size",
    "modified": "mtime_ns",
    "chunks": "chunk_count",
    "status": "status",
    "format": "format",
}
# needs_reindex: indexed with an older chunking scheme (the next sync re-reads it); a search
# hit is `stale` instead when its file changed since it was indexed.
# skipped: a file the last sync saw and did not index (helpers.store.skipped_files)
STATUSES = ("indexed", "failed", "needs_ocr", "needs_reindex", "skipped")
READ_MAX_CHARS = 40_000  # one read stays well inside an agent's context; `next_offset` continues


@dataclass(frozen=True)
class ListQuery:
    path_prefix: str = ""
    status: str | None = None
    contains: str = ""  # case-insensitive substring of the path
    sort: str = "path"
    descending: bool = False
    limit: int = 100
    offset: int = 0


def list_documents(
    conn: sqlite3.Connection, knowledge_dir: Path, query: ListQuery
) -> dict[str, Any]:
    # A big document being written (or left by a killed worker) lives under a staging path
    # until it is swapped in: it is not a file of the knowledge dir.
    clauses: list[str] = [NOT_STAGING]
    params: list[object] = list(STAGING_RANGE)
    if query.path_prefix:
        clauses.append("(path = ? OR path LIKE ? ESCAPE '\\')")
        params += [query.path_prefix, scope_like_pattern(query.path_prefix)]
    if query.status == "needs_reindex":
        clauses.append("chunk_scheme != ?")
        params.append(CHUNK_SCHEME)
    elif query.status:
        clauses.append("status = ?")
        params.append(query.status)
    if query.contains:
        clauses.append("instr(lower(path), ?) > 0")
        params.append(query.contains.lower())
    where = " AND ".join(clauses) or "1"
    total = conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", params).fetchone()[0]
    column = LIST_SORT_COLUMNS[query.sort]
    direction = "DESC" if query.descending else "ASC"
    rows = conn.execute(
        f"SELECT * FROM documents WHERE {where} ORDER BY {column} {direction}, path "
        "LIMIT ? OFFSET ?",
        (*params, query.limit, query.offset),
    ).fetchall()
    items = [_document_dict(row, knowledge_dir) for row in rows]
    return LIST.build(
        {
            "total": total,
            "offset": query.offset,
            "limit": query.limit,
            "items": items,
            "next_offset": query.offset + len(items) if query.offset + len(items) < total else None,
        }
    )


def _document_dict(row: sqlite3.Row, knowledge_dir: Path) -> dict[str, Any]:
    status = row["status"]
    if status != "failed" and row["chunk_scheme"] != CHUNK_SCHEME:
        status = "needs_reindex"
    return DOCUMENT.build(
        {
            "path": row["path"],
            "display_path": row["path"],
            "abs_path": str(knowledge_dir / row["path"]),
            "title": row["title"],
            "format": row["format"],
            "size": row["size"],
            "modified_ns": row["mtime_ns"],
            "sections": row["section_count"],
            "chunks": row["chunk_count"],
            "status": status,
            "error": row["error"],
            "ocr": bool(row["ocr_pages"]),
            "ocr_engine": row["ocr_engine"],
            "ocr_pages": json.loads(row["ocr_pages"]) if row["ocr_pages"] else [],
            "needs_ocr_pages": json.loads(row["needs_ocr_pages"]) if row["needs_ocr_pages"] else [],
            "indexed_at": row["indexed_at"],
            # secret spans replaced by "[redacted secret]" (helpers.secrets); 0 before schema 6
            "redactions": row["redactions"] if "redactions" in row.keys() else 0,  # noqa: SIM118
        }
    )


def find_document(conn: sqlite3.Connection, rel_path: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM documents WHERE path = ?", (rel_path,)).fetchone()


def _matches(location: Location, wanted: dict[str, Any]) -> bool:
    """A section matches a requested location when every field given agrees."""
    have = location.to_dict()
    for key, value in wanted.items():
        if key == "heading":
            headings = location.heading_path + location.section_path  # PDF outline too
            if not any(str(value).lower() in h.lower() for h in headings):
                return False
        elif key == "line":
            start, end = location.line_start, location.line_end or location.line_start
            if start is None or end is None or not start <= int(value) <= end:
                return False
        elif have.get(key) != value:
            return False
    return True


def read_sections(
    conn: sqlite3.Connection,
    doc: sqlite3.Row,
    *,
    section_id: int | None,
    location: dict[str, Any] | None,
    before: int,
    after: int,
    offset: int,
    max_chars: int = READ_MAX_CHARS,
) -> dict[str, Any]:
    """The section(s) at a hit with neighbours, or the whole document from `offset`, capped."""
    rows = conn.execute(
        "SELECT id, ordinal, text, location FROM sections WHERE document_id = ? ORDER BY ordinal",
        (doc["id"],),
    ).fetchall()
    if section_id is not None or location:
        centre = None
        for i, row in enumerate(rows):
            loc = Location.from_dict(json.loads(row["location"]))
            if (section_id is not None and row["id"] == section_id) or (
                section_id is None and location and _matches(loc, location)
            ):
                centre = i
                break
        if centre is None:
            return {"found": False, "sections": [], "next_offset": None}
        selected = rows[max(0, centre - before) : centre + after + 1]
        start_index = max(0, centre - before)
    else:
        selected = rows[offset:]
        start_index = offset
    out: list[dict[str, Any]] = []
    used = 0
    next_offset = None
    for i, row in enumerate(selected):
        text = section_text(row["text"])
        if out and used + len(text) > max_chars:
            next_offset = start_index + i
            break
        loc = Location.from_dict(json.loads(row["location"]))
        out.append(
            SECTION.build(
                {
                    "section_id": row["id"],
                    "ordinal": row["ordinal"],
                    "location": loc.to_dict(),
                    "location_label": loc.label(),
                    "text": text,
                }
            )
        )
        used += len(text)
    return READ.build(
        {
            "found": True,
            "path": doc["path"],
            "display_path": doc["path"],
            "title": doc["title"],
            "content_trust": UNTRUSTED_NOTICE,
            "total_sections": len(rows),
            "sections": out,
            "next_offset": next_offset,
        }
    )
