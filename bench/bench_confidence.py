"""Calibration of rag_search's `confidence` on the public eval sets (bench/RESULTS.md, "Answer
confidence").

    python bench/bench_confidence.py --index-root DIR [--mode hybrid] [--dump evidence.jsonl]
    python bench/bench_confidence.py --from-dump evidence.jsonl   # re-band, no search
    python bench/bench_confidence.py --index-root DIR --mode lexical \
        --keyword-sets KWDIR --keyword-index-root KWIDX   # + the keyword sets

KWDIR/<set>/{golden.json,docs} are keyword-query sets (index term -> the page it names; a
neighbour page may also answer, so their `high` target is KEYWORD_PRECISION_MIN) and
KWIDX/<set> their synced data dirs (synced with --semantic on for --mode hybrid); they join the
grid and leave-one-set-out (no cross pairs). A set meets its target at a share of `high` no
lower than search gave it when the rows were written (the dump's band).

DIR/<set> is a synced data dir per set (as for bench_answer_size.py). In-domain: each set's
queries on its own documents; per band, the share of queries and precision@1 (the top hit, or a
copy of it that the MCP response lists in its other_paths, is the relevant document). Cross:
each set's queries against another set's documents (CROSS_PAIRS; nothing there answers them):
the share that comes back `low`, and the share that comes back `high` (the worst error).

Then the calibration, from the same responses (no second search): per set the ceiling (the
precision@1 of the best 30 % of its queries by each single signal: what any threshold on it could
reach), a grid over the `high` rule (margin x semantic agreement x hub x pointer x the second
route, both sides at their top, x margin and agreement by document; then margin x agreement x
the units channel's agreement and route to high beside the semantic side; in lexical mode the
lexical rule instead, LEXICAL_GRID; the best GRID_SHOWN points and the constants' row are
printed), and a
leave-one-set-out check (the grid point chosen on all other sets, scored on the left-out one),
so a threshold is never fitted to one set; last a markdown table per set. After a
ranking change, re-run and move the constants only when the grid and leave-one-set-out rows say
so. `--dump` writes every query's Evidence for offline study (aggregate only: never tune to one
query); `--from-dump` re-reads such a file and bands it with the current rag_confidence, for a
change to the rule alone (the evidence itself comes from the search that wrote the dump).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_DIR))

from bench_answer_size import MODEL_DIR, SETS, _config  # noqa: E402

import rag_service  # noqa: E402
from helpers.ranking import confidence  # noqa: E402

EVAL_DIR = REPO_DIR.parent / "shared" / "eval"
# queries of the first set against the documents of the second; every set asks once, and
# every document set is asked once by a set of another topic or language
CROSS_PAIRS = (
    ("debfaq-en", "manru"),
    ("debfaq-en-mixed", "udhr-th2th"),
    ("pyfaq-en", "debfaq-en"),
    ("manru", "pyfaq-en"),
    ("udhr-th2th", "debfaq-en-mixed"),
    ("udhr-en2th", "pyfaq-en"),
)
HIGH_PRECISION_MIN = 0.85
KEYWORD_PRECISION_MIN = 0.80  # keyword sets: the label names one page, a neighbour may answer
HIGH_SHARE_MIN = 0.30
CROSS_LOW_MIN = 0.80
# the calibration grid of the `high` rule (confidence.band's keyword arguments)
MARGIN_GRID = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
AGREE_GRID = (False, True)
HUB_GRID = (0.5, 1.0)  # 1.0: hubs not excluded from high
POINTER_GRID = (0.0, 1.0)  # POINTER_MAX_HIGH; 1.0: pointers to the answer not excluded
# the second route to high (both sides agree, smaller margin): MARGIN_AGREED x
# LEXICAL_AGREE_RANK; None first, so a tie keeps the rule without it
AGREED_GRID = (
    (None, 1, confidence.COSINE_MIN),
    *itertools.product((0.1, 0.15, 0.2), (1, 2, 3), (confidence.COSINE_MIN, 0.86, 0.88)),
)
BY_DOCUMENT_GRID = (False, True)  # MARGIN_BY_DOCUMENT, AGREE_BY_DOCUMENT
GRID_KEYS = (
    "margin_high",
    "agree_for_high",
    "hub_max_high",
    "pointer_max_high",
    "margin_agreed",
    "lexical_agree_rank",
    "agreed_cosine_min",
    "margin_by_document",
    "agree_by_document",
    "unit_agree_hybrid",
    "unit_route_hybrid",
)
# the units channel beside the semantic side (hybrid mode): its agreement (UNIT_AGREE_HYBRID)
# and its route to high (UNIT_ROUTE_HYBRID: its own margin x the fused margin), each point with
# the other knobs at their constants but the margin and semantic agreement
UNIT_AGREE_GRID = (False, True)
UNIT_ROUTE_GRID = (
    None,
    *itertools.product((0.0, 0.05, 0.1, 0.2), (0.0, 0.05, 0.1, 0.15)),
)
# the lexical side alone (no cosine: lexical mode): its own margin, by document or by text, the
# units channel's agreement and margin, full coverage (confidence.band's *_lexical arguments)
LEXICAL_GRID = {
    "margin_high_lexical": (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5),
    "margin_by_document_lexical": (False, True),
    "unit_agree_lexical": (False, True),
    "unit_margin_lexical": (0.0, 0.05, 0.1, 0.2, 0.3),
    "full_coverage_lexical": (False, True),
    "own_margin_lexical": (None, 0.1, 0.15, 0.2),
}
GRID_SHOWN = 25  # grid rows printed: the best by the objective, and the constants' own row
STRONG_GRID = (0.86, 0.88, 0.90, 0.92, 1.0)  # COSINE_STRONG for `low`; 1.0: off
COVERAGE_GRID = (0.34, 0.5, 0.6, 2 / 3, 0.75)  # COVERAGE_MIN for `low`
# keyword sets over the same documents (one with marks, one without) leave out together
KEYWORD_TWINS = (("lohelp-cs", "lohelp-cs-nomarks"),)
# leave-one-out folds by corpus: the two debfaq sets (same text, other formats) and the two
# udhr sets (same documents) are left out together, so a fold never trains on its own twin
FOLDS = (("debfaq-en", "debfaq-en-mixed"), ("pyfaq-en",), ("manru",), ("udhr-th2th", "udhr-en2th"))
# single signals whose best 30 % per set give the ceiling of a threshold on that signal
SIGNALS = {
    "margin": lambda ev: ev.margin,
    "cosine": lambda ev: ev.cosine or 0.0,
    "cosine_gap": lambda ev: ev.cosine_gap,
    "coverage": lambda ev: ev.coverage + 1e-3 * ev.margin,  # ties (many 1.0) by margin
    "agreement+margin": lambda ev: float(ev.semantic and ev.lexical) + ev.margin,
    "margin, no pointer": lambda ev: ev.margin - float(ev.pointer > 0),
    "margin over another document": lambda ev: ev.doc_margin,
    "both sides top 2 + margin": lambda ev: (
        ev.margin + float((ev.semantic_rank or 99) <= 2 and (ev.lexical_rank or 99) <= 2)
    ),
    "units first + margin over another document": lambda ev: (
        ev.doc_margin + float(ev.unit_rank == 1)
    ),
    "units margin": lambda ev: ev.unit_margin,
}


@dataclass(frozen=True)
class Row:
    queries_of: str
    docs_of: str
    in_domain: bool
    evidence: confidence.Evidence
    band: str
    correct: bool
    searched_band: str = ""  # the band search gave when the row was written (the share floor)


def _top_paths(result: Any) -> set[str]:
    """The top hit's path and its copies (same section text at the same place): the MCP
    response collapses them into that hit's other_paths (rag_answer)."""
    top = result.hits[0]
    text = result.sections.get(top.section_id)
    return {
        h.path
        for h in result.hits
        if h.path == top.path
        or (result.sections.get(h.section_id) == text and h.location_label == top.location_label)
    }


