"""Migration 9 turns an index as schema 8 wrote it (plain section text, every chunk's whole
location as JSON, a 64-character text hash per chunk) into the compact encodings of
helpers.store.codec, batch by batch; half-converted, killed, read-only and semantic indexes
read and reuse exactly what a fresh index does."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import downgraded_copy, make_config, synced_written, undo_migration_9, write_corpus
from openpyxl import Workbook
from semantic_fixtures import build_tiny_model

import rag_service
from helpers.config import Config
from helpers.extract.blocks import Location
from helpers.semantic import generations
from helpers.store import backfill, index_db, units
from helpers.store.codec import (
    child_location,
    pack_child_location,
    pack_section_text,
    section_text,
)

QUERIES = ("budget meeting", "Quarterly revenue", "สิทธิ", "Ёлка", "invoic", "note-00003")


def _write_docs(docs: Path) -> None:
    write_corpus(docs, 10, 400)
    (docs / "guide.md").write_text(
        "# Guide\n\n## Install\n\n"
        + "\n\n".join(f"Step {i}: run the installer and check the budget." for i in range(60))
        + "\n\n## Quarterly revenue\n\nRevenue grew in every quarter.\n",
        "utf-8",
    )
    (docs / "thai.md").write_text("# สิทธิมนุษยชน\n\nทุกคนมีสิทธิและเสรีภาพ\n", "utf-8")
    (docs / "ru.txt").write_text("Ёлка и ёж. " * 300, "utf-8")
    rows = "\n".join(f"{i},Quarterly revenue {i},{i * 10}" for i in range(400))
    (docs / "sales.csv").write_text("id,item,amount\n" + rows + "\n", "utf-8")
    book = Workbook()
    sheet = book.active
    sheet.title = "Q1"
    sheet.append(["id", "item", "amount"])
    for i in range(300):
        sheet.append([i, f"Quarterly revenue {i}", i * 10])
    book.save(docs / "sales.xlsx")  # children differ from their section by cell range


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write_docs)


def _stored(db: Path) -> dict[str, Any]:
    """What the index stores in the columns migration 9 changes, row by row."""
    with closing(sqlite3.connect(db)) as conn:
        return {
            "sections": conn.execute("SELECT id, text FROM sections ORDER BY id").fetchall(),
            "chunks": conn.execute(
                "SELECT id, location, text_hash FROM chunks ORDER BY id"
            ).fetchall(),
        }


def _answers(config: Config) -> dict[str, Any]:
    """Every hit with its location and section text, and every document read whole."""
    out: dict[str, Any] = {}
    for query in QUERIES:
        for shape in ({}, {"detail": "compact", "max_chars": 2000}):  # with collapsed copies
            result = rag_service.search(config, query, mode="lexical", **shape).to_dict()
            result.pop("elapsed_ms", None)
            out[f"{query} {shape}"] = result
    for doc in rag_service.list_documents(config)["items"]:
        out[doc["path"]] = rag_service.read_document(config, doc["path"])
    return out


def _schema_8_copy(config: Config, target: Path) -> Config:
    db = downgraded_copy(config.db_path, target, undo_migration_9)
    return dataclasses.replace(config, data_dir=target, db_path=db)


def test_the_encodings_are_shorter_decode_exactly_and_tell_schema_8_rows_apart() -> None:
    section = Location(page=4, page_label="iv", section_path=("1 Intro",), line_start=1)
    children = [
        section,
        dataclasses.replace(section, line_start=30, line_end=52),
        dataclasses.replace(section, line_end=9),
        dataclasses.replace(section, page_label=None, heading_path=("Ünïcode > “x”",)),
        Location(sheet="Q1", cell_range="A2:D9"),
        Location(),
    ]
    for child in children:
        packed = pack_child_location(child, section)
        whole = json.dumps(child.to_dict())
        assert len(packed) <= len(whole)
        assert child_location(packed, json.dumps(section.to_dict())) == child
        assert child_location(whole, json.dumps(section.to_dict())) == child  # a schema-8 row
    assert pack_child_location(children[1], section) == "30-52"
    for text in ("", "short", "Ёлка и ёж, " * 50, "ทุกคนมีสิทธิ" * 40, "x" * 5000):
        packed = pack_section_text(text)
        assert section_text(packed) == text and section_text(text) == text
        assert isinstance(packed, bytes) == (len(packed) < len(text.encode()))
    assert isinstance(pack_section_text("budget " * 100), bytes)


def _documents(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])


def test_a_schema_8_index_migrates_in_batches_to_what_a_fresh_sync_stores(
    synced: Config, tmp_path: Path, monkeypatch
) -> None:
    fresh, answers = _stored(synced.db_path), _answers(synced)
    assert all(answers[f"{q} {{}}"]["hits"] for q in QUERIES), answers
    assert any(isinstance(text, bytes) for _, text in fresh["sections"])
    assert any(isinstance(text, str) for _, text in fresh["sections"])  # too short to gain
    assert {h for _, _, h in fresh["chunks"]} == {""}
    kinds = {loc[:1] for _, loc, _ in fresh["chunks"]}
    assert {"", "=", "1"} <= kinds, kinds  # the section's, a patch over it, a line range
    old = _schema_8_copy(synced, tmp_path / "old")
    stored = _stored(old.db_path)
    assert all(isinstance(text, str) for _, text in stored["sections"])
    assert all(loc.startswith("{") and len(h) == 64 for _, loc, h in stored["chunks"])
    assert sum(map(len, (loc for _, loc, _ in fresh["chunks"]))) * 3 < sum(
        map(len, (loc for _, loc, _ in stored["chunks"]))
    )
    sections, chunks = len(stored["sections"]), len(stored["chunks"])
    size = old.db_path.stat().st_size

    pauses: list[float] = []
    monkeypatch.setattr(backfill, "COMPACT_SECTION_ROWS", 3)
    monkeypatch.setattr(backfill, "COMPACT_CHUNK_ROWS", 7)
    monkeypatch.setattr(backfill.time, "sleep", pauses.append)
    monkeypatch.setattr(units, "UNITS_REBUILD_BATCH_S", 60.0)  # batches by count here
    with closing(index_db.open_index(old.db_path)) as conn:
        assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION
        assert not backfill.compact_backfill_pending(conn)
        conn.execute("VACUUM")
    folds = math.ceil(chunks / backfill.FOLD_BACKFILL_ROWS)  # migration 12's, one batch here
    documents = _documents(old.db_path)
    unit_batches = math.ceil(documents / units.UNITS_REBUILD_DOCUMENTS)  # migration 14's
    # one per batch
    assert len(pauses) == math.ceil(sections / 3) + math.ceil(chunks / 7) + folds + unit_batches
    assert _stored(old.db_path) == fresh
    assert _answers(old) == answers
    assert old.db_path.stat().st_size < size


class _Killed(BaseException):
    pass


def test_a_half_converted_index_reads_the_same_and_a_killed_compaction_resumes(
    synced: Config, tmp_path: Path, monkeypatch
) -> None:
    answers, fresh = _answers(synced), _stored(synced.db_path)
    old = _schema_8_copy(synced, tmp_path / "old")
    schema_8 = _stored(old.db_path)
    # a schema-8 index served read-only is read as it is, never migrated (READABLE_FROM_VERSION)
    assert _answers(dataclasses.replace(old, read_only=True)) == answers
    with closing(index_db.connect(old.db_path, readonly=True)) as conn:
        assert index_db.schema_version(conn) == 8

    monkeypatch.setattr(backfill, "COMPACT_SECTION_ROWS", 4)
    monkeypatch.setattr(backfill, "COMPACT_CHUNK_ROWS", 25)

    def killed_at(pause: int) -> Callable[[float], None]:
        pauses = iter(range(1, pause + 1))

        def sleep(_seconds: float) -> None:
            if next(pauses) == pause:
                raise _Killed

        return sleep

    monkeypatch.setattr(backfill.time, "sleep", killed_at(1))
    with pytest.raises(_Killed):
        index_db.open_index(old.db_path)  # migrated, then killed after the first batch
    stored = _stored(old.db_path)
    assert stored["sections"][:4] == fresh["sections"][:4]
    assert stored["sections"][4:] == schema_8["sections"][4:]
    assert stored["chunks"] == schema_8["chunks"]
    monkeypatch.setattr(backfill.time, "sleep", lambda _s: None)
    # compact and schema-8 rows side by side; the search rebuilds migration 14's units
    assert _answers(old) == answers
    assert _stored(old.db_path) == stored

    monkeypatch.setattr(backfill.time, "sleep", killed_at(2))
    monkeypatch.setattr(backfill, "COMPACT_SECTION_ROWS", 10_000)
    with pytest.raises(_Killed), closing(index_db.connect(old.db_path)) as conn:
        index_db.run_backfills(conn, bounded=True)  # the sections done, killed in the chunks
    stored = _stored(old.db_path)
    assert stored["sections"] == fresh["sections"]
    assert stored["chunks"][:25] == fresh["chunks"][:25]
    assert stored["chunks"][25:] == schema_8["chunks"][25:]
    assert _answers(old) == answers

    monkeypatch.setattr(backfill.time, "sleep", lambda _s: None)
    monkeypatch.setattr(backfill, "OPEN_BACKFILL_BUDGET_S", 0.0)  # the worker finishes it
    assert rag_service.sync_kb_blocking(old).state == "succeeded"
    with closing(index_db.connect(old.db_path)) as conn:
        assert not backfill.compact_backfill_pending(conn)
    assert _stored(old.db_path) == _stored(synced.db_path)
    assert _answers(old) == answers


def test_vectors_built_before_the_migration_are_reused_after_it(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "model")
    docs = tmp_path / "docs"
    _write_docs(docs)
    config = make_config(docs, tmp_path / "state", semantic=True, semantic_model_dir=model)
    view = rag_service.sync_kb_blocking(config)
    assert view.state == "succeeded" and view.semantic["done"] == view.semantic["total"] > 0
    with closing(sqlite3.connect(config.db_path)) as conn:
        undo_migration_9(conn)  # the same vectors, over an index as schema 8 stored it
        conn.commit()
    with closing(index_db.open_index(config.db_path)) as conn:
        assert not backfill.compact_backfill_pending(conn)
        before = generations.latest_ready_generation(conn)
        state = generations.generation_state(conn, model, True, tmp_path / "cache")
        assert state.state == "ready", state.reason
    (docs / "guide.md").write_text("# Guide\n\nOne new paragraph about invoices.\n", "utf-8")
    view = rag_service.sync_kb_blocking(config)
    assert view.state == "succeeded"
    with closing(index_db.connect(config.db_path)) as conn:
        after = generations.latest_ready_generation(conn)
        changed = conn.execute(
            "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.path = 'guide.md'"
        ).fetchone()[0]
    assert before is not None and after is not None and after.id != before.id
    assert view.semantic["total"] == changed  # only the changed document's text is embedded
