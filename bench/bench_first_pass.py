"""Vector first pass (helpers/semantic/first_pass.py): recall on real vectors, cost at scale.

    python bench/bench_first_pass.py --set NAME=INDEX.sqlite3:GOLDEN.json [--set ...] \
        --model-dir ../shared/models/multilingual-e5-small-int8 [--work /tmp/first-pass] \
        [--curves] [--sizes 100000,300000,1000000] [--queries 20] [--factory RaBitQfs ...] \
        [--memory-size 1000000]

Real sets: each index's ready generation (its stored vectors) and its golden queries embedded
by the real model, and all sets pooled. The exact top 400 (the worker's own scorer, ties to the
lower id) against the production first pass forced on (no size threshold): recall@400, mean and
worst query. A rescored first pass returns exactly the exact top-400 rows its candidates hold,
so this recall is the recall of the whole vector stage. --curves adds, per code, the recall
within the first N of its full ranking (N on a grid) and the N that gives each query 0.99:

- sign_c / sign_cq / sign_cqr: Hamming between sign(x - mean) and sign(q) / sign(q - mean) /
  both after a seeded random rotation (plain binary codes);
- asym_c: q . sign(x - mean), float query against 1-bit codes;
- each --factory: faiss's ranking of every row (RaBitQ fast-scan codes, qb 8).

--sizes: vectors synthesised from the real ones (bench_scale.synthesise: mixes of two real
vectors plus noise) held as the warm worker holds them. Per query, alternately, the worker's
exact scan (ONNX scorer over 1,024-vector blocks, warm) and the first pass (build time once):
medians, their ratio in the same run, and recall@400 against the exact scan.

--memory-size: a real index file of that many synthetic vectors and a real warm worker process
(default threshold): its RSS with the model loaded, then after two searches (the generation and
its codes loaded), as ratios to the vectors' float16 size. Prints one JSON
object per set and per size; bench/notes/v-index.md holds the figures.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import semantic_worker  # noqa: E402  (onnxruntime first: faiss after it)
from bench.bench_scale import synthesise  # noqa: E402
from helpers.semantic import first_pass, vector_pack  # noqa: E402

DEPTH = 400  # helpers.semantic.candidates.SEMANTIC_DEPTH
SEED = 7
GRID = (400, 800, 1600, 3200, 6400, 12800, 25600)


def load_set(db: Path) -> vector_pack.WarmGeneration:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    ids, vecs = [], []
    for id_blob, vec_blob, n, dim in conn.execute(
        "SELECT b.chunk_ids, b.vectors, b.count, g.dim FROM semantic_blocks b "
        "JOIN semantic_generations g ON g.id = b.generation_id WHERE g.ready = 1 "
        "ORDER BY b.generation_id, b.block_no"
    ):
        ids.append(vector_pack.unpack_ids(id_blob))
        vecs.append(vector_pack.unpack_vectors(vec_blob, n, dim))
    conn.close()
    return warm_of(np.concatenate(ids), np.concatenate(vecs), str(db))


def warm_of(ids: np.ndarray, vectors: np.ndarray, name: str) -> vector_pack.WarmGeneration:
    step = vector_pack.BLOCK_SIZE
    blocks = tuple((ids[a : a + step], vectors[a : a + step]) for a in range(0, len(ids), step))
    return vector_pack.WarmGeneration((name, len(ids)), ids, vectors, blocks)


def exact(warm: vector_pack.WarmGeneration, score, k: int = DEPTH) -> list[tuple[int, float]]:
    top = vector_pack.TopK(k)
    for ids, vectors in warm.blocks:
        top.add(ids, score(vectors))
    return top.result()


def recall(found: list[tuple[int, float]], truth: list[tuple[int, float]]) -> float:
    return len({c for c, _ in found} & {c for c, _ in truth}) / len(truth)


def summary(values: list[float]) -> list[float]:
    return [round(statistics.mean(values), 4), round(min(values), 4)]


def rotation(dim: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(SEED).standard_normal((dim, dim)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def positions(key: np.ndarray, truth_rows: np.ndarray) -> np.ndarray:
    """Where each true row falls in the order of ascending `key` (ties by row)."""
    order = np.lexsort((np.arange(len(key)), key))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    return pos[truth_rows]


def curves(
    warm: vector_pack.WarmGeneration, queries: np.ndarray, factories: list[str]
) -> dict[str, object]:
    import faiss

    x = warm.vectors.astype(np.float32)
    mean = x.mean(axis=0, dtype=np.float64).astype(np.float32)
    rot = rotation(x.shape[1])
    codes_c = np.packbits(x - mean > 0, axis=1)
    codes_cr = np.packbits((x - mean) @ rot > 0, axis=1)
    signs_c = np.where(x - mean > 0, 1.0, -1.0).astype(np.float32)
    passes = {f: first_pass.FirstPass.build(warm, 1, f) for f in factories}
    row_of = {int(c): i for i, c in enumerate(warm.ids)}
    found: dict[str, list[np.ndarray]] = {}
    for q in queries:
        truth = np.array(
            [row_of[c] for c, _ in exact(warm, lambda v, q=q: v.astype(np.float32) @ q)]
        )

        def add(name: str, key: np.ndarray, truth: np.ndarray = truth) -> None:
            found.setdefault(name, []).append(positions(key, truth))

        def ham(codes: np.ndarray, qcode: np.ndarray) -> np.ndarray:
            return np.bitwise_count(codes ^ qcode).sum(axis=1, dtype=np.int32)

        add("sign_c", ham(codes_c, np.packbits(q[None] > 0, axis=1)))
        add("sign_cq", ham(codes_c, np.packbits(q[None] - mean > 0, axis=1)))
        add("sign_cqr", ham(codes_cr, np.packbits((q - mean)[None] @ rot > 0, axis=1)))
        add("asym_c", -(signs_c @ q))
        for factory, fp in passes.items():
            dist, rows = fp.index.search(q[None], len(x))
            key = np.empty(len(x), dtype=np.float32)
            key[rows[0]] = -dist[0]
            add(factory, key)
    faiss.omp_set_num_threads(1)
    out: dict[str, object] = {}
    for name, pos_list in found.items():
        pos = np.stack(pos_list)
        row: dict[str, object] = {
            str(n): summary((pos < n).mean(axis=1).tolist()) for n in GRID if n <= len(x)
        }
        need = np.sort(pos, axis=1)[:, int(np.ceil(0.99 * pos.shape[1])) - 1] + 1
        row["n_for_0.99_median_worst"] = [int(np.median(need)), int(need.max())]
        out[name] = row
    return out


def real_set(
    name: str, warm: vector_pack.WarmGeneration, queries: np.ndarray, embedder, args
) -> dict[str, object]:
    fp = first_pass.FirstPass.build(warm, 2)
    rec, rescored = [], []
    for q in queries:
        truth = exact(warm, lambda v, q=q: embedder.scores(v, q))
        hits = fp.search(q, DEPTH, lambda v, q=q: embedder.scores(v, q))
        rec.append(recall(hits.hits, truth))
        rescored.append(hits.candidates)
    out: dict[str, object] = {
        "set": name,
        "vectors": len(warm.ids),
        "queries": len(queries),
        "first_pass_recall_at_400": summary(rec),
        "candidates": rescored[0],
    }
    if args.curves:
        out["curves"] = curves(warm, queries, args.factory)
    return out


def scale(size: int, base: np.ndarray, queries: np.ndarray, embedder, rng) -> dict[str, object]:
    vectors = synthesise(base, size, rng)
    warm = warm_of(np.arange(1, size + 1, dtype=np.int64), vectors, f"synthetic-{size}")
    t0 = time.perf_counter()
    fp = first_pass.FirstPass.build(warm, 2)
    build_s = time.perf_counter() - t0
    exact_t, fp_t, first_t, rec = [], [], [], []
    for q in queries:
        score = lambda v, q=q: embedder.scores(v, q)  # noqa: E731
        t0 = time.perf_counter()
        truth = exact(warm, score)
        exact_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        hits = fp.search(q, DEPTH, score)
        fp_t.append(time.perf_counter() - t0)
        first_t.append(hits.first_pass_ms / 1000)
        rec.append(recall(hits.hits, truth))
    exact_ms, fp_ms = statistics.median(exact_t) * 1000, statistics.median(fp_t) * 1000
    f16 = vectors.nbytes
    return {
        "synthetic_vectors": size,
        "exact_scan_ms": round(exact_ms, 1),
        "first_pass_total_ms": round(fp_ms, 1),
        "of_which_code_scan_ms": round(statistics.median(first_t) * 1000, 1),
        "ratio_to_exact": round(fp_ms / exact_ms, 3),
        "recall_at_400": summary(rec),
        "candidates": hits.candidates,
        "build_s": round(build_s, 1),
        "code_bytes_to_float16": round(fp.code_bytes / f16, 3),
    }


def proc_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory(size: int, base: np.ndarray, args, rng) -> dict[str, object]:
    """A real warm worker process on a real index file of `size` synthetic vectors: its RSS
    once the model is loaded, then after searches that load the generation and its codes."""
    from bench.bench_scale import write_index
    from helpers.semantic.client import SemanticWorker
    from helpers.semantic.model import load_model_info

    db = args.work / f"memory-{size}.sqlite3"
    fingerprint = load_model_info(args.model_dir, args.work / "cache").fingerprint
    vectors = synthesise(base, size, rng)
    write_index(db, vectors, fingerprint, base[:5].astype(np.float16))
    f16_mb = vectors.nbytes / 2**20
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    (generation,) = conn.execute("SELECT id FROM semantic_generations WHERE ready = 1").fetchone()
    conn.close()
    del vectors
    out: dict[str, object] = {"memory_vectors": size + 5, "float16_mb": round(f16_mb, 1)}
    log = args.work / "memory-worker.log"
    with SemanticWorker(
        args.model_dir, log_path=log, cache_dir=args.work / "cache", idle_seconds=120
    ) as worker:
        worker.info()
        worker.embed(["warm up"], "query")
        pid = worker.pid
        assert pid is not None
        before = proc_mb(pid, "VmRSS")
        for text in ("first search", "second search"):
            worker.search(db, generation, text, DEPTH, fingerprint=fingerprint)
        after, peak = proc_mb(pid, "VmRSS"), proc_mb(pid, "VmHWM")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    out.update(
        {
            "worker_rss_model_only_mb": round(before, 1),
            "worker_rss_after_mb": round(after, 1),
            "worker_peak_mb": round(peak, 1),
            "growth_to_float16": round((after - before) / f16_mb, 3),
            "total_rss_to_float16": round(after / f16_mb, 3),
            "log_tail": log.read_text().splitlines()[-2:],
        }
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", required=True, help="NAME=DB:GOLDEN")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/first-pass"))
    parser.add_argument("--curves", action="store_true")
    parser.add_argument("--factory", action="append", default=[])
    parser.add_argument("--sizes", default="")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--memory-size", type=int, default=0, help="real worker RSS at this size")
    args = parser.parse_args()
    args.factory = args.factory or [first_pass.FACTORY]
    worker = semantic_worker.Worker(args.model_dir, 2, args.work / "cache", warm=True)
    embedder = worker.embedder(for_query=True)
    sets, all_q = [], []
    for spec in args.set:
        name, rest = spec.split("=", 1)
        db, golden = rest.split(":", 1)
        texts = [q["query"] for q in json.loads(Path(golden).read_text())["queries"]]
        queries = embedder.embed(texts, "query")[0].astype(np.float32)
        sets.append(load_set(Path(db)))
        all_q.append(queries)
        print(json.dumps(real_set(name, sets[-1], queries, embedder, args)), flush=True)
    offset = 0  # pooled: the sets' ids shifted apart
    ids = []
    for warm in sets:
        ids.append(warm.ids - warm.ids.min() + offset)
        offset = int(ids[-1].max()) + 1
    pooled = warm_of(np.concatenate(ids), np.concatenate([w.vectors for w in sets]), "pooled")
    queries = np.concatenate(all_q)
    if len(sets) > 1:
        print(json.dumps(real_set("pooled", pooled, queries, embedder, args)), flush=True)
    rng = np.random.default_rng(SEED)
    sample = queries[rng.permutation(len(queries))[: args.queries]]
    base = pooled.vectors.astype(np.float32)
    for size in (int(s) for s in args.sizes.split(",") if s):
        print(json.dumps(scale(size, base, sample, embedder, rng)), flush=True)
    if args.memory_size:
        print(json.dumps(memory(args.memory_size, base, args, rng)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
