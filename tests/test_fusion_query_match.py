"""The hybrid share's query-match term (helpers.ranking.fusion) on a real synced index: how much
of the query the lexical side's top sections hold, weighted by how rare each word is."""

from __future__ import annotations

import pytest
from conftest import synced_folder

from helpers.config import Config
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.ranking import fusion
from helpers.ranking.constants import HYBRID_SHARE_BOUNDS
from helpers.store.index_db import connect

DOCS = {
    "calc/kurt.md": "# Función KURT\n\nKURT devuelve la curtosis de un conjunto de datos.\n",
    "calc/suma.md": "# Función SUMA\n\nSUMA suma todos los números de un intervalo de celdas.\n",
    "calc/media.md": "# Función PROMEDIO\n\nPROMEDIO devuelve la media de los argumentos.\n",
    "writer/tablas.md": "# Tablas\n\nInsertar una tabla con filas y columnas en el documento.\n",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return synced_folder(tmp_path_factory.mktemp("fusion-match"), DOCS)


def _match(config: Config, query: str, paths: list[str]) -> fusion.QueryMatch:
    """query_match over the sections of `paths`, in that order (as the lexical side ranks)."""
    conn = connect(config.db_path)
    try:
        ids = {
            path: sec
            for path, sec in conn.execute(
                "SELECT d.path, MIN(s.id) FROM sections s JOIN documents d "
                "ON d.id = s.document_id GROUP BY d.path"
            )
        }
        ctx = SearchContext(conn, Query.parse(query), Filters())
        return fusion.query_match(ctx, [ids[p] for p in paths])
    finally:
        conn.close()


def test_a_query_whose_words_all_stand_in_the_top_section_is_fully_matched(folder: Config):
    match = _match(folder, "KURT curtosis datos", ["calc/kurt.md"])
    assert match.found == (True, True, True)
    assert match.share == pytest.approx(1.0)


def test_one_shared_name_in_a_query_in_another_language_is_a_small_part_of_it(folder: Config):
    match = _match(folder, "KURT 함수 통계 분석", ["calc/kurt.md", "calc/suma.md"])
    assert match.found == (True, False, False, False)
    assert 0.0 < match.share < 0.5


def test_a_word_of_every_document_weighs_less_than_a_word_of_one(folder: Config):
    match = _match(folder, "función intervalo", ["calc/suma.md"])
    common, rare = match.weights
    assert common < rare
    assert match.found == (True, True)


def test_only_the_first_few_lexical_sections_count(folder: Config):
    far = ["writer/tablas.md", "calc/media.md", "calc/suma.md", "calc/kurt.md"]
    assert _match(folder, "curtosis", far).share == 0.0
    assert _match(folder, "curtosis", list(reversed(far))).share == 1.0


def test_the_share_falls_to_its_floor_as_the_match_falls_to_nothing():
    decisive_words = ([1.0, 0.2, 0.1], [1.0, 0.97, 0.95])
    full = fusion.hybrid_share(*decisive_words)
    assert fusion.hybrid_share(*decisive_words, matched=1.0) == full
    assert fusion.hybrid_share(*decisive_words, matched=0.0) == HYBRID_SHARE_BOUNDS[0]
    half = fusion.hybrid_share(*decisive_words, matched=0.5)
    assert HYBRID_SHARE_BOUNDS[0] < half < full


def test_no_lexical_section_leaves_the_share_as_the_margins_set_it(folder: Config):
    assert _match(folder, "curtosis", []).share == 1.0
