"""Retrieval evaluation through the real service call the MCP server makes (no LLM involved).

    python rag_eval.py golden.json --knowledge-dir DOCS --data-dir STATE [--mode lexical]
                       [--sync] [--details] [--explain] [--json] [--k 8] [--channels bm25,...]
                       [--min-mrr X] [--min-recall8 X]

Results go to stdout (one JSON object with --json); progress, warnings and errors to stderr.
Exit codes: 0 ok, 1 below a --min-* floor, 2 bad input/arguments/service error, 3 sync failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rag_service
from helpers.config import Config, add_config_arguments, config_from_args
from helpers.errors import IndexMissing, RagError
from helpers.eval import metrics as eval_metrics
from helpers.eval.golden import (
    EvalInputError,
    GoldenQuery,
    GoldenSet,
    RelevantDoc,
    load_golden,
)
from helpers.eval.metrics import QueryOutcome
from rag_service import FINAL_STATES, LEXICAL_CHANNELS, JobView, progress_line

EXIT_OK = 0
EXIT_BELOW_FLOOR = 1
EXIT_BAD_INPUT = 2
EXIT_SYNC_FAILED = 3
# Hits are sections, and a document often contributes several: asking for 3 hits per wanted
# document usually leaves 10 distinct documents for MRR@10 (capped by the service's top_k limit).
HITS_PER_DOCUMENT = 3
MIN_DOCUMENTS = eval_metrics.MRR_CUTOFF
TEXT_DETAIL_TOP = 3  # documents shown per query by --details in text mode
LIST_PAGE = 1000  # rag_service.list_documents' maximum page size


class SyncFailed(Exception):
    """The sync job ended in a state other than succeeded (exit 3)."""


@dataclass(frozen=True)
class EvalOptions:
    mode: str
    k: int  # extra recall cut-off and the number of documents kept per query in details
    channels: tuple[str, ...] | None  # None = every lexical channel
    explain: bool = False

    @property
    def search_top_k(self) -> int:
        wanted = max(self.k, MIN_DOCUMENTS) * HITS_PER_DOCUMENT
        return min(wanted, rag_service.TOP_K_MAX)


# -- sync and index coverage -------------------------------------------------------------------
def sync_knowledge_dir(config: Config) -> dict[str, Any]:
    """Bring the index up to date (a no-op resync is cheap), progress on stderr."""
    started = time.perf_counter()
    view = rag_service.start_sync(config)
    if view.already_running:
        sys.stderr.write(f"a sync is already running: waiting for job {view.job_id}\n")
    last = [""]

    def show(v: JobView) -> None:
        line = progress_line(v)[:160]
        if line != last[0] or v.state in FINAL_STATES:
            sys.stderr.write(line + "\n")
            last[0] = line

    view = rag_service.wait_for_job(config, view.job_id, show)
    summary = {
        "job_id": view.job_id,
        "state": view.state,
        "counts": view.counts,
        "error_count": view.error_count,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if view.state != "succeeded":
        raise SyncFailed(f"sync job {view.job_id} ended {view.state}: {view.message or ''}")
    return summary


def index_coverage(config: Config, golden: GoldenSet) -> dict[str, list[str]]:
    """Relevant documents search cannot fully return: not indexed, failed, scans without OCR."""
    status: dict[str, str] = {}
    offset: int | None = 0
    while offset is not None:
        page = rag_service.list_documents(config, limit=LIST_PAGE, offset=offset)
        status.update({item["path"]: item["status"] for item in page["items"]})
        offset = page["next_offset"]
    coverage: dict[str, list[str]] = {
        "missing": [],
        "failed": [],
        "needs_ocr": [],
        "needs_reindex": [],
    }
    relevant = sorted({r.path for q in golden.queries for r in q.relevant})
    for path in relevant:
        state = status.get(path)
        if state is None:
            coverage["missing"].append(path)
        elif state in coverage:
            coverage[state].append(path)
    return coverage


# -- evaluation --------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryRun:
    """One evaluated query: document-level outcome, unit-level outcome (located queries only)."""

    outcome: QueryOutcome
    unit_outcome: QueryOutcome | None
    hub_at_top: bool  # the first hit lies in one of the golden file's hub units
    group: str
    detail: dict[str, Any]
    warnings: list[str]
    copy_outcome: QueryOutcome | None = None  # a byte-identical copy counts as the relevant doc


def _unit_label(unit: tuple[Any, ...]) -> str:
    path, page, slide, sheet, heading_path = unit
    parts = [path]
    parts += [f"p. {page}"] if page is not None else []
    parts += [f"slide {slide}"] if slide is not None else []
    parts += [str(sheet)] if sheet is not None else []
    parts += [" > ".join(heading_path)] if heading_path else []
    return ", ".join(parts)


def evaluate_query(
    config: Config,
    query: GoldenQuery,
    options: EvalOptions,
    hubs: Sequence[RelevantDoc] = (),
) -> QueryRun:
    """One search through the service: its outcomes, its detail record and its warnings."""
    started = time.perf_counter()
    try:
        result = rag_service.search(
            config,
            query.query,
            top_k=options.search_top_k,
            mode=options.mode,
            channels=options.channels,
        )
    except IndexMissing:
        raise
    except RagError as exc:
        raise EvalInputError(f"query {query.query_id!r}: {exc}") from exc
    latency_ms = (time.perf_counter() - started) * 1000
    documents = eval_metrics.distinct_documents(hit.path for hit in result.hits)
    relevant = [r.path for r in query.relevant]
    rank = eval_metrics.first_relevant_rank(documents, relevant)
    outcome = QueryOutcome(query.query_id, query.lang, rank, tuple(documents), latency_ms)
    copies = eval_metrics.copy_rank(config.knowledge_dir, documents, relevant)
    copy_outcome = QueryOutcome(query.query_id, query.lang, copies, tuple(documents), latency_ms)
    detail: dict[str, Any] = {
        "id": query.query_id,
        "query": query.query,
        "lang": query.lang,
        "relevant": relevant,
        "rank": rank,
        "top": documents[: options.k],
        "citation": result.hits[0].citation if result.hits else None,  # the top hit's
        "confidence": result.confidence,
        "latency_ms": round(latency_ms, 2),
    }
    if query.group:
        detail["group"] = query.group
    hit_units = [(hit.path, hit.location) for hit in result.hits]
    unit_outcome = None
    if query.located:
        wanted = [(r.path, r.location) for r in query.relevant]
        unit_rank, units = eval_metrics.first_relevant_unit_rank(hit_units, wanted)
        labels = tuple(_unit_label(u) for u in units)
        unit_outcome = QueryOutcome(query.query_id, query.lang, unit_rank, labels, latency_ms)
        detail["relevant_units"] = [
            {"path": r.path, "location": r.location} for r in query.relevant
        ]
        detail["unit_rank"] = unit_rank
        detail["top_units"] = list(labels[: options.k])
    hub_at_top = bool(hit_units) and any(
        h.path == hit_units[0][0]
        and h.location
        and eval_metrics.location_matches(h.location, hit_units[0][1])
        for h in hubs
    )
    if hubs:
        detail["hub_at_top"] = hub_at_top
    if options.explain:
        best = next((h for h in result.hits if h.path in relevant), None)
        detail["channels"] = (
            None if best is None else {n: c.to_dict() for n, c in best.channels.items()}
        )
    if copies != rank:
        detail["copy_rank"] = copies
    return QueryRun(
        outcome, unit_outcome, hub_at_top, query.group, detail, list(result.warnings), copy_outcome
    )


def run_eval(
    config: Config, golden: GoldenSet, options: EvalOptions
) -> tuple[list[QueryRun], list[str]]:
    runs: list[QueryRun] = []
    warnings: dict[str, None] = {}  # the same warning comes back with every query: keep one
    for query in golden.queries:
        run = evaluate_query(config, query, options, golden.hubs)
        runs.append(run)
        warnings.update(dict.fromkeys(run.warnings))
    return runs, list(warnings)


def _level_report(
    runs: Sequence[QueryRun], extra_cutoffs: tuple[int, ...], with_hubs: bool
) -> dict[str, Any]:
    """Document-level metrics, unit-level metrics of the located queries, hub share at rank 1."""
    report: dict[str, Any] = eval_metrics.summarize(
        [r.outcome for r in runs], extra_cutoffs
    ).to_dict()
    copies = [r.copy_outcome for r in runs if r.copy_outcome is not None]
    if copies:
        report["copies_as_one"] = {
            key: value
            for key, value in eval_metrics.summarize(copies, extra_cutoffs).to_dict().items()
            if key.startswith(("recall@", "mrr@"))
        }
    located = [r.unit_outcome for r in runs if r.unit_outcome is not None]
    if located:
        report["unit_level"] = eval_metrics.summarize(located, extra_cutoffs).to_dict()
    if with_hubs:
        count = sum(1 for r in runs if r.hub_at_top)
        report["hub_at_rank1"] = {
            "queries": count,
            "share": round(count / len(runs), 4) if runs else 0.0,
        }
    return report


def build_report(
    golden: GoldenSet,
    config: Config,
    options: EvalOptions,
    runs: Sequence[QueryRun],
    extras: dict[str, Any],
) -> dict[str, Any]:
    extra_cutoffs = (options.k,)
    report: dict[str, Any] = {
        "name": golden.name,
        "mode": options.mode,
        "channels": list(options.channels) if options.channels else "all",
        "knowledge_dir": str(config.knowledge_dir),
        "k": options.k,
        "search_top_k": options.search_top_k,
    }
    with_hubs = bool(golden.hubs)
    report.update(_level_report(runs, extra_cutoffs, with_hubs))
    report["by_lang"] = {
        lang: m.to_dict()
        for lang, m in eval_metrics.summarize_by_lang(
            [r.outcome for r in runs], extra_cutoffs
        ).items()
    }
    groups = sorted({r.group for r in runs if r.group})
    if groups:
        report["by_group"] = {
            g: _level_report([r for r in runs if r.group == g], extra_cutoffs, with_hubs)
            for g in groups
        }
    report.update(extras)
    return report


# -- output ------------------------------------------------------------------------------------
def _metric_row(label: str, m: dict[str, Any]) -> str:
    return (
        f"{label:<10} {m['queries']:>5} {m['recall@1']:>6.3f} {m['recall@3']:>6.3f} "
        f"{m['recall@8']:>6.3f} {m['mrr@10']:>7.3f} {m['zero_results']:>5} "
        f"{m['latency_ms']['p50']:>7.1f} {m['latency_ms']['p95']:>7.1f}"
    )


def _channels_text(channels: dict[str, Any] | None) -> str:
    if channels is None:
        return "relevant document not retrieved"
    if not channels:
        return "no channel"
    return ", ".join(f"{n} #{c['rank']} ({c['score']:.3f})" for n, c in sorted(channels.items()))


def _level_rows(label: str, m: dict[str, Any]) -> list[str]:
    rows = [_metric_row(label, m)]
    if "unit_level" in m:
        rows.append(_metric_row(f"{label[:5]} unit", m["unit_level"]))
    if "hub_at_rank1" in m:
        hub = m["hub_at_rank1"]
        rows.append(f"{'':<10} hub at rank 1: {hub['queries']} ({hub['share']:.1%})")
    return rows


def print_text(report: dict[str, Any], details: list[dict[str, Any]] | None) -> None:
    channels = (
        report["channels"] if isinstance(report["channels"], str) else ",".join(report["channels"])
    )
    print(f"{report['name']}  mode {report['mode']}  channels {channels}  ({report['queries']} q)")
    if details is not None:
        for d in details:
            rank = f"#{d['rank']}" if d["rank"] is not None else "miss"
            unit = ""
            if "unit_rank" in d:
                unit = f" unit #{d['unit_rank']}" if d["unit_rank"] is not None else " unit miss"
            print(f"{rank:>5}{unit}  {d['id']}: {d['query'][:90]}")
            top = d.get("top_units", d["top"])
            print(f"       top: {'; '.join(top[:TEXT_DETAIL_TOP]) or '(no results)'}")
            if "channels" in d:
                print(f"       channels of {d['relevant'][0]}: {_channels_text(d['channels'])}")
        print()
    print(
        f"{'':<10} {'n':>5} {'R@1':>6} {'R@3':>6} {'R@8':>6} {'MRR@10':>7} {'zero':>5} "
        f"{'p50 ms':>7} {'p95 ms':>7}"
    )
    for row in _level_rows("all", report):
        print(row)
    for lang, m in report["by_lang"].items():
        print(_metric_row(lang, m))
    for group, m in report.get("by_group", {}).items():
        for row in _level_rows(group, m):
            print(row)
    if report.get("sync"):
        s = report["sync"]
        print(f"sync: {s['state']} in {s['seconds']} s, {s['counts']}")


# -- command line ------------------------------------------------------------------------------
def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag_eval.py", description="Evaluate retrieval on a golden set (no LLM)."
    )
    parser.add_argument("golden", type=Path, help="golden.json: {name, queries: [...]}")
    add_config_arguments(parser)
    parser.add_argument("--mode", default="hybrid", choices=rag_service.MODES)
    parser.add_argument("--k", type=int, default=8, help="extra recall cut-off; top docs kept")
    parser.add_argument("--sync", action="store_true", help="sync the knowledge dir first")
    parser.add_argument("--details", action="store_true", help="per-query rankings")
    parser.add_argument(
        "--explain", action="store_true", help="per-channel ranks (implies details)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--channels", help=f"lexical channels, from {','.join(LEXICAL_CHANNELS)}")
    parser.add_argument("--min-mrr", type=_fraction, help="exit 1 when MRR@10 is below this")
    parser.add_argument("--min-recall8", type=_fraction, help="exit 1 when Recall@8 is below")
    return parser


def _parse_channels(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in LEXICAL_CHANNELS]
    if not names or unknown:
        raise EvalInputError(
            f"--channels {text!r}: unknown or empty; use a comma list of "
            f"{', '.join(LEXICAL_CHANNELS)}"
        )
    return names


def _require_dirs(args: argparse.Namespace) -> None:
    """An explicit data dir keeps an eval from re-indexing the user's real index."""
    for attr, env, flag in (
        ("knowledge_dir", "RAGDOC_KNOWLEDGE_DIR", "--knowledge-dir"),
        ("data_dir", "RAGDOC_DATA_DIR", "--data-dir"),
    ):
        if not getattr(args, attr) and not os.environ.get(env):
            raise EvalInputError(f"{flag} is required (or set {env})")


