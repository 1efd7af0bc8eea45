"""The warm worker's first pass (helpers/semantic/first_pass.py): real model, real index, real
subprocess workers. The size threshold is lowered so a few hundred real sentences get codes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from semantic_fixtures import (
    REAL_MODEL_DIR,
    add_document,
    chunk_ids_of,
    real_sentences,
    warm_worker,
)

from helpers.semantic import first_pass
from helpers.semantic.allowed import AllowedRanges
from helpers.semantic.client import SemanticWorker
from helpers.semantic.generations import build_generation, latest_ready_generation
from helpers.store import index_db

TOP_K = 10  # candidates(10, n) = 80 rows of the ~600: the first pass really prunes
QUERIES = [
    "how do I reset a forgotten password",
    "Как удалить файл?",
    "สิทธิมนุษยชนคืออะไร",
    "what is a Python list comprehension",
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, sqlite3.Connection]]:
    if not (REAL_MODEL_DIR / "onnx").is_dir():
        pytest.fail(f"real model folder missing: {REAL_MODEL_DIR}")
    root = tmp_path_factory.mktemp("first-pass")
    db = root / "index.sqlite3"
    conn = index_db.open_index(db)
    sentences = real_sentences(per_set=240)
    half = len(sentences) // 2
    add_document(conn, "a/questions.md", sentences[:half])
    add_document(conn, "b/questions.md", sentences[half:])
    build_generation(conn, REAL_MODEL_DIR, cache_dir=root / "cache", log_path=root / "build.log")
    yield db, conn
    conn.close()


def search_all(
    worker: SemanticWorker, db: Path, allowed: AllowedRanges | None = None
) -> list[list[tuple[int, float]]]:
    conn = sqlite3.connect(db)
    generation = latest_ready_generation(conn)
    conn.close()
    assert generation is not None
    return [worker.search(db, generation.id, q, TOP_K, allowed=allowed) for q in QUERIES]


def test_the_first_pass_returns_the_exact_scans_hits_and_scores_from_a_few_candidates(
    index: tuple[Path, sqlite3.Connection], tmp_path: Path
) -> None:
    db, conn = index
    count = conn.execute("SELECT vector_count FROM semantic_generations WHERE ready = 1")
    n = count.fetchone()[0]
    assert first_pass.candidates(TOP_K, n) < n / 4
    with warm_worker(tmp_path, "exact", min_vectors=n + 1) as exact:
        expected = search_all(exact, db)
    with warm_worker(tmp_path, "codes", min_vectors=1) as codes:
        found = search_all(codes, db)
    assert found == expected
    assert all(len(hits) == TOP_K for hits in found)
    log = (tmp_path / "codes.log").read_text()
    assert f"first pass ready for {n} vectors" in log
    candidates = first_pass.candidates(TOP_K, n)
    assert log.count(f"({candidates} candidates)") == len(QUERIES)
    assert "first pass" not in (tmp_path / "exact.log").read_text()


def test_two_worker_processes_give_identical_first_pass_results(
    index: tuple[Path, sqlite3.Connection], tmp_path: Path
) -> None:
    db, _ = index
    runs = []
    for name in ("one", "two"):
        with warm_worker(tmp_path, name, min_vectors=1) as worker:
            runs.append(search_all(worker, db) + search_all(worker, db))
    assert runs[0] == runs[1]
    assert runs[0][: len(QUERIES)] == runs[0][len(QUERIES) :]


def test_a_filtered_search_scores_every_allowed_row_instead_of_the_first_pass(
    index: tuple[Path, sqlite3.Connection], tmp_path: Path
) -> None:
    db, conn = index
    small = chunk_ids_of(conn, "b/questions.md", 15)
    within = AllowedRanges.from_ids(small)
    with warm_worker(tmp_path, "exact", min_vectors=10**9) as exact:
        expected = search_all(exact, db, within)
    with warm_worker(tmp_path, "codes", min_vectors=1) as codes:
        found = search_all(codes, db, within)
    assert found == expected
    assert all(len(hits) == TOP_K and {c for c, _ in hits} <= set(small) for hits in found)
    assert "first pass" not in (tmp_path / "codes.log").read_text()


def test_a_new_generation_gets_its_own_codes_and_its_new_rows_are_found(
    tmp_path: Path,
) -> None:
    db = tmp_path / "index.sqlite3"
    conn = index_db.open_index(db)
    sentences = real_sentences(per_set=40)
    add_document(conn, "a/questions.md", sentences)
    cache = tmp_path / "cache"
    build_generation(conn, REAL_MODEL_DIR, cache_dir=cache, log_path=tmp_path / "build.log")
    with warm_worker(tmp_path, "codes", min_vectors=1) as worker:
        before = search_all(worker, db)
        new = add_document(conn, "c/new.md", [q + " (new note)" for q in QUERIES])
        build_generation(conn, REAL_MODEL_DIR, cache_dir=cache, log_path=tmp_path / "build.log")
        after = search_all(worker, db)
    conn.close()
    assert all(not {c for c, _ in hits} & set(new) for hits in before)
    assert [hits[0][0] for hits in after] == new
    log = (tmp_path / "codes.log").read_text()
    assert f"first pass ready for {len(sentences)} vectors" in log
    assert f"first pass ready for {len(sentences) + len(new)} vectors" in log


def test_by_default_a_generation_below_the_threshold_gets_no_first_pass() -> None:
    from helpers.semantic.first_pass import MIN_VECTORS, FirstPassCache
    from helpers.semantic.vector_pack import WarmGeneration

    assert MIN_VECTORS is not None
    n, dim = MIN_VECTORS - 1, 8
    vectors = np.zeros((n, dim), dtype=np.float16)
    warm = WarmGeneration(("db", 1, "fp", n, 0.0), np.arange(n, dtype=np.int64), vectors, ())
    assert FirstPassCache(threads=1).get(warm) is None  # never opens "db": no first pass
