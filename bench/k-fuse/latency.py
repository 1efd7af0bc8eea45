"""latency.py IDX: manru lexical p50 without the units channel (the pre-wave channels) and with
every channel of this tree, alternating query by query in one process, warm (as u-lex's)."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import rag_search
from helpers.store.fold_sql import register_fold

conn = sqlite3.connect(f"file:{sys.argv[1]}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
register_fold(conn)
queries = [q["query"] for q in json.load(open("/work/shared/eval/manru/golden.json"))["queries"]]
before = tuple(c for c in rag_search.LEXICAL_CHANNELS if c != "units")
times: dict[str, list[float]] = {"pre-wave": [], "all": []}
for round_ in range(4):
    for query in queries:
        order = [("pre-wave", before), ("all", None)]
        for name, channels in order if round_ % 2 else order[::-1]:
            started = time.perf_counter()
            rag_search.search(conn, query, rag_search.SearchOptions(top_k=8, channels=channels))
            if round_:
                times[name].append((time.perf_counter() - started) * 1000)
pre, full = statistics.median(times["pre-wave"]), statistics.median(times["all"])
print(f"manru lexical p50: pre-wave channels {pre:.2f} ms, all {full:.2f} ms, {full / pre:.3f}x")
