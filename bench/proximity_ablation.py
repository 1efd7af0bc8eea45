"""Query-side lexical ablation: capture each query's semantic candidates once, replay search.

    python bench/proximity_ablation.py capture SET DATA_DIR OUT.pkl --semantic-model-dir M
    python bench/proximity_ablation.py replay OUT.pkl DATA_DIR [--mode hybrid|lexical]

`capture` runs the real `rag_service.search` (hybrid, as rag_eval.py does) and records the
semantic candidates handed to `rag_search.search`. `replay` calls `rag_search.search` itself on
the same index with those candidates: every lexical channel, the fusion, the pointer prior and
the tie-break run live, so a query-side change of the lexical side (a new channel, a bonus) is
measured exactly as rag_eval.py would measure it, without the semantic worker. Its unchanged
rows equal rag_eval.py's document-level MRR@10 / Recall@8 (checked in bench/RESULTS.md, "Term
proximity").
"""

from __future__ import annotations

import argparse
import pickle
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fusion_ablation import add_capture_parser, golden_of  # noqa: E402

import rag_search  # noqa: E402
from helpers.eval import metrics as eval_metrics  # noqa: E402

TOP_HITS = 30  # rag_eval asks for 30 hits


def capture(set_name: str, data_dir: Path, out: Path, model_dir: str) -> None:
    import rag_service

    config, golden = golden_of(set_name, data_dir, model_dir)
    seen: list[list[tuple[int, float]] | None] = []
    original = rag_search.search

    def recorder(conn, raw_query, options):  # type: ignore[no-untyped-def]
        seen.append(options.semantic)
        return original(conn, raw_query, options)

    rag_search.search = recorder
    queries = []
    for query in golden.queries:
        seen.clear()
        rag_service.search(config, query.query, top_k=TOP_HITS, mode="hybrid")
        queries.append(
            {
                "id": query.query_id,
                "query": query.query,
                "relevant": [r.path for r in query.relevant],
                "semantic": seen[0],
            }
        )
    payload = {"set": set_name, "knowledge_dir": str(config.knowledge_dir), "queries": queries}
    out.write_bytes(pickle.dumps(payload))
    print(f"{set_name}: {len(queries)} queries captured to {out}", file=sys.stderr)


def replay(data: dict, data_dir: Path, mode: str) -> tuple[float, float, list[int | None]]:
    """(MRR@10, Recall@8, per-query ranks) of rag_search.search on the captured candidates."""
    conn = sqlite3.connect(f"file:{data_dir / 'index.sqlite3'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    knowledge_dir = Path(data["knowledge_dir"])
    ranks: list[int | None] = []
    try:
        for q in data["queries"]:
            options = rag_search.SearchOptions(
                top_k=TOP_HITS,
                mode=mode,
                knowledge_dir=knowledge_dir,
                semantic=q["semantic"] if mode != "lexical" else None,
            )
            result = rag_search.search(conn, q["query"], options)
            docs = eval_metrics.distinct_documents(h.path for h in result.hits)
            ranks.append(eval_metrics.first_relevant_rank(docs, q["relevant"]))
    finally:
        conn.close()
    return eval_metrics.mrr_at(ranks), eval_metrics.recall_at(ranks, 8), ranks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_capture_parser(sub)
    rep = sub.add_parser("replay")
    rep.add_argument("pickle", type=Path)
    rep.add_argument("data_dir", type=Path)
    rep.add_argument("--mode", default="hybrid", choices=("hybrid", "lexical"))
    args = parser.parse_args(argv)
    if args.cmd == "capture":
        capture(args.set, args.data_dir, args.out, args.semantic_model_dir)
        return 0
    data = pickle.loads(args.pickle.read_bytes())
    mrr, recall, _ = replay(data, args.data_dir, args.mode)
    print(f"{data['set']} {args.mode}: MRR@10 {mrr:.4f} R@8 {recall:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
