"""Scale harness, end to end: one real folder through a real MCP client over stdio (run by hand).

    python bench/bench_mcp_scale.py --knowledge-dir DOCS --data-dir DATA --golden GOLDEN.json \
        [--model-dir ../shared/models/multilingual-e5-small-int8] [--searches 40] [--no-sync]

What bench_scale.py measures in process on synthesised vectors, measured here as a user gets it,
on a real folder (issue 26 item 1: "must also run end to end on a real >= 150k-passage folder"):

1. sync through the `sync_kb` tool (polled with `sync_status`) unless --no-sync, then a second,
   no-op one, beside a bare `os.walk` + `lstat` of the same tree in the same run;
2. a fresh server: spawn -> `initialize` -> the first hybrid `rag_search` answer, beside a bare
   onnxruntime session of the same model created in a fresh interpreter (the model load);
3. warm hybrid and lexical searches over the golden queries (p50 / p95 of the tool call);
4. hostile lexical queries (a run of one common trigram, a 1,000-character paragraph pasted from
   the index, 40 OR'd common words) against the lexical p50, and whether the answer says a
   channel was cut short;
5. RSS of the server and of its warm query worker, anonymous and file-mapped pages apart
   (/proc/PID/status RssAnon / RssFile), beside the float16 size of the generation's vectors;
   index.sqlite3 size and the stored vectors' and first-pass codes' bytes.

Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from stress.harness import McpProcess  # noqa: E402

from helpers.config import Config  # noqa: E402

MODEL_DIR = REPO.parent / "shared" / "models" / "multilingual-e5-small-int8"
SYNC_TIMEOUT_S = 6 * 3600  # a first sync of ~150k passages with vectors takes tens of minutes here
SEARCH_TIMEOUT_S = 300  # a first search may wait for the worker to read every vector
PASTED_CHARS = 1000  # the hostile "pasted paragraph"
OR_WORDS = 40  # the "many OR'd words"
TRIGRAM_RUN = 60  # repeats of one common trigram
FINAL = ("succeeded", "failed", "cancelled")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bare_walk(root: Path) -> float:
    """Best of three `os.walk` + `lstat` of every file: the floor of any no-op resync."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for folder, _dirs, files in os.walk(root):
            for name in files:
                os.lstat(os.path.join(folder, name))
        best = min(best, time.perf_counter() - t0)
    return best


def bare_model_load(model_dir: Path) -> float:
    """Wall time of a fresh interpreter creating one onnxruntime session of the model."""
    model = next(iter(sorted((model_dir / "onnx").glob("*.onnx"))))
    code = (
        "import onnxruntime as ort\n"
        "o = ort.SessionOptions(); o.intra_op_num_threads = 2\n"
        f"ort.InferenceSession({str(model)!r}, o, providers=['CPUExecutionProvider'])\n"
    )
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t0


def rss(pid: int) -> dict[str, int]:
    """RssAnon / RssFile / VmRSS of a process in KiB (mapped pages of the index file apart)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            fields[key] = int(value.split()[0])
    return fields


def query_workers(server_pid: int) -> list[int]:
    """Pids of the server's semantic_worker.py children."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == server_pid and "semantic_worker.py" in cmdline:
            found.append(int(entry.name))
    return found


