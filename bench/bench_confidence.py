"""Calibration of rag_search's `confidence` on the public eval sets (bench/RESULTS.md, "Answer
confidence").

    python bench/bench_confidence.py --index-root DIR [--mode hybrid] [--dump evidence.jsonl]

DIR/<set> is a synced data dir per set (as for bench_answer_size.py). In-domain: each set's
queries on its own documents; per band, the share of queries and precision@1 (the top hit, or a
copy of it that the MCP response lists in its other_paths, is the relevant document). Cross:
each set's queries against another set's documents (CROSS_PAIRS; nothing there answers them):
the share that comes back `low`. `--dump` writes every query's Evidence for offline study of
the thresholds (aggregate only: never tune to one query).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_DIR))

from bench_answer_size import SETS, _config  # noqa: E402

import rag_confidence  # noqa: E402
import rag_service  # noqa: E402

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
HIGH_SHARE_MIN = 0.30
CROSS_LOW_MIN = 0.80


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


def run(
    queries_of: str, docs_of: str, index_root: Path, mode: str, dump: Any, in_domain: bool
) -> list[tuple[str, bool]]:
    config = _config(docs_of, index_root)
    golden = json.loads((EVAL_DIR / queries_of / "golden.json").read_text(encoding="utf-8"))
    out: list[tuple[str, bool]] = []
    for item in golden["queries"]:
        result = rag_service.search(config, item["query"], mode=mode)
        ev = rag_confidence.evidence(result)
        correct = bool(result.hits) and _top_paths(result) & set(item["relevant"]) != set()
        correct = correct and in_domain
        out.append((result.confidence, correct))
        if dump is not None:
            row = {"q": queries_of, "d": docs_of, "ok": correct, **dataclasses.asdict(ev)}
            dump.write(json.dumps(row) + "\n")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-root", type=Path, required=True)
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--dump", type=Path)
    args = parser.parse_args()
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    failed = False
    wanted = args.sets.split(",")
    for name in wanted:
        docs = "udhr-th2th" if name == "udhr-en2th" else name
        rows = run(name, docs, args.index_root, args.mode, dump, True)
        report: dict[str, Any] = {"set": name, "mode": args.mode, "queries": len(rows)}
        for level in ("high", "medium", "low"):
            picked = [ok for b, ok in rows if b == level]
            report[level] = {
                "share": round(len(picked) / len(rows), 3),
                "p_at_1": round(sum(picked) / len(picked), 3) if picked else None,
            }
        high = report["high"]
        ok = high["share"] >= HIGH_SHARE_MIN and (high["p_at_1"] or 0) >= HIGH_PRECISION_MIN
        report["high_target_met"] = ok
        failed |= not ok
        print(json.dumps(report), flush=True)
    for queries_of, docs_of in CROSS_PAIRS:
        if queries_of not in wanted:
            continue
        rows = run(queries_of, docs_of, args.index_root, args.mode, dump, False)
        low = sum(b == "low" for b, _ in rows) / len(rows)
        report = {
            "cross": f"{queries_of} -> {docs_of}",
            "mode": args.mode,
            "queries": len(rows),
            "low": round(low, 3),
            "bands": dict(Counter(b for b, _ in rows)),
            "target_met": low >= CROSS_LOW_MIN,
        }
        failed |= low < CROSS_LOW_MIN
        print(json.dumps(report), flush=True)
    if dump is not None:
        dump.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
