"""Hubness correction of semantic candidates: the math on real vectors, and the query path on a
real SQLite generation (generations._hubness_corrected)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from helpers.semantic import generations, hubness, hubness_store, vector_pack
from helpers.store import index_db

DIM = 16


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_neighbour_means_equal_brute_force_and_leave_copies_out():
    rng = np.random.default_rng(3)
    v = _unit(rng.standard_normal((40, DIM)))
    v[1] = v[0]  # a byte-identical copy: not a neighbour of its twin
    sample = hubness.stride_sample([(np.arange(40), v)], 40, 1024)
    assert len(sample) == 40  # a small index is its own sample
    sims = v @ v.T
    sims[sims >= hubness.SAME_TEXT_COSINE] = -np.inf
    expected = np.sort(sims, axis=1)[:, -5:].mean(axis=1)
    got = hubness.neighbour_means(v, sample, 5)
    assert np.allclose(got, expected, atol=1e-6)
    assert got[0] < 0.99  # its copy (cosine 1) was not counted
    everyone = hubness.neighbour_means(v[2:3], sample, 0)  # k <= 0: the mean over all others
    assert np.isclose(everyone[0], np.mean(np.delete(v @ v[2], 2)), atol=1e-6)


def test_stride_sample_is_bounded_spread_and_deterministic():
    rng = np.random.default_rng(4)
    blocks = [(np.arange(i, i + 300), _unit(rng.standard_normal((300, DIM)))) for i in (0, 300)]
    first = hubness.stride_sample(blocks, 600, 100)
    again = hubness.stride_sample(blocks, 600, 100)
    assert len(first) == 100 and np.array_equal(first, again)
    assert np.allclose(first[0], blocks[0][1][0]) and np.allclose(first[50], blocks[1][1][0])


def test_weight_is_full_for_a_weak_best_match_and_zero_for_a_close_one():
    assert hubness.weight_for(hubness.WEAK_COSINE - 0.05) == hubness.WEIGHT
    assert hubness.weight_for(hubness.STRONG_COSINE) == 0.0
    middle = hubness.weight_for((hubness.WEAK_COSINE + hubness.STRONG_COSINE) / 2)
    assert 0 < middle < hubness.WEIGHT


def _generation(db: Path, vectors: np.ndarray) -> generations.Generation:
    conn = index_db.open_index(db)
    with index_db.write_transaction(conn):
        gen = conn.execute(
            "INSERT INTO semantic_generations(fingerprint, model_name, dim, ready, vector_count, "
            "created_at, finished_at) VALUES ('test', 'test', ?, 1, ?, ?, ?)",
            (DIM, len(vectors), time.time(), time.time()),
        ).lastrowid
        size = 64  # several blocks, so candidates are read from more than one
        for block_no, start in enumerate(range(0, len(vectors), size)):
            part = vectors[start : start + size]
            conn.execute(
                "INSERT INTO semantic_blocks VALUES (?, ?, ?, ?, ?, ?)",
                (
                    gen,
                    block_no,
                    len(part),
                    vector_pack.pack_ids(np.arange(start + 1, start + len(part) + 1)),
                    vector_pack.pack_hashes([bytes(16)] * len(part)),
                    vector_pack.pack_vectors(part.astype(np.float16)),
                ),
            )
    generation = generations.latest_ready_generation(conn)
    conn.close()
    assert generation is not None
    return generation


def _hub_and_outlier(seed: int) -> np.ndarray:
    """200 chunks spread around one direction, one chunk (id 1) right at its centre: the hub
    close to everything; chunk 2 is an outlier with few neighbours."""
    rng = np.random.default_rng(seed)
    centre = _unit(rng.standard_normal((1, DIM)))[0]
    spread = _unit(centre + 0.6 * rng.standard_normal((200, DIM)))
    spread[0] = centre
    spread[1] = _unit(rng.standard_normal((1, DIM)))[0]
    return spread


def test_a_hub_falls_behind_a_specific_chunk_only_when_nothing_matches_well(tmp_path: Path):
    spread = _hub_and_outlier(5)
    db = tmp_path / "index.sqlite3"
    generation = _generation(db, spread)
    ref = hubness_store.GenerationRef(
        str(db), generation.id, generation.fingerprint, generation.vector_count, generation.dim
    )
    hubness_store._cache.clear()
    conn = index_db.connect(db, readonly=True)
    try:
        weak = [(1, 0.80), (2, 0.79), (3, 0.70)]
        corrected = hubness_store.corrected(conn, ref, weak)
        assert [cid for cid, _ in corrected][:2] == [2, 1]
        assert len(hubness_store._cache) == 1
        state = next(iter(hubness_store._cache.values()))
        assert set(state.index.values) == {1, 2, 3}  # only the candidates were computed
        assert state.index.values[1] > 0 > state.index.values[2]
        # the same query again reads nothing new and answers the same
        assert hubness_store.corrected(conn, ref, weak) == corrected
        hubness_store._cache.clear()
        strong = [(1, 0.95), (2, 0.94), (3, 0.80)]
        assert hubness_store.corrected(conn, ref, strong) == strong
        assert not hubness_store._cache  # a close match needs no sample at all
    finally:
        conn.close()
        hubness_store._cache.clear()


def test_search_reads_the_newest_generation_for_the_correction(tmp_path: Path):
    import rag_search

    spread = _hub_and_outlier(6)
    db = tmp_path / "index.sqlite3"
    empty = tmp_path / "empty.sqlite3"
    index_db.open_index(empty).close()
    _generation(db, spread)
    hubness_store._cache.clear()
    weak = [(1, 0.80), (2, 0.79), (3, 0.70)]
    try:
        conn = index_db.connect(db, readonly=True)
        assert rag_search._hubness_corrected(conn, weak)[0][0] == 2  # the hub fell behind
        assert next(iter(hubness_store._cache)).db == str(db.resolve())
        conn.close()
        conn = index_db.connect(empty, readonly=True)
        assert rag_search._hubness_corrected(conn, weak) == weak  # no vectors: nothing to do
        conn.close()
    finally:
        hubness_store._cache.clear()


def test_a_slow_build_for_one_index_does_not_block_the_correction_of_another(
    tmp_path: Path, monkeypatch
):
    """The reference sample of a large index takes one pass over all its chunk ids; meanwhile a
    search of another index (another generation) is corrected at once, not after it."""
    import threading

    refs = {}
    for name, seed in (("big", 7), ("small", 8)):
        db = tmp_path / f"{name}.sqlite3"
        generation = _generation(db, _hub_and_outlier(seed))
        ref = hubness_store.GenerationRef(
            str(db), generation.id, generation.fingerprint, generation.vector_count, generation.dim
        )
        refs[name] = (db, ref)
    entered, release = threading.Event(), threading.Event()
    real_ids = hubness_store._block_ids

    def paused_ids(conn, generation):  # type: ignore[no-untyped-def]
        if generation.db == str(refs["big"][0]):  # the big index's sample pass
            entered.set()
            assert release.wait(600), "the test never released the big build"
        yield from real_ids(conn, generation)

    monkeypatch.setattr(hubness_store, "_block_ids", paused_ids)
    hubness_store._cache.clear()
    weak = [(1, 0.80), (2, 0.79), (3, 0.70)]
    results: dict[str, list[tuple[int, float]]] = {}

    def correct(name: str) -> None:
        conn = index_db.connect(refs[name][0], readonly=True)
        try:
            results[name] = hubness_store.corrected(conn, refs[name][1], weak)
        finally:
            conn.close()

    big = threading.Thread(target=correct, args=("big",), daemon=True)
    try:
        big.start()
        assert entered.wait(120), "the big build never started"
        small = threading.Thread(target=correct, args=("small",), daemon=True)
        small.start()
        small.join(60)  # a bound for a deadlock, not a timing: the big build is still paused
        assert not small.is_alive(), "the small index waited for the big index's build"
        assert results["small"][0][0] == 2 and "big" not in results
    finally:
        release.set()
        big.join(120)
    assert results["big"][0][0] == 2  # the paused build finished with the right answer
    assert len(hubness_store._cache) == 2
    hubness_store._cache.clear()


def test_the_reference_sample_reads_only_sampled_rows_and_equals_the_full_pass_sample(
    tmp_path: Path, monkeypatch
):
    """At 3,000 vectors the stride takes every third one: read row by row (incremental BLOB
    I/O), the sample and the candidates' vectors are the rows a full pass would give, and no
    statement selects the vector BLOBs themselves."""
    rng = np.random.default_rng(11)
    vectors = _unit(rng.standard_normal((3 * hubness.SAMPLE_SIZE - 72, DIM)))
    db = tmp_path / "index.sqlite3"
    generation = _generation(db, vectors)
    ref = hubness_store.GenerationRef(
        str(db), generation.id, generation.fingerprint, generation.vector_count, generation.dim
    )
    conn = index_db.connect(db, readonly=True)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        state = hubness_store._state(conn, ref)
        blocks = [
            (vector_pack.unpack_ids(i), vector_pack.unpack_vectors(v, n, DIM))
            for i, v, n in index_db.connect(db, readonly=True).execute(
                "SELECT chunk_ids, vectors, count FROM semantic_blocks ORDER BY block_no"
            )
        ]
        full = hubness.stride_sample(blocks, len(vectors), hubness.SAMPLE_SIZE)
        assert len(full) <= hubness.SAMPLE_SIZE
        assert np.array_equal(state.index.sample, full)
        wanted = [5, 700, 2999, 10**6]  # the last one is not in the generation
        ids, found = hubness_store._candidate_vectors(conn, ref, state, wanted)
        assert ids == [5, 700, 2999]
        assert np.array_equal(found, vectors[[4, 699, 2998]].astype(np.float16).astype(np.float32))
        assert statements and not any("vectors" in s.split("FROM")[0] for s in statements)
        monkeypatch.setattr(hubness_store, "WHOLE_BLOCK_ROWS", 8)  # blocks here hold 64 rows
        many = list(range(0, 64, 3))  # past the bound: one read of the whole BLOB
        rows = hubness_store._read_rows(conn, ref, {0: many})
        assert all(np.array_equal(rows[(0, r)], blocks[0][1][r]) for r in many)
    finally:
        conn.close()
