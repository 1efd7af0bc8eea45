"""Watch mode: time from a saved file to it being searchable, and a 1,000-file burst.

    python bench/bench_watch.py [--saves 20] [--burst 1000] [--base 200] [--semantic-model-dir DIR]
        [--keep]

Runs `rag_server.py watch` as its own process over a temp folder of `--base` Markdown files.
Latency: `--saves` saves (new files and rewrites, one at a time, 1 s apart once the previous one
is found), each timed from the write until `rag_search` finds its unique sentence (lexical mode;
semantic mode with --semantic-model-dir, i.e. after the vector phase). The bare baseline, in
the same run and folder without the watcher: save, then start a sync at once and wait for it
(`sync_kb` + `sync_status` by hand). The ratio shows what the quiet period (watch.QUIET_S)
and event delivery add. Burst: `--burst` files written at once; time until all are searchable
and how many syncs the watcher started, against a plain full sync of the same files. Run by
hand; tests never time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_service  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.index import watch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
POLL_S = 0.05
TOPICS = (
    "volcanic soil", "river delta shipping", "medieval bookbinding", "glacier retreat",
    "honeybee navigation", "desert solar farms", "coral reef bleaching", "arctic ice roads",
    "violin varnish", "tea fermentation", "lighthouse keepers", "salt marsh birds",
    "paper lantern craft", "mountain rescue dogs", "copper mining history", "kelp forests",
    "clock tower repair", "wind tunnel tests", "orchid pollination", "night train routes",
    "canal lock gates", "bamboo scaffolding", "weather balloon data", "cave diving safety",
)  # fmt: skip


def sentence(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return f"Field notes number {i} describe {topic} observed during survey trip zq{i:04d}x."


def make_config(docs: Path, state: Path, model: Path | None) -> Config:
    return Config(
        knowledge_dir=docs.resolve(),
        data_dir=state.resolve(),
        db_path=(state / "index.sqlite3").resolve(),
        semantic=model is not None,
        semantic_model_dir=model,
    )


def cli_args(config: Config) -> list[str]:
    args = [
        "--knowledge-dir", str(config.knowledge_dir), "--data-dir", str(config.data_dir),
        "--semantic", "on" if config.semantic else "off",
    ]  # fmt: skip
    if config.semantic_model_dir:
        args += ["--semantic-model-dir", str(config.semantic_model_dir)]
    return args


def found(config: Config, i: int, mode: str) -> bool:
    try:
        hits = rag_service.search(config, sentence(i), mode=mode, top_k=8).hits
    except rag_service.RagError:
        return False
    return any(f"zq{i:04d}x" in h.snippet for h in hits)  # this save's text, not the old one


def wait_found(config: Config, i: int, mode: str, timeout_s: float = 120) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if found(config, i, mode):
            return time.monotonic() - start
        time.sleep(POLL_S)
    raise SystemExit(f"save {i} not searchable after {timeout_s} s")


def save(config: Config, i: int) -> None:
    """Save i: even ones create a file, odd ones rewrite the file the previous save made."""
    path = config.knowledge_dir / f"save-{i - i % 2:04d}.md"
    path.write_text(f"# Save {i}\n\n{sentence(i)}\n", encoding="utf-8")


def jobs(config: Config) -> int:
    with closing(sqlite3.connect(config.db_path)) as conn:
        return conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def idle(config: Config) -> bool:
    with closing(sqlite3.connect(config.db_path)) as conn:
        q = "SELECT COUNT(*) FROM jobs WHERE state IN ('queued','running','cancelling')"
        return conn.execute(q).fetchone()[0] == 0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--base", type=int, default=200)
    parser.add_argument("--semantic-model-dir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the temp folder and its log")
    args = parser.parse_args()
    mode = "semantic" if args.semantic_model_dir else "lexical"
    work = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    docs = work / "docs"
    docs.mkdir()
    for n in range(args.base):
        (docs / f"base-{n:04d}.md").write_text(f"# Base {n}\n\n{sentence(5000 + n)}\n")
    config = make_config(docs, work / "state", args.semantic_model_dir)
    view = rag_service.start_sync(config)
    rag_service.wait_for_job(config, view.job_id)

    # Bare baseline: save, sync at once, wait until searchable.
    baseline = []
    for i in range(args.saves):
        start = time.monotonic()
        save(config, 9000 + i)
        rag_service.wait_for_job(config, rag_service.start_sync(config).job_id)
        wait_found(config, 9000 + i, mode)
        baseline.append(time.monotonic() - start)

    log = open(work / "watch.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "rag_server.py"), *cli_args(config), "watch"],
        stdout=subprocess.DEVNULL,
        stderr=log,
        cwd=REPO,
    )
    try:
        while jobs(config) <= args.saves + 1 or not idle(config):
            time.sleep(0.2)  # the watcher's initial sync
        latencies = []
        for i in range(args.saves):
            save(config, i)
            latencies.append(wait_found(config, i, mode))
            time.sleep(1.0)
        while not idle(config):
            time.sleep(0.2)
        before = jobs(config)
        start = time.monotonic()
        burst = docs / "burst"
        burst.mkdir()
        for n in range(args.burst):
            (burst / f"b-{n:05d}.md").write_text(f"# B {n}\n\nburst file bq{n:05d}q\n")
        last = args.burst - 1
        while True:
            hits = rag_service.search(config, f"bq{last:05d}q", mode="lexical").hits
            if hits and idle(config):
                break
            time.sleep(0.2)
        burst_s = time.monotonic() - start
        burst_syncs = jobs(config) - before
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        log.close()
    fresh = make_config(docs, work / "state-fresh", args.semantic_model_dir)
    start = time.monotonic()
    rag_service.wait_for_job(fresh, rag_service.start_sync(fresh, "burst").job_id)
    plain_s = time.monotonic() - start

    print(f"mode {mode}; quiet period {watch.QUIET_S} s; base folder {args.base} files")
    print(
        f"save -> searchable, watch: p50 {statistics.median(latencies):.2f} s, "
        f"p95 {p95(latencies):.2f} s, max {max(latencies):.2f} s over {len(latencies)} saves"
    )
    print(
        f"bare baseline (save, sync at once): p50 {statistics.median(baseline):.2f} s, "
        f"p95 {p95(baseline):.2f} s; watch/baseline p95 ratio {p95(latencies) / p95(baseline):.2f}"
    )
    print(
        f"burst of {args.burst} files: all searchable after {burst_s:.1f} s with {burst_syncs} "
        f"sync(s); a plain sync of them takes {plain_s:.1f} s (ratio {burst_s / plain_s:.2f})"
    )
    if args.keep:
        print(f"work dir {work} (watch log: watch.log)", file=sys.stderr)
    else:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
