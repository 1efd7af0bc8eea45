"""kgate.py REC_DIR [TOLERANCE] [--ks 1,3,5,10,20] [--gates 0.6]: leave-one-set-out choice of
the units channel's RRF constant for spread queries (bench/notes/k-spread.md) from
bench/lex-gap/rec.py's records (`1.5,1,0,0.5,lin,word,KS/60` variants and `cov`).

A rule is (KS, T): a query no chunk answers whole whose first hit's section holds under T of its
content words (the `cov` record) takes its rank under KS, every other query its rank under
main's RRF_K. Per fold (lohelp-cs and -cs-nomarks one fold; debian-pdf's page level its own row)
the rule with the largest mean MRR@10 gain over main on the training rows, none losing more
than TOLERANCE (default 0.005); the held-out row's gain is printed, and each rule's gain on
every row above it."""
# ruff: noqa: SIM115  (lab script)

import argparse
import glob
import itertools
import json
import os

MAIN = "1.5,1,0,0.5,lin,word,60"

parser = argparse.ArgumentParser()
parser.add_argument("rec_dir")
parser.add_argument("tolerance", nargs="?", type=float, default=0.005)
parser.add_argument("--ks", default="1,3,5,10,20")
parser.add_argument("--gates", default="0.34,0.5,0.6,0.67,0.75,0.8,1.01")
args = parser.parse_args()
KS = [int(x) for x in args.ks.split(",")]
GATES = [float(x) for x in args.gates.split(",")]


def rr(rank: int | None) -> float:
    return 1 / rank if rank and rank <= 10 else 0.0


rows: dict[str, tuple[dict, int]] = {}
for path in sorted(glob.glob(f"{args.rec_dir}/rec-*.json")):
    name = os.path.basename(path)[4:-5]
    data = json.load(open(path))
    if MAIN not in data or "cov" not in data:
        print("skipped (incomplete):", name)
        continue
    rows[name] = (data, 0)
    if any(r[1] is not None for r in data[MAIN]):
        rows[name + "/page"] = (data, 1)


def mrr(row: str, rule: tuple[int, float] | None) -> float:
    data, at = rows[row]
    if rule is None:
        return sum(rr(r[at]) for r in data[MAIN]) / len(data[MAIN])
    ks, gate = rule
    sharp = data[f"1.5,1,0,0.5,lin,word,{ks}/60"]
    total = 0.0
    for plain, spread, (cov, holds) in zip(data[MAIN], sharp, data["cov"], strict=True):
        total += rr((spread if not holds and cov < gate else plain)[at])
    return total / len(data[MAIN])


rules = list(itertools.product(KS, GATES))
base = {row: mrr(row, None) for row in rows}
gain = {(row, rule): mrr(row, rule) - base[row] for row in rows for rule in rules}
for rule in rules:
    gains = [gain[(row, rule)] for row in rows]
    moved = " ".join(
        f"{row.replace('lohelp-', '')}:{gain[(row, rule)]:+.4f}"
        for row in rows
        if abs(gain[(row, rule)]) >= 0.001
    )
    print(rule, f"mean {sum(gains) / len(gains):+.4f} min {min(gains):+.4f}", moved)
folds = [[row] for row in rows if not row.startswith("lohelp-cs")]
folds.append([row for row in rows if row.startswith("lohelp-cs")])
print("leave-one-set-out, tolerance", args.tolerance)
for fold in folds:
    train = [row for row in rows if row not in fold]
    best, best_gain = None, 0.0
    for rule in rules:
        gains = [gain[(row, rule)] for row in train]
        if min(gains) >= -args.tolerance and sum(gains) / len(gains) > best_gain:
            best, best_gain = rule, sum(gains) / len(gains)
    held = " ".join(f"{row} {gain[(row, best)] if best else 0.0:+.4f}" for row in fold)
    print("held out:", held, "rule", best)
