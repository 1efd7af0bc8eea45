"""Fusion ablation offline: capture every query's channel outputs once, re-fuse with variants.

    python bench/fusion_ablation.py capture SET DATA_DIR OUT.pkl --semantic-model-dir M
    python bench/fusion_ablation.py table OUT1.pkl OUT2.pkl ...

`capture` runs the real `rag_service.search` (hybrid, semantic depth raised to DEPTH_CAPTURED)
on a synced index and records the lexical channel results and the semantic candidates handed to
fusion, plus chunk -> section -> document and each section's hub score. `table` re-fuses them
with each variant of `VARIANTS` and prints document-level MRR@10 / Recall@8 (the metric of
rag_eval.py). The `shipped` row is `rag_search`'s own fusion on the captured inputs, so the
offline numbers can be checked against a real `rag_eval.py` run. The re-fusion here leaves out
the term-proximity scaling (helpers.lexical.proximity: it reads section text from the index);
query-side lexical changes are replayed live by bench/proximity_ablation.py instead.
"""

from __future__ import annotations

import argparse
import pickle
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_search  # noqa: E402
from helpers.eval import metrics as eval_metrics  # noqa: E402
from helpers.lexical import channels as lexical_channels  # noqa: E402
from helpers.lexical import common as lexical_common  # noqa: E402
from helpers.lexical import filename as lexical_filename  # noqa: E402
from helpers.lexical.common import ChannelResult  # noqa: E402
from helpers.ranking import fusion  # noqa: E402

DEPTH_CAPTURED = 400
TOP_HITS = 30  # rag_eval asks for 30 hits (10 documents x 3)

Fused = list[tuple[int, float]]


def golden_of(set_name: str, data_dir: Path, model_dir: str):  # type: ignore[no-untyped-def]
    """rag_eval's config (hybrid) and golden queries of a public set, as rag_eval reads them."""
    import rag_eval

    eval_dir = Path(__file__).resolve().parents[2] / "shared" / "eval" / set_name
    args = rag_eval._parser().parse_args(
        [
            str(eval_dir / "golden.json"),
            "--knowledge-dir",
            str(eval_dir / "docs"),
            "--data-dir",
            str(data_dir),
            "--semantic-model-dir",
            model_dir,
            "--mode",
            "hybrid",
        ]
    )
    config = rag_eval.config_from_args(args)
    return config, rag_eval.load_golden(args.golden, config.knowledge_dir)


def capture(set_name: str, data_dir: Path, out: Path, model_dir: str) -> None:
    import rag_service
    from helpers.semantic import candidates as semantic_candidates

    config, golden = golden_of(set_name, data_dir, model_dir)
    semantic_candidates.SEMANTIC_DEPTH = 4 * DEPTH_CAPTURED
    for module in (lexical_common, lexical_channels, lexical_filename):  # each reads its own name
        module.CHANNEL_DEPTH = DEPTH_CAPTURED
    rag_search.SEMANTIC_DISTINCT = DEPTH_CAPTURED  # `fuse` applies the shipped cut (depth)
    recorded: list[list[ChannelResult]] = []
    original = rag_search.fuse_channels

    def recorder(results, section_of=None, hubs_of=None, sizes_of=None, proximity_of=None, *more):  # type: ignore[no-untyped-def]
        recorded.append(list(results))
        return original(results, section_of, hubs_of, sizes_of, proximity_of, *more)

    rag_search.fuse_channels = recorder
    queries = []
    for query in golden.queries:
        recorded.clear()
        rag_service.search(config, query.query, top_k=TOP_HITS, mode="hybrid")
        queries.append(
            {
                "id": query.query_id,
                "relevant": [r.path for r in query.relevant],
                "results": recorded[0],
            }
        )
    conn = sqlite3.connect(data_dir / "index.sqlite3")
    chunk_section = dict(conn.execute("SELECT id, section_id FROM chunks"))
    section_doc = dict(
        conn.execute("SELECT s.id, d.path FROM sections s JOIN documents d ON d.id=s.document_id")
    )
    section_key = {
        row[0]: (row[1], row[2])
        for row in conn.execute(
            "SELECT s.id, d.path, s.ordinal FROM sections s JOIN documents d ON d.id=s.document_id"
        )
    }
    hubs = dict(conn.execute("SELECT id, hub FROM sections WHERE hub > 0"))
    text_hash = dict(conn.execute("SELECT id, text_hash FROM chunks"))
    payload = {
        "set": set_name,
        "queries": queries,
        "chunk_section": chunk_section,
        "section_doc": section_doc,
        "section_key": section_key,
        "hubs": hubs,
        "text_hash": text_hash,
    }
    out.write_bytes(pickle.dumps(payload))
    print(f"{set_name}: {len(queries)} queries captured to {out}", file=sys.stderr)


