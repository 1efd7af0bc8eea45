"""What an agent receives from rag_search at default arguments, over stdio with the official MCP
client, on every public eval set (numbers in bench/RESULTS.md, "Answer size").

    python bench/bench_answer_size.py --index-root DIR [--sets pyfaq-en,manru] [--server PATH]

DIR/<set> is a data dir already synced for ../shared/eval/<set>/docs (udhr-en2th shares
udhr-th2th's documents and index). Per set: mean and p95 characters of the structured content
(compact JSON) and of the text content, and two shares: Recall@8 (the relevant document among
the hits of an unbudgeted full search, in process) and "verbatim" (every line of that document's
best-matching child, without its heading breadcrumb, appears character for character in the
response's section window, for the hit's path or one of its other_paths; lines, because a
table child repeats the header that its section shows once). `--server` measures another checkout's
rag_server.py (e.g. the tree before the budget); verbatim is then still judged on its response.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_DIR))

import rag_service  # noqa: E402
from helpers.config import config_from_args  # noqa: E402
from helpers.ranking.answer_budget import child_body  # noqa: E402
from helpers.store.codec import child_location  # noqa: E402

EVAL_DIR = REPO_DIR.parent / "shared" / "eval"
MODEL_DIR = REPO_DIR.parent / "shared" / "models" / "multilingual-e5-small-int8"
SETS = ("debfaq-en", "debfaq-en-mixed", "pyfaq-en", "manru", "udhr-th2th", "udhr-en2th")
SHARED_INDEX = {"udhr-en2th": "udhr-th2th"}  # same documents, one index


def _config(set_name: str, index_root: Path) -> Any:
    parser = argparse.ArgumentParser()
    from helpers.config import add_config_arguments

    add_config_arguments(parser)
    return config_from_args(
        parser.parse_args(
            [
                "--knowledge-dir",
                str(EVAL_DIR / set_name / "docs"),
                "--data-dir",
                str(index_root / SHARED_INDEX.get(set_name, set_name)),
                "--semantic-model-dir",
                str(MODEL_DIR),
            ]
        )
    )


def _best_child(conn: sqlite3.Connection, hits: list[Any], relevant: set[str]) -> str | None:
    """Body of the first hit's child whose document is relevant (None: not in the hits)."""
    for hit in hits:
        if hit.path in relevant:
            row = conn.execute(
                "SELECT c.text, c.location, s.location FROM chunks c "
                "JOIN sections s ON s.id = c.section_id WHERE c.id = ?",
                (hit.chunk_id,),
            ).fetchone()
            heading = child_location(row[1], row[2]).heading_path
            return child_body(row[0], " > ".join(p.strip() for p in heading if p.strip()))
    return None


def _p95(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


async def measure(set_name: str, index_root: Path, server: Path) -> dict[str, Any]:
    config = _config(set_name, index_root)
    golden = json.loads((EVAL_DIR / set_name / "golden.json").read_text(encoding="utf-8"))
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            str(server),
            "--knowledge-dir",
            str(config.knowledge_dir),
            "--data-dir",
            str(config.data_dir),
            "--semantic-model-dir",
            str(MODEL_DIR),
        ],
        cwd=str(server.parent),
    )
    structured: list[int] = []
    text: list[int] = []
    recall = verbatim = consistent = 0
    conn = sqlite3.connect(config.db_path)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for item in golden["queries"]:
            relevant = set(item["relevant"])
            result = await session.call_tool("rag_search", {"query": item["query"]})
            body = result.structured_content or {}
            structured.append(len(json.dumps(body, ensure_ascii=False, separators=(",", ":"))))
            shown = "".join(c.text for c in result.content if getattr(c, "text", None))
            text.append(len(shown))
            consistent += json.loads(shown) == body if shown.startswith("{") else 0
            full = rag_service.search(config, item["query"])
            child = _best_child(conn, full.hits, relevant)
            if child is None:
                continue
            recall += 1
            windows = [
                body.get("sections", {}).get(str(h["section_id"]), "")
                for h in body.get("hits", [])
                if relevant & {h["path"], *h.get("other_paths", [])}
            ]
            lines = [line for line in child.splitlines() if line.strip()]
            verbatim += any(all(line in w for line in lines) for w in windows)
    conn.close()
    n = len(golden["queries"])
    return {
        "set": set_name,
        "queries": n,
        "structured_mean": round(statistics.mean(structured)),
        "structured_p95": _p95(structured),
        "text_mean": round(statistics.mean(text)),
        "text_p95": _p95(text),
        "text_equals_structured": round(consistent / n, 3),
        "recall_at_8": round(recall / n, 3),
        "verbatim": round(verbatim / n, 3),
        "_sizes": structured,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-root", type=Path, required=True)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--server", type=Path, default=REPO_DIR / "rag_server.py")
    args = parser.parse_args()
    rows = []
    for name in args.sets.split(","):
        row = anyio.run(measure, name, args.index_root, args.server.resolve())
        rows.append(row.pop("_sizes"))
        print(json.dumps(row), flush=True)
    sizes = [size for row in rows for size in row]
    print(
        json.dumps(
            {
                "set": "all",
                "queries": len(sizes),
                "structured_mean": round(statistics.mean(sizes)),
                "structured_p95": _p95(sizes),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
