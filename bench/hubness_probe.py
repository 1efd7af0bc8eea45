"""Offline probe of hubness corrections on a synced index (semantic side, document level).

Loads the newest ready generation's vectors, embeds the golden queries once with the real
model (as `query` and as `passage`, the e5 prefixes), and ranks documents by their best
chunk under cos - alpha x (r_d - mean r), r_d = helpers.semantic.hubness.neighbour_means
against a stride sample. Prints semantic MRR@10 per (k, alpha, prefix). A screen only:
the kept numbers come from rag_eval.py.

    python bench/hubness_probe.py SET_DIR DATA_DIR --semantic-model-dir M [--ks 5,10,0]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.semantic import hubness, vector_pack  # noqa: E402
from helpers.semantic.client import SemanticWorker  # noqa: E402


def load(db: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    gen, dim = conn.execute(
        "SELECT id, dim FROM semantic_generations WHERE ready = 1 ORDER BY id DESC LIMIT 1"
    ).fetchone()
    ids, vecs = [], []
    for ids_blob, vec_blob, n in conn.execute(
        "SELECT chunk_ids, vectors, count FROM semantic_blocks WHERE generation_id = ? "
        "ORDER BY block_no",
        (gen,),
    ):
        ids.append(vector_pack.unpack_ids(ids_blob))
        vecs.append(vector_pack.unpack_vectors(vec_blob, n, dim).astype(np.float32))
    all_ids = np.concatenate(ids)
    paths = dict(
        conn.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.document_id")
    )
    conn.close()
    return all_ids, np.concatenate(vecs), [paths.get(int(i), "") for i in all_ids]


def mrr(scores: np.ndarray, paths: list[str], relevant: set[str], depth: int | None) -> float:
    order = np.argsort(-scores, kind="stable")
    if depth:
        order = order[:depth]
    seen: list[str] = []
    for i in order:
        p = paths[i]
        if p not in seen:
            seen.append(p)
            if p in relevant:
                return 1.0 / len(seen) if len(seen) <= 10 else 0.0
        if len(seen) >= 10:
            break
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("set_dir", type=Path)
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--semantic-model-dir", type=Path, required=True)
    ap.add_argument("--ks", default="5,10,20,0", help="neighbours; 0 = the whole sample")
    ap.add_argument("--alphas", default="0,0.25,0.5,0.75,1.0")
    ap.add_argument("--sample", type=int, default=4096)
    ap.add_argument("--kinds", default="query", help="query,passage: the e5 prefix of the query")
    ap.add_argument("--rerank-depth", type=int, default=100, help="raw top-N re-ranked")
    args = ap.parse_args()
    golden = json.loads((args.set_dir / "golden.json").read_text())
    ids, vecs, paths = load(args.data_dir / "index.sqlite3")
    queries = [q["query"] for q in golden["queries"]]
    rel = [set(q["relevant"]) for q in golden["queries"]]
    log = args.data_dir / "probe-worker.log"
    with SemanticWorker(args.semantic_model_dir, log_path=log) as w:
        qv = {
            kind: w.embed(queries, kind).vectors.astype(np.float32)
            for kind in args.kinds.split(",")
        }
    blocks = [(ids, vecs)]
    sample = hubness.stride_sample(blocks, len(vecs), args.sample)
    out = {"set": golden["name"], "chunks": len(vecs), "sample": len(sample)}
    for k in [int(x) for x in args.ks.split(",")]:
        t0 = time.perf_counter()
        r = hubness.neighbour_means(vecs, sample, k or len(sample))
        ms = (time.perf_counter() - t0) * 1000
        r = r - r.mean()
        for kind, q in qv.items():
            cos = q @ vecs.T
            for a in [float(x) for x in args.alphas.split(",")]:
                vals = []
                for qi in range(len(queries)):
                    s = cos[qi].copy()
                    if args.rerank_depth:
                        keep = np.argpartition(-s, min(args.rerank_depth, len(s) - 1))
                        mask = np.full(len(s), -np.inf)
                        mask[keep[: args.rerank_depth]] = 0
                        s = s - a * r + mask
                    else:
                        s = s - a * r
                    vals.append(mrr(s, paths, rel[qi], None))
                print(
                    f"{golden['name']:16} k={k:3} {kind:7} a={a:4.2f} "
                    f"MRR@10 {np.mean(vals):.4f}  (r: {ms:.0f} ms, sd {r.std():.4f})"
                )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
