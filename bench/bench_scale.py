"""Scale harness, vector side: semantic search over ~100k, ~300k and 1M passages.

    python bench/bench_scale.py --source-db DATA/index.sqlite3 [--source-db ...] \
        --model-dir ../shared/models/multilingual-e5-small-int8 --golden SET/golden.json \
        [--sizes 100000,300000,1000000] [--work /tmp/scale] [--queries 20] [--ann]

Vectors are synthesised from the real ones of the given indexes (see `synthesise`): each is
normalise((1 - t) a + t b + e) for two random real passage vectors a, b, t ~ U(0, 0.5) and
e ~ N(0, 0.02^2) per dimension, so the set keeps the real vectors' common direction and spread.
Queries are the real golden queries embedded by the real model. Each size gets a real index
file (documents, chunks without their FTS rows, one ready generation of packed blocks) with a
5-document folder `small/` beside the bulk, and is measured through the worker's own code:

- exact: the worker's vector stage (its block scan with the ONNX Cast+MatMul scorer, warm
  block cache), against a bare numpy scan of the same vectors in the same run (the ratio);
- filter: `path_prefix="small"` the old way (global top 400, then filtered) and the exact way
  (helpers.semantic.allowed: only the folder's rows are scored): hits returned and time;
- hubness: the first weak query's reference sample, one pass over every vector BLOB (the old
  read) against hubness_store's row reads, same sample checked;
- memory: the worker process's RSS growth for its warm block cache, as a ratio to the float16
  size of the vectors;
- --ann: usearch HNSW (float16) recall@400 against the exact scan, build and query time (the
  candidate vector index this harness was written to judge; needs `pip install usearch`).

Prints one JSON object per size; bench/notes/h7-scale.md holds the figures and conclusions.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import semantic_worker  # noqa: E402  (the worker's own scan and scorer, in process)
from helpers.semantic import hubness, hubness_store, vector_pack  # noqa: E402
from helpers.semantic.allowed import AllowedRanges  # noqa: E402
from helpers.semantic.model import load_model_info  # noqa: E402
from helpers.store import index_db  # noqa: E402

DEPTH = 400  # helpers.semantic.candidates.SEMANTIC_DEPTH: the depth search uses
CHUNKS_PER_DOC = 100
SMALL_DOCS = 5
SEED = 7


def real_vectors(paths: list[Path]) -> np.ndarray:
    parts = []
    for path in paths:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        for vec_blob, n, dim in conn.execute(
            "SELECT b.vectors, b.count, g.dim FROM semantic_blocks b "
            "JOIN semantic_generations g ON g.id = b.generation_id WHERE g.ready = 1"
        ):
            parts.append(vector_pack.unpack_vectors(vec_blob, n, dim).astype(np.float32))
        conn.close()
    return np.concatenate(parts)


def synthesise(base: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n float16 unit vectors, each a random mix of two real ones plus a little noise."""
    out = np.empty((n, base.shape[1]), dtype=np.float16)
    for at in range(0, n, 65536):
        m = min(65536, n - at)
        a, b = base[rng.integers(0, len(base), m)], base[rng.integers(0, len(base), m)]
        t = rng.uniform(0.0, 0.5, (m, 1)).astype(np.float32)
        v = (1 - t) * a + t * b + rng.normal(0.0, 0.02, a.shape).astype(np.float32)
        out[at : at + m] = vector_pack.l2_normalise(v).astype(np.float16)
    return out


