"""Vector packing, generation builds (reuse, cancel, crash, model change) and semantic search."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from semantic_fixtures import (
    CORPUS,
    REAL_MODEL_DIR,
    add_document,
    build_tiny_model,
    child_processes,
    set_chunk_text,
)

from helpers.semantic import generations, vector_pack
from helpers.semantic.generations import (
    NotReadyError,
    SemanticWorker,
    WorkerCrashed,
    build_generation,
    generation_state,
    latest_ready_generation,
)
from helpers.semantic.model import load_model_info
from helpers.store import index_db


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("other"), seed=1)


@pytest.fixture
def index(tmp_path: Path) -> sqlite3.Connection:
    conn = index_db.open_index(tmp_path / "index.sqlite3")
    yield conn
    conn.close()


def build(conn: sqlite3.Connection, model: Path, tmp_path: Path, **kwargs):
    return build_generation(
        conn, model, cache_dir=tmp_path / "cache", log_path=tmp_path / "worker.log", **kwargs
    )


def many_texts(n: int, tag: str = "") -> list[str]:
    return [f"{CORPUS[i % len(CORPUS)]} {tag}{i}" for i in range(n)]


def generation_rows(conn: sqlite3.Connection) -> list[tuple[int, int]]:
    return [tuple(r) for r in conn.execute("SELECT id, ready FROM semantic_generations")]


def stored_vectors(conn: sqlite3.Connection, generation: int, dim: int) -> dict[int, bytes]:
    out = {}
    for ids, hashes, vectors in conn.execute(
        "SELECT chunk_ids, text_hashes, vectors FROM semantic_blocks WHERE generation_id = ? "
        "ORDER BY block_no",
        (generation,),
    ):
        block = vector_pack.decode_block(ids, hashes, vectors, dim)
        for cid, row in zip(block.chunk_ids, block.vectors, strict=True):
            out[int(cid)] = row.tobytes()
    return out


# --- vector_pack --------------------------------------------------------------------------------


def test_packing_round_trips_vectors_ids_and_hashes_exactly() -> None:
    rng = np.random.default_rng(3)
    vectors = vector_pack.l2_normalise(rng.standard_normal((5, 7))).astype(np.float16)
    blob = vector_pack.pack_vectors(vectors)
    assert len(blob) == 5 * 7 * 2
    assert np.array_equal(vector_pack.unpack_vectors(blob, 5, 7), vectors)
    ids = [1, 2**40, 7, 0, 99]
    assert vector_pack.unpack_ids(vector_pack.pack_ids(ids)).tolist() == ids
    hashes = [vector_pack.hash_digest(f"{i:064x}") for i in range(5)]
    assert vector_pack.unpack_hashes(vector_pack.pack_hashes(hashes)) == tuple(hashes)
    assert vector_pack.hash_digest("ab" * 32) == bytes.fromhex("ab" * 16)
    assert len(vector_pack.hash_digest("not hex")) == vector_pack.HASH_BYTES
    decoded = vector_pack.vectors_from_b64(vector_pack.vectors_to_b64(vectors), 5, 7)
    assert np.array_equal(decoded, vectors)
    with pytest.raises(ValueError):
        vector_pack.unpack_vectors(blob[:-2], 5, 7)


def test_top_k_over_blocks_matches_a_full_sort_with_ties_broken_by_lower_id() -> None:
    rng = np.random.default_rng(5)
    vectors = vector_pack.l2_normalise(rng.standard_normal((2500, 16))).astype(np.float16)
    vectors[2400] = vectors[10]  # an exact tie: the lower chunk id must win
    ids = np.arange(1000, 3500, dtype=np.int64)
    query = vectors[10].astype(np.float32)
    blocks = [(ids[i : i + 1024], vectors[i : i + 1024]) for i in range(0, 2500, 1024)]
    top = vector_pack.exact_top_k(query, blocks, 5)
    scores = vectors.astype(np.float32) @ query
    order = sorted(range(2500), key=lambda i: (-scores[i], ids[i]))[:5]
    assert [cid for cid, _ in top] == [int(ids[i]) for i in order]
    assert top[0][0] == 1010 and top[1][0] == 3400
    assert np.allclose([s for _, s in top], [scores[i] for i in order], atol=1e-6)


# --- build_generation ---------------------------------------------------------------------------


def test_a_second_build_embeds_nothing_and_one_changed_chunk_embeds_one(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    ids = add_document(index, "a.md", many_texts(30))
    seen: list[tuple[int, int]] = []
    first = build(index, tiny_model, tmp_path, progress=lambda d, t: seen.append((d, t)))
    assert (first.status, first.embedded, first.reused, first.vector_count) == ("built", 30, 0, 30)
    assert seen[0] == (0, 30) and seen[-1] == (30, 30)
    second = build(index, tiny_model, tmp_path)
    assert (second.status, second.embedded, second.generation_id) == (
        "unchanged",
        0,
        first.generation_id,
    )
    before = stored_vectors(index, first.generation_id, 32)
    set_chunk_text(index, ids[4], "A brand new paragraph about invoices.")
    third = build(index, tiny_model, tmp_path)
    assert (third.status, third.embedded, third.reused) == ("built", 1, 29)
    assert generation_rows(index) == [(third.generation_id, 1)]
    after = stored_vectors(index, third.generation_id, 32)
    assert sorted(after) == sorted(ids)
    assert all(after[c] == before[c] for c in ids if c != ids[4])
    assert after[ids[4]] != before[ids[4]]


def test_a_pipelined_build_stores_the_bytes_of_its_requests_one_by_one(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    """The build keeps one request ahead of the worker; each request's texts are still the same
    group as before, so its vectors are byte for byte those of that request sent alone."""
    texts = many_texts(3 * generations.EMBED_REQUEST_TEXTS + 7)  # four requests, one short
    ids = add_document(index, "a.md", texts)
    seen: list[tuple[int, int]] = []
    result = build(index, tiny_model, tmp_path, progress=lambda d, t: seen.append((d, t)))
    step = generations.EMBED_REQUEST_TEXTS
    assert [d for d, _ in seen] == [0, step, 2 * step, 3 * step, len(texts)]
    stored = stored_vectors(index, result.generation_id, 32)
    with SemanticWorker(tiny_model, log_path=tmp_path / "alone.log", cache_dir=tmp_path) as w:
        alone = np.concatenate(
            [w.embed(texts[at : at + step]).vectors for at in range(0, len(texts), step)]
        )
    assert [stored[cid] for cid in ids] == [row.tobytes() for row in alone]


def test_added_and_removed_chunks_are_reflected_and_blocks_span_boundaries(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    ids = add_document(index, "big.md", many_texts(1100))
    first = build(index, tiny_model, tmp_path)
    row = index.execute(
        "SELECT count(*), sum(count) FROM semantic_blocks WHERE generation_id = ?",
        (first.generation_id,),
    ).fetchone()
    assert tuple(row) == (2, 1100)
    index.execute("DELETE FROM chunks WHERE id = ?", (ids[3],))
    extra = add_document(index, "extra.md", ["Совершенно новый текст про Байкал."])
    second = build(index, tiny_model, tmp_path)
    assert (second.status, second.embedded, second.reused, second.vector_count) == (
        "built",
        1,
        1099,
        1100,
    )
    stored = stored_vectors(index, second.generation_id, 32)
    assert ids[3] not in stored and extra[0] in stored


def test_identical_texts_are_embedded_once_and_share_the_vector(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    ids = add_document(index, "a.md", ["Page footer", "Lake Baikal", "Page footer", "Счёт"])
    result = build(index, tiny_model, tmp_path)
    assert (result.embedded, result.vector_count) == (3, 4)
    stored = stored_vectors(index, result.generation_id, 32)
    assert stored[ids[0]] == stored[ids[2]] != stored[ids[1]]


def test_cancelling_mid_build_keeps_the_previous_ready_generation(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    ids = add_document(index, "a.md", many_texts(200))
    first = build(index, tiny_model, tmp_path)
    blocks_before = stored_vectors(index, first.generation_id, 32)
    for cid in ids:
        set_chunk_text(index, cid, f"changed text number {cid}")
    progress: list[int] = []
    result = build(
        index,
        tiny_model,
        tmp_path,
        progress=lambda done, total: progress.append(done),
        should_cancel=lambda: len(progress) > 1,  # after the first embed request
    )
    assert result.status == "cancelled" and result.generation_id == first.generation_id
    assert 0 < progress[-1] < 200
    assert generation_rows(index) == [(first.generation_id, 1)]
    assert stored_vectors(index, first.generation_id, 32) == blocks_before


def test_a_cancelled_first_build_leaves_no_generation(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    add_document(index, "a.md", many_texts(100))
    result = build(index, tiny_model, tmp_path, should_cancel=lambda: True)
    assert result.status == "cancelled" and result.generation_id is None
    assert generation_rows(index) == []
    assert index.execute("SELECT count(*) FROM semantic_blocks").fetchone()[0] == 0


def _kill_worker_children(_done: int, _total: int) -> None:
    """SIGKILL every semantic_worker.py child of this process (found through /proc)."""
    for pid, args in child_processes():
        if any(a.endswith(b"semantic_worker.py") for a in args):
            os.kill(pid, signal.SIGKILL)


def test_killing_the_worker_mid_build_fails_loudly_and_keeps_the_previous_generation(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    ids = add_document(index, "a.md", many_texts(200))
    first = build(index, tiny_model, tmp_path)
    for cid in ids:
        set_chunk_text(index, cid, f"rewritten {cid}")
    calls = {"n": 0}

    def kill_after_first_request(done: int, total: int) -> None:
        calls["n"] += 1
        if done > 0:
            _kill_worker_children(done, total)

    with pytest.raises(WorkerCrashed) as error:
        build(index, tiny_model, tmp_path, progress=kill_after_first_request)
    assert "worker.log" in error.value.hint
    assert generation_rows(index) == [(first.generation_id, 1)]
    assert latest_ready_generation(index).vector_count == 200
    retry = build(index, tiny_model, tmp_path)
    assert (retry.status, retry.embedded) == ("built", 200)


def test_a_different_model_rebuilds_every_vector(
    index: sqlite3.Connection, tiny_model: Path, other_model: Path, tmp_path: Path
) -> None:
    add_document(index, "a.md", many_texts(20))
    first = build(index, tiny_model, tmp_path)
    second = build(index, other_model, tmp_path)
    assert (second.status, second.embedded, second.reused) == ("built", 20, 0)
    assert second.fingerprint != first.fingerprint
    generation = latest_ready_generation(index)
    assert generation.id == second.generation_id
    assert generation.fingerprint == load_model_info(other_model).fingerprint
    assert generation_rows(index) == [(second.generation_id, 1)]


def test_sync_phase_builds_with_the_configured_model_and_skips_when_off_or_missing(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    from helpers.config import Config

    add_document(index, "a.md", CORPUS)
    base = {"knowledge_dir": tmp_path / "docs", "data_dir": tmp_path / "state"}
    off = Config(db_path=tmp_path / "index.sqlite3", semantic=False, **base)
    assert generations.sync_phase(index, off) is None
    missing = Config(
        db_path=tmp_path / "index.sqlite3", semantic_model_dir=tmp_path / "nowhere", **base
    )
    assert generations.sync_phase(index, missing) is None
    assert latest_ready_generation(index) is None
    on = Config(db_path=tmp_path / "index.sqlite3", semantic_model_dir=tiny_model, **base)
    seen: list[tuple[int, int]] = []
    result = generations.sync_phase(index, on, progress=lambda d, t: seen.append((d, t)))
    assert result is not None and (result.status, result.embedded) == ("built", len(CORPUS))
    assert seen[-1] == (len(CORPUS), len(CORPUS))
    assert (tmp_path / "state" / "logs" / generations.WORKER_LOG).is_file()
    assert (tmp_path / "state" / "cache" / "model_hashes.json").is_file()


# --- search and state ---------------------------------------------------------------------------


def test_search_returns_the_chunk_whose_text_matches_the_query(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    filler = add_document(index, "filler.md", many_texts(1500, tag="x"))
    ids = add_document(index, "a.md", CORPUS)
    build(index, tiny_model, tmp_path)
    db = tmp_path / "index.sqlite3"
    for position in (2, 7, 9):
        hits = generations.query(
            db, tiny_model, CORPUS[position], 5, cache_dir=tmp_path, log_path=tmp_path / "q.log"
        )
        assert hits[0][0] == ids[position]
        assert len(hits) == 5 and hits[0][1] >= hits[-1][1]
    cold = generations.query(
        db, tiny_model, CORPUS[4], 5, cache_dir=tmp_path, log_path=tmp_path / "q.log"
    )
    with SemanticWorker(tiny_model, log_path=tmp_path / "warm.log", idle_seconds=30) as warm:
        for _ in range(2):  # the second call is served from the warm worker's block cache
            warm_hits = generations.query(
                db,
                tiny_model,
                CORPUS[4],
                5,
                cache_dir=tmp_path,
                log_path=tmp_path / "q.log",
                worker=warm,
            )
            assert warm_hits == cold and warm_hits[0][0] == ids[4]
    assert filler[0] not in [cid for cid, _ in cold[:1]]


def test_a_query_given_the_health_state_needs_no_model_folder_and_refuses_when_off(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    ids = add_document(index, "a.md", CORPUS)
    build(index, tiny_model, tmp_path)
    db, cache = tmp_path / "index.sqlite3", tmp_path / "cache"
    state = generation_state(index, tiny_model, True, cache, check_chunks=False)
    assert state.model is not None and state.generation is not None
    plain = generations.query(
        db, tiny_model, CORPUS[2], 3, cache_dir=cache, log_path=tmp_path / "q.log"
    )
    folded = generations.query(
        db,
        tmp_path / "not-consulted",
        CORPUS[2],
        3,
        cache_dir=cache,
        log_path=tmp_path / "q.log",
        state=state,
    )
    assert folded == plain and folded[0][0] == ids[2]
    off = generation_state(index, tiny_model, False, cache)
    with pytest.raises(NotReadyError) as error:
        generations.query(
            db, None, "lake", 3, cache_dir=cache, log_path=tmp_path / "q.log", state=off
        )
    assert "--semantic on" in error.value.hint


def test_a_cache_dir_that_cannot_be_written_only_costs_speed(
    index: sqlite3.Connection, tiny_model: Path, tmp_path: Path
) -> None:
    ids = add_document(index, "a.md", CORPUS)
    not_a_dir = tmp_path / "cache-is-a-file"
    not_a_dir.write_text("in the way")
    built = build_generation(index, tiny_model, cache_dir=not_a_dir, log_path=tmp_path / "w.log")
    assert (built.status, built.embedded) == ("built", len(CORPUS))
    hits = generations.query(
        tmp_path / "index.sqlite3",
        tiny_model,
        CORPUS[7],
        3,
        cache_dir=not_a_dir,
        log_path=tmp_path / "q.log",
    )
    assert hits[0][0] == ids[7]
    assert not_a_dir.read_text() == "in the way"


def test_query_refuses_an_index_built_with_another_model_or_never_built(
    index: sqlite3.Connection, tiny_model: Path, other_model: Path, tmp_path: Path
) -> None:
    db = tmp_path / "index.sqlite3"
    add_document(index, "a.md", CORPUS)
    with pytest.raises(NotReadyError):
        generations.query(db, tiny_model, "lake", 3, cache_dir=None, log_path=tmp_path / "q.log")
    build(index, tiny_model, tmp_path)
    with pytest.raises(NotReadyError) as error:
        generations.query(db, other_model, "lake", 3, cache_dir=None, log_path=tmp_path / "q.log")
    assert "sync" in error.value.hint


def test_semantic_state_moves_from_not_built_to_ready_to_outdated(
    index: sqlite3.Connection, tiny_model: Path, other_model: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    assert generation_state(index, tiny_model, False, cache).state == "off"
    broken = generation_state(index, tmp_path / "missing-model", True, cache)
    assert broken.state == "unavailable" and "model fetch" in broken.hint
    ids = add_document(index, "a.md", CORPUS)
    assert generation_state(index, tiny_model, True, cache).state == "not_built"
    build(index, tiny_model, tmp_path)
    ready = generation_state(index, tiny_model, True, cache)
    assert (ready.state, ready.vector_count) == ("ready", len(CORPUS))
    assert ready.fingerprint == load_model_info(tiny_model).fingerprint
    set_chunk_text(index, ids[0], "edited")
    assert generation_state(index, tiny_model, True, cache).state == "outdated"
    build(index, tiny_model, tmp_path)
    assert generation_state(index, tiny_model, True, cache).state == "ready"
    other = generation_state(index, other_model, True, cache)
    assert other.state == "outdated" and "another model" in other.reason


# --- the real model -----------------------------------------------------------------------------


def test_real_model_finds_the_thai_and_russian_passages_for_an_english_query(
    index: sqlite3.Connection, tmp_path: Path
) -> None:
    if not (REAL_MODEL_DIR / "onnx").is_dir():
        pytest.fail(f"real model folder missing: {REAL_MODEL_DIR} (shared/ must sit beside main/)")
    matches = add_document(
        index,
        "password.md",
        [
            "Чтобы сбросить пароль, нажмите на ссылку в письме с подтверждением.",
            "หากต้องการรีเซ็ตรหัสผ่าน ให้คลิกลิงก์ในอีเมลยืนยัน",
        ],
    )
    add_document(
        index,
        "distractors.md",
        [
            "Байкал — самое глубокое озеро в мире.",
            "ต้มยำกุ้งเป็นซุปไทยรสเผ็ดเปรี้ยวที่มีชื่อเสียง",
            "Поезд в Москву отправляется с седьмой платформы в 18:45.",
            "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
            "Фотосинтез превращает энергию света в химическую энергию.",
            "รถไฟไปเชียงใหม่ออกเดินทางตอนหกโมงเช้า",
            "The museum's new exhibition features paintings by Dutch masters.",
        ],
    )
    built = build(index, REAL_MODEL_DIR, tmp_path)
    assert (built.status, built.embedded) == ("built", 9)
    hits = generations.query(
        tmp_path / "index.sqlite3",
        REAL_MODEL_DIR,
        "How do I reset my password?",
        3,
        cache_dir=tmp_path / "cache",
        log_path=tmp_path / "q.log",
    )
    assert {cid for cid, _ in hits[:2]} == set(matches)
    assert 0.0 < hits[0][1] <= 1.0
    # The search path tokenizes with the query tokenizer, embed with the full model: same vector.
    with SemanticWorker(REAL_MODEL_DIR, log_path=tmp_path / "e.log") as worker:
        query = worker.embed(["How do I reset my password?"], "query").vectors[0]
    stored = stored_vectors(index, built.generation_id, 384)
    for cid, score in hits:
        passage = np.frombuffer(stored[cid], dtype=np.float16).astype(np.float32)
        assert score == pytest.approx(float(query.astype(np.float32) @ passage), abs=1e-5)
