"""table.py RES_DIR SET...: main's and the branch's lexical MRR@10 / R@8 (rag_eval.py --json
on the same fresh index) beside textbook BM25 (bench/textbook_bm25.py --json)."""

# ruff: noqa: SIM115
import json
import sys
from pathlib import Path

res = Path(sys.argv[1])
print("| set | textbook BM25 | main | branch | Δ | branch − BM25 |")
print("|---|---|---|---|---|---|")
for s in sys.argv[2:]:
    main = json.load(open(res / f"main-{s}.json"))
    branch = json.load(open(res / f"branch-{s}.json"))
    bm = res / f"bm25-{s}.json"
    bm25 = json.load(open(bm))["mrr@10"] if bm.exists() else None
    cells = [s, f"{bm25:.4f}" if bm25 is not None else ""]
    for d in (main, branch):
        cells.append(f"{d['mrr@10']:.4f} / {d['recall@8']:.3f}")
    cells.append(f"{branch['mrr@10'] - main['mrr@10']:+.4f}")
    cells.append(f"{branch['mrr@10'] - bm25:+.4f}" if bm25 is not None else "")
    print("| " + " | ".join(cells) + " |")
    if "unit_level" in main:
        u0, u1 = main["unit_level"], branch["unit_level"]
        print(
            f"| {s} page level | | {u0['mrr@10']:.4f} / R@1 {u0['recall@1']:.4f} | "
            f"{u1['mrr@10']:.4f} / R@1 {u1['recall@1']:.4f} | "
            f"{u1['mrr@10'] - u0['mrr@10']:+.4f} | |"
        )
