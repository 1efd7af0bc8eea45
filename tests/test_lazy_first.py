"""First searches answered from the stored first-pass codes plus the candidates' rows read on
demand, while every vector is read into memory on a background thread (helpers/semantic/
vector_stage.py, lazy_rows.py). Real model, real SQLite, real worker subprocesses for the answers;
the background read's faults in process, where its timing can be held. Blocks of 64 vectors so a
few hundred real sentences fill several blocks."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from semantic_fixtures import (
    add_document,
    chunk_ids_of,
    copy_of,
    index_with_codes,
    warm_worker,
)
from semantic_fixtures import (
    build_with_codes as build,
)

from helpers.semantic import first_pass, vector_pack, vector_stage
from helpers.semantic.allowed import AllowedRanges
from helpers.semantic.generations import latest_ready_generation
from helpers.store import index_db

TOP_K = 10
BLOCK = 64  # vectors per block here (the product's 1,024 would make one block)
QUERIES = ["how do I reset a forgotten password", "Как удалить файл?", "สิทธิมนุษยชนคืออะไร"]
IN_MEMORY = "read into memory in the background"
ON_DEMAND = "rows read on demand"
EXACT = 10**9  # a first-pass threshold no index here reaches: every vector scored
WAIT_S = 60.0


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_pack, "BLOCK_SIZE", BLOCK)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real index whose one generation has stored codes; tests work on copies of it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vector_pack, "BLOCK_SIZE", BLOCK)
        db = index_with_codes(tmp_path_factory.mktemp("lazy"), per_set=80)
    yield db


def generation_of(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        generation = latest_ready_generation(conn)
    assert generation is not None
    return generation.id


def wait_for(log: Path, text: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        content = log.read_text() if log.exists() else ""
        if text in content:
            return content
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {log}")


# --- real worker subprocesses -------------------------------------------------------------------


def test_each_first_search_read_on_demand_equals_the_answer_from_memory_and_the_exact_scan(
    built: Path, tmp_path: Path
) -> None:
    generation = generation_of(built)
    with warm_worker(tmp_path, "exact", EXACT) as exact:
        expected = [exact.search(built, generation, q, TOP_K) for q in QUERIES]
    for number, query in enumerate(QUERIES):
        name = f"lazy{number}"
        with warm_worker(tmp_path, name, 1) as codes:
            first = codes.search(built, generation, query, TOP_K)  # a fresh worker: on demand
            wait_for(tmp_path / f"{name}.log", IN_MEMORY)
            again = codes.search(built, generation, query, TOP_K)  # from memory
        log = (tmp_path / f"{name}.log").read_text()
        searches = [line for line in log.splitlines() if "search generation" in line]
        assert ON_DEMAND in searches[0] and ON_DEMAND not in searches[1]
        assert "stored codes" in log and "rebuilt" not in log
        assert first == again == expected[number]  # same ids, order and scores
        assert len(first) == TOP_K


def test_a_filtered_first_search_waits_for_the_full_read_and_scores_every_allowed_row(
    built: Path, tmp_path: Path
) -> None:
    generation = generation_of(built)
    with closing(sqlite3.connect(built)) as conn:
        small = chunk_ids_of(conn, "b/questions.md", 15)
    within = AllowedRanges.from_ids(small)
    with warm_worker(tmp_path, "exact", EXACT) as exact:
        expected = exact.search(built, generation, QUERIES[0], TOP_K, allowed=within)
    with warm_worker(tmp_path, "filtered", 1) as codes:
        found = codes.search(built, generation, QUERIES[0], TOP_K, allowed=within)
    assert found == expected and {c for c, _ in found} <= set(small)
    assert ON_DEMAND not in (tmp_path / "filtered.log").read_text()


def test_a_worker_killed_during_the_background_read_is_replaced_and_answers_the_same(
    built: Path, tmp_path: Path
) -> None:
    generation = generation_of(built)
    with warm_worker(tmp_path, "killed", 1) as codes:
        first = codes.search(built, generation, QUERIES[1], TOP_K)
        assert codes.pid is not None
        os.kill(codes.pid, signal.SIGKILL)  # the background read may be under way: no matter
        time.sleep(0.2)
        again = codes.search(built, generation, QUERIES[1], TOP_K)  # a fresh worker
    assert again == first
    assert (tmp_path / "killed.log").read_text().count(ON_DEMAND) >= 2


# --- in process: the background read's timing held ----------------------------------------------


def numpy_score(query: np.ndarray):  # the worker scores with onnxruntime: same rows, same order
    return lambda vectors: vectors.astype(np.float32) @ query


def target_of(db: Path) -> tuple[str, int, str | None, int]:
    with closing(sqlite3.connect(db)) as conn:
        generation = latest_ready_generation(conn)
    assert generation is not None
    return (str(db), generation.id, None, generation.dim)


def queries_of(db: Path, count: int) -> list[np.ndarray]:
    """Stored vectors plus noise: real directions, not any row's exact copy."""
    with closing(sqlite3.connect(db)) as conn:
        blob, n, dim = conn.execute(
            "SELECT b.vectors, b.count, g.dim FROM semantic_blocks b JOIN semantic_generations g "
            "ON g.id = b.generation_id WHERE g.ready = 1 ORDER BY b.block_no LIMIT 1"
        ).fetchone()
    rng = np.random.default_rng(3)
    rows = vector_pack.unpack_vectors(blob, n, dim)[:count].astype(np.float32)
    return list(vector_pack.l2_normalise(rows + rng.normal(0, 0.05, rows.shape)))


