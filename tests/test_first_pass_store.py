"""First-pass codes stored with their generation (helpers/semantic/code_store.py, migration 13):
real model, real SQLite, real worker subprocesses; blocks of 64 vectors so a few hundred real
sentences fill several code rows."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from conftest import undo_migration_13
from semantic_fixtures import (
    add_document,
    copy_of,
    index_with_codes,
    warm_worker,
)
from semantic_fixtures import (
    build_with_codes as build,
)

from helpers.semantic import code_store, rabitq, vector_pack
from helpers.semantic.generations import latest_ready_generation
from helpers.store import index_db

ROOT = Path(__file__).resolve().parents[1]
TOP_K = 10
BLOCK = 64  # vectors per block in these tests (the product's 1,024 would make one block)
QUERIES = ["how do I reset a forgotten password", "Как удалить файл?", "สิทธิมนุษยชนคืออะไร"]


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_pack, "BLOCK_SIZE", BLOCK)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real index whose one generation has stored codes; tests work on copies of it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vector_pack, "BLOCK_SIZE", BLOCK)
        db = index_with_codes(tmp_path_factory.mktemp("codes"), per_set=60)
    yield db


def search_all(tmp_path: Path, db: Path, name: str, min_vectors: int) -> list:
    with closing(sqlite3.connect(db)) as conn:
        generation = latest_ready_generation(conn)
    assert generation is not None
    with warm_worker(tmp_path, name, min_vectors) as worker:
        return [worker.search(db, generation.id, q, TOP_K) for q in QUERIES]


def stored(conn: sqlite3.Connection, generation: int) -> tuple[np.ndarray, np.ndarray]:
    """(centroid, every stored code in block order) of a generation."""
    header = code_store.read_header(conn, generation)
    assert header is not None
    rows = conn.execute(
        "SELECT codes FROM semantic_codes WHERE generation_id = ? ORDER BY block_no",
        (generation,),
    ).fetchall()
    codes = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.uint8)
    return header.centroid, codes.reshape(-1, header.code_size)


def vectors_of(conn: sqlite3.Connection, generation: int, dim: int) -> np.ndarray:
    rows = conn.execute(
        "SELECT vectors, count FROM semantic_blocks WHERE generation_id = ? ORDER BY block_no",
        (generation,),
    ).fetchall()
    return np.concatenate([vector_pack.unpack_vectors(v, n, dim) for v, n in rows])


def code_rows(conn: sqlite3.Connection) -> list[tuple[int, int]]:
    return [tuple(r) for r in conn.execute("SELECT generation_id, block_no FROM semantic_codes")]


# --- layout -------------------------------------------------------------------------------------


def test_packed_codes_are_the_bytes_faiss_itself_writes_and_search_the_same() -> None:
    rng = np.random.default_rng(11)
    vectors = vector_pack.l2_normalise(rng.standard_normal((1000, 384)) + 0.3).astype(np.float16)
    centroid = rabitq.fit_centroid(vectors)
    ours = rabitq.index_from_codes(rabitq.encode(vectors, centroid, 2), centroid, vectors)
    theirs = rabitq._empty_index(centroid)
    theirs.add(vectors.astype(np.float32))
    import faiss

    ours_table = faiss.rev_swig_ptr(ours.codes.get(), ours.codes.size())
    assert np.array_equal(ours_table, faiss.rev_swig_ptr(theirs.codes.get(), theirs.codes.size()))
    queries = vectors[:4].astype(np.float32)
    assert [a.tolist() for a in ours.search(queries, 50)] == [
        a.tolist() for a in theirs.search(queries, 50)
    ]


# --- build, load, damage ------------------------------------------------------------------------


def test_a_built_generation_stores_intact_codes_the_worker_loads_with_the_exact_scans_hits(
    built: Path, tmp_path: Path
) -> None:
    with closing(sqlite3.connect(built)) as conn:
        generation = latest_ready_generation(conn)
        assert generation is not None and generation.vector_count > 3 * BLOCK
        blocks = conn.execute("SELECT count(*) FROM semantic_blocks").fetchone()[0]
        assert len(code_rows(conn)) == blocks
        assert code_store.complete(conn, generation.id, generation.dim)
        centroid, codes = stored(conn, generation.id)
        vectors = vectors_of(conn, generation.id, generation.dim)
    assert np.array_equal(codes, rabitq.encode(vectors, centroid, 1))
    expected = search_all(tmp_path, built, "exact", min_vectors=10**9)
    assert search_all(tmp_path, built, "codes", min_vectors=1) == expected
    log = (tmp_path / "codes.log").read_text()
    assert f"first pass ready for {generation.vector_count} vectors" in log
    assert "stored codes" in log and "rebuilt" not in log


def test_missing_or_damaged_codes_are_rebuilt_from_the_vectors_and_answer_the_same(
    built: Path, tmp_path: Path
) -> None:
    expected = search_all(tmp_path, built, "stored", min_vectors=1)
    rows = copy_of(built, tmp_path / "rows")
    with closing(sqlite3.connect(rows)) as conn:
        conn.execute("DELETE FROM semantic_codes WHERE block_no = 1")
        blob = bytearray(
            conn.execute("SELECT codes FROM semantic_codes WHERE block_no = 2").fetchone()[0]
        )
        blob[5] ^= 0xFF  # a flipped byte under the old checksum
        conn.execute("UPDATE semantic_codes SET codes = ? WHERE block_no = 2", (bytes(blob),))
        blocks = conn.execute("SELECT count(*) FROM semantic_blocks").fetchone()[0]
        conn.commit()
    assert search_all(tmp_path, rows, "rows", min_vectors=1) == expected
    assert f"2 of {blocks} blocks missing or damaged" in (tmp_path / "rows.log").read_text()

    header = copy_of(built, tmp_path / "header")
    with closing(sqlite3.connect(header)) as conn:
        conn.execute("UPDATE semantic_code_sets SET version = version + 1")
        conn.commit()
    assert search_all(tmp_path, header, "header", min_vectors=1) == expected
    log = (tmp_path / "header.log").read_text()
    assert "codes version" in log and "rebuilt from the stored vectors" in log

    old = copy_of(built, tmp_path / "schema12")
    with closing(sqlite3.connect(old)) as conn:
        undo_migration_13(conn)  # a schema-12 file read as it is: no codes table at all
        conn.commit()
    assert search_all(tmp_path, old, "old", min_vectors=1) == expected
    assert "no stored codes" in (tmp_path / "old.log").read_text()

    # a header whose rows cannot be read at all: the codes are a cache, the search still answers
    unreadable = copy_of(built, tmp_path / "unreadable")
    with closing(sqlite3.connect(unreadable)) as conn:
        conn.execute("DROP TABLE semantic_codes")
        conn.commit()
    assert search_all(tmp_path, unreadable, "unreadable", min_vectors=1) == expected
    assert "unreadable (no such table" in (tmp_path / "unreadable.log").read_text()

    # a header table of another shape is damage, not "no codes": reported as unreadable
    other = copy_of(built, tmp_path / "other")
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("ALTER TABLE semantic_code_sets DROP COLUMN drift")
        conn.commit()
    with closing(sqlite3.connect(other)) as conn, pytest.raises(sqlite3.OperationalError):
        code_store.read_header(conn, latest_ready_generation(conn).id)
    assert search_all(tmp_path, other, "other", min_vectors=1) == expected
    assert "unreadable (no such column: drift" in (tmp_path / "other.log").read_text()


def test_an_incremental_build_copies_unchanged_codes_keeps_the_centroid_and_drops_the_old(
    built: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = copy_of(built, tmp_path / "inc")
    with closing(index_db.open_index(db)) as conn:
        before = latest_ready_generation(conn)
        old_centroid, old_codes = stored(conn, before.id)
        new = add_document(conn, "c/new.md", [q + " (new note)" for q in QUERIES])
        with caplog.at_level("INFO", logger="helpers.semantic.code_store"):
            result = build(conn, tmp_path)
        assert result.status == "built" and result.embedded == len(new)
        centroid, codes = stored(conn, result.generation_id)
        vectors = vectors_of(conn, result.generation_id, before.dim)
        assert {g for g, _ in code_rows(conn)} == {result.generation_id}
    assert f"{len(new)} encoded, {before.vector_count} copied" in caplog.text
    assert np.array_equal(centroid, old_centroid)
    assert np.array_equal(codes, rabitq.encode(vectors, centroid, 1))
    assert {c.tobytes() for c in old_codes} <= {c.tobytes() for c in codes}
    found = search_all(tmp_path, db, "after", min_vectors=1)
    assert found == search_all(tmp_path, db, "exact", min_vectors=10**9)
    assert [hits[0][0] for hits in found] == new


def test_a_build_refits_the_centroid_once_enough_vectors_were_encoded_since(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = copy_of(built, tmp_path / "refit")
    monkeypatch.setattr(code_store, "REFIT_SHARE", 0.0)  # any new vector is too many
    with closing(index_db.open_index(db)) as conn:
        before = latest_ready_generation(conn)
        old_centroid, _ = stored(conn, before.id)
        add_document(conn, "c/new.md", ["a brand new sentence about lighthouses"])
        result = build(conn, tmp_path)
        centroid, codes = stored(conn, result.generation_id)
        vectors = vectors_of(conn, result.generation_id, before.dim)
        header = code_store.read_header(conn, result.generation_id)
    assert not np.array_equal(centroid, old_centroid)
    assert np.array_equal(centroid, rabitq.fit_centroid(vectors))
    assert (header.fit_count, header.drift) == (len(vectors), 0)
    assert np.array_equal(codes, rabitq.encode(vectors, centroid, 1))


def test_an_unchanged_sync_stores_the_codes_a_generation_lacks(built: Path, tmp_path: Path) -> None:
    db = copy_of(built, tmp_path / "backfill")
    with closing(index_db.open_index(db)) as conn:
        generation = latest_ready_generation(conn)
        centroid, codes = stored(conn, generation.id)
        conn.execute("DELETE FROM semantic_codes")
        conn.execute("DELETE FROM semantic_code_sets")
        conn.commit()
        result = build(conn, tmp_path)
        assert (result.status, result.generation_id) == ("unchanged", generation.id)
        assert code_store.complete(conn, generation.id, generation.dim)
        again = stored(conn, generation.id)
    assert np.array_equal(again[0], centroid) and np.array_equal(again[1], codes)


# --- cancel and kill ----------------------------------------------------------------------------


def test_a_cancel_during_the_codes_build_keeps_the_previous_generation_and_its_codes(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = copy_of(built, tmp_path / "cancel")
    started = {"codes": False}
    real_write = code_store.write

    def write(*args: object, **kwargs: object) -> None:
        started["codes"] = True
        real_write(*args, **kwargs)

    monkeypatch.setattr(code_store, "write", write)
    with closing(index_db.open_index(db)) as conn:
        before = latest_ready_generation(conn)
        rows_before = code_rows(conn)
        add_document(conn, "c/new.md", ["a sentence that never gets published"])
        result = build(conn, tmp_path, should_cancel=lambda: started["codes"])
        assert started["codes"]
        assert (result.status, result.generation_id) == ("cancelled", before.id)
        assert code_rows(conn) == rows_before
        assert code_store.complete(conn, before.id, before.dim)
        assert [r[0] for r in conn.execute("SELECT id FROM semantic_generations")] == [before.id]


KILL_DURING_CODES = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from helpers.semantic import code_store, generations, vector_pack
from helpers.store import index_db
from semantic_fixtures import REAL_MODEL_DIR, add_document

vector_pack.BLOCK_SIZE = {block}
written = {{"blocks": 0}}
real_write = code_store.write

def write(conn, generation, centroid, codes, counts, fit_count, drift, should_stop=None):
    def stop():  # called before each block: the first one is committed, then SIGKILL
        written["blocks"] += 1
        if written["blocks"] == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return False
    real_write(conn, generation, centroid, codes, counts, fit_count, drift, stop)

code_store.write = write
conn = index_db.open_index(Path({db!r}))
add_document(conn, "c/killed.md", ["a sentence whose build is killed"])
generations.build_generation(conn, REAL_MODEL_DIR, cache_dir=Path({cache!r}),
    log_path=Path({log!r}), codes_min_vectors=1)
"""


