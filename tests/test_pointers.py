"""Pointer spans (cross-references, link texts) and the pointer prior: a section that matches a
query only by quoting it in `see Section 5.9, “…”` ranks behind the section that answers it,
in every search mode (real index, real model), and still ranks when nothing else matches."""

from __future__ import annotations

import pytest
from conftest import SHARED, make_config
from format_fixtures import write_text_pdf

import rag_service
from helpers.config import Config
from helpers.lexical import pointers
from helpers.lexical.query_terms import Query
from helpers.store import index_db
from helpers.text.pointers import TITLE_MAX_CHARS, pointer_spans, without_pointers

MODEL = SHARED / "models" / "multilingual-e5-small-int8"


def _spans(text: str) -> list[str]:
    return [text[a:b] for a, b in pointer_spans(text)]


@pytest.mark.parametrize(
    ("text", "span"),
    [
        (  # DocBook / LibreOffice cross-reference, curly quotes, quotes inside the title
            'See Section 14.3, “I am making a "vertical market" system?” for more information.',
            '14.3, “I am making a "vertical market" system?”',
        ),
        (  # Texinfo: no comma, a page reference, the title wrapped over two lines in a PDF
            "compile it (see Section 2.6\n[Compiling from\nUNIX source], page 6) first",
            "2.6\n[Compiling from\nUNIX source], page 6",
        ),
        ("подробнее см. раздел 3.2, «Установка пакетов».", "3.2, «Установка пакетов»"),
        ("siehe Abschnitt 4, „Pakete bauen“ unten", "4, „Pakete bauen“"),
        ("voir la section 7 : « Les archives » ici", "7 : « Les archives »"),
        ("詳しくは第3章「設定の方法」を参照してください。", "3章「設定の方法」"),
        ("Read [Installing the driver](install.md#driver) first.", "[Installing the driver]"),
    ],
)
def test_cross_references_in_many_styles_are_pointer_spans(text: str, span: str) -> None:
    found = _spans(text)
    assert len(found) == 1, found
    assert found[0].startswith(span), found


@pytest.mark.parametrize(
    "text",
    [
        'Debian 3.1 "sarge" was released in 2005.',  # a version and its name: no comma
        'On 2014-02-11: "The committee decided" that',  # a date, not an outline number
        "Set the option “quiet” to silence it.",  # a quotation without a number
        'columns 2: " 2 B R b r 2: * 4 > H R"',  # a character table: the title starts blank
        "In 1998, 35 % of the packages were ported; x86.3, “nothing” here",
        "Version 2, " + "“" + "word " * TITLE_MAX_CHARS + "”",  # too long for a title
        "Chapter 5, “The start of a title\n\nand another paragraph”",  # crosses a blank line
    ],
)
def test_quotations_versions_dates_and_tables_are_not_pointers(text: str) -> None:
    assert _spans(text) == []


def test_text_without_pointers_keeps_the_words_around_them_apart() -> None:
    text = "one, see Section 5.9, “Two three?” four and [five](x.md)six"
    assert without_pointers(text) == "one, see Section   four and  six"
    assert without_pointers("plain prose 5.9 stays") == "plain prose 5.9 stays"


def test_a_span_that_is_the_query_matches_and_a_neighbour_does_not() -> None:
    pointer = "see Section 5.9, “How does Debian support non-English languages?” ."
    query = Query.parse("How does Debian support non-English languages?")
    assert pointers.pointer_match(query, pointer) == pytest.approx(1.0)
    assert pointers.pointer_weight(1.0) == pytest.approx(1.0)
    # a related question quoted in the right answer shares some words, not most
    neighbour = "(see Section 7.14, “How do I build binary packages from a source package?”)"
    close = pointers.pointer_match(Query.parse("How do I install a source package?"), neighbour)
    assert close <= pointers.MATCH_FLOOR
    assert pointers.pointer_weight(close) == 0.0
    # a chapter elsewhere whose title shares two thirds of the words both ways: no pointer
    chapter = 'the Debian Policy Manual, section 5, "Control files and their fields" .'
    own = pointers.pointer_match(Query.parse("What is a Debian control file?"), chapter)
    assert pointers.pointer_weight(own) == 0.0
    # a one-word title is a term: a page pointing at it is about it (an index lists it)
    texinfo = "drawn with the graph module (see Section 8.26 [graph], page 98)."
    assert pointers.pointer_match(Query.parse("graph"), texinfo) == 0.0
    assert pointers.pointer_match(Query.parse("graph module"), texinfo) == 0.0
    three = "(see Section 2.6 [Compiling from UNIX source], page 6)"
    assert pointers.pointer_match(Query.parse("Compiling from UNIX source"), three) == 1.0
    # the same words in prose are no pointer at all
    prose = "Debian supports non-English languages through translations."
    assert pointers.pointer_match(query, prose) == 0.0


