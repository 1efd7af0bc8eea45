"""Retrieval regression gate: evaluation of small golden sets against recorded floors.

    python bench/run_eval_floors.py [--sets debfaq-en,manru] [--shared DIR] [--suggest]

A floor entry is keyed by its label: the set name (lexical, the file's default mode) or
`set/mode` with "set" and "mode" fields; hybrid/semantic entries index with the shared real model
(`--model-dir`), so the gate also covers the vector build and the fusion. An entry with "build"
names a script that builds the set from installed packages into a temporary folder first
(`bench/build_pdf_eval.py`: real PDF manuals from Debian), with "build_args" after the output
folder (`bench/build_keyword_eval.py` `--lang ko`); "min_unit_mrr@10" and
"min_unit_recall@1" are floors on its page-level metrics.

Each set is indexed from scratch (fresh temporary data dir, `rag_eval.py --sync`), so the gate
covers extraction, chunking, indexing and search together. Prints a table; exits 1 when a set
is below its floor, 2 when a set cannot be evaluated. Floors live in bench/eval_floors.json.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parents[1]
FLOORS_PATH = REPO_DIR / "bench" / "eval_floors.json"
SHARED_EVAL_DIR = REPO_DIR.parent / "shared" / "eval"
SHARED_MODEL_DIR = REPO_DIR.parent / "shared" / "models" / "multilingual-e5-small-int8"
EVAL_SCRIPT = REPO_DIR / "rag_eval.py"
# A suggested floor sits this far under the measured value: a real regression crosses it,
# run-to-run noise (none for lexical search, which is deterministic) and tiny drifts do not.
FLOOR_MARGIN = 0.02
RUN_TIMEOUT_S = 600  # one set takes well under a minute on 2 cores; a hang must still end CI
STDERR_TAIL_LINES = 15


@dataclass(frozen=True)
class Floor:
    set_name: str
    mode: str
    min_mrr: float
    min_recall8: float
    build: str = ""  # script (relative to the repo) that builds golden.json + docs/ into a dir
    build_args: tuple[str, ...] = ()  # its arguments after the output dir ("--lang", "ko")
    docs: str = "docs"  # the knowledge dir inside the built folder
    min_unit_mrr: float | None = None
    min_unit_recall1: float | None = None


@dataclass(frozen=True)
class SetRun:
    name: str
    report: dict[str, Any] | None  # rag_eval's JSON, None when the run failed
    seconds: float
    error: str = ""


def load_floors(path: Path) -> dict[str, Floor]:
    data = json.loads(path.read_text(encoding="utf-8"))
    default_mode = data.get("mode", "lexical")
    return {
        label: Floor(
            v.get("set", label),
            v.get("mode", default_mode),
            float(v["min_mrr@10"]),
            float(v["min_recall@8"]),
            build=v.get("build", ""),
            build_args=tuple(v.get("build_args", ())),
            docs=v.get("docs", "docs"),
            min_unit_mrr=v.get("min_unit_mrr@10"),
            min_unit_recall1=v.get("min_unit_recall@1"),
        )
        for label, v in data["sets"].items()
    }


def run_set(label: str, floor: Floor, shared: Path, model_dir: Path) -> SetRun:
    """rag_eval.py on one set in a fresh data dir; its JSON report and wall time."""
    name, mode = floor.set_name, floor.mode
    semantic = ["--semantic", "off"]  # lexical: computing vectors would only cost time
    if mode != "lexical":
        if not model_dir.is_dir():
            return SetRun(label, None, 0.0, f"mode {mode} needs the model: {model_dir} is missing")
        semantic = ["--semantic", "on", "--semantic-model-dir", str(model_dir)]
    with tempfile.TemporaryDirectory(prefix=f"ragdoc-eval-{name}-") as work:
        set_dir = shared / name
        if floor.build:
            set_dir = Path(work) / "set"
            built = subprocess.run(
                [sys.executable, str(REPO_DIR / floor.build), str(set_dir), *floor.build_args],
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
                cwd=REPO_DIR,
            )
            if built.returncode != 0:
                return SetRun(label, None, 0.0, f"{floor.build} failed: {built.stderr.strip()}")
        golden, docs = set_dir / "golden.json", set_dir / floor.docs
        if not golden.is_file() or not docs.is_dir():
            return SetRun(label, None, 0.0, f"{set_dir} has no golden.json + docs/: pass --shared")
        data_dir = str(Path(work) / "data")
        command = [
            sys.executable,
            str(EVAL_SCRIPT),
            str(golden),
            "--knowledge-dir",
            str(docs),
            "--data-dir",
            data_dir,
            "--mode",
            mode,
            *semantic,
            "--sync",
            "--json",
        ]
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=REPO_DIR
            )
        except subprocess.TimeoutExpired:
            return SetRun(label, None, RUN_TIMEOUT_S, f"timed out after {RUN_TIMEOUT_S} s")
        seconds = time.perf_counter() - started
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-STDERR_TAIL_LINES:])
        return SetRun(label, None, seconds, f"rag_eval.py exited {proc.returncode}:\n{tail}")
    return SetRun(label, json.loads(proc.stdout), seconds)


def below_floor(report: dict[str, Any], floor: Floor) -> list[str]:
    failures = []
    if report["mrr@10"] < floor.min_mrr:
        failures.append(f"MRR@10 {report['mrr@10']:.4f} < {floor.min_mrr}")
    if report["recall@8"] < floor.min_recall8:
        failures.append(f"Recall@8 {report['recall@8']:.4f} < {floor.min_recall8}")
    unit = report.get("unit_level") or {}
    for wanted, metric, name in (
        (floor.min_unit_mrr, "mrr@10", "page MRR@10"),
        (floor.min_unit_recall1, "recall@1", "page Recall@1"),
    ):
        if wanted is not None and unit.get(metric, 0.0) < wanted:
            failures.append(f"{name} {unit.get(metric, 0.0):.4f} < {wanted}")
    return failures


def _floor_of(value: float) -> float:
    return max(0.0, math.floor((value - FLOOR_MARGIN) * 100) / 100)


def suggested_floor(report: dict[str, Any]) -> dict[str, float]:
    """Measured minus the margin, rounded down to two decimals (never above measured - margin)."""
    out = {
        key: _floor_of(report[metric])
        for key, metric in (("min_mrr@10", "mrr@10"), ("min_recall@8", "recall@8"))
    }
    unit = report.get("unit_level")
    if unit:
        out["min_unit_mrr@10"] = _floor_of(unit["mrr@10"])
        out["min_unit_recall@1"] = _floor_of(unit["recall@1"])
    return out


def print_table(runs: list[SetRun], floors: dict[str, Floor]) -> None:
    print(
        f"{'set':<26} {'q':>4} {'MRR@10':>7} {'floor':>6} {'R@8':>6} {'floor':>6} "
        f"{'sync s':>7} {'eval s':>7} {'total s':>8}  status"
    )
    for run in runs:
        floor = floors[run.name]
        if run.report is None:
            print(
                f"{run.name:<26} {'':>4} {'':>7} {floor.min_mrr:>6.2f} {'':>6} "
                f"{floor.min_recall8:>6.2f} {'':>7} {'':>7} {run.seconds:>8.1f}  ERROR"
            )
            continue
        r = run.report
        failures = below_floor(r, floor)
        sync_s = (r.get("sync") or {}).get("seconds", 0.0)
        print(
            f"{run.name:<26} {r['queries']:>4} {r['mrr@10']:>7.3f} {floor.min_mrr:>6.2f} "
            f"{r['recall@8']:>6.3f} {floor.min_recall8:>6.2f} {sync_s:>7.1f} "
            f"{r['eval_seconds']:>7.1f} {run.seconds:>8.1f}  "
            + ("BELOW: " + "; ".join(failures) if failures else "ok")
        )
        if r.get("unit_level"):
            u = r["unit_level"]
            print(
                f"{'  page level':<26} {u['queries']:>4} {u['mrr@10']:>7.3f} "
                f"{floor.min_unit_mrr or 0:>6.2f} R@1 {u['recall@1']:.3f} "
                f"(floor {floor.min_unit_recall1 or 0:.2f})"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floors", type=Path, default=FLOORS_PATH)
    parser.add_argument("--shared", type=Path, default=SHARED_EVAL_DIR, help="eval sets folder")
    parser.add_argument("--model-dir", type=Path, default=SHARED_MODEL_DIR, help="for hybrid")
    parser.add_argument("--sets", help="comma list of labels (default: every floor in the file)")
    parser.add_argument(
        "--suggest", action="store_true", help=f"print floors at measured - {FLOOR_MARGIN}"
    )
    args = parser.parse_args(argv)
    floors = load_floors(args.floors)
    names = [n.strip() for n in args.sets.split(",")] if args.sets else list(floors)
    unknown = [n for n in names if n not in floors]
    if unknown:
        sys.stderr.write(f"error: no floor for {unknown} in {args.floors}\n")
        return 2
    started = time.perf_counter()
    runs = []
    for name in names:
        sys.stderr.write(f"evaluating {name} ({floors[name].mode})...\n")
        runs.append(run_set(name, floors[name], args.shared, args.model_dir))
    print_table(runs, floors)
    print(f"total {time.perf_counter() - started:.1f} s")
    for run in runs:
        if run.error:
            sys.stderr.write(f"error: {run.name}: {run.error}\n")
    if args.suggest:
        suggestion = {r.name: suggested_floor(r.report) for r in runs if r.report is not None}
        print(json.dumps(suggestion, indent=2))
    if any(r.report is None for r in runs):
        return 2
    if any(below_floor(r.report, floors[r.name]) for r in runs if r.report is not None):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
