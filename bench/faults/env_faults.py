"""Environment faults: a foreign process holding the database, a full disk, a data dir on a
read-only file system.

    python bench/faults/env_faults.py [--lock-s 3] [--long-lock-s 35] [--busy-timeout-s 30]

Needs root (tmpfs mounts) for the disk cases; they are skipped with a reason otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from _common import line, work_dir
from conftest import make_config, write_corpus
from stress.harness import (
    can_mount,
    canonical_dump,
    dump_difference,
    foreign_exclusive_lock,
    index_problems,
    jobs_in_states,
    reference_dump,
    remount,
    run_sync,
    tmpfs,
    wait_until,
    worker_pids,
)

import rag_service
from helpers.config import Config


def hammer(config: Config, job_id: str, stop: threading.Event, out: Counter[str]) -> None:
    """sync_status, search and list calls in a loop; counts outcomes by kind."""
    calls = (
        ("status", lambda: rag_service.sync_status(config, job_id)),
        ("search", lambda: rag_service.search(config, "invoice", mode="lexical")),
        ("list", lambda: rag_service.list_documents(config, limit=5)),
    )
    while not stop.is_set():
        for name, call in calls:
            started = time.monotonic()
            try:
                call()
                out[f"{name} ok"] += 1
            except Exception as exc:  # noqa: BLE001 - counted and reported
                kind = "locked" if "locked" in str(exc) else type(exc).__name__
                out[f"{name} {kind}"] += 1
            out[f"{name} max wait ms"] = max(
                out[f"{name} max wait ms"], int((time.monotonic() - started) * 1000)
            )
        time.sleep(0.1)


def foreign_lock(root: Path, seconds: float, busy_timeout_s: float) -> None:
    knowledge = root / f"lock{seconds:.0f}"
    write_corpus(knowledge, 100, seed=1)
    config = make_config(
        knowledge, root / f"lock{seconds:.0f}-state", busy_timeout_s=busy_timeout_s
    )
    run_sync(config)
    write_corpus(knowledge / "more", 1500, seed=2)
    job = rag_service.start_sync(config)
    wait_until(lambda: rag_service.sync_status(config, job.job_id).phase == "files", 60)
    out: Counter[str] = Counter()
    stop = threading.Event()
    worker = threading.Thread(target=hammer, args=(config, job.job_id, stop, out))
    with foreign_exclusive_lock(config.db_path, seconds):
        worker.start()
        cancel_started = time.monotonic()
        try:
            rag_service.cancel_sync(config, job.job_id)
            cancel = f"ok after {time.monotonic() - cancel_started:.1f} s"
        except Exception as exc:  # noqa: BLE001
            cancel = f"{type(exc).__name__} after {time.monotonic() - cancel_started:.1f} s: {exc}"
    stop.set()
    worker.join()
    if cancel.startswith("IndexBusy"):  # not recorded, as the error says: cancel again
        rag_service.cancel_sync(config, job.job_id)
    final = rag_service.wait_for_job(config, job.job_id, timeout_s=600)
    print(
        f"\nforeign BEGIN EXCLUSIVE held {seconds:.0f} s during a running sync "
        f"(service busy timeout {busy_timeout_s:g} s)"
    )
    line("cancel_sync issued under the lock", cancel[:300])
    for key in sorted(out):
        line(key, out[key])
    line("job outcome", f"{final.state}: {final.message}")
    line("index problems", index_problems(config.db_path))


def full_disk(root: Path) -> None:
    knowledge = root / "disk-docs"
    write_corpus(knowledge, 600, words_per_file=400)
    expected = reference_dump(knowledge, root / "disk-ref")
    with tmpfs(root / "tiny", "2m") as tiny:
        config = make_config(knowledge, tiny / "state")
        view = run_sync(config, timeout_s=300)
        problems = index_problems(config.db_path)
        health = rag_service.health(config)
        searchable = len(rag_service.search(config, "invoice", mode="lexical").hits)
        try:
            second = f"started: {rag_service.start_sync(config).job_id}"
            run_sync(config, timeout_s=300)
        except rag_service.RagError as exc:
            second = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - an untyped error is a finding
            second = f"UNTYPED {type(exc).__name__}: {exc}"
        subprocess.run(["mount", "-o", "remount,size=64m", str(tiny)], check=True)
        again = run_sync(config, timeout_s=300)
        diff = dump_difference(canonical_dump(config.db_path), expected)
    print("\nfull disk (2 MB tmpfs data dir, 600 files)")
    line("job state / message", f"{view.state} / {view.message}")
    line("documents committed before the disk filled", view.counts["added"])
    line("index problems", problems)
    line("searches still answered (hits)", searchable)
    line("health status / last job", f"{health['status']} / {health['last_job']['state']}")
    line("health: data dir free bytes", health["disk"].get("data_dir_free_bytes"))
    line("health warnings", health["warnings"])
    line("sync_kb again on the full disk", second[:300])
    line("after growing the disk: next sync", f"{again.state}, converged: {not diff}")


def read_only_data_dir(root: Path) -> None:
    """A data dir on a file system remounted read-only between syncs (a live writer makes the
    kernel refuse the remount with EBUSY, so it cannot be done mid-sync)."""
    knowledge = root / "ro-docs"
    write_corpus(knowledge, 300)
    with tmpfs(root / "ro", "128m") as mount:
        config = make_config(knowledge, mount / "state")
        run_sync(config)
        before = canonical_dump(config.db_path)
        wait_until(lambda: not worker_pids(config.data_dir), timeout=60)
        remount(mount, read_only=True)
        outcomes = {}
        for name, call in (
            ("search", lambda: rag_service.search(config, "invoice", mode="lexical")),
            ("sync_kb", lambda: rag_service.start_sync(config)),
            ("sync_status", lambda: rag_service.sync_status(config)),
            ("cancel_sync", lambda: rag_service.cancel_sync(config, "any")),
            ("rag_list", lambda: rag_service.list_documents(config)),
            ("rag_read", lambda: rag_service.read_document(config, "part0/note-00000.md")),
        ):
            try:
                call()
                outcomes[name] = "answered"
            except rag_service.RagError as exc:
                outcomes[name] = f"{type(exc).__name__}: {exc.message[:80]}"
            except Exception as exc:  # noqa: BLE001 - an untyped error is a finding
                outcomes[name] = f"UNTYPED {type(exc).__name__}: {exc}"[:80]
        health = rag_service.health(config)
        remount(mount, read_only=False)
        problems = index_problems(config.db_path)
        unchanged = canonical_dump(config.db_path) == before
        again = run_sync(config)
        left = jobs_in_states(config.db_path)
    print("\ndata dir on a read-only file system")
    for name, outcome in outcomes.items():
        line(name, outcome)
    line("health status / problems", f"{health['status']} / {health['problems'][:1]}")
    line("health read_only", health.get("read_only"))
    line("index problems / unchanged", f"{problems} / {unchanged}")
    line("after remount rw: next sync / jobs left active", f"{again.state} / {len(left)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lock-s", type=float, default=3)
    parser.add_argument("--long-lock-s", type=float, default=35)
    parser.add_argument("--busy-timeout-s", type=float, default=30, help="the service's")
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    root = work_dir("env", args.work)
    foreign_lock(root, args.lock_s, args.busy_timeout_s)
    foreign_lock(root, args.long_lock_s, args.busy_timeout_s)
    if can_mount():
        full_disk(root)
        read_only_data_dir(root)
    else:
        print("\nfull disk / read-only: skipped (needs root and tmpfs mounts)")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
