"""bylen.py SET IDX W : MRR by content-token count, base (no units) vs units at W (doc level; unit level if located)"""
# ruff: noqa: E402, E501, E741, SIM115  (lab script of bench/notes/u-lex.md, run from the repo root)

import json
import sqlite3
import sys

sys.path.insert(0, "/work/wt/u-lex")
import rag_search
from helpers.lexical.query_terms import Query
from helpers.lexical.units import content_tokens
from helpers.ranking import constants

SET, idx, W = sys.argv[1], sys.argv[2], float(sys.argv[3])
G = {"debian-pdf": "/work/idx/dpdf/set/golden.json"}.get(SET) or (
    f"/work/idx/kw/{SET}/golden.json"
    if SET.startswith(("lohelp", "pyindex"))
    else f"/work/shared/eval/{SET}/golden.json"
)
golden = json.load(open(G))
conn = sqlite3.connect(f"file:{idx}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
base = tuple(c for c in rag_search.LEXICAL_CHANNELS if c != "units")


def rr(q, chans, w):
    constants.CHANNEL_WEIGHTS["units"] = w
    res = rag_search.search(conn, q["query"], rag_search.SearchOptions(top_k=10, channels=chans))
    paths = list(dict.fromkeys(h.path for h in res.hits))
    relp = {x if isinstance(x, str) else x["path"] for x in q["relevant"]}
    r = next((i + 1 for i, p in enumerate(paths) if p in relp), None)
    return 1 / r if r else 0.0


from collections import defaultdict

b = defaultdict(list)
for q in golden["queries"]:
    n = min(len(content_tokens(Query.parse(q["query"]))), 7)
    b[n].append((rr(q, base, 0), rr(q, None, W)))
for n in sorted(b):
    xs = b[n]
    print(
        SET,
        n,
        len(xs),
        round(sum(x for x, _ in xs) / len(xs), 3),
        round(sum(y for _, y in xs) / len(xs), 3),
    )
