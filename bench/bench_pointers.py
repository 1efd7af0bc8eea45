"""Cost of the pointer prior (helpers.lexical.pointers) per search, as a ratio to the same search
without it, alternating in one run (bench/RESULTS.md, "Pointer spans").

    python bench/bench_pointers.py --data-dir DIR --knowledge-dir DOCS --golden GOLDEN.json
        [--mode lexical] [--top-k 30] [--rounds 3]

DIR is a synced data dir. Lexical mode by default: no semantic worker in the timing, so the
ratio is the prior against the cheapest search there is (the worst case for the ratio).

    python bench/bench_pointers.py --hostile [--files 400] [--rounds 3]

builds a folder of hostile sections (the text the span regex is slowest on, with the query's
words in each, so every one is a candidate), syncs it lexically and times one search with
the span cache cold, at top_k 8 and 50: without the prior (the bare search), with
POINTER_SCAN_BUDGET, and unbounded (bench/RESULTS.md, "Pointer-span budget (wave 7)").
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
from helpers.config import add_config_arguments, config_from_args  # noqa: E402
from helpers.lexical import pointers  # noqa: E402

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


HOSTILE_QUERY = "nightly backup copies"
# One 4 KB section per pattern: prose, then runs that start a title scan at every character
# or two (per pattern, ms per 4 KB of pointer_spans, best of 5).
PATTERNS = {
    "prose": "The pool directory holds the packages, see the mirror list for more. " * 57,
    "1 [": "1 [" * 1333,
    "1, “": "1, “" * 1000,
    "[": "[" * 4000,
    "1, « ": "1, « " * 800,
    '1, "': '1, "' * 1000,
    "...": "." * 4000,
}


def _regex_costs() -> dict[str, float]:
    from helpers.text.pointers import pointer_spans

    costs = {}
    for name, text in PATTERNS.items():
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            pointer_spans(text[:4000])
            best = min(best, time.perf_counter() - started)
        costs[name] = round(best * 1000, 3)
    return costs


def _hostile(files: int, top_k: int, rounds: int) -> dict[str, object]:
    import tempfile

    from helpers.config import Config

    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for n in range(files):
            text = f"Retention note {n} for nightly backup copies. " + "1 [" * 1280
            (docs / f"note{n:04d}.md").write_text(text + "\n", encoding="utf-8")
        data = Path(tmp) / "state"
        config = Config(
            knowledge_dir=docs.resolve(),
            data_dir=data.resolve(),
            db_path=(data / "index.sqlite3").resolve(),
            semantic=False,
        )
        view = rag_service.wait_for_job(
            config, rag_service.start_sync(config).job_id, timeout_s=600
        )
        assert view.state == "succeeded", view.message
        budget, strength = pointers.POINTER_SCAN_BUDGET, pointers.POINTER_PRIOR
        variants = {
            "bare": (budget, 0.0),
            "budget": (budget, strength),
            "unbounded": (10**12, strength),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        rag_service.search(config, HOSTILE_QUERY, top_k=top_k, mode="lexical")  # page cache
        for _ in range(rounds):
            for name, (scan_budget, prior) in variants.items():
                pointers.POINTER_SCAN_BUDGET, pointers.POINTER_PRIOR = scan_budget, prior
                pointers._pointers_of.cache_clear()  # cold: a folder of more than CACHE_TEXTS
                started = time.perf_counter()
                rag_service.search(config, HOSTILE_QUERY, top_k=top_k, mode="lexical")
                times[name].append((time.perf_counter() - started) * 1000)
        pointers.POINTER_SCAN_BUDGET, pointers.POINTER_PRIOR = budget, strength
    ms = {name: round(statistics.median(t), 1) for name, t in times.items()}
    return {
        "files": files,
        "top_k": top_k,
        "ms_per_search": ms,
        "ratio_to_bare": {n: round(v / ms["bare"], 2) for n, v in ms.items()},
        "regex_ms_per_4kb": _regex_costs(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hostile", action="store_true", help="time a hostile generated folder")
    parser.add_argument("--files", type=int, default=400, help="--hostile: sections")
    parser.add_argument("--golden", type=Path)
    parser.add_argument("--mode", default="lexical")
    parser.add_argument("--top-k", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    add_config_arguments(parser)
    args = parser.parse_args()
    if args.hostile:
        for top_k in (8, rag_service.TOP_K_MAX):  # the default and the largest
            print(json.dumps(_hostile(args.files, top_k, args.rounds)))
        return 0
    if args.golden is None:
        parser.error("--golden is required (or --hostile)")
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
