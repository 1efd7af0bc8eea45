"""table.py RES_DIR PREFIX: MRR@10 per set and variant (one rule for every 2-6-word query),
and split by whether a passage holds every content word."""
# ruff: noqa: SIM115  (lab script)

import glob
import json
import os
import sys

for path in sorted(glob.glob(f"{sys.argv[1]}/{sys.argv[2]}*.json")):
    data = json.load(open(path))
    levels = [0, 1] if any(r["base"][1] is not None for r in data) else [0]
    keys = sorted({k for r in data for k in r if k[0].isdigit() or k[0] == "L"})
    for level in levels:
        name = os.path.basename(path)[len(sys.argv[2]) : -5] + ("/page" if level else "")

        def mrr(key: str, rows: list[dict], level: int = level, total: int = len(data)) -> float:
            ks = [r.get(key, r["base"])[level] for r in rows]
            return sum(1 / k for k in ks if k and k <= 10) / total

        tog = [r for r in data if r["together"]]
        spr = [r for r in data if not r["together"]]
        cells = " ".join(f"{k}:{mrr(k, data):.4f}" for k in ["base", *keys])
        print(f"{name:20} n={len(data)} spread={len(spr)} {cells}")
        print(f"{'':20} together " + " ".join(f"{k}:{mrr(k, tog):.3f}" for k in ["base", *keys]))
        print(f"{'':20} spread   " + " ".join(f"{k}:{mrr(k, spr):.3f}" for k in ["base", *keys]))
