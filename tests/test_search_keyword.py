"""Keyword queries (a back-of-book index term) whose words a page holds in different passages:
real Markdown files synced by the real worker, searched through rag_service."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import synced_folder

import rag_service
from helpers.config import Config

FILES = {
    "calc/rank.md": (
        "# RANK\n\nReturns the position of a number in a list of numbers.\n\n"
        "## Syntax\n\nRANK(Value; Data; Type)\n\n"
        "## Notes\n\nThis function is one of the statistical functions of the spreadsheet.\n"
    ),
    "calc/average.md": (
        "# AVERAGE\n\nReturns the average of the arguments.\n\n## Syntax\n\nAVERAGE(Number 1)\n"
    ),
    "writer/tables.md": (
        "# Inserting tables\n\nChoose Table - Insert Table to open the dialog.\n\n"
        "## Borders\n\nSet the borders of the cells in the Borders tab.\n\n"
        "## Charts\n\nA chart shows the values of the table as bars.\n"
    ),
    "writer/charts.md": (
        "# Chart colours\n\nThe chart palette gives every chart its colours; a chart keeps "
        "its colours when the chart is copied, and each chart series has one colour.\n"
    ),
    "writer/borders.md": (
        "# Paragraph borders\n\nBorders around paragraphs are set in the paragraph dialog.\n"
    ),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return synced_folder(tmp_path_factory.mktemp("keyword"), FILES)


def first_path(config: Config, query: str, **kwargs: object) -> str | None:
    hits = rag_service.search(config, query, mode="lexical", **kwargs).hits  # type: ignore[arg-type]
    return hits[0].path if hits else None


PASSAGE_CHANNELS = "filename,words,sections,bm25,exact,short,variants,fuzzy,cjk"


def test_an_index_term_whose_parts_the_page_writes_apart_still_finds_the_page(
    corpus: Config,
) -> None:
    assert first_path(corpus, "RANK-function") == "calc/rank.md"
    # The passage channels alone look for the hyphenated term as one phrase, which no page has:
    # the documents channel is what finds it (the test fails without it).
    passages = tuple(PASSAGE_CHANNELS.split(","))
    assert first_path(corpus, "RANK-function", channels=passages) is None


def test_a_keyword_query_spread_over_a_pages_title_and_sections_ranks_that_page_first(
    corpus: Config,
) -> None:
    # tables.md holds "chart" in one section and "borders" in another; charts.md repeats
    # "chart" in its only passage, which is what the passage channels alone rank first.
    assert first_path(corpus, "chart borders") == "writer/tables.md"
    passages = tuple(PASSAGE_CHANNELS.split(","))
    assert first_path(corpus, "chart borders", channels=passages) == "writer/charts.md"


def test_a_question_is_left_to_the_passage_channels(corpus: Config) -> None:
    result = rag_service.search(corpus, "how do I insert tables?", mode="lexical")
    assert "documents" not in result.channels_used
    keyword = rag_service.search(corpus, "tables charts", mode="lexical")
    assert "documents" in keyword.channels_used


def test_the_documents_channel_reports_its_page_in_the_per_channel_ranks(corpus: Config) -> None:
    hit = rag_service.search(corpus, "RANK-function", mode="lexical").hits[0]
    assert hit.path == "calc/rank.md"
    assert hit.channels["documents"].rank == 1
    assert Path(hit.path).suffix == ".md"
