"""forms_latency.py SET IDX: lexical search p50 / p95 over SET's queries with a word searched by
all its forms (this tree) and by the form most units hold (main), alternating query by query in
one process, warm; and the same for the units channel's ranking alone."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import labkit

import rag_search
from helpers.lexical import unit_words, units
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query

SET, IDX = sys.argv[1:3]
conn = labkit.read_index(IDX)
queries = [q["query"] for q in labkit.golden(SET)["queries"]]
merged_words = unit_words.query_words


def main_words(per_language, holding):
    """main's rule: each word by the form most units hold."""
    words = merged_words(per_language, holding)
    return [unit_words.QueryWord((max(w.forms, key=lambda f: f[1]),)) for w in words]


times: dict[str, list[float]] = {"main": [], "branch": [], "main units": [], "branch units": []}
split = 0
for _ in range(2):
    for query in queries:
        for way, rule in (("main", main_words), ("branch", merged_words)):
            unit_words.query_words = rule
            start = time.perf_counter()
            rag_search.search(conn, query, rag_search.SearchOptions(top_k=10))
            times[way].append(time.perf_counter() - start)
            ctx = SearchContext(conn, Query.parse(query), Filters())
            start = time.perf_counter()
            units.ranked_units(ctx)
            times[way + " units"].append(time.perf_counter() - start)
for query in queries:
    ctx = SearchContext(conn, Query.parse(query), Filters())
    words = merged_words(
        units._per_language(ctx.query, units.index_languages(conn)), units._units_holding(conn)
    )
    split += any(len(w.forms) > 1 for w in words)
print(SET, "queries with a word of several forms:", split, "of", len(queries))
for way, values in times.items():
    values = values[len(values) // 2 :]  # the second, warm pass
    q = statistics.quantiles(values, n=20)
    print(f"  {way:13} p50 {statistics.median(values) * 1000:6.2f} ms  p95 {q[18] * 1000:6.2f} ms")
