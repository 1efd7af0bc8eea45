"""Does a hit point at the asked operation? Rank of the first hit whose cited lines start inside
the operation's lines in the spec, for any code version (the index need not have heading paths).

Run from the checkout whose code made the index (its rag_service is imported from the current
directory): `python bench/openapi_eval/operation_hits.py DATA_DIR [lexical|hybrid] [MODEL_DIR]`.
The operation's lines come from the spec itself (PyYAML node marks), not from the index.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TOP_K = 8


def operation_lines(spec: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """(route, METHOD) -> 1-based first and last line of the operation in the file."""
    root = yaml.compose(spec.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    paths = next(v for k, v in root.value if k.value == "paths")
    out = {}
    for route, item in paths.value:
        for method, op in item.value:
            out[(route.value, method.value.upper())] = (
                method.start_mark.line + 1,
                op.end_mark.line + (0 if op.end_mark.column == 0 else 1),
            )
    return out


def main() -> None:
    sys.path.insert(0, str(Path.cwd()))
    import rag_service
    from helpers.config import Config

    data_dir = Path(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "lexical"
    model = sys.argv[3] if len(sys.argv) > 3 else None
    golden = json.loads((HERE / "golden.json").read_text(encoding="utf-8"))
    spans = operation_lines(HERE / "docs" / "api.yml")
    config = Config(
        knowledge_dir=HERE / "docs",
        data_dir=data_dir.resolve(),
        db_path=(data_dir / "index.sqlite3").resolve(),
        semantic=model is not None,
        semantic_model_dir=Path(model) if model else None,
    )
    ranks = []
    for query in golden["queries"]:
        route, method = query["relevant"][0]["location"]["heading_path"][1:]
        start, end = spans[(route, method)]
        hits = rag_service.search(config, query["query"], mode=mode, top_k=TOP_K).hits
        rank = next(
            (
                n
                for n, hit in enumerate(hits, 1)
                if hit.path == "api.yml" and start <= (hit.location.get("line_start") or 0) <= end
            ),
            None,
        )
        ranks.append(rank)
    n = len(ranks)
    print(
        json.dumps(
            {
                "mode": mode,
                "queries": n,
                "op@1": round(sum(r == 1 for r in ranks) / n, 4),
                "op@3": round(sum(r is not None and r <= 3 for r in ranks) / n, 4),
                "op@8": round(sum(r is not None for r in ranks) / n, 4),
                "op_mrr@8": round(sum(1 / r for r in ranks if r) / n, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
