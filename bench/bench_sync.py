"""Sync and server benchmarks (run by hand; numbers go into the issue notes, not into tests).

    python bench/bench_sync.py [--files 2000] [--noop-files 10000] [--work DIR]
    python bench/bench_sync.py --real DIR [--rounds 3] [--work DIR]
    python bench/bench_sync.py --real DIR --split     # CPU seconds per stage, output hash
    python bench/bench_sync.py --real DIR --rounds 0 --cpu   # CPU of the sync vs the bare insert

Reports: first-sync files/s and MB/s, no-op resync time for unchanged files, sync_kb return
latency (in-process and over MCP stdio), rag_search latency over stdio, MCP server RSS.
With --real, a lexical first sync of a real folder instead: MB/s of extracted section text, the
ratio to a bare FTS5 trigram table taking the same text in ~600-character rows in the same run
(the floor SQLite sets; medians over --rounds), the fixed cost of a sync (an empty folder:
worker start, imports, sandbox), and the size of every table against the text. --split adds the
worker's CPU seconds per stage, each stage alone over the whole folder in this process (a fresh
process, like the worker: the chunker's caches start empty), and one sha256 over every section
and child the stages produce (text, location, hub score, matching form): two revisions that
print the same hash index the same rows.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from conftest import server_args, write_corpus  # noqa: E402
from sync_split import bare_fts_seconds as bare_split_seconds  # noqa: E402
from sync_split import cpu_ratio, cpu_split  # noqa: E402 - bench/ itself is on sys.path

import rag_service  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.store.codec import section_text  # noqa: E402


def make_files(root: Path, count: int, words: int, seed: int) -> int:
    """The test suite's corpus generator (one vocabulary everywhere); returns the bytes written."""
    return sum(p.stat().st_size for p in write_corpus(root, count, words, seed))


def config_for(knowledge: Path, data: Path) -> Config:
    return Config(knowledge, data, data / "index.sqlite3", semantic=False)


def timed_sync(config: Config) -> tuple[float, float, dict[str, int]]:
    """(wall seconds from sync_kb to final state, worker seconds, counts)."""
    start = time.perf_counter()
    job = rag_service.start_sync(config)
    view = rag_service.wait_for_job(config, job.job_id)
    wall = time.perf_counter() - start
    worker = (view.finished_at or 0) - (view.started_at or 0)
    assert view.state == "succeeded", view.to_dict()
    return wall, worker, view.counts


def sync_kb_latency(config: Config, rounds: int = 20) -> list[float]:
    """Return latency of start_sync when a job is already running (the common repeat call)."""
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        rag_service.start_sync(config)
        samples.append((time.perf_counter() - t) * 1000)
    return samples


async def stdio_measurements(config: Config, queries: list[str]) -> dict[str, float]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(
        command=sys.executable,
        args=server_args(config),
    )
    async with Client(transport) as client:
        latencies = []
        for query in queries:
            t = time.perf_counter()
            await client.call_tool("rag_search", {"query": query, "mode": "lexical"})
            latencies.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await client.call_tool("sync_kb", {})
        sync_ms = (time.perf_counter() - t) * 1000
        rss = server_rss_mb()
    return {
        "search_p50_ms": statistics.median(latencies),
        "search_p95_ms": sorted(latencies)[int(len(latencies) * 0.95) - 1],
        "sync_kb_ms": sync_ms,
        "server_rss_mb": rss,
    }


