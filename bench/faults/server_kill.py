"""SIGKILL the MCP server (python rag_server.py, stdio) mid-sync and mid-call.

    python bench/faults/server_kill.py [--rounds 20] [--files 500]

Mid-sync: a real stdio server starts sync_kb and is killed after a random delay; the detached
worker must finish, and a new server must report the job succeeded with every file.
Mid-call: a tool call is sent and the server killed 0-30 ms later (before, during or after the
call); no job may stay active, and the index must stay whole.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time

from _common import line, work_dir
from conftest import make_config, write_corpus
from stress.harness import McpProcess, index_problems, run_sync, worker_pids

import rag_service
from helpers.store import job_rows


def mid_sync(root, rounds: int, files: int, rng: random.Random) -> int:  # type: ignore[no-untyped-def]
    knowledge = root / "docs"
    write_corpus(knowledge, files)
    ok = survived_worker = 0
    for round_no in range(rounds):
        shutil.rmtree(root / "state", ignore_errors=True)
        config = make_config(knowledge, root / "state")
        server = McpProcess.start(config)
        is_error, job = server.call("sync_kb", {})
        time.sleep(rng.uniform(0, 1.5))
        server.kill()
        survived_worker += bool(worker_pids(config.data_dir))
        second = McpProcess.start(config)
        status: dict = {}
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            _err, status = second.call("sync_status", {"job_id": job["job_id"]})
            if status["state"] in job_rows.FINAL_STATES:
                break
            time.sleep(0.2)
        second.close()
        good = (
            not is_error
            and status.get("state") == "succeeded"
            and status["counts"]["added"] == files
            and not index_problems(config.db_path)
        )
        ok += good
        print(f"{'ok ' if good else 'BAD'} mid-sync round {round_no}: {status.get('state')}")
    print("\nserver killed mid-sync")
    line("rounds / worker alive after the kill", f"{rounds} / {survived_worker}")
    line("new server reported the job succeeded, all files", f"{ok} / {rounds}")
    return rounds - ok


def mid_call(root, rounds: int, rng: random.Random) -> int:  # type: ignore[no-untyped-def]
    knowledge = root / "docs2"
    write_corpus(knowledge, 100)
    config = make_config(knowledge, root / "state2")
    run_sync(config)
    calls = [
        ("sync_kb", {}),
        ("rag_search", {"query": "invoice payment"}),
        ("sync_status", {}),
        ("rag_list", {}),
        ("cancel_sync", {"job_id": "x"}),
    ]
    bad = slow = 0
    for round_no in range(rounds):
        (knowledge / f"new{round_no}.md").write_text(f"# n\n\nround{round_no:04d}\n", "utf-8")
        server = McpProcess.start(config)
        name, args = calls[round_no % len(calls)]
        server.send_request("tools/call", {"name": name, "arguments": args})
        time.sleep(rng.uniform(0, 0.03))
        server.kill()
        started = time.monotonic()
        view = None
        while time.monotonic() - started < 60:
            view = rag_service.sync_status(config)
            if view.state in job_rows.FINAL_STATES:
                break
            time.sleep(0.1)
        took = time.monotonic() - started
        slow += took > 5
        problems = index_problems(config.db_path)
        good = view is not None and view.state in job_rows.FINAL_STATES and not problems
        bad += not good
        print(
            f"{'ok ' if good else 'BAD'} mid-call {name:<11} -> {view.state if view else None} "
            f"({took:.1f} s to final)"
        )
    print("\nserver killed mid-call")
    line("rounds / not final or index problems", f"{rounds} / {bad}")
    line("jobs that took > 5 s to be final (queued grace)", slow)
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = work_dir("srvkill", args.work)
    bad = mid_sync(root, args.rounds, args.files, rng) + mid_call(root, args.rounds, rng)
    shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