def _below_floors(report: dict[str, Any], args: argparse.Namespace) -> list[str]:
    failures = []
    if args.min_mrr is not None and report["mrr@10"] < args.min_mrr:
        failures.append(f"MRR@10 {report['mrr@10']:.4f} is below --min-mrr {args.min_mrr}")
    if args.min_recall8 is not None and report["recall@8"] < args.min_recall8:
        failures.append(
            f"Recall@8 {report['recall@8']:.4f} is below --min-recall8 {args.min_recall8}"
        )
    return failures


def _evaluate(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    _require_dirs(args)
    if not 1 <= args.k <= rag_service.TOP_K_MAX:
        raise EvalInputError(f"--k must be between 1 and {rag_service.TOP_K_MAX}, got {args.k}")
    options = EvalOptions(args.mode, args.k, _parse_channels(args.channels), args.explain)
    config = config_from_args(args)
    problems = rag_service.check_config(config)
    if problems:
        raise EvalInputError("; ".join(problems))
    golden = load_golden(args.golden, config.knowledge_dir)
    if options.mode == "semantic":
        semantic = rag_service.semantic_state(config)
        if semantic["state"] != "ready":
            raise EvalInputError(
                f"--mode semantic needs semantic search, which is {semantic['state']}: "
                f"{semantic.get('hint', '')}"
            )
    sync = sync_knowledge_dir(config) if args.sync else None
    started = time.perf_counter()
    try:
        coverage = index_coverage(config, golden)
        runs, warnings = run_eval(config, golden, options)
    except IndexMissing as exc:
        raise EvalInputError(f"{exc.message}: pass --sync to index the knowledge dir") from exc
    eval_seconds = round(time.perf_counter() - started, 2)
    for kind, paths in coverage.items():
        if paths:
            warnings.append(f"{len(paths)} relevant document(s) {kind}: {', '.join(paths[:5])}")
    extras: dict[str, Any] = {
        "warnings": warnings,
        "index_coverage": coverage,
        "sync": sync,
        "eval_seconds": eval_seconds,
    }
    report = build_report(golden, config, options, runs, extras)
    return report, [r.detail for r in runs]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        report, details = _evaluate(args)
    except EvalInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    except RagError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    except SyncFailed as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_SYNC_FAILED
    show_details = args.details or args.explain
    if args.json:
        if show_details:
            report["details"] = details
        sys.stdout.write(json.dumps(report, ensure_ascii=False) + "\n")
    else:
        print_text(report, details if show_details else None)
    for warning in report["warnings"]:
        sys.stderr.write(f"warning: {warning}\n")
    failures = _below_floors(report, args)
    for failure in failures:
        sys.stderr.write(f"below floor: {failure}\n")
    return EXIT_BELOW_FLOOR if failures else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