def _keyword_config(set_dir: Path, data_dir: Path, mode: str) -> Any:
    """A keyword set's config: its vectors are read in hybrid mode (an index synced with
    --semantic on), none in lexical mode."""
    from helpers.config import add_config_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = ["--knowledge-dir", str(set_dir / "docs"), "--data-dir", str(data_dir)]
    if mode == "lexical":
        return config_from_args(parser.parse_args([*args, "--semantic", "off"]))
    return config_from_args(parser.parse_args([*args, "--semantic-model-dir", str(MODEL_DIR)]))


def run(
    queries_of: str,
    docs_of: str,
    index_root: Path,
    mode: str,
    dump: Any,
    in_domain: bool,
    keyword: tuple[Path, Path] | None = None,
) -> list[Row]:
    if keyword is None:
        config = _config(docs_of, index_root)
        golden_path = EVAL_DIR / queries_of / "golden.json"
    else:
        config = _keyword_config(keyword[0] / docs_of, keyword[1] / docs_of, mode)
        golden_path = keyword[0] / queries_of / "golden.json"
    golden = json.loads(golden_path.read_text(encoding="utf-8"))
    out: list[Row] = []
    for item in golden["queries"]:
        result = rag_service.search(config, item["query"], mode=mode)
        ev = confidence.evidence(result)
        correct = bool(result.hits) and _top_paths(result) & set(item["relevant"]) != set()
        correct = correct and in_domain
        band = result.confidence
        out.append(Row(queries_of, docs_of, in_domain, ev, band, correct, band))
        if dump is not None:
            row = {"q": queries_of, "d": docs_of, "ok": correct, "in_domain": in_domain}
            row["mode"] = mode
            row |= {"band": result.confidence, **dataclasses.asdict(ev)}
            dump.write(json.dumps(row) + "\n")
    return out


