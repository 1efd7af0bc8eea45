"""MCP server memory with semantic search on: RSS before and after hybrid searches (run by hand).

The semantic channel runs in short-lived subprocesses, so the server's RSS should not move when
searches use it, and onnxruntime / sentencepiece must never map into the server. A bare FastMCP
server with one tool is measured beside it as the floor.

    python bench/bench_server_rss.py [--set pyfaq-en] [--model-dir DIR] [--searches 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from semantic_fixtures import REAL_MODEL_DIR  # noqa: E402
from stress.harness import McpProcess  # noqa: E402

from helpers.config import Config  # noqa: E402

EVAL = REPO.parent / "shared" / "eval"
ML_LIBRARIES = ("onnxruntime", "sentencepiece")
BARE_SERVER = """
from fastmcp import FastMCP
mcp = FastMCP("bare")
@mcp.tool
def ping(text: str) -> str:
    return text
mcp.run()
"""


def status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def mapped_ml(pid: int) -> list[str]:
    maps = Path(f"/proc/{pid}/maps").read_text(errors="replace").lower()
    return [name for name in ML_LIBRARIES if name in maps]


def queries(set_name: str, count: int) -> list[str]:
    golden = json.loads((EVAL / set_name / "golden.json").read_text(encoding="utf-8"))
    items = golden["queries"] if isinstance(golden, dict) else golden
    return [item["query"] for item in items[:count]]


def bare_fastmcp_rss() -> float:
    """RSS of a one-tool FastMCP server after initialize and one call."""
    proc = subprocess.Popen(
        [sys.executable, "-c", BARE_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    client = McpProcess(proc)
    client.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b"}},
    )
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    client.call("ping", {"text": "x"})
    rss = status_mib(proc.pid, "VmRSS")
    client.close()
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="pyfaq-en")
    parser.add_argument("--model-dir", type=Path, default=REAL_MODEL_DIR)
    parser.add_argument("--searches", type=int, default=30)
    args = parser.parse_args()
    docs = EVAL / args.set / "docs"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "state"
        sync = [sys.executable, str(REPO / "rag_server.py"), "--knowledge-dir", str(docs)]
        sync += ["--data-dir", str(data), "--semantic-model-dir", str(args.model_dir), "sync"]
        subprocess.run(sync, check=True, stdout=subprocess.DEVNULL)
        config = Config(docs.resolve(), data, data / "index.sqlite3", semantic=True)
        server = McpProcess.start(config, Path(tmp) / "server.log", semantic_model=args.model_dir)
        try:
            pid = server.proc.pid
            server.call("rag_health", {})
            after_init = status_mib(pid, "VmRSS")
            for query in queries(args.set, 10):
                server.call("rag_search", {"query": query, "mode": "lexical"})
            after_lexical = status_mib(pid, "VmRSS")
            latencies = []
            for query in queries(args.set, args.searches):
                t = time.perf_counter()
                is_error, result = server.call("rag_search", {"query": query, "mode": "hybrid"})
                latencies.append((time.perf_counter() - t) * 1000)
                assert not is_error and not result.get("warnings"), result
            after_hybrid = status_mib(pid, "VmRSS")
            peak = status_mib(pid, "VmHWM")
            ml = mapped_ml(pid)
        finally:
            server.close()
    latencies.sort()
    print(
        f"MCP server RSS ({args.set}, real model): after initialize + health {after_init:.1f} MiB; "
        f"after 10 lexical searches {after_lexical:.1f} MiB; after {args.searches} hybrid "
        f"searches {after_hybrid:.1f} MiB (change {after_hybrid - after_lexical:+.1f} MiB); "
        f"peak {peak:.1f} MiB; hybrid p50 {latencies[len(latencies) // 2]:.0f} ms over stdio; "
        f"ML libraries mapped into the server: {ml or 'none'}"
    )
    print(f"bare FastMCP server (one tool) RSS: {bare_fastmcp_rss():.1f} MiB")


if __name__ == "__main__":
    main()
