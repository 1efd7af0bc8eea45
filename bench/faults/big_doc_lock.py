"""One huge document: how long does its write hold the SQLite write lock (bug 3)?

    python bench/faults/big_doc_lock.py [--mb 20] [--kind one-line|words] [--cancel-after 0]

Syncs a folder holding one big text file while a probe process takes `BEGIN IMMEDIATE` and
commits in a loop (as cancel_sync, sync_kb and the worker's heartbeat do): its longest wait is
the longest time the worker held the write lock. sync_status is polled at the same time.
With --cancel-after S the folder already holds an indexed small version of the file, the big
version replaces it, and cancel_sync is called S seconds into the big document's write phase:
the job must end cancelled with the small version still searchable.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import time

from _common import line, work_dir
from conftest import WORDS, make_config
from hostile_fixtures import write_one_line, write_repeated
from stress.harness import index_problems, percentile

import rag_service

# The probe: BEGIN IMMEDIATE + COMMIT every PROBE_PAUSE_S, printing each wait in ms.
_PROBE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=300)
pause = float(sys.argv[2])
while True:
    started = time.monotonic()
    conn.execute("BEGIN IMMEDIATE")
    waited = time.monotonic() - started
    conn.execute("COMMIT")
    print(f"{waited * 1000:.0f}", flush=True)
    time.sleep(pause)
"""
PROBE_PAUSE_S = 0.05


def write_big_text(path, size: int, kind: str) -> None:  # type: ignore[no-untyped-def]
    """`size` bytes of words: one line without a newline, or 12-word lines in paragraphs."""
    if kind == "one-line":
        write_one_line(path, size)
        return
    lines = [" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12)) for i in range(2000)]
    write_repeated(path, ("\n".join(lines) + "\n\n").encode(), size)


def watch(config, label: str, cancel_after: float = 0.0) -> None:  # type: ignore[no-untyped-def]
    probe = subprocess.Popen(
        [sys.executable, "-c", _PROBE, str(config.db_path), str(PROBE_PAUSE_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    started = time.monotonic()
    job = rag_service.start_sync(config)
    status_ms: list[float] = []
    status_errors = 0
    cancel_ms = None
    cancelled_at = None
    writing_since = None
    view = job
    while True:
        t0 = time.monotonic()
        try:
            view = rag_service.sync_status(config, job.job_id)
        except Exception as exc:  # noqa: BLE001 - a failed status call is the measured fault
            status_errors += 1
            print(f"  status failed: {type(exc).__name__}: {exc}", flush=True)
            time.sleep(0.2)
            continue
        status_ms.append((time.monotonic() - t0) * 1000)
        if view.state not in ("queued", "running", "cancelling"):
            break
        detail = view.message or ""
        if writing_since is None and "chunks written" in detail:
            writing_since = time.monotonic()
        if (
            cancel_after
            and cancelled_at is None
            and writing_since is not None
            and time.monotonic() - writing_since >= cancel_after
        ):
            t0 = time.monotonic()
            rag_service.cancel_sync(config, job.job_id)
            cancel_ms = (time.monotonic() - t0) * 1000
            cancelled_at = time.monotonic()
            print(f"  cancel requested at: {detail}", flush=True)
        time.sleep(0.2)
    took = time.monotonic() - started
    ended = time.monotonic()
    probe.kill()
    out, _ = probe.communicate()
    waits = [int(x) for x in out.split()]
    conn = sqlite3.connect(config.db_path)
    chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    docs = conn.execute("SELECT path, status, chunk_count, error FROM documents").fetchall()
    conn.close()
    print(f"\n{label}")
    line("job state / message", f"{view.state} / {view.message}")
    line("wall time (s)", f"{took:.1f}")
    line("chunks in the index", chunks)
    line("documents (path, status, chunks, note)", docs)
    line("probe transactions", len(waits))
    line("longest write-lock wait of the probe (s)", f"{max(waits, default=0) / 1000:.2f}")
    line(
        "probe wait p50 / p95 (ms)",
        f"{percentile(waits, 50):.0f} / {percentile(waits, 95):.0f}" if waits else "-",
    )
    line("sync_status calls / failed", f"{len(status_ms)} / {status_errors}")
    line("sync_status slowest (ms)", f"{max(status_ms, default=0):.0f}")
    if cancel_ms is not None and cancelled_at is not None:
        line("cancel_sync call (ms)", f"{cancel_ms:.0f}")
        line("cancel requested -> job final (s)", f"{ended - cancelled_at:.1f}")
    line("index problems", index_problems(config.db_path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--kind", choices=["one-line", "words"], default="one-line")
    parser.add_argument("--cancel-after", type=float, default=0.0)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    root = work_dir("bigdoc", args.work)
    docs = root / "docs"
    docs.mkdir()
    config = make_config(docs, root / "state")
    big = docs / "big.txt"
    if args.cancel_after:
        big.write_text("small first version: keepmarker\n", encoding="utf-8")
        rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    write_big_text(big, int(args.mb * 1_000_000), args.kind)
    watch(config, f"one {args.mb:g} MB text file ({args.kind})", args.cancel_after)
    if args.cancel_after:
        hits = rag_service.search(config, "keepmarker", mode="lexical").hits
        line("old version still found after cancel", bool(hits) and hits[0].path == "big.txt")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
