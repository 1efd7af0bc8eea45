"""Hostile input at full size: the >= 200-case corpus of tests/hostile_fixtures.py with a 200 MB
single-line text file, synced by the real worker while status is polled.

    python bench/faults/hostile.py [--big-mb 200]

Reports cases tried, crashes (job failed or worker died), mismatches against each case's
expectation, good files found, and every sync_status error seen while polling (a status call
must never fail, e.g. with "database is locked").
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import time
from collections import Counter

from _common import line, work_dir
from conftest import make_config
from hostile_fixtures import make_hostile_corpus
from stress.harness import index_problems, rss_kib, sandbox_children, worker_pids

import rag_service


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    root = work_dir("hostile", args.work)
    corpus = make_hostile_corpus(root / "docs", big_text_bytes=args.big_mb * 1_000_000)
    config = make_config(corpus.root, root / "state")
    started = time.monotonic()
    job = rag_service.start_sync(config)
    poll_errors: Counter[str] = Counter()
    polls = peak = 0
    state = "queued"
    while state in ("queued", "running", "cancelling"):
        try:
            state = rag_service.sync_status(config, job.job_id).state
            polls += 1
        except Exception as exc:  # noqa: BLE001 - counted and reported
            poll_errors[f"{type(exc).__name__}: {exc}"[:80]] += 1
        for pid in worker_pids(config.data_dir):
            peak = max(peak, rss_kib(pid), *(rss_kib(c) for c in sandbox_children(pid)))
        time.sleep(0.5)
    view = rag_service.sync_status(config, job.job_id)
    took = time.monotonic() - started
    conn = sqlite3.connect(config.db_path)
    conn.row_factory = sqlite3.Row
    docs = {r["path"]: r for r in conn.execute("SELECT path, status, error FROM documents")}
    conn.close()
    from test_hostile_input import HostileSync, _load, _mismatch

    documents, errors = _load(config, view.job_id)
    run = HostileSync(corpus, config, view, documents, errors, None)
    mismatches = [(c, why) for c in corpus.cases if (why := _mismatch(c, run))]
    found = sum(
        1
        for rel, mark in corpus.good.items()
        if (hits := rag_service.search(config, mark, mode="lexical", top_k=3).hits)
        and hits[0].path == rel
    )
    big = docs.get("big/one-line.txt")
    print("\nhostile summary")
    line("hostile cases tried", len(corpus.cases))
    line("by category", dict(Counter(c.category.split(":")[0] for c in corpus.cases)))
    line("job state (crash = failed / worker died)", f"{view.state} {view.message or ''}")
    line("files failed / skipped (reported)", f"{view.counts['failed']} / {view.counts['skipped']}")
    line("cases not handled as expected", len(mismatches))
    line("good files indexed and found", f"{found} / {len(corpus.good)}")
    line(f"{args.big_mb} MB one-line file", f"{big['status']} {big['error'] or ''}" if big else "?")
    line("sync wall time (s)", f"{took:.0f}")
    line("peak worker/sandbox RSS (MiB)", f"{peak / 1024:.0f}")
    line("sync_status polls answered / failed", f"{polls} / {sum(poll_errors.values())}")
    for message, count in poll_errors.items():
        print(f"    {count} x {message}")
    line("index problems", index_problems(config.db_path))
    for case, why in mismatches[:20]:
        print(f"    {case.category}: {case.rel_path!r}: {why}")
    shutil.rmtree(root, ignore_errors=True)
    crashed = view.state != "succeeded"
    return 1 if crashed or mismatches or poll_errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