def write_index(db: Path, vectors: np.ndarray, fingerprint: str, small: np.ndarray) -> None:
    """Bulk documents of CHUNKS_PER_DOC chunks, then the small folder (one chunk each)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    conn = index_db.open_index(db)
    n, dim = len(vectors), vectors.shape[1]
    all_vectors = np.concatenate([vectors, small])
    conn.execute("BEGIN IMMEDIATE")
    docs = [(f"bulk/doc{d:06d}.md", 0) for d in range(-(-n // CHUNKS_PER_DOC))]
    docs += [(f"small/note{i}.md", 1) for i in range(len(small))]
    chunk = 0
    for number, (path, _) in enumerate(docs):
        doc = conn.execute(
            "INSERT INTO documents(path, size, mtime_ns, sha256, format, title, status, "
            "chunk_scheme, indexed_at) VALUES (?, 1, 1, 'x', 'md', ?, 'indexed', 1, 0)",
            (path, path),
        ).lastrowid
        section = conn.execute(
            "INSERT INTO sections(document_id, ordinal, text, location) VALUES (?, 0, '', '{}')",
            (doc,),
        ).lastrowid
        count = CHUNKS_PER_DOC if number < len(docs) - len(small) else 1
        count = min(count, len(all_vectors) - chunk)
        conn.executemany(
            "INSERT INTO chunks(id, document_id, section_id, ordinal, text, norm_stored, "
            "text_hash, location) VALUES (?, ?, ?, ?, ?, ?, '', '{}')",
            [
                (chunk + k + 1, doc, section, k, f"p{chunk + k}", f"p{chunk + k}")
                for k in range(count)
            ],
        )
        chunk += count
    gen = conn.execute(
        "INSERT INTO semantic_generations(fingerprint, model_name, dim, ready, vector_count, "
        "created_at, finished_at) VALUES (?, 'bench', ?, 1, ?, 0, 0)",
        (fingerprint, dim, len(all_vectors)),
    ).lastrowid
    ids = np.arange(1, len(all_vectors) + 1, dtype=np.int64)
    for block_no, at in enumerate(range(0, len(all_vectors), vector_pack.BLOCK_SIZE)):
        part = slice(at, at + vector_pack.BLOCK_SIZE)
        conn.execute(
            "INSERT INTO semantic_blocks VALUES (?, ?, ?, ?, ?, ?)",
            (
                gen,
                block_no,
                len(ids[part]),
                vector_pack.pack_ids(ids[part]),
                bytes(vector_pack.HASH_BYTES * len(ids[part])),
                vector_pack.pack_vectors(all_vectors[part]),
            ),
        )
    conn.execute("COMMIT")
    conn.close()


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def measure(
    db: Path, queries: np.ndarray, worker: semantic_worker.Worker, fingerprint: str, ann: bool
) -> dict[str, object]:
    embedder = worker.embedder(for_query=True)
    dim = embedder.info.dim
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    gen, count = conn.execute("SELECT id, vector_count FROM semantic_generations").fetchone()
    small_ids = [
        r[0]
        for r in conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.path LIKE 'small/%'"
        )
    ]
    within = AllowedRanges.from_ids(small_ids)
    scanner = worker.scanner
    before = rss_mb()

    def scan(q: np.ndarray, allowed: AllowedRanges | None = None) -> list[tuple[int, float]]:
        top = vector_pack.TopK(DEPTH)

        def visit(ids: np.ndarray, block: np.ndarray) -> None:
            rows = (ids, block) if allowed is None else allowed.restrict(ids, block)
            if rows is not None:
                top.add(rows[0], embedder.scores(rows[1], q))

        scanner.scan(str(db), gen, fingerprint, dim, visit)
        return top.result()

    scan(queries[0])  # fills the warm block cache
    cache_mb = rss_mb() - before
    exact_t, numpy_t, filtered_t, old_hits, new_hits = [], [], [], [], []
    exact_lists = []
    for q in queries:
        t0 = time.perf_counter()
        hits = scan(q)
        exact_t.append(time.perf_counter() - t0)
        exact_lists.append([cid for cid, _ in hits])
        t0 = time.perf_counter()
        vector_pack.exact_top_k(q, scanner.blocks, DEPTH)  # bare numpy, same blocks in memory
        numpy_t.append(time.perf_counter() - t0)
        old_hits.append(len(set(exact_lists[-1]) & set(small_ids)))
        t0 = time.perf_counter()
        new_hits.append(len(scan(q, within)))
        filtered_t.append(time.perf_counter() - t0)
    ref = hubness_store.GenerationRef(str(db), gen, fingerprint, count, dim)
    t0 = time.perf_counter()
    full = hubness.stride_sample(
        (
            (vector_pack.unpack_ids(i), vector_pack.unpack_vectors(v, n, dim))
            for i, v, n in conn.execute(
                "SELECT chunk_ids, vectors, count FROM semantic_blocks ORDER BY block_no"
            )
        ),
        count,
        hubness.SAMPLE_SIZE,
    )
    old_sample_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    state = hubness_store._state(conn, ref)
    new_sample_s = time.perf_counter() - t0
    conn.close()
    out: dict[str, object] = {
        "vectors": count,
        "float16_mb": round(count * dim * 2 / 2**20, 1),
        "exact_scan_ms": median_ms(exact_t),
        "numpy_scan_ms": median_ms(numpy_t),
        "filtered_small_ms": median_ms(filtered_t),
        "small_folder_chunks": len(small_ids),
        "small_hits_global_then_filter": statistics.mean(old_hits),
        "small_hits_exact_filter": statistics.mean(new_hits),
        # The bytes the warm cache holds (exact), and the process's RSS growth when it filled
        # (undercounts after earlier sizes or the synthesis freed memory the allocator reuses).
        "warm_cache_held_mb": round(
            sum(ids.nbytes + v.nbytes for ids, v in scanner.blocks) / 2**20, 1
        ),
        "warm_cache_rss_mb": round(cache_mb, 1),
        "warm_cache_to_vectors": round(cache_mb / (count * dim * 2 / 2**20), 3),
        "hubness_full_pass_s": round(old_sample_s, 3),
        "hubness_row_reads_s": round(new_sample_s, 3),
        "hubness_same_sample": bool(np.array_equal(full, state.index.sample)),
    }
    if ann:
        out.update(ann_figures(scanner.blocks, queries, exact_lists))
    return out


def ann_figures(blocks, queries: np.ndarray, exact: list[list[int]]) -> dict[str, object]:
    """usearch HNSW (float16, M=16): build time, recall@DEPTH and query time per ef."""
    from usearch.index import Index

    ids = np.concatenate([b[0] for b in blocks])
    vectors = np.concatenate([b[1] for b in blocks])
    index = Index(ndim=vectors.shape[1], metric="cos", dtype="f16", connectivity=16)
    t0 = time.perf_counter()
    index.add(ids, vectors, threads=os.cpu_count() or 1)
    figures: dict[str, object] = {"ann_build_s": round(time.perf_counter() - t0, 1)}
    figures["ann_memory_mb"] = round(index.memory_usage / 2**20, 1)
    for ef in (400, 800, 1600):
        index.expansion_search = ef
        recall, took = [], []
        for q, truth in zip(queries, exact, strict=True):
            t0 = time.perf_counter()
            found = index.search(q, DEPTH, threads=1).keys.tolist()
            took.append(time.perf_counter() - t0)
            recall.append(len(set(found) & set(truth)) / len(truth))
        figures[f"ann_ef{ef}"] = {
            "recall_at_400": round(statistics.mean(recall), 4),
            "min_recall": round(min(recall), 4),
            "ms": median_ms(took),
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-db", type=Path, action="append", required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--golden", type=Path, action="append", required=True)
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-scale"))
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--ann", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    base = real_vectors(args.source_db)
    texts = [q["query"] for g in args.golden for q in json.loads(g.read_text())["queries"]]
    texts = [texts[i] for i in rng.permutation(len(texts))[: args.queries]]
    info = load_model_info(args.model_dir, args.work / "cache")
    worker = semantic_worker.Worker(args.model_dir, 2, args.work / "cache", warm=True)
    queries = worker.embedder(for_query=True).embed(texts, "query")[0].astype(np.float32)
    for size in (int(s) for s in args.sizes.split(",")):
        db = args.work / f"scale-{size}.sqlite3"
        write_index(db, synthesise(base, size, rng), info.fingerprint, base[:SMALL_DOCS])
        worker.scanner = vector_pack.GenerationScanner(keep_in_memory=True)  # drop the last
        print(json.dumps(measure(db, queries, worker, info.fingerprint, args.ann)), flush=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