class HeldRead:
    """GenerationScanner._read that stops after its first block until `release` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        real = vector_pack.GenerationScanner._read

        def held(conn: sqlite3.Connection, generation: int, dim: int):
            for number, block in enumerate(real(conn, generation, dim)):
                if number == 1 and threading.current_thread().name == "vector-read":
                    self.started.set()
                    assert self.release.wait(WAIT_S)
                yield block

        monkeypatch.setattr(vector_pack.GenerationScanner, "_read", staticmethod(held))


def test_in_process_answers_on_demand_and_from_memory_are_identical_for_many_queries(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = HeldRead(monkeypatch)
    target = target_of(built)
    scanner, codes = vector_pack.GenerationScanner(True), first_pass.FirstPassCache(1, 1)
    queries = queries_of(built, 40)
    lazy = [
        vector_stage.top_hits(scanner, codes, {}, target, q, numpy_score(q), 25) for q in queries
    ]
    assert all(ON_DEMAND in s.summary for s in lazy)
    assert scanner.held(scanner._reading.key) is None  # still held after one block
    read.release.set()
    warm = scanner.load(*target)  # waits for the background read, never reads again
    assert codes.current is not None and not codes.current.in_memory
    memory = [
        vector_stage.top_hits(scanner, codes, {}, target, q, numpy_score(q), 25) for q in queries
    ]
    assert all(ON_DEMAND not in s.summary for s in memory) and codes.current.in_memory
    assert codes.current.rows is warm
    assert [s.hits for s in lazy] == [s.hits for s in memory]
    exact = [vector_pack.exact_top_k(q, warm.blocks, 25) for q in queries]
    assert [s.hits for s in memory] == exact


def test_a_generation_published_during_the_background_read_is_never_served_and_the_new_one_is(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = copy_of(built, tmp_path / "replaced")
    read = HeldRead(monkeypatch)
    old = target_of(db)
    scanner, codes = vector_pack.GenerationScanner(True), first_pass.FirstPassCache(1, 1)
    q = queries_of(db, 1)[0]
    vector_stage.top_hits(scanner, codes, {}, old, q, numpy_score(q), TOP_K)
    assert read.started.wait(WAIT_S)
    with closing(index_db.open_index(db)) as conn:  # a sync publishes a new generation
        new_ids = add_document(conn, "c/new.md", ["a brand new note about lighthouses"])
        build(conn, tmp_path)
    new = target_of(db)
    assert new[1] != old[1]
    with caplog.at_level(logging.INFO, logger="helpers.semantic.vector_pack"):
        read.release.set()  # the old read ends on its own snapshot
        scanner._reading and scanner._reading.wait()
        with pytest.raises(vector_pack.ScanError, match="not ready"):
            vector_stage.top_hits(scanner, codes, {}, old, q, numpy_score(q), TOP_K)
        lazy = vector_stage.top_hits(scanner, codes, {}, new, q, numpy_score(q), TOP_K)
        assert ON_DEMAND in lazy.summary
        warm = scanner.load(*new)
    assert warm.key[1] == new[1] and set(new_ids) <= set(warm.ids.tolist())
    assert lazy.hits == vector_pack.exact_top_k(q, warm.blocks, TOP_K)


def test_asking_for_another_generation_stops_the_background_read_of_the_first(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    other = copy_of(built, tmp_path / "other")
    read = HeldRead(monkeypatch)
    first, second = target_of(built), target_of(other)
    scanner, codes = vector_pack.GenerationScanner(True), first_pass.FirstPassCache(1, 1)
    q = queries_of(built, 1)[0]
    vector_stage.top_hits(scanner, codes, {}, first, q, numpy_score(q), TOP_K)
    assert read.started.wait(WAIT_S)
    reading = scanner._reading
    assert reading is not None
    stopper = threading.Timer(0.2, read.release.set)  # the held block lets go; the stop is seen
    stopper.start()
    with caplog.at_level(logging.INFO, logger="helpers.semantic.vector_pack"):
        found = vector_stage.top_hits(scanner, codes, {}, second, q, numpy_score(q), TOP_K)
        reading.wait()
        warm = scanner.load(*second)
    stopper.join()
    assert reading.stop.is_set() and "stopped: another one was asked for" in caplog.text
    assert warm.key[0] == str(other) and scanner.held(reading.key) is None
    assert found.hits == vector_pack.exact_top_k(q, warm.blocks, TOP_K)


def test_missing_code_rows_are_encoded_from_their_blocks_read_on_demand(
    built: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = copy_of(built, tmp_path / "rows")
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("DELETE FROM semantic_codes WHERE block_no IN (0, 3)")
        conn.commit()
        blocks = conn.execute("SELECT count(*) FROM semantic_blocks").fetchone()[0]
    target = target_of(db)
    scanner, codes = vector_pack.GenerationScanner(True), first_pass.FirstPassCache(1, 1)
    q = queries_of(db, 1)[0]
    with caplog.at_level(logging.INFO):
        lazy = vector_stage.top_hits(scanner, codes, {}, target, q, numpy_score(q), TOP_K)
    assert ON_DEMAND in lazy.summary
    assert f"2 of {blocks} blocks missing or damaged" in caplog.text
    warm = scanner.load(*target)
    assert lazy.hits == vector_pack.exact_top_k(q, warm.blocks, TOP_K)


def test_codes_without_a_usable_header_wait_for_the_full_read_and_say_so(
    built: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = copy_of(built, tmp_path / "header")
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("DELETE FROM semantic_code_sets")
        conn.commit()
    target = target_of(db)
    scanner, codes = vector_pack.GenerationScanner(True), first_pass.FirstPassCache(1, 1)
    q = queries_of(db, 1)[0]
    with caplog.at_level(logging.INFO):
        vector_stage.prepare(scanner, codes, {}, target)  # declines: no codes to answer from
        found = vector_stage.top_hits(scanner, codes, {}, target, q, numpy_score(q), TOP_K)
    assert ON_DEMAND not in found.summary
    assert "waits for every vector to be read: no stored codes" in caplog.text
    assert found.hits == vector_pack.exact_top_k(q, scanner.load(*target).blocks, TOP_K)


def test_a_filtered_search_in_process_scores_only_the_allowed_rows(built: Path) -> None:
    target = target_of(built)
    scanner, codes = vector_pack.GenerationScanner(True), first_pass.FirstPassCache(1, 1)
    q = queries_of(built, 1)[0]
    warm = vector_pack.GenerationScanner(True).load(*target)
    within = AllowedRanges.from_ids(warm.ids[100:130].tolist())
    request = {"allowed": within.encode()}
    vector_stage.prepare(scanner, codes, request, target)
    found = vector_stage.top_hits(scanner, codes, request, target, q, numpy_score(q), TOP_K)
    assert found.summary.startswith("read+scan")
    allowed = [(ids[within.mask(ids)], v[within.mask(ids)]) for ids, v in warm.blocks]
    assert found.hits == vector_pack.exact_top_k(q, allowed, TOP_K)


def test_a_failed_background_read_is_logged_and_the_next_search_answers_and_reads_again(
    built: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    target = target_of(built)
    scanner, codes = vector_pack.GenerationScanner(True), first_pass.FirstPassCache(1, 1)
    real = vector_pack.GenerationScanner._read_all
    calls = {"n": 0}

    def flaky(*args: object, **kwargs: object):
        calls["n"] += 1
        if calls["n"] == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return real(*args, **kwargs)

    monkeypatch.setattr(vector_pack.GenerationScanner, "_read_all", staticmethod(flaky))
    q = queries_of(built, 1)[0]
    with caplog.at_level(logging.INFO, logger="helpers.semantic.vector_pack"):
        first = vector_stage.top_hits(scanner, codes, {}, target, q, numpy_score(q), TOP_K)
        scanner._reading and scanner._reading.wait()
        assert "failed (disk I/O error): the next search reads it again" in caplog.text
        second = vector_stage.top_hits(scanner, codes, {}, target, q, numpy_score(q), TOP_K)
        scanner._reading and scanner._reading.wait()
    assert ON_DEMAND in first.summary and ON_DEMAND in second.summary
    assert first.hits == second.hits
    warm = scanner.load(*target)
    assert calls["n"] == 2 and first.hits == vector_pack.exact_top_k(q, warm.blocks, TOP_K)
