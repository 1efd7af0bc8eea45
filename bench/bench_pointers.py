"""Cost of the pointer prior (helpers.lexical.pointers) per search, as a ratio to the same search
without it, alternating in one run (bench/RESULTS.md, "Pointer spans").

    python bench/bench_pointers.py --data-dir DIR --knowledge-dir DOCS --golden GOLDEN.json
        [--mode lexical] [--top-k 30] [--rounds 3]

DIR is a synced data dir. Lexical mode by default: no semantic worker in the timing, so the
ratio is the prior against the cheapest search there is (the worst case for the ratio).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_DIR))

import rag_search  # noqa: E402
import rag_service  # noqa: E402
from helpers.lexical import pointers  # noqa: E402
from rag_config import add_config_arguments, config_from_args  # noqa: E402

INSIDE: list[float] = []  # ms inside the prior, per call (the direct measure: load-proof)


def _inside_prior(*args, **kwargs):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    try:
        return pointers.apply_pointer_prior(*args, **kwargs)
    finally:
        INSIDE.append((time.perf_counter() - started) * 1000)


def _timed(config, queries: list[str], mode: str, top_k: int) -> float:
    started = time.perf_counter()
    for query in queries:
        rag_service.search(config, query, top_k=top_k, mode=mode)
    return (time.perf_counter() - started) * 1000 / len(queries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--golden", type=Path, required=True)
    parser.add_argument("--mode", default="lexical")
    parser.add_argument("--top-k", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    add_config_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    golden = json.loads(args.golden.read_text(encoding="utf-8"))
    queries = [item["query"] for item in golden["queries"]]
    strength = pointers.POINTER_PRIOR
    rag_search.apply_pointer_prior = _inside_prior
    _timed(config, queries[:20], args.mode, args.top_k)  # warm the page cache
    with_prior, without = [], []
    for _ in range(args.rounds):
        pointers.POINTER_PRIOR = 0.0  # returns before reading any section
        without.append(_timed(config, queries, args.mode, args.top_k))
        pointers.POINTER_PRIOR = strength
        INSIDE.clear()
        with_prior.append(_timed(config, queries, args.mode, args.top_k))
        inside = sorted(INSIDE)
    report = {
        "queries": len(queries),
        "mode": args.mode,
        "top_k": args.top_k,
        "ms_per_search_without": round(statistics.median(without), 2),
        "ms_per_search_with": round(statistics.median(with_prior), 2),
        "ratio": round(statistics.median(with_prior) / statistics.median(without), 3),
        "ms_inside_prior_p50": round(inside[len(inside) // 2], 3),
        "ms_inside_prior_p95": round(inside[int(0.95 * (len(inside) - 1))], 3),
        "share_inside_prior": round(sum(inside) / len(inside) / statistics.median(with_prior), 3),
        "rounds": [[round(a, 2), round(b, 2)] for a, b in zip(without, with_prior, strict=True)],
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
