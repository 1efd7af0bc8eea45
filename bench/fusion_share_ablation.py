"""The hybrid share's query-match term, offline: capture each query's fusion inputs once, then
score variants of the share rule on them.

    python bench/fusion_share_ablation.py capture GOLDEN DOCS DATA_DIR OUT.pkl \
        --semantic-model-dir M
    python bench/fusion_share_ablation.py table OUT1.pkl OUT2.pkl ...

`capture` runs the real `rag_service.search` (hybrid) on an index that has vectors and records,
per query, the two sides' 0-1 section scores as `helpers.ranking.fusion.mix` receives them and,
for each of the lexical side's first five sections, which content words it holds, with their
rarity weights. `table` re-mixes them under each variant and prints document-level MRR@10 (the
ranking after the mix; the pointer prior and the tie-break that follow it are left out, so the
`shipped` row is checked against a real rag_eval.py run), plus a leave-one-set-out choice of
the exponent of the match term.
"""

from __future__ import annotations

import argparse
import pickle
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_search  # noqa: E402
from helpers.eval import metrics as eval_metrics  # noqa: E402
from helpers.ranking import fusion  # noqa: E402
from helpers.ranking.constants import HYBRID_SHARE_BOUNDS  # noqa: E402

CAPTURED_SECTIONS = 5
TOP_HITS = 30  # rag_eval asks for 30 hits (10 documents x 3)


def capture(golden: Path, docs: Path, data_dir: Path, out: Path, model_dir: str) -> None:
    import rag_eval
    import rag_service

    args = rag_eval._parser().parse_args(
        [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(data_dir)]
        + ["--semantic-model-dir", model_dir, "--mode", "hybrid", "--semantic", "on"]
    )
    config = rag_eval.config_from_args(args)
    gold = rag_eval.load_golden(args.golden, config.knowledge_dir)
    seen: dict[str, object] = {}
    real_match, real_mix = fusion.query_match, fusion.mix

    def match(ctx, sections):  # type: ignore[no-untyped-def]
        per = [real_match(ctx, [sec]) for sec in sections[:CAPTURED_SECTIONS]]
        weights = per[0].weights if per else ()
        seen["match"] = (weights, [m.found for m in per])
        return real_match(ctx, sections)

    def mix(lexical, semantic, matched=1.0):  # type: ignore[no-untyped-def]
        seen["sides"] = (dict(lexical), dict(semantic))
        return real_mix(lexical, semantic, matched)

    fusion.query_match, fusion.mix = match, mix
    real_distinct, real_corrected = rag_search.distinct_candidates, rag_search._hubness_corrected

    def corrected(conn, hits, depth):  # type: ignore[no-untyped-def]
        return real_corrected(conn, real_distinct(conn, hits, depth))

    queries = []
    for query in gold.queries:
        seen.clear()
        result = rag_service.search(config, query.query, top_k=TOP_HITS, mode="hybrid")
        record = {
            "id": query.query_id,
            "relevant": [r.path for r in query.relevant],
            "sides": seen.get("sides"),
            "match": seen.get("match", ((), [])),
            "real": eval_metrics.distinct_documents(h.path for h in result.hits),
        }
        # the same query with the semantic side corrected for hubness whatever the words found
        rag_search.distinct_candidates, rag_search._hubness_corrected = corrected, _same
        try:
            seen.clear()
            rag_service.search(config, query.query, top_k=TOP_HITS, mode="hybrid")
            record["sides_hubness"] = seen.get("sides")
        finally:
            rag_search.distinct_candidates = real_distinct
            rag_search._hubness_corrected = real_corrected
        queries.append(record)
    conn = sqlite3.connect(data_dir / "index.sqlite3")
    section_doc = dict(
        conn.execute("SELECT s.id, d.path FROM sections s JOIN documents d ON d.id=s.document_id")
    )
    payload = {"set": golden.parent.name, "queries": queries, "section_doc": section_doc}
    out.write_bytes(pickle.dumps(payload))
    print(f"{golden.parent.name}: {len(queries)} queries captured to {out}", file=sys.stderr)


def _same(conn, hits):  # type: ignore[no-untyped-def]
    return hits


def matched(q: dict, sections: int, weighted: bool) -> float:
    weights, per = q["match"]
    if not weights:
        return 1.0
    found = [any(flags[i] for flags in per[:sections]) for i in range(len(weights))]
    ws = weights if weighted else [1.0] * len(weights)
    total = sum(ws)
    return sum(w for w, hit in zip(ws, found, strict=True) if hit) / total if total else 1.0


def share_of(q: dict, power: float, sections: int, weighted: bool) -> float:
    lexical, semantic = q["sides"]
    base = fusion.hybrid_share(list(lexical.values()), list(semantic.values()), 1.0)
    low = HYBRID_SHARE_BOUNDS[0]
    m = matched(q, sections, weighted) if power > 0 else 1.0
    return low + (base - low) * m**power


def ranks(data: dict, power: float, sections: int, weighted: bool) -> list[int | None]:
    out = []
    for q in data["queries"]:
        if q["sides"] is None:  # one side only: the mix never ran
            out.append(eval_metrics.first_relevant_rank(q["real"], q["relevant"]))
            continue
        lexical, semantic = q["sides"]
        share = share_of(q, power, sections, weighted)
        combined = {s: share * v for s, v in lexical.items()}
        for s, v in semantic.items():
            combined[s] = combined.get(s, 0.0) + (1 - share) * v
        order = sorted(combined.items(), key=lambda x: (-round(x[1], 12), x[0]))
        docs = eval_metrics.distinct_documents(data["section_doc"][s] for s, _ in order[:TOP_HITS])
        out.append(eval_metrics.first_relevant_rank(docs, q["relevant"]))
    return out


POWERS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
SECTIONS = (1, 3, 5)


def table(paths: list[Path]) -> None:
    sets = [pickle.loads(p.read_bytes()) for p in paths]
    real = [
        eval_metrics.mrr_at(
            [eval_metrics.first_relevant_rank(q["real"], q["relevant"]) for q in d["queries"]]
        )
        for d in sets
    ]
    print("| variant | " + " | ".join(d["set"] for d in sets) + " | mean |")
    print("|---|" + "---|" * (len(sets) + 1))
    print("| real run (this branch) | " + " | ".join(f"{m:.4f}" for m in real) + " | |")
    grid: dict[tuple, list[float]] = {}
    for weighted in (True, False):
        for sections in SECTIONS:
            for power in POWERS:
                if power == 0 and (sections != 1 or not weighted):
                    continue
                key = (power, sections, weighted)
                grid[key] = [eval_metrics.mrr_at(ranks(d, *key)) for d in sets]
                label = f"power {power}, top {sections}, {'idf' if weighted else 'plain'}"
                if power == 0:
                    label = "no match term (main)"
                cells = " | ".join(f"{m:.4f}" for m in grid[key])
                mean = sum(grid[key]) / len(sets)
                print(f"| {label} | {cells} | {mean:.4f} |", flush=True)
    print("\nleave-one-set-out (pick by mean MRR gain over main on the other sets):")
    main = grid[(0.0, 1, True)]
    for i, d in enumerate(sets):

        def gain(key: tuple, i: int = i) -> float:
            return sum(grid[key][j] - main[j] for j in range(len(sets)) if j != i)

        best = max(grid, key=lambda k: (gain(k), -k[0]))
        held = f"held-out {grid[best][i]:.4f} (main {main[i]:.4f})"
        print(f"  held out {d['set']}: chose {best}, {held}")


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
