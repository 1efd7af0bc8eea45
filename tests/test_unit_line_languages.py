"""Each line of a retrieval unit is stemmed in its own language (migration 14): a help page
translated in part (Swedish headings and paragraphs over English notes) is found by the Swedish
words a user types, and the stored line languages keep every delete, edit and upgrade equal to a
rebuild, whatever the language identifier would say later."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import (
    downgraded_copy,
    rebuilt_unit_vocab,
    synced_written,
    undo_migration_14,
    unit_vocab,
)

import rag_service
from helpers.config import Config
from helpers.store import index_db, units
from helpers.text import language_id
from helpers.text import unit_tokens as unit_tokens_module
from helpers.text.unit_tokens import (
    UNIT_TOKENS_VERSION,
    UnitLanguages,
    decode_runs,
    encode_runs,
    line_languages,
    text_tokens,
    unit_tokens,
)

# As LibreOffice's Swedish help has many of its pages: the title and the first paragraph
# translated, the rest still English.
HALF_TRANSLATED = """# Radbrytning

Tar bort manuella radbrytningar ovanför den aktiva cellen och flyttar innehållet uppåt.

Position the cursor in a cell directly below the row break indicated by a horizontal line and
choose Sheet - Delete Page Break - Row Break. The manual row break is removed.

Choose Sheet - Delete Page Break - Row Break.
"""
SWEDISH_PAGES = {
    "celler.md": "# Formatera celler\n\nHär väljer du hur cellernas innehåll visas, med tal, "
    "datum och valutor i den aktiva tabellen.\n",
    "sidor.md": "# Sidbrytningar\n\nEn sidbrytning delar tabellen i sidor när den skrivs ut; "
    "du kan infoga och ta bort dem i menyn Blad.\n",
    "rader.md": "# Infoga rader\n\nNya rader infogas ovanför markeringen, och de befintliga "
    "raderna flyttas nedåt i tabellen.\n",
}
QUERY = "manuella radbrytningar"


def _write(docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "radbrytning.md").write_text(HALF_TRANSLATED, "utf-8")
    for name, text in SWEDISH_PAGES.items():
        (docs / name).write_text(text, "utf-8")


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def _unit_rows(db: Path) -> list[tuple[str, str, str]]:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT d.path, u.lang, u.lang_runs FROM units u "
            "JOIN documents d ON d.id = u.document_id ORDER BY d.path"
        ).fetchall()
    return [(path, lang, runs) for path, lang, runs in rows]


def test_each_line_of_a_half_translated_page_gets_its_own_language() -> None:
    text = HALF_TRANSLATED.replace("\nchoose", " choose")
    languages = line_languages(text)
    by_line = dict(zip(text.split("\n"), languages.lines, strict=True))
    assert by_line["# Radbrytning"] == "swedish"  # one word, told apart among the page's two
    assert by_line[text.split("\n")[2]] == "swedish"
    assert by_line[text.split("\n")[4]] == "english"
    assert by_line["Choose Sheet - Delete Page Break - Row Break."] == "english"
    tokens = text_tokens(text, languages)
    assert unit_tokens(QUERY, "swedish") == ["manuell", "radbrytning"]
    assert "manuell" in tokens and "manuella" not in tokens  # the Swedish line: Swedish stems
    assert "remov" in tokens and "choos" in tokens  # the English ones: English stems


def test_a_one_word_heading_is_read_among_the_languages_around_it() -> None:
    assert language_id.identify("Radbrytning") != "sv"  # alone, among 142 languages
    assert language_id.identify_among("Radbrytning", ["en", "sv"]) == "sv"
    assert language_id.identify_among("Delete Page Break", ["en", "sv"]) == "en"


def test_a_short_quote_in_another_language_is_stemmed_with_the_page() -> None:
    text = (
        "Configuración de la impresora\n"
        "La impresora predeterminada se elige en el cuadro de diálogo de impresión del "
        "programa, y cada documento puede guardar la suya propia junto con el papel.\n"
        "Los márgenes y la orientación de la página se definen en el mismo cuadro.\n"
        "Obrigado pela atenção, boa leitura.\n"
    )
    languages = line_languages(text)
    assert languages == UnitLanguages("spanish", ("spanish",) * len(text.split("\n")))
    assert encode_runs(languages) == ""


def test_line_languages_are_stored_as_runs_and_read_back() -> None:
    languages = UnitLanguages("english", ("swedish", "swedish", "english", "", "english"))
    runs = encode_runs(languages)
    assert runs == "swedish*2 english*1 -*1 english*1"
    assert decode_runs("english", runs, 5) == languages
    assert decode_runs("english", "", 3) == UnitLanguages("english", ("english",) * 3)


def test_the_half_translated_page_is_found_by_its_swedish_words(synced: Config) -> None:
    rows = dict((path, (lang, runs)) for path, lang, runs in _unit_rows(synced.db_path))
    assert rows["celler.md"] == ("swedish", "")
    lang, runs = rows["radbrytning.md"]
    assert "swedish*" in runs and "english*" in runs
    vocab = unit_vocab(synced.db_path)
    assert "manuell" in vocab and "manuella" not in vocab
    result = rag_service.search(synced, QUERY, top_k=4, mode="lexical", channels=("units",))
    assert [hit.path for hit in result.hits][:1] == ["radbrytning.md"]


def test_deletes_use_the_stored_line_languages_not_the_identifier(
    synced: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another identifier (a new release, a missing install) after the rows were written: the
    # edit's delete must still compute the tokens the rows were written with.
    monkeypatch.setattr(language_id, "identify", lambda text: "en" if text.strip() else "")
    monkeypatch.setattr(language_id, "identify_among", lambda text, codes: "en")
    monkeypatch.setattr(unit_tokens_module, "_LINE_CODES", {})  # nothing identified before
    page = synced.knowledge_dir / "radbrytning.md"
    page.write_text(HALF_TRANSLATED + "\nSee also: page breaks.\n", "utf-8")
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    vocab = unit_vocab(synced.db_path)
    assert "manuella" in vocab and "manuell" not in vocab  # the old Swedish rows are gone
    page.unlink()
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    assert "manuella" not in unit_vocab(synced.db_path)
    monkeypatch.undo()  # the pages left were written by the real identifier: so is the rebuild
    assert unit_vocab(synced.db_path) == rebuilt_unit_vocab(synced.db_path, tmp_path)


def test_a_schema_13_index_upgrades_to_line_languages_equal_to_a_fresh_sync(
    synced: Config, tmp_path: Path
) -> None:
    old = downgraded_copy(synced.db_path, tmp_path / "old", undo_migration_14)
    with closing(sqlite3.connect(old)) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(units)")]
        assert "lang_runs" not in columns
    with closing(index_db.open_index(old)) as conn:
        assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION == 15
        assert units.stored_version(conn) == UNIT_TOKENS_VERSION
    assert _unit_rows(old) == _unit_rows(synced.db_path)
    assert unit_vocab(old) == unit_vocab(synced.db_path)