# -- offline fusion with knobs ------------------------------------------------------------------
def fuse(
    data: dict,
    results: list[ChannelResult],
    mode: str,
    hub: float = rag_search.HUB_PRIOR,
    depth: int = 100,
    base: float = fusion.HYBRID_LEXICAL_BASE,
    gain: float = fusion.HYBRID_MARGIN_GAIN,
    child_agg: float = 0.0,
    doc_agg: float = 0.0,
    fixed_share: float | None = None,
    lex_child_agg: float | None = None,
    sem_child_agg: float | None = None,
    child_n: int = fusion.SEMANTIC_CHILD_COUNT,
    distinct_margin: bool = False,
    floor_rank: int = 0,
    per_size: bool = True,
) -> list[str]:
    """Documents in rank order for one query under one variant."""
    chunk_section = data["chunk_section"]
    section_doc = data["section_doc"]
    lexical = [r for r in results if r.name != "semantic"]
    semantic = [r for r in results if r.name == "semantic"]
    sem = (
        ChannelResult("semantic", _distinct(data, semantic[0].ranked, depth)) if semantic else None
    )
    if mode == "lexical" or sem is None:
        fused = [(c, s) for c, s, _ in rag_search.rrf_fuse(lexical, rag_search.CHANNEL_WEIGHTS)]
        by_section = _best_per_section(fused, chunk_section)
    elif mode == "semantic":
        fused = [(c, s) for c, s, _ in rag_search.rrf_fuse([sem], rag_search.CHANNEL_WEIGHTS)]
        by_section = _best_per_section(fused, chunk_section)
    else:
        hubs = data["hubs"] if hub > 0 else {}
        lex_agg = child_agg if lex_child_agg is None else lex_child_agg
        sem_agg = (
            (child_agg or fusion.SEMANTIC_CHILD_SHARE) if sem_child_agg is None else sem_child_agg
        )
        by_section = _hybrid(
            lexical,
            sem,
            chunk_section,
            base,
            gain,
            (lex_agg, sem_agg, child_n),
            fixed_share,
            hubs,
            hub,
            distinct_margin,
            floor_rank,
            _section_sizes(data) if per_size else None,
        )
    if hub > 0 and mode != "hybrid":
        hubs = data["hubs"]
        by_section = {s: v * (1 - hub * hubs.get(s, 0.0)) for s, v in by_section.items()}
    if doc_agg > 0:
        by_doc: dict[str, list[float]] = {}
        for sec, value in by_section.items():
            by_doc.setdefault(section_doc[sec], []).append(value)
        for values in by_doc.values():
            values.sort(reverse=True)
        by_section = {
            sec: value + doc_agg * _others(by_doc[section_doc[sec]], value)
            for sec, value in by_section.items()
        }
    key = data["section_key"]
    order = sorted(by_section.items(), key=lambda x: (-round(x[1], 12), key[x[0]]))
    return eval_metrics.distinct_documents(section_doc[s] for s, _ in order[:TOP_HITS])


def _distinct(data: dict, ranked: list[tuple[int, float]], depth: int) -> list[tuple[int, float]]:
    """The first `depth` distinct child texts with every copy (rag_search.distinct_candidates);
    a capture without text hashes (before wave 5) is cut at plain depth."""
    hashes = data.get("text_hash")
    if hashes is None:
        return ranked[:depth]
    return rag_search.first_distinct(ranked, lambda cid: hashes.get(cid, str(cid)), depth)


def _section_sizes(data: dict) -> dict[int, int]:
    """Section id -> children, from the captured chunk -> section map (cached in `data`)."""
    if "section_size" not in data:
        sizes: dict[int, int] = {}
        for sec in data["chunk_section"].values():
            sizes[sec] = sizes.get(sec, 0) + 1
        data["section_size"] = sizes
    return data["section_size"]


