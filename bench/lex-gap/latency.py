"""latency.py IDX: manru lexical p50 with main's units gate (overlapping tokens counted) and
with this tree's rule, alternating query by query in one process, warm (as
bench/k-fuse/latency.py)."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import rag_search
from helpers.lexical import units
from helpers.store.fold_sql import register_fold

conn = sqlite3.connect(f"file:{sys.argv[1]}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
register_fold(conn)
queries = [q["query"] for q in json.load(open("/work/shared/eval/manru/golden.json"))["queries"]]
branch = units.query_terms
main = lambda q: len(units.content_tokens(q))  # noqa: E731


def use(rule) -> None:
    units.query_terms = rule


times: dict[str, list[float]] = {"main": [], "branch": []}
for round_ in range(4):
    for query in queries:
        order = [("main", main), ("branch", branch)]
        for name, rule in order if round_ % 2 else order[::-1]:
            use(rule)
            started = time.perf_counter()
            rag_search.search(conn, query, rag_search.SearchOptions(top_k=8))
            if round_:
                times[name].append((time.perf_counter() - started) * 1000)
a, b = statistics.median(times["main"]), statistics.median(times["branch"])
print(f"manru lexical p50: main's rule {a:.2f} ms, branch {b:.2f} ms, {b / a:.3f}x")
