"""Every eval set through the semantic first pass against the exact scan, same index, same run.

    python bench/bench_first_pass_eval.py --set NAME=DATA_DIR --eval-dir ../shared/eval \
        --model-dir ../shared/models/multilingual-e5-small-int8 [--modes semantic,hybrid]

Each DATA_DIR is an index already synced with semantic on (rag_eval.py --sync --semantic on).
For each set and mode the real service search runs twice: the warm worker's exact scan, then a
warm worker whose first pass is forced on at any size (helpers.semantic.candidates.
FIRST_PASS_MIN_VECTORS = 1). Prints one JSON object per set and mode: MRR@10 and Recall@8 of
both and their differences (target: within +-0.002). --store-codes first stores each index's
first-pass codes (helpers/semantic/code_store.py, as a sync does for a large generation), so
the forced worker loads them instead of encoding them; its log line says which it did.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rag_eval  # noqa: E402
from helpers.semantic import candidates  # noqa: E402


def evaluate(argv: list[str], min_vectors: int | None) -> dict[str, float]:
    candidates.FIRST_PASS_MIN_VECTORS = min_vectors
    with candidates._warm_lock:  # a fresh warm worker with this threshold
        for worker in candidates._warm_workers.values():
            worker.close()
        candidates._warm_workers.clear()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = rag_eval.main([*argv, "--json"])
    if code != rag_eval.EXIT_OK:
        raise SystemExit(f"rag_eval failed ({code}): {' '.join(argv)}")
    report = json.loads(out.getvalue())
    return {"mrr@10": report["mrr@10"], "recall@8": report["recall@8"]}


def store_codes(data_dir: Path, model_dir: Path) -> str:
    """The codes of the index's ready generation, stored as an unchanged sync stores them."""
    from helpers.semantic import code_store
    from helpers.semantic.generations import build_generation, latest_ready_generation
    from helpers.store import index_db

    conn = index_db.open_index(data_dir / "index.sqlite3")
    try:
        result = build_generation(
            conn,
            model_dir,
            cache_dir=data_dir / "cache",
            log_path=data_dir / "logs" / "codes.log",
            codes_min_vectors=1,
        )
        generation = latest_ready_generation(conn)
        assert generation is not None
        ok = code_store.complete(conn, generation.id, generation.dim)
    finally:
        conn.close()
    return f"{result.status}, codes {'complete' if ok else 'MISSING'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", required=True, help="NAME=DATA_DIR")
    parser.add_argument("--eval-dir", type=Path, required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--modes", default="semantic,hybrid")
    parser.add_argument("--store-codes", action="store_true")
    args = parser.parse_args()
    for spec in args.set:
        name, data_dir = spec.split("=", 1)
        if args.store_codes:
            status = store_codes(Path(data_dir), args.model_dir)
            print(json.dumps({"set": name, "codes": status}), flush=True)
        for mode in args.modes.split(","):
            argv = [
                str(args.eval_dir / name / "golden.json"),
                "--knowledge-dir",
                str(args.eval_dir / name / "docs"),
                "--data-dir",
                data_dir,
                "--mode",
                mode,
                "--semantic",
                "on",
                "--semantic-model-dir",
                str(args.model_dir),
            ]
            exact = evaluate(argv, None)
            forced = evaluate(argv, 1)
            delta = {k: round(forced[k] - exact[k], 4) for k in exact}
            row = {"set": name, "mode": mode, "exact": exact, "first_pass": forced, "delta": delta}
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