def index_sizes(db: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        generation = conn.execute(
            "SELECT id, vector_count, dim FROM semantic_generations WHERE ready = 1 "
            "ORDER BY id DESC LIMIT 1"
        ).fetchone()
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        documents = conn.execute(
            "SELECT count(*) FROM documents WHERE status = 'indexed'"
        ).fetchone()[0]
        vectors = codes = 0
        if generation is not None:
            vectors = conn.execute(
                "SELECT coalesce(sum(length(vectors)), 0) FROM semantic_blocks "
                "WHERE generation_id = ?",
                (generation[0],),
            ).fetchone()[0]
            codes = conn.execute(
                "SELECT coalesce(sum(length(codes)), 0) FROM semantic_codes "
                "WHERE generation_id = ?",
                (generation[0],),
            ).fetchone()[0]
    wal = db.with_name(db.name + "-wal")
    return {
        "documents": documents,
        "chunks": chunks,
        "vectors": generation[1] if generation else 0,
        "index_bytes": db.stat().st_size + (wal.stat().st_size if wal.exists() else 0),
        "vector_bytes": vectors,
        "code_bytes": codes,
    }


def hostile_queries(db: Path) -> dict[str, str]:
    """Three worst cases of the issue, drawn from the index's own text."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        conn.create_function("rag_fold", 1, str.lower, deterministic=True)
        texts = [row[0] for row in conn.execute("SELECT text FROM chunks ORDER BY id LIMIT 2000")]
    words = Counter(w for t in texts for w in re.findall(r"\w{4,}", t.lower()))
    trigrams = Counter(
        w[i : i + 3] for w, n in words.items() for i in range(len(w) - 2) for _ in [n]
    )
    common = trigrams.most_common(1)[0][0]
    long_text = max(texts, key=len)
    pasted = " ".join(long_text.split())[:PASTED_CHARS]
    ored = " OR ".join(w for w, _ in words.most_common(OR_WORDS))
    return {"trigram_run": " ".join([common] * TRIGRAM_RUN), "pasted": pasted, "or_words": ored}


def timed_call(server: McpProcess, name: str, args: dict[str, Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    is_error, body = server.call(name, args, timeout=SEARCH_TIMEOUT_S)
    elapsed = time.perf_counter() - t0
    if is_error:
        raise RuntimeError(f"{name} failed: {body}")
    return elapsed, body


def run_sync(server: McpProcess) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    _, job = timed_call(server, "sync_kb", {})
    while job["state"] not in FINAL:
        _, job = timed_call(server, "sync_status", {"job_id": job["job_id"], "wait_seconds": 20})
        log(f"sync {job['state']} {job.get('phase')} {job.get('percent')}%")
        if time.perf_counter() - t0 > SYNC_TIMEOUT_S:
            raise TimeoutError("sync did not finish")
    return time.perf_counter() - t0, job


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def latencies(server: McpProcess, queries: list[str], mode: str) -> dict[str, float]:
    times = [timed_call(server, "rag_search", {"query": q, "mode": mode})[0] for q in queries]
    return {
        "p50_ms": round(statistics.median(times) * 1000, 1),
        "p95_ms": round(percentile(times, 0.95) * 1000, 1),
        "n": len(times),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    data = args.data_dir.resolve()
    config = Config(args.knowledge_dir.resolve(), data, data / "index.sqlite3")
    golden = json.loads(args.golden.read_text(encoding="utf-8"))
    queries = [q["query"] for q in golden["queries"]][: args.searches]
    stderr_path = args.data_dir / "bench-mcp-server.log"
    args.data_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"knowledge_dir": str(config.knowledge_dir)}

    server = McpProcess.start(config, stderr_path, args.model_dir)
    try:
        if not args.no_sync:
            log("first sync")
            seconds, job = run_sync(server)
            report["sync_s"] = round(seconds, 1)
            report["sync_counts"] = job.get("counts")
        log("no-op resync")
        noop, job = run_sync(server)
        walk = bare_walk(config.knowledge_dir)
        report["noop_resync_s"] = round(noop, 3)
        report["bare_walk_lstat_s"] = round(walk, 4)
        report["noop_ratio"] = round(noop / walk, 2) if walk > 0 else None
    finally:
        server.close()
    report.update(index_sizes(config.db_path))
    model_load = bare_model_load(args.model_dir)
    report["bare_model_load_s"] = round(model_load, 2)

    log("fresh server: first search")
    t0 = time.perf_counter()
    server = McpProcess.start(config, stderr_path, args.model_dir)
    try:
        started = time.perf_counter() - t0
        first, body = timed_call(server, "rag_search", {"query": queries[0], "mode": "hybrid"})
        report["server_start_s"] = round(started, 2)
        report["first_hybrid_s"] = round(started + first, 2)
        report["first_search_mode"] = body.get("mode")
        server_rss_cold = rss(server.proc.pid)
        log("warm searches")
        report["hybrid"] = latencies(server, queries, "hybrid")
        report["lexical"] = latencies(server, queries, "lexical")
        warm = report["hybrid"]["p50_ms"] / 1000
        budget = 2 * warm + model_load
        report["first_search_ratio"] = round((started + first) / budget, 2)
        # the server's own start (imports, MCP handshake) is the same at any index size
        report["first_search_ratio_past_server_start"] = round(first / budget, 2)
        hostile = {}
        for name, query in hostile_queries(config.db_path).items():
            runs = [
                timed_call(server, "rag_search", {"query": query, "mode": "lexical"})
                for _ in range(3)
            ]
            seconds = statistics.median(r[0] for r in runs)
            body = runs[-1][1]
            hostile[name] = {
                "ms": round(seconds * 1000, 1),
                "ratio_to_p50": round(seconds * 1000 / report["lexical"]["p50_ms"], 2),
                "hits": len(body.get("hits", [])),
                "truncated_channels": body.get("truncated_channels", []),
                "warnings": body.get("warnings", [])[:3],
            }
        report["hostile"] = hostile
        report["server_rss_kib"] = {
            "after_first": server_rss_cold,
            "after_all": rss(server.proc.pid),
        }
        workers = query_workers(server.proc.pid)
        report["worker_rss_kib"] = [rss(pid) for pid in workers]
        if workers and report["vector_bytes"]:
            anon = report["worker_rss_kib"][0].get("RssAnon", 0) * 1024
            report["worker_anon_to_vectors"] = round(anon / report["vector_bytes"], 3)
    finally:
        server.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--knowledge-dir", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--golden", type=Path, required=True, help="queries: golden.json")
    parser.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    parser.add_argument("--searches", type=int, default=40)
    parser.add_argument("--no-sync", action="store_true", help="the index is already built")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
