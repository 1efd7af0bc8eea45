"""Cost of the hubness correction (generations._hubness_corrected) on a large generation.

    nice python bench/bench_hubness.py [--vectors 100000] [--rounds 3]

Builds a ready generation of random unit vectors in a temp index, then times, in the same run:
the bare read of every block (SELECT + unpack, what any scan pays), one exact cosine scan of
one query (numpy, the worker's per-query work), and the correction of 100 candidates: the first
weak query of a generation in this process (the sample pass plus its candidates' blocks), a
query whose 100 candidates are all new (scattered over the blocks: the worst case), and one
whose candidates were seen before. Speeds are ratios to the bare read, measured beside them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_semantic import insert_random_generation  # noqa: E402

from helpers.semantic import (  # noqa: E402
    generations,  # noqa: E402
    hubness,
    hubness_store,
    vector_pack,
)
from helpers.store import index_db  # noqa: E402

DIM = 384


def make_generation(db: Path, vectors: int) -> generations.Generation:
    conn = index_db.open_index(db)
    insert_random_generation(conn, "bench", "bench", DIM, vectors)
    generation = generations.latest_ready_generation(conn)
    conn.close()
    assert generation is not None
    return generation


def bare_read(conn, generation: generations.Generation) -> np.ndarray:
    last = None
    for ids_blob, vec_blob, n in conn.execute(
        "SELECT chunk_ids, vectors, count FROM semantic_blocks WHERE generation_id = ? "
        "ORDER BY block_no",
        (generation.id,),
    ):
        vector_pack.unpack_ids(ids_blob)
        last = vector_pack.unpack_vectors(vec_blob, n, generation.dim)
    assert last is not None
    return last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "index.sqlite3"
        generation = make_generation(db, args.vectors)
        ref = hubness_store.GenerationRef(
            str(db), generation.id, generation.fingerprint, generation.vector_count, generation.dim
        )
        conn = index_db.connect(db, readonly=True)
        rng = np.random.default_rng(1)
        reads, scans, builds, news, corrects = [], [], [], [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            bare_read(conn, generation)
            reads.append(time.perf_counter() - t0)
            q = vector_pack.l2_normalise(rng.standard_normal((1, DIM)))[0].astype(np.float32)
            t0 = time.perf_counter()
            top = vector_pack.TopK(100)
            for ids_blob, vec_blob, n in conn.execute(
                "SELECT chunk_ids, vectors, count FROM semantic_blocks WHERE generation_id = ? "
                "ORDER BY block_no",
                (generation.id,),
            ):
                block = vector_pack.unpack_vectors(vec_blob, n, generation.dim)
                top.add(vector_pack.unpack_ids(ids_blob), block.astype(np.float32) @ q)
            hits = top.result()
            scans.append(time.perf_counter() - t0)
            hubness_store._cache.clear()
            t0 = time.perf_counter()
            hubness_store.corrected(conn, ref, hits)
            builds.append(time.perf_counter() - t0)
            fresh = [(int(c), 0.5) for c in rng.choice(args.vectors, 100, replace=False) + 1]
            t0 = time.perf_counter()
            hubness_store.corrected(conn, ref, fresh)
            news.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for _ in range(20):
                hubness_store.corrected(conn, ref, fresh)
            corrects.append((time.perf_counter() - t0) / 20)
        conn.close()
    read = statistics.median(reads)
    med = {
        name: statistics.median(v)
        for name, v in (("scan", scans), ("first", builds), ("new", news), ("seen", corrects))
    }
    print(
        f"{args.vectors} vectors x {DIM}, sample {hubness.SAMPLE_SIZE}, k {hubness.NEIGHBOURS}, "
        f"{args.rounds} rounds (median):\n"
        f"  bare read of every block            {read * 1000:8.1f} ms (1.0x)\n"
        f"  one exact scan (numpy)              {med['scan'] * 1000:8.1f} ms "
        f"({med['scan'] / read:.1f}x)\n"
        f"  correction, first weak query        {med['first'] * 1000:8.1f} ms "
        f"({med['first'] / read:.1f}x)\n"
        f"  correction, 100 new candidates      {med['new'] * 1000:8.1f} ms "
        f"({med['new'] / read:.1f}x)\n"
        f"  correction, candidates seen before  {med['seen'] * 1000:8.3f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
