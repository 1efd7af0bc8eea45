"""loso.py RES_DIR [TOLERANCE] [--table]: leave-one-set-out choice of the lexical units rule
from bench/lex-gap/rec.py's records. A rule is (spread lift L, coverage gate T, together lift
LT): a query no chunk answers whole takes its rank under lift L when the first passage's
section holds under T of its content words (the `cov` record), else under no spread lift; a
query a chunk answers whole takes its rank under LT. Per fold (lohelp-cs and -cs-nomarks one
fold; debian-pdf's page level its own row) the rule with the largest mean MRR@10 gain over
main's rule on the training rows, none losing more than TOLERANCE (default 0.002); the
held-out row's gain is reported (bench/notes/lex-gap.md)."""
# ruff: noqa: SIM115  (lab script)

import glob
import json
import os
import sys

RES = sys.argv[1]
TOL = float(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2][0].isdigit() else 0.002
TODAY = "1.5,1,0,0.5,lin,tok,60"
NOLIFT = "1.5,1,0,0.5,exp,word,60"


def key(ls: float, lt: float | str) -> str:
    return f"1.5,1,{ls:g},{lt:g},exp,word,60"


def lookup(data: dict, ls: float, lt: float) -> list | None:
    """The tail lift with its fallback to the relative score under 10 ranked documents (`exq`)
    where recorded; elsewhere `exp` (the same once 10 documents are ranked, as on the help
    sets: an approximation the fresh runs check)."""
    name = key(ls, lt)
    return data.get(name.replace(",exp,", ",exq,"), data.get(name))


def together_of(data: dict, lt: float) -> list | None:
    """Ranks for the queries a chunk answers whole under the together lift LT: the spread lift
    does not touch them, so any variant with that LT serves (exq first, as in lookup)."""
    for ls in (0, 0.5, 1, 2):
        found = data.get(key(ls, lt).replace(",exp,", ",exq,"))
        if found is not None:
            return found
    return lookup(data, 0.5, lt)


def rr(rank: int | None) -> float:
    return 1 / rank if rank and rank <= 10 else 0.0


records: dict[str, tuple[dict, int]] = {}
for path in sorted(glob.glob(f"{RES}/rec-*.json")):
    name = os.path.basename(path)[4:-5]
    data = json.load(open(path))
    if "cov" not in data or TODAY not in data:
        print("skipped (incomplete):", name)
        continue
    records[name] = (data, 0)
    if any(r[1] is not None for r in data[TODAY]):
        records[name + "/page"] = (data, 1)
SPREAD = (0.5, 1.0, 2.0)
GATES = (0.34, 0.5, 0.6, 0.67, 0.75, 0.8, 1.01)
TOGETHER = ("lin", 0.5, 1.0)
rules = [(0.0, 0.0, lt) for lt in TOGETHER]
rules += [(ls, t, lt) for ls in SPREAD for t in GATES for lt in TOGETHER]


def mrr(name: str, rule: tuple[float, float, float] | None) -> float | None:
    data, level = records[name]
    if rule is None:
        return sum(rr(r[level]) for r in data[TODAY]) / len(data[TODAY])
    ls, t, lt = rule
    spread = lookup(data, ls, 0.5)
    if lt == "lin":  # main's lift for these queries (its gate of words where it is recorded)
        together = data.get("1.5,1,0,0.5,lin,word,60", data[TODAY])
    else:
        together = together_of(data, lt)
    if (ls and spread is None) or together is None:
        return None
    total = 0.0
    for i, (cov, holds) in enumerate(data["cov"]):
        if holds:
            total += rr(together[i][level])
        elif ls and cov < t:
            total += rr(spread[i][level])
        else:
            total += rr(lookup(data, 0, 0.5)[i][level])
    return total / len(data["cov"])


table = {rule: {s: mrr(s, rule) for s in records} for rule in rules}
rules = [r for r in rules if all(v is not None for v in table[r].values())]
today = {s: mrr(s, None) for s in records}


def fold(name: str) -> str:
    return name.split("/")[0].replace("-nomarks", "")


def choose(train: list[str]) -> tuple[float, float, float]:
    def score(rule: tuple[float, float, float]) -> tuple[bool, float]:
        ok = all(table[rule][s] - today[s] >= -TOL for s in train)
        return ok, sum(table[rule][s] - today[s] for s in train) / len(train)

    return max(rules, key=score)


print(f"{len(rules)} rules on {len(records)} rows, tolerance {TOL}")
print(f"{'held-out row':22} main    chosen on the others (L, T, LT)  held-out  delta")
for s in records:
    rule = choose([t for t in records if fold(t) != fold(s)])
    gain = table[rule][s] - today[s]
    print(f"{s:22} {today[s]:.4f} {rule!s:32} {table[rule][s]:.4f} {gain:+.4f}")
rule = choose(list(records))
print("all rows ->", rule)
for s in records:
    print(f"  {s:22} {today[s]:.4f} -> {table[rule][s]:.4f} ({table[rule][s] - today[s]:+.4f})")
if "--table" in sys.argv:
    for rule in rules:
        worst = min(table[rule][s] - today[s] for s in records)
        mean = sum(table[rule][s] - today[s] for s in records) / len(records)
        print(rule, f"mean {mean:+.4f} worst {worst:+.4f}")
