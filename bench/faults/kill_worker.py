"""SIGKILL the sync worker at random points, hundreds of times, over a folder of mixed formats.

    python bench/faults/kill_worker.py --runs 100 [--sets 3] [--seed 0] [--big-kb 1500]

Each run starts a sync, kills the worker after a random delay (0 .. 0.9 x a clean sync), then
checks: integrity_check ok and no half-written document, the job reported failed (time to
report), no sandbox child left behind, and that the next sync gives exactly the clean result
(canonical dump: paths, sha256, status, chunk texts). Half the runs kill a fresh index, half an
update of an indexed folder (changed, grown, replaced, deleted and added files).
With --big-kb the folder also holds one big one-line text file (~7 chunks per KB; more than 2,000
chunks are staged in batches, helpers.index.document_write), replaced by another in the update, so
most kills land while a big document is staged, swapped in or its old version discarded.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import time
from collections import Counter

from _common import line, work_dir
from conftest import make_config
from stress.corpora import make_mixed_corpus, mutate_corpus
from stress.faults import fresh_data_dir, kill_during_sync
from stress.harness import canonical_dump, reference_dump, run_sync


def copy_index(source_db, target_dir) -> None:  # type: ignore[no-untyped-def]
    target_dir.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(source_db)
    dst = sqlite3.connect(target_dir / "index.sqlite3")
    src.backup(dst)
    dst.close()
    src.close()


def write_big_text(path, size: int, word: str) -> None:  # type: ignore[no-untyped-def]
    """`size` bytes of numbered words on one line (w0 w1 ...)."""
    piece = (" ".join(f"{word}{i % 997}" for i in range(20_000)) + " ").encode()
    with path.open("wb") as f:
        written = 0
        while written < size:
            f.write(piece[: size - written])
            written += len(piece[: size - written])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--sets", type=int, default=5, help="7 files of mixed formats per set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--big-kb", type=int, default=0, help="add one big text file (KB)")
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = work_dir("kill", args.work)
    original, updated = root / "original", root / "updated"
    make_mixed_corpus(original, sets=args.sets, seed=args.seed)
    if args.big_kb:
        write_big_text(original / "huge.txt", args.big_kb * 1000, "w")
    shutil.copytree(original, updated)
    mutate_corpus(updated)
    if args.big_kb:
        write_big_text(updated / "huge.txt", args.big_kb * 1100, "v")
    started = time.monotonic()
    expected_fresh = reference_dump(original, root / "ref-original")
    clean_s = time.monotonic() - started
    expected_update = reference_dump(updated, root / "ref-updated")
    base = make_config(original, root / "base")
    run_sync(base)
    probe = fresh_data_dir(root / "probe")
    copy_index(base.db_path, probe)
    started = time.monotonic()
    run_sync(make_config(updated, probe))
    update_s = time.monotonic() - started
    outcomes = []
    for run in range(args.runs):
        update = run % 2 == 1
        data = fresh_data_dir(root / "run")
        if update:
            copy_index(base.db_path, data)
        config = make_config(updated if update else original, data)
        delay = rng.uniform(0, (update_s if update else clean_s) * 0.9)
        outcome = kill_during_sync(config, delay, expected_update if update else expected_fresh)
        outcomes.append((update, outcome))
        mark = "ok " if outcome.survived else "BAD"
        print(
            f"{mark} run {run:3d} {'update' if update else 'fresh '} delay {delay:5.2f}s "
            f"at {outcome.phase_at_kill:<18} committed {outcome.documents_at_kill:3d} -> "
            f"{outcome.state_after_kill} in {outcome.seconds_to_report:5.2f}s "
            f"{'; '.join(outcome.problems + outcome.difference)[:200]}",
            flush=True,
        )
    injected = [o for _u, o in outcomes if o.injected]
    survived = [o for o in injected if o.survived]
    report = [o.seconds_to_report for o in injected]
    print("\nkill_worker summary")
    line("files in the folder", len(expected_fresh))
    line("clean sync / update sync (s)", f"{clean_s:.2f} / {update_s:.2f}")
    line("runs / faults injected (live worker killed)", f"{len(outcomes)} / {len(injected)}")
    line("survived (all checks)", f"{len(survived)} / {len(injected)}")
    line("killed in state/phase", dict(Counter(o.phase_at_kill for o in injected)))
    total = len(expected_fresh)
    mid = [o for u, o in outcomes if o.injected and not u and 0 < o.documents_at_kill < total]
    line("fresh runs killed mid-files (0 < committed < all)", len(mid))
    line("integrity or half-written problems", sum(bool(o.problems) for o in injected))
    line("did not converge to the clean dump", sum(not o.converged for o in injected))
    line(
        "jobs left active after 45 s",
        sum(o.state_after_kill not in ("failed", "succeeded", "cancelled") for o in injected),
    )
    line("sandbox children left running", sum(len(o.orphans) for o in injected))
    if report:
        line(
            "time to 'failed' p50 / max (s)", f"{statistics.median(report):.2f} / {max(report):.2f}"
        )
    stuck = [o for o in injected if o.seconds_to_report > 5]
    line("reported only after the 30 s queued grace", f"{len(stuck)} (killed before the claim)")
    line("dump of a final sync equals reference", canonical_dump(base.db_path) == expected_fresh)
    shutil.rmtree(root, ignore_errors=True)
    return 0 if len(survived) == len(injected) else 1


if __name__ == "__main__":
    raise SystemExit(main())
