"""No-op resync against a bare os.walk + lstat of the same tree, in one run.

    python bench/bench_noop_resync.py [--files 100000] [--indexed 20000] [--work /tmp/noop] \
        [--rounds 3] [--other gz|dat] [--profile OUT.pstats]

The tree: FOLDER_FILES files per folder, `--indexed` of them small Markdown notes (one line of
words and a unique marker) and the rest empty files named `*.OTHER` (`--other gz`, the default:
a supported type, each an empty indexed document; `--other dat`: an unsupported type, so each
is a skip the sync records with its reason, as in a folder of downloads).
After the first sync (not timed against anything), each round times, one after the
other:

- bare: os.walk + os.lstat of every entry (the floor: what any sync must look at);
- resync: rag_service.start_sync + wait_for_job (end to end: the worker process starts, plans,
  records the skips, finds nothing to read) and the worker's own seconds (job row times);
- plan: helpers.index.plan.plan_sync alone, in this process.

Medians over --rounds; the ratio resync / bare is the issue 26 target (<= 3 at 100k files).
--profile runs one more no-op resync in this process (rag_service.sync_kb_blocking, the worker's
own code) under cProfile and writes the stats there.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rag_service  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.index.plan import plan_sync  # noqa: E402
from helpers.store.index_db import open_index  # noqa: E402
from rag_sync import sync_excludes  # noqa: E402

FOLDER_FILES = 1000  # files per folder: a big download or archive folder
WORDS = ("invoice", "contract", "report", "budget", "meeting", "travel", "policy", "audit")
SEED = 5


def make_tree(root: Path, files: int, indexed: int, other: str) -> None:
    """Writes the tree once (kept between runs with the same counts)."""
    marker = root / f".bench-{files}-{indexed}-{other}"
    if marker.exists():
        return
    rng = random.Random(SEED)
    every = max(1, files // max(indexed, 1))
    for i in range(files):
        folder = root / f"f{i // FOLDER_FILES:03d}"
        if i % FOLDER_FILES == 0:
            folder.mkdir(parents=True, exist_ok=True)
        if indexed and i % every == 0 and i // every < indexed:
            body = " ".join(rng.choice(WORDS) for _ in range(12))
            (folder / f"note{i:06d}.md").write_text(f"{body} marker{i:06d}\n", encoding="utf-8")
        else:
            (folder / f"file{i:06d}.{other}").touch()
    marker.touch()


def bare_walk(root: Path) -> float:
    started = time.perf_counter()
    for folder, dirs, names in os.walk(root):
        for name in (*dirs, *names):
            os.lstat(os.path.join(folder, name))
    return time.perf_counter() - started


def resync(config: Config) -> tuple[float, float, dict[str, int]]:
    started = time.perf_counter()
    job = rag_service.start_sync(config)
    view = rag_service.wait_for_job(config, job.job_id)
    wall = time.perf_counter() - started
    if view.state != "succeeded":
        raise SystemExit(f"sync {view.state}: {view.to_dict()}")
    return wall, (view.finished_at or 0) - (view.started_at or 0), view.counts


def plan_only(config: Config) -> float:
    conn = open_index(config.db_path)
    excludes = sync_excludes(config)
    started = time.perf_counter()
    plan_sync(conn, config.knowledge_dir, "", config.max_file_bytes, excludes or None)
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--indexed", type=int, default=20_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/noop"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--other", default="gz", help="suffix of the files that are not notes")
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args()
    root = args.work / "kb"
    make_tree(root, args.files, args.indexed, args.other)
    data = args.work / "state"
    config = Config(root, data, data / "index.sqlite3", semantic=False)
    first = resync(config)
    sys.stderr.write(f"first sync {first[0]:.1f} s: {first[2]}\n")
    bare, wall, worker, plan = [], [], [], []
    counts: dict[str, int] = {}
    for _ in range(args.rounds):
        bare.append(bare_walk(root))
        w, k, counts = resync(config)
        wall.append(w)
        worker.append(k)
        plan.append(plan_only(config))
    med = {
        name: statistics.median(v)
        for name, v in (
            ("bare_s", bare),
            ("resync_s", wall),
            ("worker_s", worker),
            ("plan_s", plan),
        )
    }
    report = {
        "files": args.files,
        "notes": args.indexed,
        "other": args.other,
        **{k: round(v, 3) for k, v in med.items()},
        "ratio_resync_to_bare": round(med["resync_s"] / med["bare_s"], 2),
        "ratio_worker_to_bare": round(med["worker_s"] / med["bare_s"], 2),
        "ratio_plan_to_bare": round(med["plan_s"] / med["bare_s"], 2),
        "counts": counts,
    }
    print(json.dumps(report), flush=True)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        rag_service.sync_kb_blocking(config)
        profiler.disable()
        profiler.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
