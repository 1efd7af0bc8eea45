"""How sections and chunks keep their text and locations compactly in the index (migration 9).

Every encoding tells itself apart from what schema 8 and earlier stored, so an index whose rows
are only partly converted (migration 9's batched backfill, a read-only mount that is never
migrated) reads the same row by row:

- sections.text: zlib-compressed UTF-8 as a BLOB when that is smaller, else the plain TEXT as
  before. Section text is only ever shown, never searched in SQL (the full-text tables index the
  chunks), and compresses to 0.39x on the Python manual (bench/RESULTS.md, "Index size,
  migration 9").
- chunks.location: '' when the child's location is its section's; "START-END" when only the
  line range differs ("22-35", "22-", "-35"); else "=" + a JSON merge patch over the section's
  location (null removes a field), or the whole JSON object when that is shorter. Schema 8
  stored the whole object in every row: a value starting with '{' is read as whole in any row.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from typing import Any

from helpers.extract.blocks import Location

HASH_BYTES = 16  # sha256 prefix per vector: 128 bits cannot collide by chance

# zlib's default level: as small as level 9 and as fast (bench/RESULTS.md "Index size,
# migration 9"); level 1 is faster but larger.
SECTION_ZLIB_LEVEL = 6
_LINES = ("line_start", "line_end")
_PATCH = "="


def pack_section_text(text: str) -> str | bytes:
    """What sections.text stores: the compressed bytes, or the text when they are not smaller."""
    raw = text.encode("utf-8")
    packed = zlib.compress(raw, SECTION_ZLIB_LEVEL)
    return packed if len(packed) < len(raw) else text


def section_text(stored: str | bytes) -> str:
    """The text of a sections.text value, compressed (migration 9) or plain (any schema)."""
    if isinstance(stored, bytes):
        return zlib.decompress(stored).decode("utf-8")
    return stored


def pack_child_location(
    child: Location, section: Location, section_fields: dict[str, Any] | None = None
) -> str:
    """What chunks.location stores for a child of `section`: only what differs from it
    (`section_fields`: section.to_dict(), when the caller has it for all its children)."""
    if child == section:  # most children of a small file: no dict to build
        return ""
    mine = child.to_dict()
    theirs = section.to_dict() if section_fields is None else section_fields
    if mine == theirs:
        return ""
    patch: dict[str, Any] = {k: v for k, v in mine.items() if theirs.get(k) != v}
    patch.update({k: None for k in theirs if k not in mine})
    if set(patch) <= set(_LINES) and all(type(v) is int and v >= 0 for v in patch.values()):
        return "-".join("" if patch.get(k) is None else str(patch[k]) for k in _LINES)
    patched = _PATCH + _json(patch)
    whole = _json(mine)
    return whole if len(whole) < len(patched) else patched


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def child_location(stored: str, section_location: str) -> Location:
    """The location of a chunk from its chunks.location and its section's sections.location."""
    if stored.startswith("{"):  # schema 8 and earlier: the whole object
        return Location.from_dict(json.loads(stored))
    data = json.loads(section_location) if section_location else {}
    if not stored:
        return Location.from_dict(data)
    if stored.startswith(_PATCH):
        for key, value in json.loads(stored[len(_PATCH) :]).items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        return Location.from_dict(data)
    start, _, end = stored.partition("-")
    if start:
        data["line_start"] = int(start)
    if end:
        data["line_end"] = int(end)
    return Location.from_dict(data)


# --- migration 9's backfill: rows an older schema wrote, converted batch by batch ---------------


def compact_sections(conn: sqlite3.Connection, first_id: int, limit: int) -> tuple[int, int] | None:
    """Inside a write transaction: compress the plain section texts among the `limit` sections
    from id `first_id` on; (next id, sections visited), or None when no section is left."""
    rows = conn.execute(
        "SELECT id, text FROM sections WHERE id >= ? ORDER BY id LIMIT ?", (first_id, limit)
    ).fetchall()
    if not rows:
        return None
    updates = [
        (packed, sid)
        for sid, text in rows
        if isinstance(text, str) and isinstance(packed := pack_section_text(text), bytes)
    ]
    conn.executemany("UPDATE sections SET text = ? WHERE id = ?", updates)
    return int(rows[-1][0]) + 1, len(rows)


def compact_chunks(conn: sqlite3.Connection, first_id: int, limit: int) -> tuple[int, int] | None:
    """Inside a write transaction: the `limit` chunks from id `first_id` on keep only what their
    location adds to their section's and no text hash; (next id, chunks visited), or None.
    Neither column is indexed or watched by a trigger, so no full-text row is touched."""
    rows = conn.execute(
        "SELECT c.id, c.location, c.text_hash, s.location FROM chunks c "
        "JOIN sections s ON s.id = c.section_id WHERE c.id >= ? ORDER BY c.id LIMIT ?",
        (first_id, limit),
    ).fetchall()
    if not rows:
        return None
    updates = []
    for cid, stored, text_hash, section_location in rows:
        if text_hash == "" and not stored.startswith("{"):
            continue  # written by migration 9's code already
        section = Location.from_dict(json.loads(section_location) if section_location else {})
        packed = pack_child_location(child_location(stored, section_location), section)
        if packed != stored or text_hash != "":
            updates.append((packed, cid))
    conn.executemany("UPDATE chunks SET location = ?, text_hash = '' WHERE id = ?", updates)
    return int(rows[-1][0]) + 1, len(rows)


def text_digest(text: str) -> bytes:
    """The 16-byte key of a chunk's text, which its semantic vector is stored and reused under
    (migration 9 stores no hash per chunk: hashing the text costs 0.05 s per 51,000 chunks).
    Equal to vector_pack.hash_digest of the schema-8 hex sha256, so older vectors still match."""
    return hashlib.sha256(text.encode("utf-8")).digest()[:HASH_BYTES]
