"""hloso.py HREC_DIR [TOLERANCE]: leave-one-set-out choice of the units channel's lift beside the
semantic side from bench/lex-gap/hrec.py's records (`hrec-SET.json`, one rank list per variant;
main's variant is `lin,6`). Per fold (lohelp-cs and -cs-nomarks one fold, the two debfaq sets
one, the two udhr sets one; the cross sets x-* are rows of their own) the variant with the
largest mean MRR@10 gain over main on the training rows, none losing more than TOLERANCE
(default 0.005); the held-out rows' gains are printed (bench/notes/hyb-units.md)."""
# ruff: noqa: SIM115  (lab script)

import glob
import json
import os
import sys

MAIN = "lin,6"
TWINS = (("lohelp-cs", "lohelp-cs-nomarks"), ("debfaq-en", "debfaq-en-mixed"))
TWINS += (("udhr-th2th", "udhr-en2th"),)


def rr(rank: int | None) -> float:
    return 1 / rank if rank and rank <= 10 else 0.0


res_dir = sys.argv[1]
tolerance = float(sys.argv[2]) if len(sys.argv) > 2 else 0.005
records = {
    os.path.basename(p)[5:-5]: json.load(open(p))
    for p in sorted(glob.glob(f"{res_dir}/hrec-*.json"))
}
variants = sorted({v for r in records.values() for v in r if v != MAIN})
variants = [v for v in variants if all(v in r for r in records.values())]
mrr = {
    (name, v): sum(rr(r[0]) for r in data[v]) / len(data[v])
    for name, data in records.items()
    for v in (MAIN, *variants)
}
gain = {(name, v): mrr[(name, v)] - mrr[(name, MAIN)] for name in records for v in variants}
for v in variants:
    row = " ".join(f"{n.replace('lohelp-', '')}:{gain[(n, v)]:+.4f}" for n in records)
    print(v, f"mean {sum(gain[(n, v)] for n in records) / len(records):+.4f}", row)
folds = [t for t in TWINS if set(t) & set(records)]
folds += [(n,) for n in records if not any(n in t for t in TWINS)]
print("leave-one-set-out, tolerance", tolerance)
for fold in folds:
    train = [n for n in records if n not in fold]
    best, best_gain = None, 0.0
    for v in variants:
        gains = [gain[(n, v)] for n in train]
        if min(gains) >= -tolerance and sum(gains) / len(gains) > best_gain:
            best, best_gain = v, sum(gains) / len(gains)
    held = " ".join(f"{n} {gain[(n, best)] if best else 0.0:+.4f}" for n in fold if n in records)
    print("held out:", held, "variant", best or MAIN)
