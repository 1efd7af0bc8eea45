"""loso.py : leave-one-set-out choice of (weight, max terms, min terms) from rec-*.json"""
# ruff: noqa: E402, E501, E741, SIM115  (lab script of bench/notes/u-lex.md, run from the repo root)

import glob
import json
import os
import sys

rows = {}
for f in sorted(glob.glob("/tmp/u-lex/res/rec-*.json")):
    s = os.path.basename(f)[4:-5]
    data = json.load(open(f))
    rows[s] = (data, 0)
    if data and data[0]["base"][1] is not None or any(r["base"][1] for r in data):
        rows[s + "/page"] = (data, 1)
WS = ["0.5", "1", "1.5", "2", "3", "4"]


def mrr(data, lvl, w, N, M):
    tot = 0.0
    for r in data:
        use = w is not None and M <= r["n"] <= N
        k = r[w][lvl] if use else r["base"][lvl]
        tot += 1 / k if k and k <= 10 else 0
    return tot / len(data)


variants = [(w, N, M) for w in WS for N in (3, 4, 5, 6, 99) for M in (1, 2)]
table = {v: {s: mrr(d, l, *v) for s, (d, l) in rows.items()} for v in variants}
base = {s: mrr(d, l, None, 0, 0) for s, (d, l) in rows.items()}
alone = {
    s: sum(1 / r["alone"][l] if r["alone"][l] and r["alone"][l] <= 10 else 0 for r in d) / len(d)
    for s, (d, l) in rows.items()
}
TOL = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0  # 0: one query's worth per set


def choose(train):
    def score(v):
        gains = [table[v][s] - base[s] for s in train]
        ok = all(table[v][s] - base[s] >= -(TOL or 1.0 / len(rows[s][0])) for s in train)
        return (ok, sum(gains) / len(gains))

    return max(variants, key=score)


print("set                 main   alone  | chosen (w,N,M) held-out  delta")
for s in rows:
    v = choose([t for t in rows if t != s and t.split("/")[0] != s.split("/")[0]])
    print(
        f"{s:18} {base[s]:.4f} {alone[s]:.4f} | {v} {table[v][s]:.4f} {table[v][s] - base[s]:+.4f}"
    )
v = choose(list(rows))
print("all sets ->", v, {s: round(table[v][s] - base[s], 4) for s in rows})
