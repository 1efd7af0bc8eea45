"""Load: concurrent searches from separate processes during a running sync, then sync/cancel
storms from several processes.

    python bench/faults/load.py [--searchers 20] [--calls 50] [--files 5000] [--storm-s 20]

Part 1: `--searchers` processes each run `--calls` lexical searches through rag_service while a
sync of `--files` Markdown files writes; two more processes poll sync_status. Reports every error
(none may say "database is locked") and the latency p50/p95/max.
Part 2: four processes loop start_sync / random sleep / cancel_sync for `--storm-s` seconds while
the main process samples /proc/locks (flock holders), the running jobs and the worker processes
(`ps`); afterwards no job may be left queued/running and no worker may be alive.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter

from _common import REPO, line, work_dir
from conftest import make_config, write_corpus
from stress.harness import (
    jobs_in_states,
    lock_holders,
    percentile,
    run_sync,
    wait_until,
    worker_pids,
)

import rag_service

SEARCHER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import rag_service
from helpers.config import Config
config = Config.from_json(sys.argv[2])
queries = ["invoice payment", "budget meeting", "marker00042", "zz", "quarter revenue report"]
out = {"ok": 0, "errors": [], "ms": []}
for i in range(int(sys.argv[3])):
    started = time.perf_counter()
    try:
        if sys.argv[4] == "status":
            rag_service.sync_status(config)
            time.sleep(0.2)
        else:
            rag_service.search(config, queries[i % len(queries)], mode="lexical")
        out["ok"] += 1
    except Exception as exc:
        out["errors"].append(f"{type(exc).__name__}: {exc}"[:200])
    out["ms"].append((time.perf_counter() - started) * 1000)
print(json.dumps(out))
"""

STORMER = """
import random, sys, time
sys.path.insert(0, sys.argv[1])
import rag_service
from helpers.config import Config
config = Config.from_json(sys.argv[2])
rng = random.Random(int(sys.argv[3]))
end = time.monotonic() + float(sys.argv[4])
errors = 0
while time.monotonic() < end:
    try:
        job = rag_service.start_sync(config)
        time.sleep(rng.uniform(0, 0.5))
        rag_service.cancel_sync(config, job.job_id)
    except Exception as exc:
        errors += 1
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
print(errors)
"""


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, str(REPO), *args], stdout=subprocess.PIPE, text=True
    )


def searches_during_sync(root, searchers: int, calls: int, files: int) -> int:  # type: ignore[no-untyped-def]
    knowledge = root / "docs"
    write_corpus(knowledge, 200, seed=1)
    config = make_config(knowledge, root / "state")
    run_sync(config)
    write_corpus(knowledge / "more", files, seed=2)
    job = rag_service.start_sync(config)
    wait_until(lambda: rag_service.sync_status(config, job.job_id).phase == "files", 60)
    procs = [spawn(SEARCHER, config.to_json(), str(calls), "search") for _ in range(searchers)]
    pollers = [spawn(SEARCHER, config.to_json(), str(calls), "status") for _ in range(2)]
    results = [json.loads(p.communicate(timeout=900)[0]) for p in procs]
    polls = [json.loads(p.communicate(timeout=900)[0]) for p in pollers]
    state_during = rag_service.sync_status(config, job.job_id)
    final = rag_service.wait_for_job(config, job.job_id, timeout_s=1800)
    ms = [m for r in results for m in r["ms"]]
    errors = [e for r in results for e in r["errors"]]
    poll_errors = [e for r in polls for e in r["errors"]]
    print("\nload: searches from separate processes during a sync")
    line("search processes x calls", f"{searchers} x {calls}")
    line("calls answered", f"{sum(r['ok'] for r in results)} / {searchers * calls}")
    line("errors ('database is locked')", f"{len(errors)} ({sum('locked' in e for e in errors)})")
    line(
        "latency p50 / p95 / max (ms)",
        f"{percentile(ms, 50):.0f} / {percentile(ms, 95):.0f} / {max(ms):.0f}",
    )
    line(
        "sync_status polls answered / errors", f"{sum(r['ok'] for r in polls)} / {len(poll_errors)}"
    )
    line("job still writing when the searches ended", state_during.state == "running")
    line("sync (files, state)", f"{files + 200}, {final.state}")
    for e in sorted(set(errors + poll_errors))[:5]:
        print("    error:", e)
    return len(errors) + len(poll_errors)


def storm(root, seconds: float, processes: int = 4) -> int:  # type: ignore[no-untyped-def]
    knowledge = root / "storm-docs"
    write_corpus(knowledge, 400, seed=3)
    config = make_config(knowledge, root / "storm-state")
    run_sync(config)
    procs = [spawn(STORMER, config.to_json(), str(seed), str(seconds)) for seed in range(processes)]
    samples = 0
    holders_max = running_max = workers_max = 0
    worker_counts: Counter[int] = Counter()
    while any(p.poll() is None for p in procs):
        samples += 1
        holders_max = max(holders_max, len(set(lock_holders(config.lock_path))))
        running_max = max(
            running_max, len(jobs_in_states(config.db_path, ("running", "cancelling")))
        )
        workers = len(worker_pids(config.data_dir))
        workers_max = max(workers_max, workers)
        worker_counts[workers] += 1
        time.sleep(0.02)
    storm_errors = sum(int(p.communicate()[0].strip() or 0) for p in procs)
    wait_until(lambda: not worker_pids(config.data_dir), timeout=120)
    rag_service.list_jobs(config, 500)
    rag_service.sync_status(config)  # reconciles whatever is left
    left = jobs_in_states(config.db_path)
    jobs = rag_service.list_jobs(config, 500)
    print("\nload: sync_kb / cancel_sync storm")
    line("processes x seconds", f"{processes} x {seconds:.0f}")
    line("jobs created", len(jobs))
    line("final states", dict(Counter(j.state for j in jobs)))
    line("storm calls that raised", storm_errors)
    line("samples of /proc/locks, jobs, ps", samples)
    line("max flock holders at once", holders_max)
    line("max running/cancelling jobs at once", running_max)
    line(
        "max worker processes alive at once",
        f"{workers_max} (samples by count: {dict(worker_counts)})",
    )
    line("jobs left queued/running after settling", len(left))
    line("workers alive after settling", len(worker_pids(config.data_dir)))
    return int(holders_max > 1) + int(running_max > 1) + len(left) + storm_errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--searchers", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--storm-s", type=float, default=20)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    root = work_dir("load", args.work)
    bad = searches_during_sync(root, args.searchers, args.calls, args.files)
    bad += storm(root, args.storm_s)
    shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
