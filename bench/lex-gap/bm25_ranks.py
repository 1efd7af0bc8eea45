"""bm25_ranks.py GOLDEN IDX OUT: textbook BM25 (bench/textbook_bm25.py) per query: its top
documents and the relevant document's rank, for the per-query error analysis
(bench/notes/lex-gap.md)."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import textbook_bm25 as tb

golden = json.load(open(sys.argv[1]))
documents = tb.read_documents(Path(sys.argv[2]) / "index.sqlite3")
lang = Counter(q.get("lang", "und") for q in golden["queries"]).most_common(1)[0][0]
tokens = tb.tokenizer(lang)
con = sqlite3.connect(":memory:")
con.execute(
    "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, body, tokenize = "
    + tb._quoted(tb.FTS_TOKENIZE)
    + ")"
)
con.executemany(
    "INSERT INTO docs(path, body) VALUES (?, ?)",
    ((p, " ".join(tokens(t))) for p, t in sorted(documents.items())),
)
out = []
for q in golden["queries"]:
    terms = list(dict.fromkeys(tokens(q["query"])))
    ranked = []
    if terms:
        ranked = [
            r[0]
            for r in con.execute(
                "SELECT path FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), path LIMIT 10",
                (" OR ".join(tb._quoted(t) for t in terms),),
            )
        ]
    rel = {r if isinstance(r, str) else r["path"] for r in q["relevant"]}
    rank = next((i + 1 for i, p in enumerate(ranked) if p in rel), None)
    out.append({"query": q["query"], "rank": rank, "top": ranked[:5], "terms": terms})
json.dump(out, open(sys.argv[3], "w"), ensure_ascii=False)
print(sum(1 / r["rank"] for r in out if r["rank"]) / len(out))