def from_dump(path: Path, queries_of: str, docs_of: str, in_domain: bool, mode: str) -> list[Row]:
    """The rows of one run from a --dump file, banded by the current rule: recalibrate after a
    change to rag_confidence without searching again. Rows dumped in another --mode are left
    out (a dump without modes counts as the asked one); fields a dump from an older Evidence
    lacks take their defaults. The band the dump recorded is each row's searched_band."""
    fields = {f.name for f in dataclasses.fields(confidence.Evidence)}
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if (row["q"], row["d"]) != (queries_of, docs_of) or row.get("mode", mode) != mode:
            continue
        if row.get("in_domain", (queries_of, docs_of) not in CROSS_PAIRS) != in_domain:
            continue
        ev = confidence.Evidence(**{k: v for k, v in row.items() if k in fields})
        band = confidence.band(ev)
        out.append(Row(queries_of, docs_of, in_domain, ev, band, row["ok"], row["band"]))
    return out


def band_report(rows: list[Row], bands: list[str]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for level in ("high", "medium", "low"):
        picked = [r.correct for r, b in zip(rows, bands, strict=True) if b == level]
        report[level] = {
            "share": round(len(picked) / len(rows), 3),
            "p_at_1": round(sum(picked) / len(picked), 3) if picked else None,
        }
    return report


KEYWORD_SETS: set[str] = set()  # the names given by --keyword-sets (their own target)
TODAY_SHARE: dict[str, float] = {}  # share of high under the constants (the share floor)


def high_met(report: dict[str, Any], name: str = "") -> bool:
    """Precision of high at the set's target, at a share no lower than the constants give it
    today (HIGH_SHARE_MIN when unknown)."""
    high = report["high"]
    floor = KEYWORD_PRECISION_MIN if name in KEYWORD_SETS else HIGH_PRECISION_MIN
    share = TODAY_SHARE.get(name, HIGH_SHARE_MIN)
    return high["share"] >= share - 1e-9 and (high["p_at_1"] or 0) >= floor


def ceiling(rows: list[Row]) -> dict[str, float]:
    """Precision@1 of the best 30 % of queries by each signal (the most any threshold on it
    could give at the share the target asks for)."""
    take = max(1, round(HIGH_SHARE_MIN * len(rows)))
    out = {}
    for name, signal in SIGNALS.items():
        best = sorted(rows, key=lambda r: -signal(r.evidence))[:take]
        out[name] = round(sum(r.correct for r in best) / take, 3)
    return out


@dataclass(frozen=True)
class Tally:
    queries: int
    high: int
    high_correct: int
    low: int = 0


def tally(rows: list[Row], knobs: dict[str, Any]) -> Tally:
    """Counts of one set's (or the cross pairs') bands under confidence.band(**knobs)."""
    bands = [confidence.band(r.evidence, **knobs) for r in rows]
    high = [r.correct for r, b in zip(rows, bands, strict=True) if b == "high"]
    return Tally(len(rows), len(high), sum(high), bands.count("low"))


def _point(knobs: dict[str, Any], sets: dict[str, Tally], cross: Tally) -> dict[str, Any]:
    per_set = {}
    for name, t in sets.items():
        high = {
            "share": round(t.high / t.queries, 3),
            "p_at_1": round(t.high_correct / t.high, 3) if t.high else None,
        }
        per_set[name] = high | {"met": high_met({"high": high}, name)}
    return {
        **knobs,
        "sets_met": sum(v["met"] for v in per_set.values()),
        # a set with no `high` has no precision to lower (udhr-en2th in lexical mode)
        "min_p_at_1": min((v["p_at_1"] for v in per_set.values() if v["p_at_1"]), default=0.0),
        "cross_high": round(cross.high / cross.queries, 3) if cross.queries else 0.0,
        "cross_low": round(cross.low / cross.queries, 3) if cross.queries else None,
        "sets": per_set,
    }


def grid_point(
    sets: dict[str, list[Row]], cross: list[Row], knobs: dict[str, Any]
) -> dict[str, Any]:
    """Per set the share and precision of `high` (and whether it meets its target), and the
    cross pairs' `high` and `low` shares, under confidence.band with these keyword arguments."""
    tallies = {name: tally(rows, knobs) for name, rows in sets.items()}
    return _point(knobs, tallies, tally(cross, knobs))


def grid(mode: str) -> list[dict[str, Any]]:
    """The `high` rule's calibration grid: lexical mode has no semantic side, so agreement and
    the second route never apply there and its own rule (the *_lexical arguments) is varied."""
    if mode == "lexical":
        keys = tuple(LEXICAL_GRID)
        return [dict(zip(keys, p, strict=True)) for p in itertools.product(*LEXICAL_GRID.values())]
    off = (False, None)  # the units knobs as they were before they existed
    points = [
        (*head, *agreed, *by_doc, *off)
        for head in itertools.product(MARGIN_GRID, AGREE_GRID, HUB_GRID, POINTER_GRID)
        for agreed in AGREED_GRID
        for by_doc in itertools.product(BY_DOCUMENT_GRID, BY_DOCUMENT_GRID)
    ]
    knobs = [dict(zip(GRID_KEYS, p, strict=True)) for p in points]
    base = constants_point(mode)
    for margin, agree, unit_agree, route in itertools.product(
        MARGIN_GRID, AGREE_GRID, UNIT_AGREE_GRID, UNIT_ROUTE_GRID
    ):
        if (unit_agree, route) != off:
            knobs.append(
                base
                | {"margin_high": margin, "agree_for_high": agree}
                | {"unit_agree_hybrid": unit_agree, "unit_route_hybrid": route}
            )
    return knobs


def constants_point(mode: str) -> dict[str, Any]:
    keys = LEXICAL_GRID if mode == "lexical" else GRID_KEYS
    return {key: getattr(confidence, key.upper()) for key in keys}


def _objective(point: dict[str, Any]) -> tuple[int, float, float]:
    """Most sets meeting the high target, then the fewest queries against another set's
    documents called high (the worst error: a confident answer where none exists), then the
    best worst-set precision of high."""
    return (point["sets_met"], -(point["cross_high"] or 0.0), point["min_p_at_1"])


def low_grid(sets: dict[str, list[Row]], cross: list[Row], mode: str) -> None:
    """`low` against COSINE_STRONG: every cross pair's low share, and per set the share of
    correct answers called low (what a strong cosine rescues) and the precision@1 of low."""
    pairs = sorted({(r.queries_of, r.docs_of) for r in cross})
    for strong in STRONG_GRID:
        report: dict[str, Any] = {"low_grid": mode, "cosine_strong": strong, "cross_low": {}}
        for q, d in pairs:
            rows = [r for r in cross if (r.queries_of, r.docs_of) == (q, d)]
            low = sum(confidence.band(r.evidence, cosine_strong=strong) == "low" for r in rows)
            report["cross_low"][f"{q} -> {d}"] = round(low / len(rows), 3)
        report["correct_called_low"] = {}
        for name, rows in sets.items():
            bands = [confidence.band(r.evidence, cosine_strong=strong) for r in rows]
            correct = [b for r, b in zip(rows, bands, strict=True) if r.correct]
            share = correct.count("low") / len(correct) if correct else 0.0
            low = band_report(rows, bands)["low"]
            report["correct_called_low"][name] = round(share, 3)
            report.setdefault("low", {})[name] = low
        print(json.dumps(report), flush=True)
    for cov in COVERAGE_GRID:
        report = {"low_grid": mode, "coverage_min": round(cov, 3), "cross_low": {}, "low": {}}
        for q, d in pairs:
            rows = [r for r in cross if (r.queries_of, r.docs_of) == (q, d)]
            low = sum(confidence.band(r.evidence, coverage_min=cov) == "low" for r in rows)
            report["cross_low"][f"{q} -> {d}"] = round(low / len(rows), 3)
        for name, rows in sets.items():
            bands = [confidence.band(r.evidence, coverage_min=cov) for r in rows]
            report["low"][name] = band_report(rows, bands)["low"]
        print(json.dumps(report), flush=True)


def _cosine_spread(rows: list[Row]) -> dict[str, Any]:
    """Top-hit cosines of queries that nothing answers: how close they come to COSINE_STRONG."""
    cosines = sorted(r.evidence.cosine for r in rows if r.evidence.cosine is not None)
    if not cosines:
        return {}
    at = lambda q: round(cosines[min(len(cosines) - 1, int(q * len(cosines)))], 3)  # noqa: E731
    strong = sum(c >= confidence.COSINE_STRONG for c in cosines) / len(rows)
    return {"top_cosine": {"p50": at(0.5), "p99": at(0.99), "max": cosines[-1]}} | {
        "at_least_cosine_strong": round(strong, 3)
    }


def calibrate(sets: dict[str, list[Row]], cross: list[Row], mode: str) -> None:
    for name, rows in sets.items():  # the share floor of each set: what search gave it
        bands = [r.searched_band or confidence.band(r.evidence) for r in rows]
        TODAY_SHARE[name] = band_report(rows, bands)["high"]["share"]
    low_grid(sets, cross, mode)
    for name, rows in sets.items():
        print(json.dumps({"ceiling_top30": name, "mode": mode, **ceiling(rows)}), flush=True)
    knobs = grid(mode)
    # each point's counts once per set: a fold's choice adds them up without banding again
    table = [({n: tally(rows, k) for n, rows in sets.items()}, tally(cross, k)) for k in knobs]
    points = [_point(k, t, c) for k, (t, c) in zip(knobs, table, strict=True)]
    ranked = sorted(range(len(knobs)), key=lambda i: _objective(points[i]), reverse=True)
    for i in ranked[:GRID_SHOWN]:
        print(json.dumps({"grid": mode, **points[i]}), flush=True)
    now = grid_point(sets, cross, constants_point(mode))
    print(json.dumps({"grid": mode, "constants": True, **now}), flush=True)
    keyword_folds = [t for t in KEYWORD_TWINS if set(t) & KEYWORD_SETS]
    twins = {n for t in keyword_folds for n in t}
    keyword_folds += [(n,) for n in sorted(KEYWORD_SETS - twins)]
    held_out: dict[str, dict[str, Any]] = {}
    for fold in (*FOLDS, *keyword_folds):
        if not set(fold) & set(sets) or not set(sets) - set(fold):
            continue

        def trained(i: int, fold: tuple[str, ...] = fold) -> tuple[int, float, float]:
            train = {n: t for n, t in table[i][0].items() if n not in fold}
            return _objective(_point(knobs[i], train, table[i][1]))

        best = max(range(len(knobs)), key=trained)  # ties keep the first grid point
        held = {n: t for n, t in table[best][0].items() if n in fold}
        for name, test in _point(knobs[best], held, table[best][1])["sets"].items():
            report = {"leave_out": name, "fold": list(fold), "mode": mode, "chosen": knobs[best]}
            print(json.dumps(report | test), flush=True)
            held_out[name] = test
    print_table(sets, now, held_out, mode)


def print_table(
    sets: dict[str, list[Row]],
    now: dict[str, Any],
    held_out: dict[str, dict[str, Any]],
    mode: str,
) -> None:
    """One markdown row per set: `high` as search gave it (the dump), under the constants and
    held out; `low` under the constants."""
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    print(f"\n### {mode}")
    print(
        "| set | p@1 | searched high share | searched high p@1 | high share | high p@1 "
        "(in-sample) | held-out high p@1 | held-out high share | low share | low p@1 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, rows in sets.items():
        searched = band_report(rows, [r.searched_band or r.band for r in rows])["high"]
        low = band_report(rows, [confidence.band(r.evidence) for r in rows])["low"]
        high, held = now["sets"][name], held_out.get(name, {})
        p_at_1 = sum(r.correct for r in rows) / len(rows)
        cells = (
            p_at_1,
            searched["share"],
            searched["p_at_1"],
            high["share"],
            high["p_at_1"],
            held.get("p_at_1"),
            held.get("share"),
            low["share"],
            low["p_at_1"],
        )
        print(f"| {name} | " + " | ".join(fmt(c) for c in cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-root", type=Path)
    parser.add_argument("--from-dump", type=Path, help="rows of an earlier --dump, no search")
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--no-calibration", action="store_true")
    parser.add_argument("--keyword-sets", type=Path, help="dir of SET/{golden.json,docs}")
    parser.add_argument("--keyword-index-root", type=Path, help="dir of SET data dirs")
    args = parser.parse_args()
    if (args.index_root is None) == (args.from_dump is None):
        parser.error("give --index-root (search) or --from-dump (rows of an earlier run)")
    if args.from_dump is not None and args.dump is not None:
        parser.error("--dump writes the rows of a search; --from-dump re-reads them (not both)")

    keyword = None
    if args.keyword_sets is not None:
        keyword = (args.keyword_sets, args.keyword_index_root or args.keyword_sets)
        KEYWORD_SETS.update(p.name for p in args.keyword_sets.iterdir() if p.is_dir())

    def rows_of(queries_of: str, docs_of: str, in_domain: bool) -> list[Row]:
        if args.from_dump is not None:
            return from_dump(args.from_dump, queries_of, docs_of, in_domain, args.mode)
        kw = keyword if queries_of in KEYWORD_SETS else None
        return run(queries_of, docs_of, args.index_root, args.mode, dump, in_domain, kw)

    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    failed = False
    wanted = args.sets.split(",") + sorted(KEYWORD_SETS)
    in_domain: dict[str, list[Row]] = {}
    for name in wanted:
        docs = "udhr-th2th" if name == "udhr-en2th" else name
        rows = rows_of(name, docs, True)
        if not rows:
            print(json.dumps({"set": name, "mode": args.mode, "queries": 0}), flush=True)
            continue
        in_domain[name] = rows
        report: dict[str, Any] = {"set": name, "mode": args.mode, "queries": len(rows)}
        report["p_at_1"] = round(sum(r.correct for r in rows) / len(rows), 3)
        report |= band_report(rows, [r.band for r in rows])
        report["high_target_met"] = high_met(report, name)
        failed |= not report["high_target_met"]
        print(json.dumps(report), flush=True)
    cross: list[Row] = []
    for queries_of, docs_of in CROSS_PAIRS:
        if queries_of not in wanted:
            continue
        rows = rows_of(queries_of, docs_of, False)
        if not rows:
            continue
        cross += rows
        bands = Counter(r.band for r in rows)
        low = bands["low"] / len(rows)
        report = {
            "cross": f"{queries_of} -> {docs_of}",
            "mode": args.mode,
            "queries": len(rows),
            "low": round(low, 3),
            "high": round(bands["high"] / len(rows), 3),
            "bands": dict(bands),
            "target_met": low >= CROSS_LOW_MIN,
            **_cosine_spread(rows),
        }
        failed |= low < CROSS_LOW_MIN
        print(json.dumps(report), flush=True)
    if dump is not None:
        dump.close()
    if not args.no_calibration:
        calibrate(in_domain, cross, args.mode)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
