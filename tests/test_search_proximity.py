"""Term proximity (helpers.lexical.proximity) on a real synced index: in hybrid fusion a
section that holds the query's words in one window keeps its lexical score, one that holds them
only far apart loses part of it; lexical mode, questions, Thai and CJK queries and one-word
queries are left alone; the text read per search is bounded."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

import rag_search
import rag_service
from helpers.config import Config
from helpers.lexical import proximity
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.store.read_only import connect_read_only

FILLER = (
    "The office keeps its archive of older notes in the basement, sorted by year and by the "
    "team that wrote them, and nobody has asked for any of it in a long while. "
)
GAP = "and then the rest of the day went on as it always does here "  # 13 words
# Every query word twice, but no two different ones within twenty words of each other.
SCATTERED = f"# Storage notes\n\nKernel kernel. {GAP}{GAP}Module module. {GAP}{GAP}Loading loading."
TOGETHER = "# Boot\n\nAt boot, module loading for the kernel reads the list of drivers. " + FILLER
QUERY = "kernel module loading"


def _sync(config: Config, knowledge: Path) -> None:
    (knowledge / "scattered.md").write_text(SCATTERED, "utf-8")
    (knowledge / "together.md").write_text(TOGETHER, "utf-8")
    for n in range(6):  # enough other chunks for the words to have a real IDF
        (knowledge / f"other{n}.md").write_text(f"# Other {n}\n\n" + FILLER * 4, "utf-8")
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)


def _ctx(config: Config, query: str) -> SearchContext:
    conn = connect_read_only(config.db_path)  # chunks.norm needs rag_fold (migration 12)
    return SearchContext(conn, Query.parse(query), Filters())


def _chunks_of(config: Config, path: str) -> list[int]:
    with closing(connect_read_only(config.db_path)) as conn:
        rows = conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.path = ? ORDER BY c.id",
            (path,),
        )
        return [row[0] for row in rows]


def test_words_in_one_window_keep_their_share_words_far_apart_lose_it(
    config: Config, knowledge: Path
):
    _sync(config, knowledge)
    ctx = _ctx(config, QUERY)
    together, scattered = _chunks_of(config, "together.md"), _chunks_of(config, "scattered.md")
    shares = proximity.section_proximity(ctx, together + scattered)
    assert shares[together[0]] == pytest.approx(1.0)
    assert 0.0 < shares[scattered[0]] < 0.6  # one word per window at best
    assert {shares[c] for c in scattered} == {shares[scattered[0]]}  # a section's share
    ctx.conn.close()


def test_hybrid_ranks_the_section_with_the_words_together_first(
    config: Config, knowledge: Path, monkeypatch: pytest.MonkeyPatch
):
    _sync(config, knowledge)
    together, scattered = _chunks_of(config, "together.md"), _chunks_of(config, "scattered.md")
    # the semantic side sees both pages alike: the lexical side decides
    semantic = [(together[0], 0.9), (scattered[0], 0.9)] + [
        (cid, 0.5) for n in range(6) for cid in _chunks_of(config, f"other{n}.md")
    ]

    def top(query: str) -> str:
        with closing(connect_read_only(config.db_path)) as conn:
            conn.row_factory = sqlite3.Row
            options = rag_search.SearchOptions(top_k=3, mode="hybrid", semantic=semantic)
            return rag_search.search(conn, query, options).hits[0].path

    assert top(QUERY) == "together.md"
    # without the signal the page that repeats every word (apart) comes first
    monkeypatch.setattr(rag_search, "section_proximity", lambda ctx, ids: {})
    assert top(QUERY) == "scattered.md"
    # lexical mode is not scaled
    monkeypatch.undo()
    hits = rag_service.search(config, QUERY, mode="lexical").hits
    assert hits[0].path == "scattered.md"


def test_window_share_matches_stems_and_counts_each_word_once(config: Config, knowledge: Path):
    _sync(config, knowledge)
    ctx = _ctx(config, "kernels modules loaded")
    terms = proximity.word_terms(ctx)
    assert len(terms) == 3
    assert proximity.window_share(terms, "a kernel module is loading") == pytest.approx(1.0)
    # the same word twice in a window is not two words
    once = proximity.window_share(terms, "kernel kernel kernel")
    assert 0.0 < once < 0.5
    far = "kernel " + "word " * 30 + "module"
    assert proximity.window_share(terms, far) < proximity.window_share(terms, "kernel module")
    # an identifier counts as written, joined or spaced
    ids = proximity.word_terms(_ctx(config, "latin 8859-15 charset"))
    for text in ("latin 8859-15 charset", "latin 885915 charset", "latin 8859 15 charset"):
        assert proximity.window_share(ids, text) == pytest.approx(1.0)
    # PDF text breaks lines: a line break parts words as a space does
    assert proximity.window_share(terms, far.replace(" ", "\r\n")) == pytest.approx(
        proximity.window_share(terms, far)
    )
    ctx.conn.close()


@pytest.mark.parametrize(
    "query",
    [
        "How is a kernel module loading?",  # a question: the answer rarely repeats it
        "kernel",  # one word: nothing to be near
        "kernel module ภาษาไทย",  # Thai words have no word positions here
        "kernel module 内核模块",
    ],
)
def test_queries_proximity_leaves_alone(config: Config, knowledge: Path, query: str):
    _sync(config, knowledge)
    ctx = _ctx(config, query)
    assert proximity.section_proximity(ctx, _chunks_of(config, "scattered.md")) == {}
    ctx.conn.close()


def test_sections_read_per_search_are_bounded(
    config: Config, knowledge: Path, monkeypatch: pytest.MonkeyPatch
):
    _sync(config, knowledge)
    monkeypatch.setattr(proximity, "PROXIMITY_MAX_SECTIONS", 1)
    ctx = _ctx(config, QUERY)
    together, scattered = _chunks_of(config, "together.md"), _chunks_of(config, "scattered.md")
    shares = proximity.section_proximity(ctx, scattered + together)
    assert set(shares) == set(scattered)  # the first section given, only
    # an unread chunk gets the smallest factor read (here the only one): the order stays
    scaled = proximity.scaled_evidence({scattered[0]: 0.5, together[0]: 1.0}, shares)
    assert scaled == pytest.approx({scattered[0]: 0.5, together[0]: 1.0})
    ctx.conn.close()


def test_an_identifier_counts_in_every_spelling_the_word_channel_accepts(
    config: Config, knowledge: Path
):
    _sync(config, knowledge)
    terms = proximity.word_terms(_ctx(config, "x86_64 kernel"))
    for text in ("the x86-64 kernel", "the x86_64 kernel", "the x86 / 64 kernel", "x8664 kernel"):
        assert proximity.window_share(terms, text) == pytest.approx(1.0), text
    apart = "x86-64 " + GAP * 3 + "kernel"
    assert proximity.window_share(terms, apart) < 1.0


def test_one_text_word_counts_for_every_query_word_it_is_a_form_of(config: Config, knowledge: Path):
    """ "network" is a prefix of "networking": the later query word is not shadowed."""
    _sync(config, knowledge)
    terms = proximity.word_terms(_ctx(config, "network networking setup"))
    assert len(terms) == 3
    assert proximity.window_share(terms, "the networking setup guide") == pytest.approx(1.0)


def test_weights_do_not_depend_on_the_process_hash_seed(config: Config, knowledge: Path):
    """A short identifier's forms are a set: its df must not come from whichever form a
    process's string hashing iterates first (rankings would change across restarts)."""
    import os
    import subprocess
    import sys

    for n in range(4):  # "wifi" in four chunks: a df unlike that of "wi-fi" (0)
        (knowledge / f"wifi{n}.md").write_text(f"# Radio {n}\n\nThe wifi card {n}.\n", "utf-8")
    _sync(config, knowledge)
    script = (
        "import sqlite3, sys\n"
        "from helpers.lexical import proximity\n"
        "from helpers.lexical.common import Filters, SearchContext\n"
        "from helpers.lexical.query_terms import Query\n"
        "from pathlib import Path\n"
        "from helpers.store.read_only import connect_read_only\n"
        "conn = connect_read_only(Path(sys.argv[1]))\n"
        "ctx = SearchContext(conn, Query.parse(sys.argv[2]), Filters())\n"
        "print([round(t.weight, 9) for t in proximity.word_terms(ctx)])\n"
    )
    repo = Path(proximity.__file__).resolve().parents[2]
    outputs = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", script, str(config.db_path), "wi-fi kernel module"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1, outputs
