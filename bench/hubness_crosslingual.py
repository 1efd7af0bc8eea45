"""The hubness correction of a query that only the semantic side can answer, offline, on
cross-lingual and same-language sets: capture each query's semantic candidates with their
centred hubness once, then rank them as hybrid search does when no word of the query is in the
folder, under each weight and cosine gate of the correction.

    python bench/hubness_crosslingual.py capture GOLDEN DOCS DATA_DIR OUT.pkl \\
        --semantic-model-dir M
    python bench/hubness_crosslingual.py flags GOLDEN DOCS DATA_DIR OUT.pkl
    python bench/hubness_crosslingual.py table OUT1.pkl OUT2.pkl ...

The ranking replayed is rag_search.hybrid_fuse with an empty lexical side (the semantic side's
section scores, helpers.ranking.fusion.semantic_sections, hubs lowered), then distinct documents
(MRR@10 as rag_eval.py counts it). Weight 0 is that path without the correction, i.e. what
semantic evidence alone gives. `flags` adds to a capture which queries the lexical side finds
nothing for: hybrid search applies the correction to those only, so `table` reports each set
twice, over every query (the correction as a re-ranker of semantic evidence) and as hybrid
search sees it (the correction on the queries without lexical hits, the captured hybrid rank
elsewhere is not replayed: those rows count the no-hit queries only).
"""

from __future__ import annotations

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
    from fusion_share_ablation import eval_inputs

    import rag_service
    from helpers.semantic import hubness, hubness_store

    args, config, gold = eval_inputs(golden, docs, data_dir, model_dir, "semantic")
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


def flags(golden: Path, docs: Path, data_dir: Path, out: Path) -> None:
    """Mark each captured query whose lexical search returns nothing."""
    import rag_eval
    import rag_service

    args = rag_eval._parser().parse_args(
        [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(data_dir)]
        + ["--mode", "lexical"]
    )
    config = rag_eval.config_from_args(args)
    gold = rag_eval.load_golden(args.golden, config.knowledge_dir)
    data = pickle.loads(out.read_bytes())
    for record, query in zip(data["queries"], gold.queries, strict=True):
        hits = rag_service.search(config, query.query, top_k=1, mode="lexical").hits
        record["lexical_hits"] = bool(hits)
    out.write_bytes(pickle.dumps(data))


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


ALPHAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
GATES = (
    (0.84, 0.87),
    (0.82, 0.87),
    (0.84, 0.90),
    (0.80, 0.90),
    (0.78, 0.84),
    (0.80, 0.84),
    (0.82, 0.84),
)
SHIPPED = (0.5, 0.84, 0.87)  # helpers.semantic.hubness: WEIGHT, WEAK_COSINE, STRONG_COSINE


def _mrr_sum(d: dict, variant: tuple[float, float, float], only_no_hits: bool) -> float:
    """Sum of reciprocal ranks (top 10) over the set's queries (or its no-lexical-hit ones)."""
    total = 0.0
    for q in d["queries"]:
        if only_no_hits and q.get("lexical_hits", False):
            continue
        r = rank(d, q, *variant)
        total += 1.0 / r if r is not None and r <= 10 else 0.0
    return total


def table(paths: list[Path]) -> None:
    sets = [pickle.loads(p.read_bytes()) for p in paths]
    print("| set | queries | without lexical hits | median top cosine |")
    print("|---|---|---|---|")
    for d in sets:
        tops = [max(c for _, c, _ in q["hits"]) for q in d["queries"] if q["hits"]]
        n = len(d["queries"])
        none = sum(1 for q in d["queries"] if not q.get("lexical_hits", True))
        flagged = "lexical_hits" in d["queries"][0] if d["queries"] else False
        print(f"| {d['set']} | {n} | {none if flagged else '?'} | {statistics.median(tops):.3f} |")
    variants = [(a, w, s) for w, s in GATES for a in ALPHAS if a > 0] + [(0.0, 0.84, 0.87)]
    for only in (False, True):
        title = "queries without lexical hits: MRR gain" if only else "every query: MRR@10"
        print(f"\n{title} (weight, gate) | " + " | ".join(d["set"] for d in sets))
        print("|---|" + "---|" * len(sets))
        grid = {}
        for v in variants:
            sums = [_mrr_sum(d, v, only) / len(d["queries"]) for d in sets]
            grid[v] = sums
        base = grid[(0.0, 0.84, 0.87)]
        for v, sums in grid.items():
            cells = [s - b for s, b in zip(sums, base, strict=True)] if only else sums
            row = " | ".join(f"{c:+.4f}" if only else f"{c:.4f}" for c in cells)
            mark = " (shipped)" if v == SHIPPED else ""
            print(f"| {v[0]}, {v[1]}-{v[2]}{mark} | {row} |", flush=True)
        if not only:
            continue
        print("\nleave-one-set-out, hybrid view (gain = the set's MRR@10 change; worst other set):")
        for i, d in enumerate(sets):

            def worst(v, i=i, grid=grid, base=base):  # type: ignore[no-untyped-def]
                return min(grid[v][j] - base[j] for j in range(len(sets)) if j != i)

            def mean(v, i=i, grid=grid, base=base):  # type: ignore[no-untyped-def]
                return sum(grid[v][j] - base[j] for j in range(len(sets)) if j != i)

            def safe(v, worst=worst, mean=mean):  # type: ignore[no-untyped-def]
                return mean(v) if worst(v) >= -1e-9 else -1.0  # never below main elsewhere

            for name, key in (("maximin", worst), ("mean", mean), ("mean, none below", safe)):
                best = max(grid, key=lambda v: (round(key(v), 9), -v[0]))
                held = grid[best][i] - base[i]
                shipped = grid[SHIPPED][i] - base[i]
                print(
                    f"  {d['set']}: {name} picks {best}, held-out gain {held:+.4f} "
                    f"(shipped {shipped:+.4f})"
                )


def main(argv: list[str] | None = None) -> int:
    from fusion_share_ablation import replay_parser

    args = replay_parser(__doc__, ("capture",), ("flags",)).parse_args(argv)
    if args.cmd == "capture":
        capture(args.golden, args.docs, args.data_dir, args.out, args.semantic_model_dir)
    elif args.cmd == "flags":
        flags(args.golden, args.docs, args.data_dir, args.out)
    else:
        table(args.pickles)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
