"""loso.py RES_DIR [PREFIX]: leave-one-set-out choice of the units channel's weights
(weight when no passage holds every content word, weight when one does, most content words)
from rec.py's records; lohelp-cs and lohelp-cs-nomarks are one fold. A choice maximises the
mean MRR@10 gain over today's rule (weight 1 for every 2-6-word query) on the training sets,
none of which may lose more than one query's worth (bench/notes/k-fuse.md)."""
# ruff: noqa: SIM115  (lab script)

import glob
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from helpers.lexical.query_terms import Query  # noqa: E402

RES = sys.argv[1]
PREFIX = sys.argv[2] if len(sys.argv) > 2 else "rec-"
TODAY = sys.argv[3] if len(sys.argv) > 3 else "1.0"  # today's weight (hybrid: lift 0.0)
TOLERANCE = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0  # queries' worth a set may lose
rows: dict[str, tuple[list[dict], int]] = {}
for path in sorted(glob.glob(f"{RES}/{PREFIX}*.json")):
    name = os.path.basename(path)[len(PREFIX) : -5]
    data = json.load(open(path))
    rows[name] = (data, 0)
    if name == "debian-pdf":
        golden = "/work/idx/dpdf/set/golden.json"
    elif name.startswith(("lohelp", "pyindex")):
        golden = f"/work/idx/kw/{name}/golden.json"
    else:
        golden = f"/work/shared/eval/{name}/golden.json"
    prose = {
        q["query"][:80]: any(g.stop for g in Query.parse(q["query"]).groups)
        for q in json.load(open(golden))["queries"]
    }
    for r in data:
        r["prose"] = prose[r["q"]]
    if any(r["base"][1] is not None for r in data):
        rows[name + "/page"] = (data, 1)
gated = [r for d, _ in rows.values() for r in d if "1.0" in r or "0.0" in r]
keys = set.intersection(*(set(r) for r in gated))  # the variants every set recorded
weights = sorted(k for k in keys if k[0].isdigit() or k[0] == "L")


def fold(name: str) -> str:
    return name.split("/")[0].replace("-nomarks", "")


def rank(r: dict, spread: str, together: str, most: int, asked: bool, level: int) -> int | None:
    if not 2 <= r["n"] <= most or spread not in r:
        return r["base"][level]
    if asked == 1 and r.get("question"):  # a question keeps today's weight
        return r[TODAY][level]
    if asked == 2 and r.get("prose"):  # so does a query with a stop word (a sentence)
        return r[TODAY][level]
    return r[together if r["together"] else spread][level]


def mrr(data: list[dict], level: int, v: tuple[str, str, int, bool]) -> float:
    ranks = [rank(r, *v, level) for r in data]
    return sum(1 / k for k in ranks if k and k <= 10) / len(data)


variants = [(s, t, n, q) for s in weights for t in weights for n in (4, 5, 6) for q in (0, 1, 2)]
table = {v: {s: mrr(d, lvl, v) for s, (d, lvl) in rows.items()} for v in variants}
today = {s: table[(TODAY, TODAY, 6, False)][s] for s in rows}


def choose(train: list[str]) -> tuple[str, str, int, bool]:
    def score(v: tuple[str, str, int, bool]) -> tuple[bool, float]:
        ok = all(table[v][s] - today[s] >= -TOLERANCE / len(rows[s][0]) for s in train)
        return ok, sum(table[v][s] - today[s] for s in train) / len(train)

    return max(variants, key=score)


print(f"{'held-out set':22} today   (spread, together, most, questions apart) held-out  delta")
for s in rows:
    v = choose([t for t in rows if fold(t) != fold(s)])
    print(f"{s:22} {today[s]:.4f} {str(v):26} {table[v][s]:.4f} {table[v][s] - today[s]:+.4f}")
v = choose(list(rows))
print("all sets ->", v)
for s in rows:
    print(f"  {s:22} {today[s]:.4f} -> {table[v][s]:.4f} ({table[v][s] - today[s]:+.4f})")
