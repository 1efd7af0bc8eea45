"""per-query: textbook rank vs our channel(s) rank. usage: cmp.py GOLDEN IDX CHANNELS [N]"""
# ruff: noqa: E402, E501, E741, SIM115  (lab script of bench/notes/u-lex.md, run from the repo root)

import json
import sqlite3
import sys

sys.path.insert(0, "/work/wt/u-lex")
sys.path.insert(0, "/work/wt/u-lex/bench")
import textbook_bm25 as tb

import rag_search
from helpers.lexical import units as _U

_U.UNIT_MIN_TERMS = 0
_U.UNIT_MAX_TERMS = 99
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query

golden = json.load(open(sys.argv[1]))
idx = sys.argv[2]
chans = tuple(sys.argv[3].split(","))
n = int(sys.argv[4]) if len(sys.argv) > 4 else 30
from collections import Counter

lang = Counter(q.get("lang", "und") for q in golden["queries"]).most_common(1)[0][0]
docs = tb.read_documents(__import__("pathlib").Path(idx) / "index.sqlite3")
tok = tb.tokenizer(lang)
mem = sqlite3.connect(":memory:")
mem.execute(
    "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, body, tokenize = "
    + tb._quoted(tb.FTS_TOKENIZE)
    + ")"
)
mem.executemany(
    "INSERT INTO docs(path, body) VALUES (?, ?)",
    ((p, " ".join(tok(t))) for p, t in sorted(docs.items())),
)
from helpers.store.index_db import open_index

open_index(__import__("pathlib").Path(idx) / "index.sqlite3").close()
conn = sqlite3.connect(f"file:{idx}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
shown = 0
a = b = 0.0
for q in golden["queries"]:
    terms = list(dict.fromkeys(tok(q["query"])))
    ranked = (
        [
            r[0]
            for r in mem.execute(
                "SELECT path FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), path LIMIT 10",
                (" OR ".join(tb._quoted(t) for t in terms),),
            )
        ]
        if terms
        else []
    )
    rel = {r if isinstance(r, str) else r["path"] for r in q["relevant"]}
    rt = next((i + 1 for i, p in enumerate(ranked) if p in rel), None)
    res = rag_search.search(conn, q["query"], rag_search.SearchOptions(top_k=10, channels=chans))
    paths = list(dict.fromkeys(h.path for h in res.hits))
    ro = next((i + 1 for i, p in enumerate(paths) if p in rel), None)
    a += 1 / rt if rt else 0
    b += 1 / ro if ro else 0
    if rt != ro and shown < n:
        shown += 1
        ctx = SearchContext(conn, Query.parse(q["query"]), Filters())
        print(
            f"{q['query'][:70]!r} tb={rt} ours={ro} rel={sorted(rel)[0][:40]}\n   tb terms={terms[:12]}\n   ours=-\n   tbtop={ranked[:3]}\n   ourtop={paths[:3]}"
        )
print("mrr textbook", a / len(golden["queries"]), "ours", b / len(golden["queries"]))
