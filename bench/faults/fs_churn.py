"""Files changing, growing, vanishing or being replaced during real syncs; folders renamed.

    python bench/faults/fs_churn.py [--rounds 10] [--files 800]

Each round starts a sync of a folder of Markdown and mixed-format files while a thread keeps
editing it (append, atomic replace, delete, create, rename a folder and back). When the job
ends: it must be final (never stuck), the index whole; once the churn stops, the next sync must
give exactly the clean result of the folder as it is then.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import threading
import time
from collections import Counter

from _common import line, work_dir
from conftest import make_config, write_corpus
from stress.corpora import make_mixed_corpus
from stress.harness import canonical_dump, dump_difference, index_problems, reference_dump, run_sync

import rag_service


def churn(root, stop: threading.Event, rng: random.Random, done: Counter[str]) -> None:  # type: ignore[no-untyped-def]
    while not stop.is_set():
        files = [p for p in root.rglob("*.md") if p.is_file()]
        if not files:
            break
        target = rng.choice(files)
        action = rng.choice(["append", "replace", "delete", "create", "rename-folder"])
        try:
            if action == "append":
                with target.open("a", encoding="utf-8") as f:
                    f.write(" growing text " * rng.randint(1, 200))
            elif action == "replace":
                tmp = target.with_suffix(".part")
                tmp.write_text(f"# Replaced\n\nreplaced {rng.random()}\n", encoding="utf-8")
                os.replace(tmp, target)
            elif action == "delete":
                target.unlink()
            elif action == "create":
                (target.parent / f"c{rng.randrange(10**6)}.md").write_text("# c\n\nnew\n", "utf-8")
            else:
                folder = target.parent
                moved = folder.with_name(folder.name + "-mv")
                os.rename(folder, moved)
                time.sleep(rng.uniform(0, 0.05))
                os.rename(moved, folder)
            done[action] += 1
        except OSError:
            done["raced"] += 1
        time.sleep(rng.uniform(0, 0.02))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--files", type=int, default=800)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = work_dir("churn", args.work)
    knowledge = root / "docs"
    write_corpus(knowledge, args.files)
    make_mixed_corpus(knowledge / "mixed", sets=2)
    config = make_config(knowledge, root / "state")
    actions: Counter[str] = Counter()
    states: Counter[str] = Counter()
    reported: Counter[str] = Counter()
    diverged = problems = 0
    for round_no in range(args.rounds):
        stop = threading.Event()
        worker = threading.Thread(target=churn, args=(knowledge, stop, rng, actions))
        job = rag_service.start_sync(config)
        worker.start()
        view = rag_service.wait_for_job(config, job.job_id, timeout_s=600)
        stop.set()
        worker.join()
        states[view.state] += 1
        for error in view.errors:
            reported[error["message"].split(" (hint")[0][:40]] += 1
        problems += bool(index_problems(config.db_path))
        run_sync(config)
        expected = reference_dump(knowledge, root / "ref")
        diff = dump_difference(canonical_dump(config.db_path), expected)
        diverged += bool(diff)
        print(
            f"{'ok ' if not diff else 'BAD'} round {round_no}: {view.state} "
            f"{view.counts} errors {view.error_count} {diff[:3]}",
            flush=True,
        )
    print("\nfs_churn summary")
    line("rounds / churn actions", f"{args.rounds} / {dict(actions)}")
    line("job states during churn", dict(states))
    line("per-file reasons reported", dict(reported.most_common(6)))
    line("rounds with index problems", problems)
    line("rounds whose next sync did not converge", diverged)
    shutil.rmtree(root, ignore_errors=True)
    return 1 if problems or diverged else 0


if __name__ == "__main__":
    raise SystemExit(main())
