"""Big folders: 50,000 small files, and PDFs of 2,000 pages. Memory must stay bounded (worker and
sandbox RSS sampled from /proc) and progress must keep moving.

    python bench/faults/scale.py [--small 50000] [--pdf-pages 2000] [--pdfs 2]
"""

from __future__ import annotations

import argparse
import shutil
import time

from _common import line, work_dir
from conftest import make_config
from stress.corpora import make_long_pdf, make_small_files
from stress.harness import index_problems, rss_kib, sandbox_children, worker_pids

import rag_service
from helpers.config import Config


def watch(config: Config, label: str) -> None:
    """Run one sync, sampling RSS and progress every 0.5 s."""
    started = time.monotonic()
    job = rag_service.start_sync(config)
    peak_worker = peak_child = 0
    longest_still = 0.0
    last_key = None
    last_change = time.monotonic()
    samples = 0
    while True:
        view = rag_service.sync_status(config, job.job_id)
        for pid in worker_pids(config.data_dir):
            peak_worker = max(peak_worker, rss_kib(pid))
            for child in sandbox_children(pid):
                peak_child = max(peak_child, rss_kib(child))
        key = (view.phase, view.completed_files, view.done_bytes)
        now = time.monotonic()
        if key != last_key:
            last_key, last_change = key, now
        elif view.state == "running":
            longest_still = max(longest_still, now - last_change)
        samples += 1
        if view.state not in ("queued", "running", "cancelling"):
            break
        time.sleep(0.5)
    took = time.monotonic() - started
    print(f"\n{label}")
    line(
        "state / files / failed", f"{view.state} / {view.counts['added']} / {view.counts['failed']}"
    )
    line("wall time (s)", f"{took:.1f}")
    line("files per second", f"{view.counts['added'] / took:.0f}")
    line("peak worker RSS (MiB)", f"{peak_worker / 1024:.0f}")
    line("peak sandbox child RSS (MiB)", f"{peak_child / 1024:.0f}")
    line("longest time progress stood still (s)", f"{longest_still:.1f}")
    line("status samples", samples)
    line("index problems", index_problems(config.db_path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=50_000)
    parser.add_argument("--pdf-pages", type=int, default=2000)
    parser.add_argument("--pdfs", type=int, default=2)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    root = work_dir("scale", args.work)
    if args.small:
        make_small_files(root / "small", args.small)
        watch(make_config(root / "small", root / "small-state"), f"{args.small} small files")
    if args.pdfs:
        for i in range(args.pdfs):
            make_long_pdf(root / "pdfs" / f"manual{i}.pdf", args.pdf_pages, seed=i)
        watch(
            make_config(root / "pdfs", root / "pdf-state"),
            f"{args.pdfs} PDFs of {args.pdf_pages} pages",
        )
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
