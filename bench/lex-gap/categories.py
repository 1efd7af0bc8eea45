"""categories.py AN.json [IDX]: the queries textbook BM25 ranks first and we do not, by cause
(bench/notes/lex-gap.md). With IDX, a relevant page the units channel misses or ranks lower is
split by whether its unit is stemmed in another language than most units."""

# ruff: noqa: SIM115
import json
import sqlite3
import sys
from collections import Counter

rows = json.load(open(sys.argv[1]))
lang_of: dict[str, str] = {}
main_lang = ""
if len(sys.argv) > 2:
    conn = sqlite3.connect(f"file:{sys.argv[2]}/index.sqlite3?mode=ro", uri=True)
    sql = "SELECT d.path, u.lang FROM units u JOIN documents d ON d.id = u.document_id"
    lang_of = dict(conn.execute(sql).fetchall())
    main_lang = Counter(lang_of.values()).most_common(1)[0][0]
cats: Counter = Counter()
for r in rows:
    if r["bm25"] != 1 or r["ours"] == 1:
        continue
    if not 2 <= r["n"] <= 6:
        c = "gate: units not run (content tokens outside 2-6)"
    elif r["units"] == 1:
        c = "units has it first, fusion loses it" + (
            " (a chunk holds all words)" if r["together"] else " (no chunk holds all words)"
        )
    else:
        c = "units misses it or ranks it lower than BM25"
        if lang_of and lang_of.get(r["rel"], main_lang) != main_lang:
            c += " (its page stemmed in another language)"
    cats[c] += 1
wins = sum(1 for r in rows if r["ours"] == 1 and r["bm25"] != 1)
print(sum(cats.values()), "lost at rank 1;", wins, "won at rank 1")
for c, n in cats.most_common():
    print(f"{n:4} {c}")
