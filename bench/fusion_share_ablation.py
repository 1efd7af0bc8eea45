"""The hybrid share's query-match term, offline: capture each query's fusion inputs once, then
score variants of the share rule on them.

    python bench/fusion_share_ablation.py capture GOLDEN DOCS DATA_DIR OUT.pkl \
        --semantic-model-dir M
    python bench/fusion_share_ablation.py table OUT1.pkl OUT2.pkl ...

`capture` runs the real `rag_service.search` (hybrid) on an index that has vectors and records,
per query, the two sides' 0-1 section scores as `helpers.ranking.fusion.mix` receives them and,
for each of the lexical side's first five sections, which content words it holds, with their
rarity weights. `table` re-mixes them under each variant and prints document-level MRR@10 (the
ranking after the mix; the pointer prior and the tie-break that follow it are left out, so the
`shipped` row is checked against a real rag_eval.py run), plus a leave-one-set-out choice of
the exponent of the match term.
"""

from __future__ import annotations

import argparse
import math
import pickle
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_search  # noqa: E402
from helpers.eval import metrics as eval_metrics  # noqa: E402
from helpers.lexical.common import SearchContext  # noqa: E402
from helpers.lexical.query_terms import TermGroup  # noqa: E402
from helpers.ranking import fusion  # noqa: E402
from helpers.ranking.constants import HYBRID_SHARE_BOUNDS  # noqa: E402
from helpers.store.codec import section_text  # noqa: E402
from helpers.text.normalize import fold  # noqa: E402

CAPTURED_SECTIONS = 5
TOP_HITS = 30  # rag_eval asks for 30 hits (10 documents x 3)


@dataclass(frozen=True)
class QueryMatch:
    """Per content word of the query: its weight (rarity in the folder) and whether the given
    sections hold it."""

    weights: tuple[float, ...] = ()
    found: tuple[bool, ...] = ()


def query_match(ctx: SearchContext, sections: list[int]) -> QueryMatch:
    """The query's content words weighted by rarity in the folder (a word in no document
    weighs most: it is the part of the query the words cannot have matched), each found when
    one of the lexical side's first CAPTURED_SECTIONS sections (best first) holds it in a
    form the channels accept."""
    groups = ctx.query.content
    if not groups or not sections:
        return QueryMatch()
    total = max(ctx.chunk_count(), 1)
    weights = tuple(math.log(1.0 + total / (1.0 + ctx.doc_freq(g.text))) for g in groups)
    found = [False] * len(groups)
    for text in _section_texts(ctx.conn, sections[:CAPTURED_SECTIONS]):
        found = [a or b for a, b in zip(found, _held(groups, text), strict=True)]
    return QueryMatch(weights, tuple(found))


def _held(groups: tuple[TermGroup, ...], text: str) -> list[bool]:
    """Per group: whether `text` holds it in an accepted form (as confidence.coverage)."""
    folded = fold(text)
    return [
        any(form and form in folded for form in (g.substrings(recall=False) or (g.text,)))
        for g in groups
    ]


def _section_texts(conn: sqlite3.Connection, sections: list[int]) -> list[str]:
    """The texts of `sections`, in their order (a missing one is left out)."""
    marks = ",".join("?" * len(sections))
    rows = dict(conn.execute(f"SELECT id, text FROM sections WHERE id IN ({marks})", sections))
    return [section_text(rows[sec]) for sec in sections if sec in rows]


def eval_inputs(
    golden: Path, docs: Path, data_dir: Path, model_dir: str, mode: str
) -> tuple[object, object, list]:
    """rag_eval's parsed arguments, config and golden queries for one set (shared by the
    offline-replay benches)."""
    import rag_eval

    args = rag_eval._parser().parse_args(
        [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(data_dir)]
        + ["--semantic-model-dir", model_dir, "--mode", mode, "--semantic", "on"]
    )
    config = rag_eval.config_from_args(args)
    return args, config, rag_eval.load_golden(args.golden, config.knowledge_dir)


