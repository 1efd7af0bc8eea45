"""analyse.py SET IDX BM25Q OUT: per query, our document rank (all channels), the rank with the
units channel out, the units channel alone (documents in its order), textbook BM25's rank, the
number of content tokens and whether a chunk holds them all: the table the error categories of
bench/notes/lex-gap.md are counted from."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import rag_search
from helpers.eval import metrics as em
from helpers.lexical.channels import passage_holds_all
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.lexical.units import content_tokens, ranked_units
from helpers.store.fold_sql import register_fold

SET, IDX, BM25Q, OUT = sys.argv[1:5]
golden = json.load(open(f"/work/idx/kw/{SET}/golden.json"))
bm25 = json.load(open(BM25Q))
conn = sqlite3.connect(f"file:{IDX}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
register_fold(conn)
paths = {r[0]: r[1] for r in conn.execute("SELECT id, path FROM documents")}


def doc_rank(q, channels):
    res = rag_search.search(conn, q["query"], rag_search.SearchOptions(top_k=30, channels=channels))
    docs = em.distinct_documents(h.path for h in res.hits)
    return em.first_relevant_rank(docs, q["relevant"]), docs[:3], res


base = tuple(c for c in rag_search.LEXICAL_CHANNELS if c != "units")
out = []
for q, b in zip(golden["queries"], bm25, strict=True):
    parsed = Query.parse(q["query"])
    ctx = SearchContext(conn, parsed, Filters())
    n = len(content_tokens(parsed))
    full, top, res = doc_rank(q, None)
    nounits, _, _ = doc_rank(q, base)
    units = []
    for _, doc, _ in ranked_units(ctx):
        if paths[doc] not in units:
            units.append(paths[doc])
    urank = next((i + 1 for i, p in enumerate(units) if p in q["relevant"]), None)
    hit_ch = {}
    for h in res.hits:
        if h.path in q["relevant"]:
            hit_ch = {k: v.rank for k, v in h.channels.items()}
            break
    top_ch = {k: v.rank for k, v in res.hits[0].channels.items()} if res.hits else {}
    out.append(
        {
            "query": q["query"],
            "rel": q["relevant"][0],
            "n": n,
            "together": passage_holds_all(ctx),
            "question": parsed.question,
            "ours": full,
            "nounits": nounits,
            "units": urank,
            "bm25": b["rank"],
            "top": top,
            "bm25top": b["top"][:3],
            "units_top": units[:3],
            "rel_channels": hit_ch,
            "top_channels": top_ch,
        }
    )
json.dump(out, open(OUT, "w"), ensure_ascii=False, indent=0)
mrr = lambda k: sum(1 / r[k] for r in out if r[k] and r[k] <= 10) / len(out)  # noqa: E731
print(SET, {k: round(mrr(k), 4) for k in ("ours", "nounits", "units", "bm25")})
