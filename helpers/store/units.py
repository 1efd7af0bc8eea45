"""Retrieval units and their contentless BM25 table (migrations 11 and 14): every SQL statement on
`units` and `units_fts` lives here.

A unit is a run of a document's consecutive sections under one outline entry (a PDF's
bookmarks), else on one page (a PDF without an outline, a scanned file), else the whole
document. `units_fts` holds one row
per unit (rowid = units.id) of helpers.text.unit_tokens over its text (the document's title
first when the unit is the whole document), and stores no copy of that text: a row is deleted
with the FTS5 'delete' command and the same tokens recomputed from the sections still stored,
so every path that deletes sections calls `drop_units` first (helpers.index.discard,
helpers.index.document_write). meta 'unit_tokens_version' names the tokenizer the rows were
written with; `ensure_current` starts a rebuild of the table when it differs, which runs batch by
batch (helpers.store.backfill.UNITS_REBUILD) with the units channel off until it ends.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from helpers.store.batched import in_batches
from helpers.store.codec import section_text
from helpers.store.connection import write_transaction
from helpers.text.unit_tokens import (
    UNIT_TOKENS_VERSION,
    UnitLanguages,
    decode_runs,
    encode_runs,
    line_languages,
    text_tokens,
)

UNIT_VERSION_KEY = "unit_tokens_version"
# The meta row of a units rebuild under way: the next document id to give units to.
UNITS_REBUILD_KEY = "units_rebuild_next"
# A rebuild batch prepares units (outside the write lock) until this much time has passed (at
# least one document, at most UNITS_REBUILD_DOCUMENTS); its write then takes a short lock.
UNITS_REBUILD_BATCH_S = 0.25
UNITS_REBUILD_DOCUMENTS = 500
# The schema unit rows are written at: migration 11 adds the tables, 14 their line languages (an
# index migrated only part of the way, as tests do, has no rows to keep current).
UNITS_SCHEMA = 14
# Documents whose rows are hidden (a big document being written or discarded): never units.
_STAGING_STATUS = "staging"
# A document (`d`) a rebuild gives units to: visible, and none yet (a sync wrote its own); one
# parameter, _STAGING_STATUS.
_NEEDS_UNITS = "d.status != ? AND NOT EXISTS (SELECT 1 FROM units u WHERE u.document_id = d.id)"


@dataclass(frozen=True)
class UnitSpan:
    """Sections first..last (ordinals, inclusive) of one document, from `page` (None = the whole
    document)."""

    first: int
    last: int
    page: int | None


# Where a section lies, as far as units go: its outline entry (PDF bookmarks) and its page.
SectionPlace = tuple[tuple[str, ...], int | None]


def unit_spans(places: Sequence[SectionPlace]) -> list[UnitSpan]:
    """The units of a document whose sections (by ordinal from 0) lie at `places`: consecutive
    sections under one outline entry form a unit (a topic of a manual, on the page it starts);
    outside an outline, consecutive sections on one page; sections with neither form the
    document's unit."""
    if not places:
        return []
    if all(not outline and page is None for outline, page in places):
        return [UnitSpan(0, len(places) - 1, None)]
    keys = [outline if outline else page for outline, page in places]
    spans: list[UnitSpan] = []
    start = 0
    for ordinal in range(1, len(places) + 1):
        if ordinal == len(places) or keys[ordinal] != keys[start]:
            spans.append(UnitSpan(start, ordinal - 1, places[start][1]))
            start = ordinal
    return spans


def _unit_text(title: str, span: UnitSpan, texts: Sequence[str]) -> str:
    body = "\n".join(texts[span.first : span.last + 1])
    return f"{title}\n{body}" if span.page is None else body


@dataclass(frozen=True)
class PreparedUnit:
    """A unit's row before it is written: its span, stemming languages and tokens."""

    span: UnitSpan
    languages: UnitLanguages
    tokens: str


def prepare_units(
    title: str, sections: Sequence[tuple[str, SectionPlace]]
) -> tuple[PreparedUnit, ...]:
    """The units of a document whose sections are (text, place), ordinals 0..n-1: computed
    before the write transaction (language identification and stemming take the time a write
    lock must not be held for)."""
    return prepare_many([(title, sections)])[0]