def capture(golden: Path, docs: Path, data_dir: Path, out: Path, model_dir: str) -> None:
    import rag_service

    args, config, gold = eval_inputs(golden, docs, data_dir, model_dir, "hybrid")
    seen: dict[str, object] = {}
    real_proximity, real_mix = rag_search.section_proximity, fusion.mix

    def proximity(ctx, ids):  # type: ignore[no-untyped-def]
        seen["ctx"] = ctx
        return real_proximity(ctx, ids)

    def mix(lexical, semantic):  # type: ignore[no-untyped-def]
        seen["sides"] = (dict(lexical), dict(semantic))
        ctx = seen.get("ctx")
        if lexical and ctx is not None and "match" not in seen:
            ordered = sorted(lexical, key=lambda sec: (-lexical[sec], sec))
            per = [query_match(ctx, [sec]) for sec in ordered[:CAPTURED_SECTIONS]]
            seen["match"] = (per[0].weights, [m.found for m in per])
        return real_mix(lexical, semantic)

    rag_search.section_proximity, fusion.mix = proximity, mix
    real_distinct, real_corrected = rag_search.distinct_candidates, rag_search._hubness_corrected

    def corrected(conn, hits, depth):  # type: ignore[no-untyped-def]
        return real_corrected(conn, real_distinct(conn, hits, depth))

    queries = []
    for query in gold.queries:
        seen.clear()
        result = rag_service.search(config, query.query, top_k=TOP_HITS, mode="hybrid")
        record = {
            "id": query.query_id,
            "relevant": [r.path for r in query.relevant],
            "sides": seen.get("sides"),
            "match": seen.get("match", ((), [])),
            "real": eval_metrics.distinct_documents(h.path for h in result.hits),
        }
        # the same query with the semantic side corrected for hubness whatever the words found
        rag_search.distinct_candidates, rag_search._hubness_corrected = corrected, _same
        try:
            seen.clear()
            rag_service.search(config, query.query, top_k=TOP_HITS, mode="hybrid")
            record["sides_hubness"] = seen.get("sides")
        finally:
            rag_search.distinct_candidates = real_distinct
            rag_search._hubness_corrected = real_corrected
        queries.append(record)
    conn = sqlite3.connect(data_dir / "index.sqlite3")
    section_doc = dict(
        conn.execute("SELECT s.id, d.path FROM sections s JOIN documents d ON d.id=s.document_id")
    )
    payload = {"set": golden.parent.name, "queries": queries, "section_doc": section_doc}
    out.write_bytes(pickle.dumps(payload))
    print(f"{golden.parent.name}: {len(queries)} queries captured to {out}", file=sys.stderr)


def _same(conn, hits):  # type: ignore[no-untyped-def]
    return hits


def matched(q: dict, sections: int, weighted: bool) -> float:
    weights, per = q["match"]
    if not weights:
        return 1.0
    found = [any(flags[i] for flags in per[:sections]) for i in range(len(weights))]
    ws = weights if weighted else [1.0] * len(weights)
    total = sum(ws)
    return sum(w for w, hit in zip(ws, found, strict=True) if hit) / total if total else 1.0


def share_of(q: dict, sides: tuple, power: float, sections: int, weighted: bool) -> float:
    lexical, semantic = sides
    base = fusion.hybrid_share(list(lexical.values()), list(semantic.values()))
    low = HYBRID_SHARE_BOUNDS[0]
    m = matched(q, sections, weighted) if power > 0 else 1.0
    return low + (base - low) * m**power


Variant = tuple[float, int, bool, float]  # power, sections, idf-weighted, hubness below


