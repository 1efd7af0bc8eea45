"""Exact search filters on the semantic side: the best hits within a filter, however small it is
next to the rest of the index (helpers.semantic.allowed, helpers.semantic.candidates)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import make_config
from semantic_fixtures import CORPUS, add_document, build_tiny_model

from helpers.config import Config
from helpers.lexical.common import Filters
from helpers.semantic import candidates, vector_pack
from helpers.semantic.allowed import AllowedError, AllowedRanges, restricted
from helpers.semantic.generations import SemanticWorker, build_generation
from helpers.store import index_db

QUERY = CORPUS[1]  # the big folder is full of near copies of it
BIG_FOLDER_CHUNKS = 3 * candidates.SEMANTIC_DEPTH // 2  # more than one global candidate list


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def corpus(tmp_path: Path, tiny_model: Path) -> Iterator[tuple[Config, sqlite3.Connection, dict]]:
    """A big folder of texts close to QUERY and a small folder of five other texts."""
    config = replace(
        make_config(tmp_path / "docs", tmp_path / "state"),
        semantic=True,
        semantic_model_dir=tiny_model,
    )
    config.data_dir.mkdir(parents=True)
    conn = index_db.open_index(config.db_path)
    big = add_document(
        conn, "big/copies.md", [f"{QUERY} copy {i}" for i in range(BIG_FOLDER_CHUNKS)]
    )
    small = [add_document(conn, f"small/note{i}.md", [CORPUS[6 + i]])[0] for i in range(5)]
    # Two of the small notes are text files and newer: the other filters select within it.
    conn.execute(
        "UPDATE documents SET format = 'txt', mtime_ns = 50 WHERE path IN (?, ?)",
        ("small/note1.md", "small/note3.md"),
    )
    build_generation(
        conn,
        tiny_model,
        cache_dir=config.data_dir / "cache",
        log_path=tmp_path / "build.log",
    )
    yield config, conn, {"big": big, "small": small}
    conn.close()


def search(config: Config, conn: sqlite3.Connection, filters: Filters) -> list[tuple[int, float]]:
    return candidates.query_candidates(
        config, conn, QUERY, config.semantic_model_dir, filters, config.logs_dir / "q.log"
    )


def exact_within(
    config: Config, conn: sqlite3.Connection, wanted: list[int]
) -> list[tuple[int, float]]:
    """Brute force over the stored vectors of `wanted`, the query embedded by the same model."""
    with SemanticWorker(config.semantic_model_dir, log_path=config.logs_dir / "e.log") as worker:
        query = worker.embed([QUERY], "query").vectors[0].astype(np.float32)
    ids, vectors = [], []
    for ids_blob, vec_blob, n in conn.execute(
        "SELECT chunk_ids, vectors, count FROM semantic_blocks"
    ):
        ids.append(vector_pack.unpack_ids(ids_blob))
        vectors.append(vector_pack.unpack_vectors(vec_blob, n, len(query)))
    all_ids, all_vectors = np.concatenate(ids), np.concatenate(vectors)
    keep = np.isin(all_ids, wanted)
    return vector_pack.exact_top_k(query, [(all_ids[keep], all_vectors[keep])], len(wanted))


@pytest.fixture(autouse=True)
def close_warm_workers() -> Iterator[None]:
    yield
    with candidates._warm_lock:
        for worker in candidates._warm_workers.values():
            worker.close()
        candidates._warm_workers.clear()


def test_a_small_folder_beside_a_big_one_returns_every_one_of_its_semantic_hits(corpus) -> None:
    config, conn, ids = corpus
    unfiltered = {cid for cid, _ in search(config, conn, Filters())}
    assert not unfiltered & set(ids["small"])  # the global list lies entirely in the big folder
    hits = search(config, conn, Filters(path_prefix="small"))
    assert sorted(cid for cid, _ in hits) == sorted(ids["small"])
    expected = exact_within(config, conn, ids["small"])
    assert [cid for cid, _ in hits] == [cid for cid, _ in expected]
    assert np.allclose([s for _, s in hits], [s for _, s in expected], atol=1e-4)


def test_file_type_and_modified_after_filters_select_exactly_within_the_folder(corpus) -> None:
    config, conn, ids = corpus
    wanted = {ids["small"][1], ids["small"][3]}
    by_type = search(config, conn, Filters(file_types=("txt",)))
    by_time = search(config, conn, Filters(path_prefix="small", modified_after_ns=10))
    assert {cid for cid, _ in by_type} == wanted
    assert {cid for cid, _ in by_time} == wanted
    assert search(config, conn, Filters(path_prefix="nowhere")) == []


def test_a_filter_wider_than_the_candidate_depth_returns_a_full_list_of_the_best_within_it(
    corpus,
) -> None:
    config, conn, ids = corpus
    hits = search(config, conn, Filters(path_prefix="big"))
    assert len(hits) == candidates.SEMANTIC_DEPTH
    assert {cid for cid, _ in hits} <= set(ids["big"])
    expected = exact_within(config, conn, ids["big"])[: candidates.SEMANTIC_DEPTH]
    assert [cid for cid, _ in hits] == [cid for cid, _ in expected]


# --- the allowed-ids payload -----------------------------------------------------------------


def test_allowed_ids_travel_as_ranges_and_mask_exactly_the_ids_given() -> None:
    ids = [9, 3, 4, 5, 20, 21, 4, 100]
    ranges = AllowedRanges.from_ids(ids)
    assert ranges.starts.tolist() == [3, 9, 20, 100] and ranges.ends.tolist() == [6, 10, 22, 101]
    assert ranges.count == 7
    back = AllowedRanges.decode(ranges.encode())
    probe = np.arange(0, 110, dtype=np.int64)
    assert probe[back.mask(probe)].tolist() == sorted(set(ids))
    assert AllowedRanges.from_ids([]).count == 0
    assert not AllowedRanges.from_ids([]).mask(probe).any()


def test_a_block_outside_the_filter_is_never_scored_and_a_partial_one_is_cut() -> None:
    seen: list[list[int]] = []
    visit = restricted(
        {"allowed": AllowedRanges.from_ids([2, 3, 7]).encode()},
        lambda chunk_ids, vectors: seen.append(chunk_ids.tolist()),
    )
    vectors = np.zeros((4, 2), dtype=np.float16)
    visit(np.array([0, 1, 2, 3]), vectors)
    visit(np.array([10, 11, 12, 13]), vectors)
    visit(np.array([4, 5, 6, 7]), vectors)
    assert seen == [[2, 3], [7]]
    unfiltered = restricted({}, lambda chunk_ids, vectors: seen.append(chunk_ids.tolist()))
    unfiltered(np.array([10, 11]), vectors)
    assert seen[-1] == [10, 11]


@pytest.mark.parametrize(
    "payload",
    [
        123,
        "not base64!",
        "AAAA",
        AllowedRanges(np.array([5, 1], dtype=np.int64), np.array([6, 2], dtype=np.int64)).encode(),
    ],
)
def test_an_unreadable_allowed_payload_is_refused_with_a_hint(payload: object) -> None:
    with pytest.raises(AllowedError) as caught:
        AllowedRanges.decode(payload)
    assert caught.value.hint


def test_restricting_random_blocks_keeps_exactly_the_rows_isin_keeps() -> None:
    rng = np.random.default_rng(9)
    allowed_ids = rng.choice(5000, size=700, replace=False)
    ranges = AllowedRanges.from_ids(allowed_ids.tolist())
    for _ in range(200):
        start = int(rng.integers(0, 5000))
        ids = rng.permutation(np.arange(start, start + int(rng.integers(1, 64))))
        vectors = np.arange(len(ids) * 2, dtype=np.float16).reshape(-1, 2)
        keep = np.isin(ids, allowed_ids)
        rows = ranges.restrict(ids, vectors)
        if not keep.any():
            assert rows is None
        else:
            assert rows is not None
            assert rows[0].tolist() == ids[keep].tolist()
            assert np.array_equal(rows[1], vectors[keep])


def test_filter_ranges_hold_every_chunk_of_a_document_whose_ids_have_gaps(tmp_path: Path) -> None:
    conn = index_db.open_index(tmp_path / "index.sqlite3")
    try:
        first = add_document(conn, "small/a.md", ["one", "two"])
        other = add_document(conn, "big/b.md", ["three", "four"])
        late = add_document(conn, "small/c.md", ["five"])
        # A chunk of small/a.md written after the others: that document's ids are not one run.
        doc, section = conn.execute(
            "SELECT document_id, section_id FROM chunks WHERE id = ?", (first[0],)
        ).fetchone()
        gap = conn.execute(
            "INSERT INTO chunks(document_id, section_id, ordinal, text, norm_stored, text_hash, "
            "location) VALUES (?, ?, 2, 'six', 'six', 'x', '{}')",
            (doc, section),
        ).lastrowid
        ranges = candidates._filter_ranges(conn, Filters(path_prefix="small"))
        assert ranges is not None
        probe = np.arange(0, gap + 5, dtype=np.int64)
        assert probe[ranges.mask(probe)].tolist() == sorted([*first, *late, gap])
        assert not set(other) & set(probe[ranges.mask(probe)].tolist())
        assert candidates._filter_ranges(conn, Filters()) is None
    finally:
        conn.close()


def test_spans_in_any_order_merge_into_sorted_disjoint_ranges() -> None:
    ranges = AllowedRanges.from_spans([(10, 12), (1, 3), (3, 5), (11, 15), (20, 20)])
    assert ranges.starts.tolist() == [1, 10] and ranges.ends.tolist() == [5, 15]