def prepare_many(
    documents: Sequence[tuple[str, Sequence[tuple[str, SectionPlace]]]],
) -> list[tuple[PreparedUnit, ...]]:
    """prepare_units of each (title, sections), every unit's language identified first, back to
    back: the identifier's tables (tens of MB) stay in the CPU caches between units."""
    spans_texts = []
    for title, sections in documents:
        texts = [text for text, _ in sections]
        spans = unit_spans([place for _, place in sections])
        spans_texts.append([(span, _unit_text(title, span, texts)) for span in spans])
    languages = [[line_languages(text) for _, text in units] for units in spans_texts]
    return [
        tuple(
            PreparedUnit(span, found, " ".join(text_tokens(text, found)))
            for (span, text), found in zip(units, doc_languages, strict=True)
        )
        for units, doc_languages in zip(spans_texts, languages, strict=True)
    ]


def write_units(conn: sqlite3.Connection, doc_id: int, units: Sequence[PreparedUnit]) -> None:
    """Inside a write transaction: a document's units, its sections just written (its old
    units already dropped)."""
    for unit in units:
        span = unit.span
        unit_id = conn.execute(
            "INSERT INTO units(document_id, first_ordinal, last_ordinal, page, lang, lang_runs) "
            "VALUES (?,?,?,?,?,?)",
            (
                doc_id,
                span.first,
                span.last,
                span.page,
                unit.languages.main,
                encode_runs(unit.languages),
            ),
        ).lastrowid
        conn.execute("INSERT INTO units_fts(rowid, tokens) VALUES (?, ?)", (unit_id, unit.tokens))


def drop_units(conn: sqlite3.Connection, doc_ids: Iterable[int]) -> None:
    """Inside a write transaction, before the documents' sections go: their units and their
    rows of units_fts (deleted with the tokens recomputed from the stored sections)."""
    for part, marks in in_batches(list(doc_ids)):
        units = conn.execute(
            f"SELECT u.id, u.document_id, u.first_ordinal, u.last_ordinal, u.page, u.lang, "
            f"u.lang_runs, d.title FROM units u JOIN documents d ON d.id = u.document_id "
            f"WHERE u.document_id IN ({marks}) ORDER BY u.document_id, u.first_ordinal",
            part,
        ).fetchall()
        by_doc: dict[int, list[tuple[int, UnitSpan, str, str, str]]] = {}
        for unit_id, doc_id, first, last, page, lang, runs, title in units:
            span = UnitSpan(first, last, page)
            by_doc.setdefault(doc_id, []).append((unit_id, span, lang, runs, title))
        for doc_id, doc_units in by_doc.items():
            texts = _section_texts(conn, doc_id)
            for unit_id, span, lang, runs, title in doc_units:
                text = _unit_text(title, span, texts)
                languages = decode_runs(lang, runs, text.count("\n") + 1)
                tokens = " ".join(text_tokens(text, languages))
                conn.execute(
                    "INSERT INTO units_fts(units_fts, rowid, tokens) VALUES ('delete', ?, ?)",
                    (unit_id, tokens),
                )
        conn.execute(f"DELETE FROM units WHERE document_id IN ({marks})", part)


def _section_texts(conn: sqlite3.Connection, doc_id: int) -> list[str]:
    """The document's section texts by ordinal (a missing ordinal reads as '')."""
    rows = conn.execute(
        "SELECT ordinal, text FROM sections WHERE document_id = ? ORDER BY ordinal", (doc_id,)
    ).fetchall()
    texts = [""] * (rows[-1][0] + 1 if rows else 0)
    for ordinal, text in rows:
        texts[ordinal] = section_text(text)
    return texts


def start_rebuild(conn: sqlite3.Connection) -> None:
    """Inside a write transaction: drop every unit and its row of units_fts (the whole table at
    once: rows of an older tokenizer cannot be deleted one by one) and leave the rebuild to
    UNITS_REBUILD, batch by batch from the first document (migration 14's backfill, and a
    tokenizer change). Until it ends the units channel is off
    (helpers.store.backfill.units_rebuild_pending)."""
    conn.execute("INSERT INTO units_fts(units_fts) VALUES ('delete-all')")
    conn.execute("DELETE FROM units")
    for key, value in ((UNITS_REBUILD_KEY, "0"), (UNIT_VERSION_KEY, str(UNIT_TOKENS_VERSION))):
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


