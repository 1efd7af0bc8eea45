"""Byte-identical copies in the semantic candidate list: they share one vector and tie, so they
must not use up the candidates fusion sees (rag_search.distinct_candidates), and the real
service, given a folder where one page exists under four names, keeps every copy and still
reaches as many distinct pages as a folder without copies."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from conftest import SHARED, make_config

import rag_search
import rag_service
from helpers.config import Config
from helpers.semantic import candidates as semantic_candidates

MODEL = SHARED / "models" / "multilingual-e5-small-int8"

PAGE = (
    "The {name} character set is shown here in octal, decimal and hexadecimal. Every printable "
    "character of it has a row with its code and its name; the control codes come first."
)
OTHERS = {
    f"topic{i}.md": f"# Topic {i}\n\nNotes number {i} about shipping, invoices and parcels "
    f"that arrive late on day {i}.\n"
    for i in range(12)
}


def _sync(root: Path, files: dict[str, str], semantic: bool = False) -> Config:
    knowledge = root / "docs"
    for rel, text in files.items():
        (knowledge / rel).parent.mkdir(parents=True, exist_ok=True)
        (knowledge / rel).write_text(text, encoding="utf-8")
    overrides = {"semantic": True, "semantic_model_dir": MODEL} if semantic else {}
    config = make_config(knowledge, root / "state", **overrides)
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    return config


def _chunks(config: Config) -> list[tuple[int, str]]:
    with closing(sqlite3.connect(config.db_path)) as conn:
        return conn.execute(
            "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.document_id "
            "ORDER BY d.path, c.ordinal"
        ).fetchall()


def test_copies_do_not_use_up_the_candidate_list(tmp_path: Path):
    copy = PAGE.format(name="ISO 8859-15")
    files = {f"copy{i}.md": copy for i in range(4)} | OTHERS
    config = _sync(tmp_path, files)
    chunks = _chunks(config)
    copies = [cid for cid, path in chunks if path.startswith("copy")]
    others = [cid for cid, path in chunks if path.startswith("topic")]
    assert len(copies) == 4 and len(others) == 12
    # the four copies first (as the worker ranks tied vectors), then the other pages
    hits = [(cid, 0.9) for cid in copies] + [(cid, 0.8 - i / 100) for i, cid in enumerate(others)]
    with closing(sqlite3.connect(config.db_path)) as conn:
        kept = rag_search.distinct_candidates(conn, hits, 5)
        assert kept == hits[: 4 + 4]  # one text for the four copies, then four more pages
        assert rag_search.distinct_candidates(conn, hits, 16) == hits  # short list: as given
        # without copies the limit is plain depth
        assert rag_search.distinct_candidates(conn, hits[3:], 5) == hits[3:8]


def test_a_copy_ranked_below_the_limit_is_kept_with_its_text(tmp_path: Path):
    copy = PAGE.format(name="KOI8-R")
    files = {"a.md": copy, "z.md": copy} | OTHERS
    config = _sync(tmp_path, files)
    chunks = dict((path, cid) for cid, path in _chunks(config))
    others = [cid for path, cid in sorted(chunks.items()) if path.startswith("topic")]
    hits = [(chunks["a.md"], 0.9)] + [(cid, 0.8) for cid in others[:3]] + [(chunks["z.md"], 0.7)]
    hits += [(cid, 0.6) for cid in others[3:]]
    with closing(sqlite3.connect(config.db_path)) as conn:
        kept = rag_search.distinct_candidates(conn, hits, 4)
    assert kept == hits[:5]  # z.md is a.md's text: kept although four texts are already in


def test_hybrid_search_ranks_every_copy_and_the_distinct_pages_behind_them(tmp_path: Path):
    assert MODEL.is_dir(), f"the real test model is missing: {MODEL}"
    copy = PAGE.format(name="ISO 8859-15")
    files = {f"copy{i}.md": copy for i in range(4)} | OTHERS
    config = _sync(tmp_path, files, semantic=True)
    # four names a page
    assert semantic_candidates.SEMANTIC_DEPTH >= 4 * rag_search.SEMANTIC_DISTINCT
    result = rag_service.search(config, "octal codes of a character set", top_k=16, mode="hybrid")
    paths = [hit.path for hit in result.hits]
    assert sorted(paths[:4]) == [f"copy{i}.md" for i in range(4)]
    assert len(set(paths)) == len(paths) == len(files)


def test_every_copy_of_the_distinct_candidates_reaches_fusion(tmp_path: Path):
    """60 pages under four names each: 240 candidates, 60 texts. All of them are fused (the
    lexical channels' depth, CHANNEL_DEPTH = 200, does not cut the semantic list)."""
    files = {
        f"{name}{i}.md": PAGE.format(name=f"page {i} {'x' * (i % 7)}")
        for i in range(60)
        for name in ("a", "b", "c", "d")
    }
    config = _sync(tmp_path, files)
    chunks = _chunks(config)
    assert len(chunks) == 240 > rag_search.CHANNEL_DEPTH
    by_page = sorted(chunks, key=lambda row: (int(row[1][1:-3]), row[1]))
    semantic = [(cid, 0.9 - rank // 4 / 1000) for rank, (cid, _) in enumerate(by_page)]
    options = rag_search.SearchOptions(top_k=240, mode="semantic", semantic=semantic)
    with closing(sqlite3.connect(config.db_path)) as conn:
        conn.row_factory = sqlite3.Row
        result = rag_search.search(conn, "character set", options)
    assert len(result.hits) == 240
    assert [hit.path for hit in result.hits[:4]] == ["a0.md", "b0.md", "c0.md", "d0.md"]