def server_rss_mb() -> float:
    best = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "rag_server.py" not in cmdline or "sync_job_worker" in cmdline:
                continue
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    best = max(best, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return best


BARE_ROW_CHARS = 600  # about one retrieval child's text


def bare_fts_seconds(texts: list[str], work: Path) -> float:
    """Wall seconds of the bare trigram FTS5 insert of `texts` in BARE_ROW_CHARS rows."""
    return bare_split_seconds(texts, work, BARE_ROW_CHARS)


def table_sizes(db: Path) -> list[tuple[str, int]]:
    """Bytes per table and index, largest first (SQLite's dbstat)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
    sizes = [(name, int(size)) for name, size in rows]
    conn.close()
    return sizes


SHOWN_BYTES = 10_000  # tables and indexes listed one by one; the rest are summed
# Stored bytes of each column of the two row tables (what dbstat's per-table figure is made of).
COLUMNS = {
    "chunks": ("text", "norm_stored", "text_hash", "location"),
    "sections": ("text", "location"),
}


def column_sizes(db: Path) -> list[tuple[str, int]]:
    """Bytes per stored text column (its values' lengths as BLOBs: compressed text as stored)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sizes = [
        (f"{table}.{column}", int(conn.execute(sql).fetchone()[0] or 0))
        for table, columns in COLUMNS.items()
        for column in columns
        for sql in (f"SELECT SUM(length(CAST({column} AS BLOB))) FROM {table}",)
    ]
    conn.close()
    return sizes


def real_folder(folder: Path, work: Path, rounds: int = 1) -> None:
    """Lexical first syncs of `folder` (fresh data dirs), each beside a bare FTS5 insert of the
    same text: medians over `rounds` (the box is shared: the ratio is the figure to quote)."""
    walls: list[float] = []
    bares: list[float] = []
    for round_no in range(rounds):
        config = config_for(folder, work / f"state-{round_no}")
        wall, worker, counts = timed_sync(config)
        conn = sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)
        texts = [section_text(r[0]) for r in conn.execute("SELECT text FROM sections ORDER BY id")]
        conn.close()
        (work / "bare.sqlite3").unlink(missing_ok=True)
        bare = bare_fts_seconds(texts, work)
        walls.append(wall)
        bares.append(bare)
        print(f"  round {round_no + 1}: sync {wall:.2f} s (worker {worker:.2f} s)", end=", ")
        print(f"bare {bare:.2f} s")
    text_mb = sum(len(t.encode()) for t in texts) / 1e6
    wall, bare = statistics.median(walls), statistics.median(bares)
    ratios = sorted(w / b for w, b in zip(walls, bares, strict=True))
    print(f"real folder {folder}: {counts}")
    print(f"  lexical sync {wall:.2f} s wall (median of {rounds}), {text_mb:.1f} MB text")
    print(f"  {text_mb / wall:.2f} MB/s; bare FTS5 trigram insert {bare:.2f} s", end="; ")
    each = ", ".join(f"{r:.1f}" for r in ratios)
    print(f"ratio {statistics.median(ratios):.1f}x (per round {each})")
    empty = work / "empty"
    empty.mkdir(exist_ok=True)
    fixed, fixed_worker, _ = timed_sync(config_for(empty, work / "state-empty"))
    print(f"  fixed cost: sync of an empty folder {fixed:.2f} s wall (worker {fixed_worker:.2f} s)")
    sizes = table_sizes(config.db_path)
    total = sum(size for _, size in sizes)
    print(f"  index {total / 1e6:.1f} MB = {total / 1e6 / text_mb:.1f}x the section text")
    shown = [(name, size) for name, size in sizes if size >= SHOWN_BYTES]
    shown.append((f"({len(sizes) - len(shown)} smaller ones)", total - sum(s for _, s in shown)))
    for name, size in shown:
        print(f"    {name:28} {size / 1e6:8.2f} MB  {size / 1e6 / text_mb:5.3f}x")
    print("  stored columns (payload, without row and page overhead):")
    for name, size in column_sizes(config.db_path):
        print(f"    {name:28} {size / 1e6:8.2f} MB  {size / 1e6 / text_mb:5.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--words", type=int, default=400)
    parser.add_argument("--noop-files", type=int, default=10000)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--real", type=Path, help="a real folder: lexical sync vs bare FTS5")
    parser.add_argument("--rounds", type=int, default=1, help="--real: syncs to take a median of")
    parser.add_argument("--split", action="store_true", help="--real: CPU seconds per stage")
    parser.add_argument("--cpu", action="store_true", help="--real: CPU of sync vs bare insert")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-sync-"))
    try:
        if args.real:
            if args.rounds > 0:
                real_folder(args.real.resolve(), work, args.rounds)
            if args.split:
                cpu_split(args.real.resolve(), work)
            if args.cpu:
                cpu_ratio(args.real.resolve(), work, BARE_ROW_CHARS)
            return
        docs = work / "docs"
        size = make_files(docs, args.files, args.words, seed=1)
        config = config_for(docs, work / "state")
        wall, worker, counts = timed_sync(config)
        print(f"first sync: {args.files} files, {size / 1e6:.1f} MB in {wall:.2f} s wall")
        print(f"  {args.files / wall:.0f} files/s, {size / 1e6 / wall:.2f} MB/s ({counts})")

        noop_docs = work / "noop"
        make_files(noop_docs, args.noop_files, 30, seed=2)
        noop_config = config_for(noop_docs, work / "noop-state")
        timed_sync(noop_config)
        wall, worker, counts = timed_sync(noop_config)
        print(
            f"no-op resync of {args.noop_files} unchanged files: {wall:.2f} s wall "
            f"(worker {worker:.2f} s), unchanged={counts['unchanged']}"
        )

        job = rag_service.start_sync(noop_config)
        samples = sync_kb_latency(noop_config)
        rag_service.wait_for_job(noop_config, job.job_id)
        print(
            f"sync_kb in-process latency (job running): p50 {statistics.median(samples):.1f} ms,"
            f" max {max(samples):.1f} ms"
        )
        queries = ["invoice payment", "budget meeting", "termination notice", "file-000123"] * 10
        stdio = anyio.run(stdio_measurements, config, queries)
        print(
            "over MCP stdio: rag_search p50 {search_p50_ms:.1f} ms p95 {search_p95_ms:.1f} ms, "
            "sync_kb {sync_kb_ms:.1f} ms, server RSS {server_rss_mb:.1f} MB".format(**stdio)
        )
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
