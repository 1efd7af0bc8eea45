"""The hubness correction of a query that only the semantic side can answer, offline, on
cross-lingual and same-language sets: capture each query's semantic candidates with their
centred hubness once, then rank them as hybrid search does when no word of the query is in the
folder, under each weight and cosine gate of the correction.

    python bench/hubness_crosslingual.py capture GOLDEN DOCS DATA_DIR OUT.pkl \\
        --semantic-model-dir M
    python bench/hubness_crosslingual.py table OUT1.pkl OUT2.pkl ...

The ranking replayed is rag_search.hybrid_fuse with an empty lexical side (the semantic side's
section scores, helpers.ranking.fusion.semantic_sections, hubs lowered), then distinct documents
(MRR@10 as rag_eval.py counts it). Weight 0 is that path without the correction, i.e. what
semantic evidence alone gives.
"""

from __future__ import annotations

import argparse
import pickle
import sqlite3
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_search  # noqa: E402
from helpers.eval import metrics as eval_metrics  # noqa: E402
from helpers.ranking import fusion  # noqa: E402

TOP_HITS = 30


def capture(golden: Path, docs: Path, data_dir: Path, out: Path, model_dir: str) -> None:
    import rag_eval
    import rag_service
    from helpers.semantic import hubness, hubness_store

    args = rag_eval._parser().parse_args(
        [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(data_dir)]
        + ["--semantic-model-dir", model_dir, "--mode", "semantic", "--semantic", "on"]
    )
    config = rag_eval.config_from_args(args)
    gold = rag_eval.load_golden(args.golden, config.knowledge_dir)
    seen: dict[str, list] = {}
    real_distinct = rag_search.distinct_candidates

    def distinct(conn, hits, depth):  # type: ignore[no-untyped-def]
        found = real_distinct(conn, hits, depth)
        seen["hits"] = found
        return found

    rag_search.distinct_candidates = distinct
    conn = sqlite3.connect(data_dir / "index.sqlite3")
    row = conn.execute(
        "SELECT id, fingerprint, vector_count, dim FROM semantic_generations WHERE ready = 1 "
        "ORDER BY id DESC LIMIT 1"
    ).fetchone()
    db = str((data_dir / "index.sqlite3").resolve())
    ref = hubness_store.GenerationRef(db, int(row[0]), str(row[1]), int(row[2]), int(row[3]))
    hubness.weight_for = lambda top, weight=None: 1.0  # r read back as cosine - corrected
    queries = []
    for query in gold.queries:
        seen.clear()
        rag_service.search(config, query.query, top_k=TOP_HITS, mode="semantic")
        hits = seen.get("hits", [])
        corrected = dict(hubness_store.corrected(conn, ref, hits))
        queries.append(
            {
                "relevant": [r.path for r in query.relevant],
                "hits": [(cid, cos, round(cos - corrected[cid], 6)) for cid, cos in hits],
            }
        )
    payload = {
        "set": golden.parent.name,
        "queries": queries,
        "chunk_section": dict(conn.execute("SELECT id, section_id FROM chunks")),
        "section_doc": dict(
            conn.execute(
                "SELECT s.id, d.path FROM sections s JOIN documents d ON d.id = s.document_id"
            )
        ),
        "hub": dict(conn.execute("SELECT id, hub FROM sections WHERE hub > 0")),
        "size": dict(conn.execute("SELECT section_id, COUNT(*) FROM chunks GROUP BY section_id")),
    }
    out.write_bytes(pickle.dumps(payload))
    print(f"{golden.parent.name}: {len(queries)} queries captured to {out}", file=sys.stderr)


def weight(top: float, alpha: float, weak: float, strong: float) -> float:
    return alpha * min(1.0, max(0.0, (strong - top) / (strong - weak)))


def rank(data: dict, q: dict, alpha: float, weak: float, strong: float) -> int | None:
    hits = q["hits"]
    if not hits:
        return None
    w = weight(max(c for _, c, _ in hits), alpha, weak, strong)
    scored = sorted(((cid, round(c - w * r, 6)) for cid, c, r in hits), key=lambda h: -h[1])
    cosines: dict[int, list[float]] = {}
    for cid, cos in scored:
        sec = data["chunk_section"].get(cid)
        if sec is not None:
            cosines.setdefault(sec, []).append(cos)
    hubs = {sec: data["hub"].get(sec, 0.0) for sec in cosines}
    sizes = {sec: data["size"].get(sec, 1) for sec, v in cosines.items() if len(v) > 1}
    side = fusion.lowered_side(fusion.semantic_sections(cosines, hubs, sizes), hubs)
    order = sorted(side.items(), key=lambda x: (-round(x[1], 12), x[0]))
    docs = eval_metrics.distinct_documents(data["section_doc"][s] for s, _ in order[:TOP_HITS])
    return eval_metrics.first_relevant_rank(docs, q["relevant"])


ALPHAS = (0.0, 0.1, 0.25, 0.5)
GATES = ((0.84, 0.87), (0.80, 0.84), (0.78, 0.82), (0.84, 0.90))


def table(paths: list[Path]) -> None:
    sets = [pickle.loads(p.read_bytes()) for p in paths]
    print("| set | median top cosine | " + " | ".join(str(a) for a in ALPHAS) + " |")
    for d in sets:
        tops = [max(c for _, c, _ in q["hits"]) for q in d["queries"] if q["hits"]]
        print(f"| {d['set']} | {statistics.median(tops):.3f} |")
    print("\n| weight, gate | " + " | ".join(d["set"] for d in sets) + " |")
    print("|---|" + "---|" * len(sets))
    for weak, strong in GATES:
        for alpha in ALPHAS:
            cells = [
                eval_metrics.mrr_at([rank(d, q, alpha, weak, strong) for q in d["queries"]])
                for d in sets
            ]
            row = " | ".join(f"{m:.4f}" for m in cells)
            print(f"| {alpha}, {weak}-{strong} | {row} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    cap = sub.add_parser("capture")
    for name in ("golden", "docs", "data_dir", "out"):
        cap.add_argument(name, type=Path)
    cap.add_argument("--semantic-model-dir", required=True)
    tab = sub.add_parser("table")
    tab.add_argument("pickles", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.cmd == "capture":
        capture(args.golden, args.docs, args.data_dir, args.out, args.semantic_model_dir)
    else:
        table(args.pickles)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