ANSWER = (
    "Translations of program messages and manuals come as language packs for each of the "
    "supported languages. Install the locales package, choose your language with dpkg-reconfigure "
    "locales, and set LANG in your profile; keyboard layouts for non-English languages are "
    "chosen in the installer."
)
POINTER = (
    "The next release extends the work on translations, see Section 5.9, “How does Debian "
    "support non-English languages?” . We hope to find more volunteers to translate the "
    "release notes, and see Section 7.2, “Where is the projector lamp?” for the hardware."
)
PDF_POINTER = [
    "Printing is set up once per office. See Section 5.9, “How does Debian",
    "support non-English languages?” for the keyboards of the front desk.",
]
QUERY = "How does Debian support non-English languages?"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Config:
    assert MODEL.is_dir(), f"the real test model is missing: {MODEL}"
    root = tmp_path_factory.mktemp("pointers")
    docs = root / "docs"
    (docs / "faq").mkdir(parents=True)
    (docs / "faq" / "languages.md").write_text(ANSWER + "\n", "utf-8")
    (docs / "faq" / "release.md").write_text(POINTER + "\n", "utf-8")
    write_text_pdf(docs / "faq" / "printing.pdf", [PDF_POINTER])
    (docs / "faq" / "backups.md").write_text(
        "Backups run every night with rsync to the second disk; restore by copying back.\n",
        "utf-8",
    )
    config = make_config(docs, root / "state", semantic=True, semantic_model_dir=MODEL)
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    return config


@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid"])
def test_the_answer_outranks_sections_that_quote_its_question(folder: Config, mode) -> None:
    hits = rag_service.search(folder, QUERY, mode=mode).hits
    assert hits[0].path == "faq/languages.md", (mode, [h.path for h in hits])


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_without_the_prior_a_pointer_takes_rank_one(folder: Config, mode, monkeypatch) -> None:
    """The check that the test above can fail: the quoted question wins on its words."""
    monkeypatch.setattr(pointers, "POINTER_PRIOR", 0.0)
    hits = rag_service.search(folder, QUERY, mode=mode).hits
    assert hits[0].path in {"faq/release.md", "faq/printing.pdf"}, [h.path for h in hits]


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_a_pointer_still_ranks_when_nothing_else_matches(folder: Config, mode) -> None:
    hits = rag_service.search(folder, "Where is the projector lamp?", mode=mode).hits
    assert hits[0].path == "faq/release.md", (mode, [h.path for h in hits])


def test_a_folder_without_pointers_ranks_exactly_as_before(folder: Config) -> None:
    conn = index_db.connect(folder.db_path)
    try:
        ids = [row[0] for row in conn.execute("SELECT id FROM chunks ORDER BY id")]
        fused = [(cid, 1.0 / (i + 1), {}) for i, cid in enumerate(ids)]
        plain = Query.parse("nightly backups with rsync")
        assert pointers.apply_pointer_prior(conn, plain, fused, window=64).ranked is fused
        quoted = pointers.apply_pointer_prior(conn, Query.parse(QUERY), fused, window=64).ranked
    finally:
        conn.close()
    before = {cid: score for cid, score, _ in fused}
    lowered = {cid for cid, score, _ in quoted if score < before[cid]}
    assert lowered, "the sections that quote the query are lowered"
    assert min(score for _, score, _ in quoted) > 0  # bounded: lowered, never removed
    assert [cid for cid, _, _ in quoted if cid not in lowered] == [
        cid for cid, _, _ in fused if cid not in lowered
    ]  # the others keep their order


def test_the_top_hit_carries_the_weight_the_prior_gave_its_section(folder: Config) -> None:
    """One owner: the confidence band reads the weight the prior computed for the top hit's
    section, the same a fresh judgement of that section gives."""
    result = rag_service.search(folder, "Where is the projector lamp?", mode="lexical")
    top = result.hits[0]
    conn = index_db.connect(folder.db_path)
    try:
        ids = [row[0] for row in conn.execute("SELECT id FROM chunks ORDER BY id")]
        fused = [(cid, 1.0 / (i + 1), {}) for i, cid in enumerate(ids)]
        query = Query.parse("Where is the projector lamp?")
        prior = pointers.apply_pointer_prior(conn, query, fused, window=len(ids))
    finally:
        conn.close()
    text = result.sections[top.section_id]
    fresh = pointers.pointer_weight(pointers.pointer_match(query, text))
    assert prior.weights[top.section_id] == fresh == result.top.pointer > 0
    assert prior.weight(top.section_id, text) == fresh


def _hostile_section(n: int) -> str:
    """~3,900 characters of the text the pointer regex is slowest on (runs of an outline number
    and an opening bracket: every one starts a title scan of TITLE_MAX_CHARS), with the words
    of the query, so that every such section is a candidate."""
    return f"Retention note {n} for nightly backup copies. " + "1 [" * 1280


def test_a_search_reads_at_most_the_pointer_budget_of_section_text(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of hostile sections cannot make one search run the span regex over every
    candidate: the sections are judged in rank order until POINTER_SCAN_BUDGET characters
    have been scanned."""
    docs = tmp_path / "docs"
    docs.mkdir()
    count = 40
    for n in range(count):
        (docs / f"note{n:02d}.md").write_text(_hostile_section(n) + "\n", "utf-8")
    config = make_config(docs, tmp_path / "state")
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    scanned: list[int] = []
    real = pointers.pointer_spans

    def counting(text: str) -> list[tuple[int, int]]:
        scanned.append(len(text))
        return real(text)

    monkeypatch.setattr(pointers, "pointer_spans", counting)
    pointers._pointers_of.cache_clear()
    hits = rag_service.search(config, "nightly backup copies", top_k=50, mode="lexical").hits
    assert len(hits) == count  # every hostile section is a candidate
    section = len(_hostile_section(0))
    assert count * section > 2 * pointers.POINTER_SCAN_BUDGET  # the budget has work to do
    assert scanned, "the best candidates are still judged"
    assert sum(scanned) <= pointers.POINTER_SCAN_BUDGET + section
    pointers._pointers_of.cache_clear()