@dataclass(frozen=True)
class RebuildBatch:
    """The units of the next documents that had none, prepared before the write lock; `next_id`
    is where the rebuild goes on."""

    next_id: int
    documents: tuple[tuple[int, tuple[PreparedUnit, ...]], ...]


def prepare_rebuild(conn: sqlite3.Connection, first_id: int) -> RebuildBatch | None:
    """Reads only (no lock needed): the units of the next visible indexed documents from id
    `first_id` on that have none, prepared for UNITS_REBUILD_BATCH_S (at least one document);
    None when none is left. Language identification and stemming take 1-10 ms a page, so a
    5,000-page PDF would hold a write lock for seconds if this ran inside it."""
    docs = conn.execute(
        f"SELECT d.id, d.title FROM documents d WHERE d.id >= ? AND {_NEEDS_UNITS} "
        "ORDER BY d.id LIMIT ?",
        (first_id, _STAGING_STATUS, UNITS_REBUILD_DOCUMENTS),
    ).fetchall()
    if not docs:
        return None
    started = time.monotonic()
    prepared: list[tuple[int, tuple[PreparedUnit, ...]]] = []
    for doc_id, title in docs:
        rows = conn.execute(
            "SELECT text, location FROM sections WHERE document_id = ? ORDER BY ordinal",
            (doc_id,),
        ).fetchall()
        sections = [(section_text(text), _place(location)) for text, location in rows]
        prepared.append((doc_id, prepare_units(title, sections) if sections else ()))
        if time.monotonic() - started >= UNITS_REBUILD_BATCH_S:
            break
    return RebuildBatch(prepared[-1][0] + 1, tuple(prepared))


def write_rebuild(conn: sqlite3.Connection, batch: RebuildBatch) -> tuple[int, int]:
    """Inside a write transaction: the prepared units of the documents that still need them (a
    sync since the batch was read wrote its own; a document deleted or being rewritten since
    gets none); (next id, documents)."""
    for doc_id, prepared in batch.documents:
        still_without = conn.execute(
            f"SELECT 1 FROM documents d WHERE d.id = ? AND {_NEEDS_UNITS}",
            (doc_id, _STAGING_STATUS),
        ).fetchone()
        if still_without and prepared:
            write_units(conn, doc_id, prepared)
    return batch.next_id, len(batch.documents)


def rebuild_batch(conn: sqlite3.Connection, first_id: int) -> tuple[int, int] | None:
    """Inside a write transaction: prepare_rebuild and write_rebuild at once (a caller holding
    the lock anyway, or one whose read-ahead another process overtook)."""
    batch = prepare_rebuild(conn, first_id)
    return None if batch is None else write_rebuild(conn, batch)


def rebuild_units(conn: sqlite3.Connection) -> None:
    """Inside a write transaction: every unit of every visible indexed document from its stored
    sections, at once (tests, and tools that hold the lock anyway)."""
    start_rebuild(conn)
    first = 0
    while (batch := rebuild_batch(conn, first)) is not None:
        first = batch[0]
    conn.execute("DELETE FROM meta WHERE key = ?", (UNITS_REBUILD_KEY,))


def _place(location: str) -> SectionPlace:
    fields = json.loads(location) if location else {}
    page = fields.get("page")
    return tuple(fields.get("section_path") or ()), int(page) if page is not None else None


def unit_languages(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """(stemming language, units) of the index's units ('' = unstemmed), most units first."""
    try:
        rows = conn.execute(
            "SELECT lang, COUNT(*) AS n FROM units GROUP BY lang ORDER BY n DESC, lang"
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [(row[0], row[1]) for row in rows]


def stored_version(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (UNIT_VERSION_KEY,)).fetchone()
    return int(row[0]) if row else None


def ensure_current(conn: sqlite3.Connection) -> bool:
    """Start a rebuild of the unit table when its rows were written by another tokenizer
    version (helpers.store.backfill.UNITS_REBUILD finishes it); True when it did."""
    if stored_version(conn) == UNIT_TOKENS_VERSION:
        return False
    with write_transaction(conn):
        if stored_version(conn) == UNIT_TOKENS_VERSION:
            return False
        start_rebuild(conn)
    return True