def _others(values: list[float], own: float) -> float:
    """The best score among the document's other sections."""
    rest = list(values)
    rest.remove(own)
    return rest[0] if rest else 0.0


def _best_per_section(fused: Fused, chunk_section: dict[int, int]) -> dict[int, float]:
    out: dict[int, float] = {}
    for cid, score in fused:
        sec = chunk_section.get(cid)
        if sec is not None and sec not in out:
            out[sec] = score
    return out


def _agg(values: list[float], child_agg: float, child_n: int = 2) -> float:
    values = sorted(values, reverse=True)
    return values[0] + child_agg * sum(values[1 : 1 + child_n])


def _lowered(scores: dict[int, float], hubs: dict[int, float], hub: float) -> dict[int, float]:
    lowered = {s: v * (1 - hub * hubs.get(s, 0.0)) for s, v in scores.items()}
    best = max(lowered.values(), default=0.0)
    return {s: v / best for s, v in lowered.items()} if best > 0 else lowered


def _hybrid(
    lexical,
    sem,
    chunk_section,
    base,
    gain,
    child_agg,
    fixed_share,
    hubs,
    hub,
    distinct,
    floor_rank=0,
    sizes=None,
):  # type: ignore[no-untyped-def]
    lex_agg, sem_agg, child_n = child_agg
    evidence = fusion.lexical_evidence(lexical)
    lex: dict[int, list[float]] = {}
    for cid, value in evidence.items():
        sec = chunk_section.get(cid)
        if sec is not None:
            lex.setdefault(sec, []).append(value)
    cos: dict[int, list[float]] = {}
    for cid, value in sem.ranked:
        sec = chunk_section.get(cid)
        if sec is not None:
            cos.setdefault(sec, []).append(value)
    lexical_best = {s: _agg(v, lex_agg, child_n) for s, v in lex.items()}
    if lexical_best and lex_agg:
        top = max(lexical_best.values())
        lexical_best = {s: v / top for s, v in lexical_best.items()}
    cosine_best = {s: max(v) for s, v in cos.items()}
    if cosine_best:
        high, low = max(cosine_best.values()), min(cosine_best.values())
        if floor_rank:  # the scale's floor at the k-th best section, not the deepest candidate
            ordered = sorted(cosine_best.values(), reverse=True)
            low = ordered[min(floor_rank, len(ordered)) - 1]
        spread = (high - low) or 1.0
        norm = {s: [max(c - low, 0.0) / spread for c in v] for s, v in cos.items()}
        if sizes:  # as rag_search: the share of the windows that match, none for a hub
            cosine_best = {
                s: _agg(
                    v,
                    sem_agg * min(1.0, (1 + child_n) / sizes[s]) * (1.0 - hubs.get(s, 0.0)),
                    child_n,
                )
                for s, v in norm.items()
            }
        else:
            cosine_best = {s: _agg(v, sem_agg, child_n) for s, v in norm.items()}
        if sem_agg:
            top = max(cosine_best.values()) or 1.0
            cosine_best = {s: v / top for s, v in cosine_best.items()}
    if hubs:
        lexical_best = _lowered(lexical_best, hubs, hub)
        cosine_best = _lowered(cosine_best, hubs, hub)
    if fixed_share is None:
        # hybrid_share reads the constants from its own module (helpers.ranking.fusion)
        old = fusion.HYBRID_LEXICAL_BASE, fusion.HYBRID_MARGIN_GAIN
        fusion.HYBRID_LEXICAL_BASE, fusion.HYBRID_MARGIN_GAIN = base, gain
        lex_values, sem_values = list(lexical_best.values()), list(cosine_best.values())
        if distinct:  # the top-2 gap over distinct scores: tied copies do not hide a margin
            lex_values = list({round(v, 9) for v in lex_values})
            sem_values = list({round(v, 9) for v in sem_values})
        share = fusion.hybrid_share(lex_values, sem_values)
        fusion.HYBRID_LEXICAL_BASE, fusion.HYBRID_MARGIN_GAIN = old
    else:
        share = fixed_share
    combined = {s: share * v for s, v in lexical_best.items()}
    for s, v in cosine_best.items():
        combined[s] = combined.get(s, 0.0) + (1 - share) * v
    return combined