def test_a_build_killed_while_writing_codes_leaves_the_previous_generation_whole(
    built: Path, tmp_path: Path
) -> None:
    db = copy_of(built, tmp_path / "kill")
    expected = search_all(tmp_path, db, "before", min_vectors=1)
    script = KILL_DURING_CODES.format(
        root=str(ROOT),
        tests=str(ROOT / "tests"),
        block=BLOCK,
        db=str(db),
        cache=str(tmp_path / "cache"),
        log=str(tmp_path / "killed.log"),
    )
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True, timeout=600
    )
    assert run.returncode == -9, run.stderr.decode()[-2000:]
    with closing(sqlite3.connect(db)) as conn:
        ready = conn.execute("SELECT id FROM semantic_generations WHERE ready = 1").fetchall()
        killed = conn.execute("SELECT id FROM semantic_generations WHERE ready = 0").fetchall()
        assert len(ready) == 1 and len(killed) == 1
        half = conn.execute(
            "SELECT count(*) FROM semantic_codes WHERE generation_id = ?", killed[0]
        ).fetchone()[0]
        assert half == 1  # killed mid-write: one code row committed, no header
        assert code_store.read_header(conn, killed[0][0]) is None
        assert code_store.complete(conn, ready[0][0], latest_ready_generation(conn).dim)
    found = search_all(tmp_path, db, "after-kill", min_vectors=1)
    assert found == expected
    assert "stored codes" in (tmp_path / "after-kill.log").read_text()
    with closing(index_db.open_index(db)) as conn:
        result = build(conn, tmp_path)
        assert result.status == "built"
        assert {g for g, _ in code_rows(conn)} == {result.generation_id}
        assert code_store.complete(conn, result.generation_id, latest_ready_generation(conn).dim)
