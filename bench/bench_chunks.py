"""Chunk-size distribution in real model tokens (run by hand; numbers go into the notes).

    python bench/bench_chunks.py [--model-dir ../shared/models/multilingual-e5-small-int8]
                                 [--sets debfaq-en manru udhr-th2th debfaq-en-mixed]

Syncs each evaluation set into a temporary index (lexical only), then counts every retrieval
child's tokens with the real SentencePiece tokenizer through the semantic worker, prompt and
special tokens included. The target: no child over 128 model tokens.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import rag_service  # noqa: E402
from rag_config import Config  # noqa: E402
from rag_db import connect  # noqa: E402
from rag_semantic import SemanticWorker  # noqa: E402

LIMIT = 128  # paraphrase-multilingual-MiniLM-L12-v2 truncates after 128 tokens
BATCH = 256


def measure(set_dir: Path, model_dir: Path, work: Path) -> dict[str, float]:
    config = Config(set_dir / "docs", work, work / "index.sqlite3", semantic=False)
    job = rag_service.start_sync(config)
    view = rag_service.wait_for_job(config, job.job_id)
    assert view.state == "succeeded", view.to_dict()
    conn = connect(config.db_path)
    texts = [r[0] for r in conn.execute("SELECT text FROM chunks ORDER BY id")]
    conn.close()
    counts: list[int] = []
    with SemanticWorker(model_dir, log_path=work / "worker.log", cache_dir=work) as worker:
        for start in range(0, len(texts), BATCH):
            counts.extend(worker.count_tokens(texts[start : start + BATCH], kind="passage"))
    over = sum(1 for c in counts if c > LIMIT)
    return {
        "children": len(counts),
        "p50": statistics.median(counts),
        "p95": sorted(counts)[int(len(counts) * 0.95) - 1],
        "max": max(counts),
        "over_128": over,
        "share_over_128": over / len(counts),
    }


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
    args = parser.parse_args()
    print(f"{'set':<18}{'children':>9}{'p50':>6}{'p95':>6}{'max':>6}{'>128':>6}{'share':>8}")
    for name in args.sets:
        with tempfile.TemporaryDirectory() as tmp:
            row = measure(REPO.parent / "shared/eval" / name, args.model_dir, Path(tmp))
        print(
            f"{name:<18}{row['children']:>9}{row['p50']:>6.0f}{row['p95']:>6.0f}{row['max']:>6}"
            f"{row['over_128']:>6}{row['share_over_128']:>8.4f}"
        )


if __name__ == "__main__":
    main()
