"""marks_sweep.py IDX MARKED_SET [NOMARKS_SET]: how the semantic query's respelling
(`helpers.semantic.folder_marks`) treats SET's queries at each MARKED_MAJORITY, on the index in
IDX: with NOMARKS_SET (the same queries without marks, same order), how many accent-free queries
come back exactly as the marked query was written ("restored"), and how many are respelled to
something else ("wrong"); on MARKED_SET itself, how many queries as typed are rewritten at all
(each is a change on a set whose users type marks, or a set with none to restore); "in part":
some words restored, the rest as typed; "a word wrong": a word respelled otherwise. Also the
cost per query (p50 / p95 ms, warm, this process)."""
# ruff: noqa: E402  (lab script, run from the repo root)

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import labkit

from helpers.semantic import folder_marks

RATIOS = (1, 2, 3, 5, 8)

IDX, MARKED = sys.argv[1:3]
NOMARKS = sys.argv[3] if len(sys.argv) > 3 else None
conn = labkit.read_index(IDX)
marked = [q["query"] for q in labkit.golden(MARKED)["queries"]]
bare = [q["query"] for q in labkit.golden(NOMARKS)["queries"]] if NOMARKS else []
assert not bare or len(bare) == len(marked), "the two sets must hold the same queries"

for ratio in RATIOS:
    folder_marks.MARKED_MAJORITY = ratio
    rewritten = [q for q in marked if folder_marks.with_folder_marks(conn, q) != q]
    restored = partly = wrong = 0
    for typed, meant in zip(bare, marked, strict=False):
        if typed == meant:
            continue
        out = folder_marks.with_folder_marks(conn, typed)
        restored += out == meant
        words = zip(out.split(), typed.split(), meant.split(), strict=False)
        bad = any(o not in (t, m) for o, t, m in words)
        wrong += bad
        partly += out not in (typed, meant) and not bad
    changed = sum(t != m for t, m in zip(bare, marked, strict=False))
    print(
        f"ratio {ratio}: marked queries rewritten {len(rewritten)}/{len(marked)}"
        + (
            f"; accent-free restored {restored}/{changed}, in part {partly}, a word wrong {wrong}"
            if bare
            else ""
        )
    )
    for q in rewritten[:5]:
        print(f"    {q!r} -> {folder_marks.with_folder_marks(conn, q)!r}")

folder_marks.MARKED_MAJORITY = 5
costs = []
for q in (bare or marked) * 2:
    start = time.perf_counter()
    folder_marks.with_folder_marks(conn, q)
    costs.append((time.perf_counter() - start) * 1000)
costs.sort()
print(
    f"cost per query: p50 {statistics.median(costs):.2f} ms, "
    f"p95 {costs[int(0.95 * len(costs))]:.2f} ms"
)
