"""The units channel (migration 11): one BM25 row per page of a PDF, else per document, in a
contentless table that every resync, edit, removal and upgrade keeps equal to a rebuild from
the stored sections; a keyword query whose words are spread over a page finds that page first."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import (
    downgraded_copy,
    rebuilt_unit_vocab,
    synced_written,
    undo_migration_11,
    unit_vocab,
)
from format_fixtures import write_text_pdf

import rag_search
import rag_service
from helpers.config import Config
from helpers.index import discard, pacing
from helpers.index import document_write as sync_write
from helpers.store import index_db, units
from helpers.text.unit_tokens import UNIT_TOKENS_VERSION, unit_tokens

SPREAD_PAGE = """# Kestrel dashboards

Dashboards show the state of every job.

## Colours

Each dashboard panel takes its colour from the theme.

## Thresholds

A panel turns red above its threshold.
"""
# Each of these repeats one of the query's words in one passage: a passage-level channel likes
# them, a page-level BM25 sees one word of three.
DISTRACTORS = {
    "themes.md": "# Themes\n\n" + "The colour of a theme, its colour scheme and colour names. " * 8,
    "limits.md": "# Limits\n\n" + "A threshold is a limit; the threshold of a threshold rule. " * 8,
    "kestrel.md": "# Kestrel\n\n" + "Kestrel is a bird. The kestrel hovers. " * 8,
}


def _write(docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "dashboards.md").write_text(SPREAD_PAGE, "utf-8")
    for name, text in DISTRACTORS.items():
        (docs / name).write_text(text, "utf-8")
    notes = "# Notes\n\nThe zanzibarite sample is in drawer four.\n"
    (docs / "notes.md").write_text(notes, "utf-8")
    write_text_pdf(
        docs / "manual.pdf",
        [
            ["Installing the pump", "Mount the pump on the wall."],
            ["Cleaning the filter", "Rinse the filter in warm water."],
            ["Replacing the impeller", "Unscrew the cover, then the impeller."],
        ],
    )


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def _units(db: Path) -> list[tuple[str, int | None]]:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT d.path, u.page FROM units u JOIN documents d ON d.id = u.document_id "
            "ORDER BY d.path, u.page"
        ).fetchall()
    return [(path, page) for path, page in rows]


def _paths(config: Config, query: str, channels: tuple[str, ...] | None = None) -> list[str]:
    result = rag_service.search(config, query, top_k=8, mode="lexical", channels=channels)
    return list(dict.fromkeys(hit.path for hit in result.hits))


def test_a_pdf_has_one_unit_per_page_and_any_other_file_one_unit(synced: Config) -> None:
    assert _units(synced.db_path) == [
        ("dashboards.md", None),
        ("kestrel.md", None),
        ("limits.md", None),
        ("manual.pdf", 1),
        ("manual.pdf", 2),
        ("manual.pdf", 3),
        ("notes.md", None),
        ("themes.md", None),
    ]


def test_a_keyword_query_spread_over_title_and_sections_finds_that_page_first(
    synced: Config,
) -> None:
    assert _paths(synced, "kestrel colours thresholds")[0] == "dashboards.md"
    assert _paths(synced, "kestrel colours thresholds", ("units",))[0] == "dashboards.md"


def test_the_channel_alone_ranks_the_page_of_a_pdf_that_holds_the_words(synced: Config) -> None:
    result = rag_service.search(synced, "filter rinse", top_k=3, mode="lexical", channels=["units"])
    assert result.hits and result.hits[0].location.get("page") == 2


def test_words_are_stemmed_the_same_way_in_documents_and_queries(synced: Config) -> None:
    # "colours" / "thresholds" in the page, "colour" / "threshold" in the query
    assert _paths(synced, "kestrel colour threshold", ("units",))[0] == "dashboards.md"


def test_an_edited_file_leaves_none_of_its_old_words_in_the_unit_table(
    synced: Config, tmp_path: Path
) -> None:
    assert "zanzibarit" in unit_vocab(synced.db_path)
    notes = synced.knowledge_dir / "notes.md"
    notes.write_text("# Notes\n\nThe basalt sample is in drawer five.\n", "utf-8")
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    vocab = unit_vocab(synced.db_path)
    assert "zanzibarit" not in vocab and "basalt" in vocab
    assert _paths(synced, "zanzibarite four", ("units",)) == []
    assert _paths(synced, "basalt five", ("units",)) == ["notes.md"]
    assert vocab == rebuilt_unit_vocab(synced.db_path, tmp_path)


def test_a_removed_file_leaves_no_unit_and_no_term_behind(synced: Config, tmp_path: Path) -> None:
    (synced.knowledge_dir / "manual.pdf").unlink()
    (synced.knowledge_dir / "notes.md").unlink()
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    assert [path for path, _ in _units(synced.db_path)] == [
        "dashboards.md",
        "kestrel.md",
        "limits.md",
        "themes.md",
    ]
    vocab = unit_vocab(synced.db_path)
    assert "impel" not in vocab and "impeller" not in vocab and "zanzibarit" not in vocab
    assert vocab == rebuilt_unit_vocab(synced.db_path, tmp_path)
    for path in list(synced.knowledge_dir.iterdir()):
        path.unlink()
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    assert _units(synced.db_path) == [] and unit_vocab(synced.db_path) == {}


def test_a_big_document_written_in_batches_keeps_the_table_consistent_when_replaced(
    synced: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_write, "SINGLE_TRANSACTION_CHUNKS", 2)
    monkeypatch.setattr(sync_write, "STAGE_BATCH_CHUNKS", 2)
    monkeypatch.setattr(discard, "DISCARD_BATCH_CHUNKS", 2)
    monkeypatch.setattr(pacing, "BATCH_PAUSE_S", 0.0)
    words = ["quokka", "wombat", "dingo", "emu", "koala", "platypus"]
    pages = [[f"The {word} page", f"Notes on the {word} and where it lives."] for word in words]
    write_text_pdf(synced.knowledge_dir / "manual.pdf", pages)
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    assert [page for path, page in _units(synced.db_path) if path == "manual.pdf"] == list(
        range(1, 7)
    )
    vocab = unit_vocab(synced.db_path)
    assert "quokka" in vocab and "impel" not in vocab
    assert vocab == rebuilt_unit_vocab(synced.db_path, tmp_path)


def test_a_schema_10_index_upgrades_to_units_equal_to_a_fresh_sync(
    synced: Config, tmp_path: Path
) -> None:
    old = downgraded_copy(synced.db_path, tmp_path / "old", undo_migration_11)
    with closing(sqlite3.connect(old)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "10",
        )
    with closing(index_db.open_index(old)) as conn:
        assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION == 15
        assert units.stored_version(conn) == UNIT_TOKENS_VERSION
    assert _units(old) == _units(synced.db_path)
    assert unit_vocab(old) == unit_vocab(synced.db_path)
    with closing(index_db.connect(old)) as conn:
        query = rag_search.SearchOptions(top_k=3, channels=("units",))
        hits = rag_search.search(conn, "kestrel colours thresholds", query).hits
    assert hits and hits[0].path == "dashboards.md"


def test_a_unit_table_written_by_another_tokenizer_version_is_rebuilt_on_open(
    synced: Config,
) -> None:
    before = unit_vocab(synced.db_path)
    with closing(sqlite3.connect(synced.db_path)) as conn:
        conn.execute("INSERT INTO units_fts(units_fts) VALUES ('delete-all')")
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'unit_tokens_version'")
        conn.commit()
    assert unit_vocab(synced.db_path) == {}
    with closing(index_db.open_index(synced.db_path)) as conn:
        assert units.stored_version(conn) == UNIT_TOKENS_VERSION
    assert unit_vocab(synced.db_path) == before


def test_an_index_without_units_opened_read_only_still_searches(
    synced: Config, tmp_path: Path
) -> None:
    old = downgraded_copy(synced.db_path, tmp_path / "old", undo_migration_11)
    with closing(sqlite3.connect(f"file:{old}?mode=ro", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        result = rag_search.search(conn, "kestrel colours thresholds", rag_search.SearchOptions())
    assert result.hits and "units" not in result.channels_used


def test_a_russian_page_keeps_its_english_words_stemmed_as_english_ones() -> None:
    english = unit_tokens("running processes", "english")
    assert unit_tokens("Команда running processes", "russian")[1:] == english
    assert unit_tokens("процессы", "english") == unit_tokens("процессы", "russian")
