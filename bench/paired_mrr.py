"""Paired comparison of two runs on one set: the MRR@10 difference with a bootstrap interval.

    python bench/paired_mrr.py A.json B.json [--a-key fused_with_ours] [--b-key ...]

A run is a `rag_eval.py --details --json` report (per-query `rank` in `details`) or a
bench/cjk_tokenizer_bm25.py report (`ranks`; `--a-key`/`--b-key` pick `ours` or
`fused_with_ours` inside it). Prints MRR@10 of both, B - A, its 95 % paired bootstrap interval
(BOOTSTRAP resamples of the queries, fixed seed) and how many queries each side wins.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

BOOTSTRAP = 10_000
SEED = 29  # fixed: the same interval on every run
MRR_DEPTH = 10


def reciprocal_ranks(report: dict, key: str | None) -> dict[str, float]:
    part = report[key] if key else report
    details = part.get("details")
    ranks = part["ranks"] if details is None else {d["id"]: d["rank"] for d in details}
    return {qid: (1.0 / r if r is not None and r <= MRR_DEPTH else 0.0) for qid, r in ranks.items()}


def compare(a: dict[str, float], b: dict[str, float]) -> dict:
    if a.keys() != b.keys():
        raise SystemExit("the two runs are not over the same queries")
    ids = sorted(a)
    diffs = [b[q] - a[q] for q in ids]
    rng = random.Random(SEED)
    n = len(diffs)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(BOOTSTRAP))
    return {
        "queries": n,
        "mrr_a": round(sum(a.values()) / n, 4),
        "mrr_b": round(sum(b.values()) / n, 4),
        "b_minus_a": round(sum(diffs) / n, 4),
        "ci95": [round(means[int(0.025 * BOOTSTRAP)], 4), round(means[int(0.975 * BOOTSTRAP)], 4)],
        "b_better": sum(1 for d in diffs if d > 0),
        "a_better": sum(1 for d in diffs if d < 0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--a-key")
    parser.add_argument("--b-key")
    args = parser.parse_args(argv)
    a = reciprocal_ranks(json.loads(args.a.read_text(encoding="utf-8")), args.a_key)
    b = reciprocal_ranks(json.loads(args.b.read_text(encoding="utf-8")), args.b_key)
    print(json.dumps(compare(a, b)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
