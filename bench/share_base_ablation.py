"""The hybrid share's base and a full-match lift, offline, on the captures of
`fusion_share_ablation.py capture` (issue 29 items 1 and 4).

    python bench/share_base_ablation.py --golden G1 --golden G2 ... CAP1.pkl CAP2.pkl ...

Each capture holds, per query, the two sides' 0-1 section scores as `fusion.mix` received them
and which content words the lexical side's first sections hold. A variant re-mixes them with
share = clamp(base + gain x (lexical margin - semantic margin)) + lift when the lexical side's
first section holds every content word of the query (what `confidence` calls full coverage:
then the words themselves vouch for the passage), with the base apart for questions and for
keyword queries (`Query.question`, the signal the exact channel uses). The table gives
document-level MRR@10 per set, then a leave-one-set-out choice: on every fold, the variant with
the best mean gain over main on the other sets among those where no other set loses more than
LOSS_ALLOWED, and its held-out number.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.eval import metrics as eval_metrics  # noqa: E402
from helpers.lexical.query_terms import Query  # noqa: E402
from helpers.ranking.constants import (  # noqa: E402
    HYBRID_LEXICAL_BASE,
    HYBRID_MARGIN_GAIN,
    HYBRID_SHARE_BOUNDS,
)

TOP_HITS = 30  # rag_eval asks for 30 hits
LOSS_ALLOWED = 0.002  # a training set may lose at most this much MRR@10 (one query in 500)
KEYWORD_BASES = (0.5, 0.55, 0.6, 0.65, 0.7)
QUESTION_BASES = (0.4, 0.45, 0.5, 0.55)
GAINS = (0.5, 0.75)
LIFTS = (0.0, 0.05, 0.1, 0.15, 0.2)
Variant = tuple[float, float, float, float]  # keyword base, question base, gain, full-match lift
MAIN: Variant = (HYBRID_LEXICAL_BASE, HYBRID_LEXICAL_BASE, HYBRID_MARGIN_GAIN, 0.0)


def _margin(values: list[float]) -> float:
    top = sorted(values, reverse=True)[:2]
    return top[0] - top[1] if len(top) == 2 else float(bool(top))


def full_match(q: dict) -> bool:
    """The lexical side's first section holds every content word of the query."""
    weights, per = q["match"]
    return bool(weights) and bool(per) and all(per[0])


def share(q: dict, question: bool, variant: Variant) -> float:
    keyword_base, question_base, gain, lift = variant
    lexical, semantic = q["sides"]
    base = question_base if question else keyword_base
    value = base + gain * (_margin(list(lexical.values())) - _margin(list(semantic.values())))
    if lift and full_match(q):
        value += lift
    low, high = HYBRID_SHARE_BOUNDS
    return min(high, max(low, value))


def ranks(data: dict, questions: dict[str, bool], variant: Variant) -> list[int | None]:
    out = []
    for q in data["queries"]:
        if q["sides"] is None:  # one side only: the mix never ran
            out.append(eval_metrics.first_relevant_rank(q["real"], q["relevant"]))
            continue
        lexical, semantic = q["sides"]
        s = share(q, questions.get(q["id"], False), variant)
        combined = {sec: s * v for sec, v in lexical.items()}
        for sec, v in semantic.items():
            combined[sec] = combined.get(sec, 0.0) + (1 - s) * v
        order = sorted(combined.items(), key=lambda x: (-round(x[1], 12), x[0]))
        docs = eval_metrics.distinct_documents(
            data["section_doc"][sec] for sec, _ in order[:TOP_HITS]
        )
        out.append(eval_metrics.first_relevant_rank(docs, q["relevant"]))
    return out


def question_flags(goldens: list[Path]) -> dict[str, dict[str, bool]]:
    """Set name -> query id -> phrased as a question."""
    flags: dict[str, dict[str, bool]] = {}
    for golden in goldens:
        queries = json.loads(golden.read_text(encoding="utf-8"))["queries"]
        flags[golden.parent.name] = {q["id"]: Query.parse(q["query"]).question for q in queries}
    return flags


def variants() -> list[Variant]:
    grid = itertools.product(KEYWORD_BASES, QUESTION_BASES, GAINS, LIFTS)
    return [MAIN, *(v for v in grid if v != MAIN)]


def table(paths: list[Path], goldens: list[Path]) -> None:
    sets = [pickle.loads(p.read_bytes()) for p in paths]
    flags = question_flags(goldens)
    names = [d["set"] for d in sets]
    shares = {n: (sum(flags.get(n, {}).values()) / max(len(flags.get(n, {})), 1)) for n in names}
    print("question share: " + ", ".join(f"{n} {shares[n]:.2f}" for n in names))
    real = [
        eval_metrics.mrr_at(
            [eval_metrics.first_relevant_rank(q["real"], q["relevant"]) for q in d["queries"]]
        )
        for d in sets
    ]
    grid = {
        v: [eval_metrics.mrr_at(ranks(d, flags.get(d["set"], {}), v)) for d in sets]
        for v in variants()
    }
    main = grid[MAIN]
    print("| variant (kw base, q base, gain, lift) | " + " | ".join(names) + " | mean gain |")
    print("|---|" + "---|" * (len(sets) + 1))
    print("| real run | " + " | ".join(f"{m:.4f}" for m in real) + " | |")
    ordered = sorted(grid, key=lambda v: -sum(grid[v][j] - main[j] for j in range(len(sets))))
    for v in [MAIN, *[v for v in ordered if v != MAIN][:25]]:
        gain = sum(grid[v][j] - main[j] for j in range(len(sets))) / len(sets)
        cells = " | ".join(f"{m:.4f}" for m in grid[v])
        print(f"| {v} | {cells} | {gain:+.4f} |")
    print(f"\nleave-one-set-out (best mean gain elsewhere, no other set losing > {LOSS_ALLOWED}):")
    for i, name in enumerate(names):
        others = [j for j in range(len(sets)) if j != i]
        allowed = [v for v in grid if all(grid[v][j] >= main[j] - LOSS_ALLOWED for j in others)]
        best = max(
            allowed, key=lambda v: (round(sum(grid[v][j] - main[j] for j in others), 9), v == MAIN)
        )
        print(
            f"  {name}: chose {best}, held out {grid[best][i]:.4f} (main {main[i]:.4f}, "
            f"{grid[best][i] - main[i]:+.4f})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pickles", type=Path, nargs="+")
    parser.add_argument("--golden", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    table(args.pickles, args.golden)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
