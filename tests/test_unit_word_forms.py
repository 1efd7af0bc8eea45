"""A query word is one term of the units channel over every form it takes in the index's
languages: in a folder of Swedish pages and English ones, `data` is `dat` in the Swedish units
and `data` in the English ones, and both are found, scored as bm25() scores one term
(helpers.lexical.unit_words; bench/notes/word-forms.md)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import synced_written

from helpers.config import Config
from helpers.lexical import unit_words, units
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.store.codec import section_text
from helpers.store.open_index import read_conn
from helpers.store.units import UnitSpan, _unit_text
from helpers.text.unit_tokens import decode_runs, text_tokens

SWEDISH = {
    "sortera.md": (
        "# Sortera data\n\nDu kan sortera data i en tabell efter en eller flera kolumner. "
        "Markera området som innehåller dina data och välj sedan Sortera i menyn. Sorteringen "
        "ändrar ordningen på raderna men aldrig innehållet i cellerna, och du kan ångra den.\n\n"
        # A line left in English: this unit holds both forms of the word.
        "The data range must have the names of its columns in the first row of the data.\n"
    ),
    "filtrera.md": (
        "# Filtrera rader\n\nEtt filter visar bara de rader som uppfyller villkoren du anger. "
        "Dina data finns kvar i tabellen även när raderna är dolda, och du kan när som helst "
        "ta bort filtret för att se alla rader igen.\n"
    ),
    "importera.md": (
        "# Importera en textfil\n\nNär du öppnar en textfil frågar programmet hur fälten är "
        "avgränsade. Välj tecknet som skiljer fälten åt, till exempel semikolon eller tabb, "
        "och kontrollera förhandsvisningen innan du läser in dina data i kalkylbladet.\n"
    ),
}
ENGLISH_TOPICS = ("charts", "pivot tables", "forms", "reports", "queries", "macros", "links")
QUERY = "data kolumner"


def _write(docs: Path) -> None:
    docs.mkdir(parents=True)
    for name, text in SWEDISH.items():
        (docs / name).write_text(text, "utf-8")
    for topic in ENGLISH_TOPICS:
        (docs / f"{topic.replace(' ', '-')}.md").write_text(
            f"# Working with {topic}\n\nThe {topic} of a spreadsheet read their data from a "
            f"range of cells. When the data in that range changes, the {topic} are updated the "
            "next time the document is recalculated or opened again.\n",
            "utf-8",
        )


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return synced_written(tmp_path_factory.mktemp("forms"), _write)


def _paths(conn: sqlite3.Connection, ranked: list[tuple[int, int, float]]) -> list[str]:
    path_of = dict(conn.execute("SELECT id, path FROM documents").fetchall())
    return [path_of[doc_id] for _, doc_id, _ in ranked]


def _words(conn: sqlite3.Connection, query: str) -> list[unit_words.QueryWord]:
    ctx = SearchContext(conn, Query.parse(query), Filters())
    return unit_words.query_words(
        units._per_language(ctx.query, units.index_languages(conn)), units._units_holding(conn)
    )


def test_the_folder_holds_the_word_in_two_forms(synced: Config) -> None:
    with closing(read_conn(synced)) as conn:
        assert set(units.index_languages(conn)) == {"swedish", "english"}
        data = next(w for w in _words(conn, QUERY) if len(w.forms) > 1)
    assert {form for form, _ in data.forms} == {"dat", "data"}
    # The English form is held by more units: searched alone, it leaves the Swedish pages out.
    assert dict(data.forms)["data"] > dict(data.forms)["dat"]


def test_every_page_holding_the_word_in_either_language_is_ranked(synced: Config) -> None:
    with closing(read_conn(synced)) as conn:
        ctx = SearchContext(conn, Query.parse(QUERY), Filters())
        paths = _paths(conn, units.ranked_units(ctx))
    assert paths[0] == "sortera.md"  # both words, in Swedish
    assert set(paths) == set(SWEDISH) | {f"{t.replace(' ', '-')}.md" for t in ENGLISH_TOPICS}


def _reference_scores(conn: sqlite3.Connection, one_form: dict[str, str], query: str) -> dict:
    """bm25() over a copy of units_fts whose tokens have every form of a word as one token."""
    ref = sqlite3.connect(":memory:")
    ref.execute("CREATE VIRTUAL TABLE t USING fts5(tokens)")
    rows = conn.execute(
        "SELECT u.id, u.document_id, u.first_ordinal, u.last_ordinal, u.page, u.lang, "
        "u.lang_runs, d.title FROM units u JOIN documents d ON d.id = u.document_id"
    ).fetchall()
    for unit_id, doc_id, first, last, page, lang, runs, title in rows:
        stored = conn.execute(
            "SELECT text FROM sections WHERE document_id = ? ORDER BY ordinal", (doc_id,)
        ).fetchall()
        text = _unit_text(title, UnitSpan(first, last, page), [section_text(r[0]) for r in stored])
        tokens = text_tokens(text, decode_runs(lang, runs, text.count("\n") + 1))
        ref.execute(
            "INSERT INTO t(rowid, tokens) VALUES (?, ?)",
            (unit_id, " ".join(one_form.get(t, t) for t in tokens)),
        )
    return dict(ref.execute("SELECT rowid, -rank FROM t WHERE t MATCH ?", (query,)).fetchall())


def test_the_merged_score_is_bm25_of_one_term(synced: Config) -> None:
    with closing(read_conn(synced)) as conn:
        words = _words(conn, QUERY)
        both = conn.execute(
            "SELECT COUNT(*) FROM (SELECT doc FROM units_instances WHERE term IN ('dat', 'data') "
            "GROUP BY doc HAVING COUNT(DISTINCT term) = 2)"
        ).fetchone()[0]
        assert both == 1  # sortera.md: its frequencies of the two forms are summed
        merged = {
            unit_id: score
            for unit_id, _, score in unit_words.ranked_by_words(conn, words, ("1", []), 100)
        }
        reference = _reference_scores(conn, {"dat": "data"}, "data OR kolumn")
    assert set(merged) == set(reference)
    for unit_id, score in reference.items():
        assert merged[unit_id] == pytest.approx(score, rel=1e-9)


def test_a_word_of_one_form_scores_as_bm25_does(synced: Config) -> None:
    with closing(read_conn(synced)) as conn:
        words = _words(conn, "tabell kolumner")
        assert all(len(word.forms) == 1 for word in words)
        ctx = SearchContext(conn, Query.parse("tabell kolumner"), Filters())
        native = units.ranked_units(ctx)
        merged = unit_words.ranked_by_words(conn, words, ("1", []), units.UNIT_DEPTH)
    assert [u for u, _, _ in merged] == [u for u, _, _ in native]
    assert [s for _, _, s in merged] == pytest.approx([s for _, _, s in native], rel=1e-9)


def test_without_the_instances_table_a_unit_keeps_its_best_form(synced: Config) -> None:
    saturated = {7: {"dat": 0.8, "data": 1.1}}
    with closing(sqlite3.connect(":memory:")) as bare:
        assert unit_words._summed(bare, saturated) == {7: 1.1}


def test_filters_keep_the_whole_indexs_statistics(synced: Config) -> None:
    with closing(read_conn(synced)) as conn:
        words = _words(conn, QUERY)
        everything = {u: s for u, _, s in unit_words.ranked_by_words(conn, words, ("1", []), 100)}
        where, params = Filters(path_prefix="sortera.md").sql()
        narrowed = unit_words.ranked_by_words(conn, words, (where, params), 100)
        assert _paths(conn, narrowed) == ["sortera.md"]
    assert narrowed[0][2] == pytest.approx(everything[narrowed[0][0]])
