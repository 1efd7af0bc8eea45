"""latency.py IDX : manru lexical p50, main's channels vs all channels, alternating query by query in one process (warm)"""
# ruff: noqa: E402, E501, E741, SIM115  (lab script of bench/notes/u-lex.md, run from the repo root)

import json
import sqlite3
import statistics
import sys
import time

sys.path.insert(0, "/work/wt/u-lex")
import rag_search

idx = sys.argv[1]
qs = [q["query"] for q in json.load(open("/work/shared/eval/manru/golden.json"))["queries"]]
conn = sqlite3.connect(f"file:{idx}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
base = tuple(c for c in rag_search.LEXICAL_CHANNELS if c != "units")
t = {"main": [], "branch": []}
for rnd in range(4):
    for q in qs:
        for name, chans in (
            (("main", base), ("branch", None)) if rnd % 2 else (("branch", None), ("main", base))
        ):
            s = time.perf_counter()
            rag_search.search(conn, q, rag_search.SearchOptions(top_k=8, channels=chans))
            e = time.perf_counter()
            if rnd:
                t[name].append((e - s) * 1000)
m, b = statistics.median(t["main"]), statistics.median(t["branch"])
print(
    f"manru lexical p50 main-channels {m:.2f} ms, branch {b:.2f} ms, ratio {b / m:.3f} ({len(t['main'])} queries each)"
)
