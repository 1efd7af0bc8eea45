"""latency.py IDX: manru lexical p50 with main's units rule (token-count gate, no spread lift,
the relative-score lift) and with this tree's, alternating query by query in one process, warm
(as bench/k-fuse/latency.py)."""
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
from helpers.ranking import fusion
from helpers.store.fold_sql import register_fold

conn = sqlite3.connect(f"file:{sys.argv[1]}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
register_fold(conn)
queries = [q["query"] for q in json.load(open("/work/shared/eval/manru/golden.json"))["queries"]]
branch = (units.query_terms, rag_search.unit_weight, rag_search.tail_factors)


def main_weight(ctx, beside_semantic=False):
    weight = branch[1](ctx, beside_semantic)
    return weight if weight.rrf != units.UNIT_WEIGHT_SPREAD else units.UnitWeight(1.5, 0.0, 6.0)


main = (lambda q: len(units.content_tokens(q)), main_weight, fusion.unit_factors)


def use(rule) -> None:
    units.query_terms, rag_search.unit_weight, rag_search.tail_factors = rule


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