def score(data: dict, mode: str, **knobs: object) -> tuple[float, float]:
    ranks = []
    for q in data["queries"]:
        docs = fuse(data, q["results"], mode, **knobs)  # type: ignore[arg-type]
        ranks.append(eval_metrics.first_relevant_rank(docs, q["relevant"]))
    return eval_metrics.mrr_at(ranks), eval_metrics.recall_at(ranks, 8)


VARIANTS: list[tuple[str, str, dict[str, object]]] = [
    # Wave 3 (issue 15, document level). Shipped: hub prior 0.9, share base 0.5 gain 0.5,
    # semantic depth 100, semantic side = best child + 0.05 x the next two (SEMANTIC_CHILD_*).
    ("lexical (shipped)", "lexical", {}),
    ("semantic (shipped)", "semantic", {}),
    ("hybrid, no child aggregation (before)", "hybrid", {"sem_child_agg": 0.0}),
    ("hybrid, semantic + 0.02 x next two", "hybrid", {"sem_child_agg": 0.02}),
    ("hybrid, semantic + 0.03 x next two", "hybrid", {"sem_child_agg": 0.03}),
    ("hybrid, semantic + 0.05 x next two, per window count, hubs none (shipped)", "hybrid", {}),
    ("hybrid, semantic + 0.05 x next two (count-blind, hubs too)", "hybrid", {"per_size": False}),
    ("hybrid, semantic + 0.07 x next two", "hybrid", {"sem_child_agg": 0.07}),
    ("hybrid, semantic + 0.1 x next two", "hybrid", {"sem_child_agg": 0.1}),
    ("hybrid, semantic + 0.05 x next one", "hybrid", {"child_n": 1}),
    ("hybrid, semantic + 0.05 x next four", "hybrid", {"child_n": 4}),
    ("hybrid, lexical + 0.05 x next two", "hybrid", {"sem_child_agg": 0.0, "lex_child_agg": 0.05}),
    ("hybrid, both sides + 0.05 x next two", "hybrid", {"child_agg": 0.05}),
    ("+ semantic depth 120", "hybrid", {"depth": 120}),
    ("+ semantic depth 150", "hybrid", {"depth": 150}),
    ("+ semantic depth 200", "hybrid", {"depth": 200}),
    ("+ document: + 0.1 x its next-best section", "hybrid", {"doc_agg": 0.1}),
    ("+ share base 0.45", "hybrid", {"base": 0.45}),
    ("+ share base 0.55", "hybrid", {"base": 0.55}),
    ("+ share gain 0.75", "hybrid", {"gain": 0.75}),
    ("+ share margin over distinct scores (copies)", "hybrid", {"distinct_margin": True}),
    ("+ hub prior 1.0", "hybrid", {"hub": 1.0}),
]


def table(paths: list[Path], variants: list[tuple[str, str, dict[str, object]]]) -> None:
    datasets = [pickle.loads(p.read_bytes()) for p in paths]
    print("| variant | " + " | ".join(d["set"] for d in datasets) + " | mean MRR |")
    print("|---|" + "---|" * (len(datasets) + 1))
    for label, mode, knobs in variants:
        cells = [score(d, mode, **knobs) for d in datasets]
        mean = sum(c[0] for c in cells) / len(cells)
        row = " | ".join(f"{m:.3f} / {r:.3f}" for m, r in cells)
        print(f"| {label} | {row} | {mean:.4f} |", flush=True)


def add_capture_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`capture SET DATA_DIR OUT --semantic-model-dir M` (this script and proximity_ablation)."""
    cap = sub.add_parser("capture")
    cap.add_argument("set")
    cap.add_argument("data_dir", type=Path)
    cap.add_argument("out", type=Path)
    cap.add_argument("--semantic-model-dir", required=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_capture_parser(sub)
    tab = sub.add_parser("table")
    tab.add_argument("pickles", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.cmd == "capture":
        capture(args.set, args.data_dir, args.out, args.semantic_model_dir)
    else:
        table(args.pickles, VARIANTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
