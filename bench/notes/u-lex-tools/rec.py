"""rec.py SET IDX : per-query ranks (doc, unit) without units and with units at several weights"""
# ruff: noqa: E402, E501, E741, SIM115  (lab script of bench/notes/u-lex.md, run from the repo root)

import json
import sqlite3
import sys
import time

sys.path.insert(0, "/work/wt/u-lex")
from pathlib import Path

import rag_search
from helpers.eval import metrics as em
from helpers.lexical.query_terms import Query
from helpers.lexical.units import content_tokens
from helpers.ranking import constants
from helpers.store.index_db import open_index

SET, idx = sys.argv[1], sys.argv[2]
WS = [0.5, 1, 1.5, 2, 3, 4]
G = {"debian-pdf": "/work/idx/dpdf/set/golden.json"}.get(SET) or (
    f"/work/idx/kw/{SET}/golden.json"
    if SET.startswith(("lohelp", "pyindex"))
    else f"/work/shared/eval/{SET}/golden.json"
)
golden = json.load(open(G))
open_index(Path(idx) / "index.sqlite3").close()
conn = sqlite3.connect(f"file:{idx}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
base = tuple(c for c in rag_search.LEXICAL_CHANNELS if c != "units")


def ranks(q, chans, w):
    constants.CHANNEL_WEIGHTS["units"] = w
    res = rag_search.search(conn, q["query"], rag_search.SearchOptions(top_k=8, channels=chans))
    docs = em.distinct_documents(h.path for h in res.hits)
    rel = q["relevant"]
    relp = [x if isinstance(x, str) else x["path"] for x in rel]
    d = em.first_relevant_rank(docs, relp)
    u = None
    if isinstance(rel[0], dict) and rel[0].get("location"):
        u, _ = em.first_relevant_unit_rank(
            [(h.path, h.location) for h in res.hits], [(x["path"], x["location"]) for x in rel]
        )
    return [d, u]


out = []
t = time.time()
for q in golden["queries"]:
    row = {
        "n": len(content_tokens(Query.parse(q["query"]))),
        "q": q["query"][:80],
        "base": ranks(q, base, 0),
    }
    only = ranks(q, ("units",), 1)
    row["alone"] = only
    for w in WS:
        row[str(w)] = ranks(q, None, w)
    out.append(row)
json.dump(out, open(f"/tmp/u-lex/res/rec-{SET}.json", "w"))
print(SET, len(out), round(time.time() - t, 1), "s", flush=True)
