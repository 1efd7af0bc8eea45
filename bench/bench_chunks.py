"""Chunk-size distribution in real model tokens (run by hand; numbers go into the notes).

    python bench/bench_chunks.py [--model-dir ../shared/models/multilingual-e5-small-int8]
                                 [--sets debfaq-en manru udhr-th2th debfaq-en-mixed]
                                 [--worst N]

Syncs each evaluation set into a temporary index (lexical only), then counts every retrieval
child's tokens with the real SentencePiece tokenizer through the semantic worker, prompt and
special tokens included. The target: no child over 128 model tokens. `--worst N` prints the N
largest children of each set with their document, real count and estimate, to find the text
patterns the estimate under-counts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import rag_service  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.semantic.generations import SemanticWorker  # noqa: E402
from helpers.store.index_db import connect  # noqa: E402
from helpers.text.chunking import estimate_tokens  # noqa: E402

LIMIT = 128  # paraphrase-multilingual-MiniLM-L12-v2 truncates after 128 tokens
BATCH = 256


@dataclass(frozen=True)
class Measured:
    path: str
    text: str
    tokens: int  # real model tokens, "passage: " prompt and <s> </s> included


def measure(set_dir: Path, model_dir: Path, work: Path) -> list[Measured]:
    """Every retrieval child of the set, with its real token count."""
    config = Config(set_dir / "docs", work, work / "index.sqlite3", semantic=False)
    job = rag_service.start_sync(config)
    view = rag_service.wait_for_job(config, job.job_id)
    assert view.state == "succeeded", view.to_dict()
    conn = connect(config.db_path)
    rows = conn.execute(
        "SELECT d.path, c.text FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.id"
    ).fetchall()
    conn.close()
    counts: list[int] = []
    with SemanticWorker(model_dir, log_path=work / "worker.log", cache_dir=work) as worker:
        for start in range(0, len(rows), BATCH):
            batch = [r[1] for r in rows[start : start + BATCH]]
            counts.extend(worker.count_tokens(batch, kind="passage"))
    return [Measured(path, text, n) for (path, text), n in zip(rows, counts, strict=True)]


def summarise(children: list[Measured]) -> dict[str, float]:
    counts = sorted(c.tokens for c in children)
    over = sum(1 for c in counts if c > LIMIT)
    return {
        "children": len(counts),
        "p50": statistics.median(counts),
        "p95": counts[int(len(counts) * 0.95) - 1],
        "max": counts[-1],
        "over_128": over,
        "share_over_128": over / len(counts),
    }


def print_worst(name: str, children: list[Measured], n: int) -> None:
    worst = sorted(children, key=lambda c: c.tokens, reverse=True)[:n]
    for child in worst:
        estimate = estimate_tokens(child.text)
        print(f"--- {name} {child.path}: {child.tokens} tokens, estimate {estimate}")
        print(child.text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--model-dir", type=Path, default=REPO.parent / "shared/models/multilingual-e5-small-int8"
    )
    parser.add_argument(
        "--sets",
        nargs="+",
        default=["debfaq-en", "pyfaq-en", "manru", "udhr-th2th", "debfaq-en-mixed"],
    )
    parser.add_argument("--worst", type=int, default=0, help="print the N largest children")
    args = parser.parse_args()
    lines = [f"{'set':<18}{'children':>9}{'p50':>6}{'p95':>6}{'max':>6}{'>128':>6}{'share':>8}"]
    for name in args.sets:
        with tempfile.TemporaryDirectory() as tmp:
            children = measure(REPO.parent / "shared/eval" / name, args.model_dir, Path(tmp))
        row = summarise(children)
        if args.worst:
            print_worst(name, children, args.worst)
        lines.append(
            f"{name:<18}{row['children']:>9}{row['p50']:>6.0f}{row['p95']:>6.0f}{row['max']:>6}"
            f"{row['over_128']:>6}{row['share_over_128']:>8.4f}"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