def ranks(data: dict, variant: Variant) -> list[int | None]:
    power, sections, weighted, hub_below = variant
    out = []
    for q in data["queries"]:
        if q["sides"] is None:  # one side only: the mix never ran
            out.append(eval_metrics.first_relevant_rank(q["real"], q["relevant"]))
            continue
        sides = q["sides"]
        if q.get("sides_hubness") and matched(q, sections, weighted) < hub_below:
            sides = q["sides_hubness"]
        lexical, semantic = sides
        share = share_of(q, sides, power, sections, weighted)
        combined = {s: share * v for s, v in lexical.items()}
        for s, v in semantic.items():
            combined[s] = combined.get(s, 0.0) + (1 - share) * v
        order = sorted(combined.items(), key=lambda x: (-round(x[1], 12), x[0]))
        docs = eval_metrics.distinct_documents(data["section_doc"][s] for s, _ in order[:TOP_HITS])
        out.append(eval_metrics.first_relevant_rank(docs, q["relevant"]))
    return out


POWERS = (0.0, 0.5, 1.0, 2.0)
SECTIONS = (1, 3)
HUB_BELOW = (0.0, 0.25, 0.5, 2.0)  # 0: as main (only with no lexical hit); 2: always
MAIN: Variant = (0.0, 1, True, 0.0)


def _label(v: Variant) -> str:
    power, sections, weighted, hub_below = v
    term = f"match^{power}, top {sections}, {'idf' if weighted else 'plain'}" if power else "-"
    hub = {0.0: "-", 2.0: "always"}.get(hub_below, f"match < {hub_below}")
    return f"share x {term}; hubness {hub}"


def table(paths: list[Path]) -> None:
    sets = [pickle.loads(p.read_bytes()) for p in paths]
    real = [
        eval_metrics.mrr_at(
            [eval_metrics.first_relevant_rank(q["real"], q["relevant"]) for q in d["queries"]]
        )
        for d in sets
    ]
    print("| variant | " + " | ".join(d["set"] for d in sets) + " | mean |")
    print("|---|" + "---|" * (len(sets) + 1))
    print("| real run (this branch) | " + " | ".join(f"{m:.4f}" for m in real) + " | |")
    grid: dict[Variant, list[float]] = {}
    for weighted in (True, False):
        for sections in SECTIONS:
            for power in POWERS:
                for hub_below in HUB_BELOW:
                    if power == 0 and (sections != 1 or not weighted) and hub_below == 0:
                        continue
                    key = (power, sections, weighted, hub_below)
                    grid[key] = [eval_metrics.mrr_at(ranks(d, key)) for d in sets]
                    cells = " | ".join(f"{m:.4f}" for m in grid[key])
                    mean = sum(grid[key]) / len(sets)
                    print(f"| {_label(key)} | {cells} | {mean:.4f} |", flush=True)
    print("\nleave-one-set-out (the variant with the best mean MRR gain over main elsewhere):")
    main = grid[MAIN]
    for i, d in enumerate(sets):

        def gain(key: Variant, i: int = i) -> float:
            return sum(grid[key][j] - main[j] for j in range(len(sets)) if j != i)

        best = max(grid, key=lambda k: (round(gain(k), 9), -k[0], -k[3]))
        held = f"held-out {grid[best][i]:.4f} (main {main[i]:.4f})"
        print(f"  held out {d['set']}: chose {_label(best)}, {held}")


def replay_parser(
    doc: str, with_model: tuple[str, ...], without_model: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    """The offline-replay benches' command line: each capture-like command takes a set
    (golden, docs, data dir, output file; the model dir for those in `with_model`), `table` the
    captured pickles."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for command in (*with_model, *without_model):
        cmd = sub.add_parser(command)
        for name in ("golden", "docs", "data_dir", "out"):
            cmd.add_argument(name, type=Path)
        if command in with_model:
            cmd.add_argument("--semantic-model-dir", required=True)
    sub.add_parser("table").add_argument("pickles", type=Path, nargs="+")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = replay_parser(__doc__, ("capture",)).parse_args(argv)
    if args.cmd == "capture":
        capture(args.golden, args.docs, args.data_dir, args.out, args.semantic_model_dir)
    else:
        table(args.pickles)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
