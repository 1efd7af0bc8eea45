"""Cost of the secret detector (helpers/secrets.py) in sync time (run by hand).

    nice python bench/bench_secrets.py [--rounds 3] [--eval-dir ../shared/eval]

Syncs the docs of every eval set into a fresh index, with the detector and without it (the
redactor swapped for one that returns the text as it is), alternating, in the same process and
the same run; both go through the worker's own pipeline (rag_sync.sync_files with the extraction
sandbox, as sync_job_worker runs it; no semantic phase, which would only dilute the cost). It
reports the median sync times, their ratio, and the time spent inside the redactor itself
(measured with a wrapping timer in the detector runs), as a share of the sync.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from secret_fixtures import NoRedaction, NullObserver  # noqa: E402

import rag_sync  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.extract.sandbox import SandboxedExtractor  # noqa: E402
from helpers.secrets import BlockRedactor  # noqa: E402
from helpers.store import index_db  # noqa: E402
from rag_sync import build_extract_context, ocr_options  # noqa: E402

TIMER = {"seconds": 0.0, "chars": 0}


class _Timed(BlockRedactor):
    """The real detector, with the time spent in it added up."""

    def text(self, text: str) -> str:
        start = time.perf_counter()
        out = super().text(text)
        TIMER["seconds"] += time.perf_counter() - start
        TIMER["chars"] += len(text)
        return out

    def extra(self, text: str, *, counted: bool = True) -> str:
        start = time.perf_counter()
        out = super().extra(text, counted=counted)
        TIMER["seconds"] += time.perf_counter() - start
        return out


def sync_all(roots: list[Path], redactor: type[BlockRedactor], work: Path) -> float:
    """Seconds to sync every root into its own fresh index."""
    rag_sync.BlockRedactor = redactor  # type: ignore[misc]
    total = 0.0
    for root in roots:
        data = Path(tempfile.mkdtemp(dir=work))
        config = Config(root, data, data / "index.sqlite3", semantic=False)
        ctx = build_extract_context(config)
        sandbox = SandboxedExtractor(ctx.limits, ocr_options(config))
        start = time.perf_counter()
        with closing(index_db.open_index(config.db_path)) as conn:
            counts: dict[str, int] = {}
            rag_sync.sync_files(conn, root, "", ctx, NullObserver(), counts, sandbox)
        total += time.perf_counter() - start
        sandbox.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--eval-dir", type=Path, default=REPO.parent / "shared" / "eval")
    args = parser.parse_args()
    roots = sorted(p.resolve() for p in args.eval_dir.glob("*/docs"))
    size = sum(f.stat().st_size for r in roots for f in r.rglob("*") if f.is_file())
    print(f"{len(roots)} eval corpora, {size / 1e6:.1f} MB", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sync_all(roots, NoRedaction, work)  # warm-up: file cache, imports, sandbox start
        on, off, inside = [], [], []
        for _ in range(args.rounds):
            TIMER["seconds"] = 0.0
            TIMER["chars"] = 0
            on.append(sync_all(roots, _Timed, work))
            detector = TIMER["seconds"]
            inside.append(detector)
            off.append(sync_all(roots, NoRedaction, work))
            print(
                f"  with detector {on[-1]:.2f} s (inside it {detector:.3f} s for "
                f"{TIMER['chars'] / 1e6:.1f} M chars), without {off[-1]:.2f} s",
                flush=True,
            )
    with_s, without_s = statistics.median(on), statistics.median(off)
    print(f"median sync with detector {with_s:.2f} s, without {without_s:.2f} s")
    print(f"sync time ratio with/without: {with_s / without_s:.3f}")
    share = statistics.median(i / w for i, w in zip(inside, on, strict=True))
    print(f"time inside the detector, share of the sync: {share:.1%} (median of the rounds)")


if __name__ == "__main__":
    main()
