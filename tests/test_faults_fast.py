"""Faults, fast subset: SIGKILLed workers and servers, foreign locks, full and read-only disks,
files changing under a sync, concurrent searches and sync/cancel storms.

The long runs (hundreds of kills, minutes of load) are bench/faults/*.py; see its README.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import (
    REPO,
    RecordingObserver,
    files_for_seconds,
    make_config,
    needs_mount,
    needs_setpriv,
    write_corpus,
)
from stress.corpora import make_mixed_corpus
from stress.faults import fresh_data_dir, kill_during_sync
from stress.harness import (
    STUCK_SANDBOX_WORKER,
    McpProcess,
    canonical_dump,
    dump_difference,
    foreign_exclusive_lock,
    index_problems,
    is_alive,
    jobs_in_states,
    kill_hard,
    lock_holders,
    reference_dump,
    run_sync,
    run_worker_without_dac_override,
    sandbox_children,
    tmpfs,
    wait_until,
    worker_pids,
)

import rag_service
import rag_sync
from helpers.config import Config
from helpers.extract.blocks import ExtractContext
from helpers.store import job_rows
from helpers.store.index_db import open_index


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    root = tmp_path_factory.mktemp("mixed")
    make_mixed_corpus(root / "docs", sets=3, seed=4)
    return root / "docs", reference_dump(root / "docs", root / "reference")


# -- SIGKILL ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_sigkilled_worker_leaves_a_whole_index_a_failed_job_and_the_next_sync_converges(
    mixed: tuple[Path, list], tmp_path: Path, seed: int
):
    knowledge, expected = mixed
    delay = random.Random(seed).uniform(0.0, 0.3)  # after the claim, well before the sync ends
    config = make_config(knowledge, fresh_data_dir(tmp_path / "state"))
    outcome = kill_during_sync(config, delay, expected, after_claim=True)
    assert outcome.injected, "the sync finished before the kill: nothing was tested"
    assert outcome.state_after_kill == "failed", outcome
    assert "worker died" in outcome.message
    assert outcome.problems == [], outcome
    assert outcome.orphans == []
    assert outcome.resync_state == "succeeded"
    assert outcome.difference == []


def test_a_worker_killed_before_claiming_its_job_does_not_block_the_next_sync(
    config: Config, knowledge: Path
):
    write_corpus(knowledge, 5)
    for _attempt in range(5):
        job = rag_service.start_sync(config)
        pids = wait_until(lambda: worker_pids(config.data_dir), timeout=10, interval=0.002)
        for pid in pids:
            kill_hard(pid)
        wait_until(lambda: not worker_pids(config.data_dir), timeout=10)
        row = jobs_in_states(config.db_path, ("queued",))
        if row and row[0]["id"] == job.job_id:
            break  # killed before its claim: the case under test (start_sync recorded its pid)
        rag_service.wait_for_job(config, job.job_id, timeout_s=60)
    else:
        pytest.fail("the worker claimed its job before it could be killed, five times")
    again = rag_service.start_sync(config)  # well inside QUEUED_GRACE_S: the pid decides
    assert not again.already_running, again.to_dict()
    dead = rag_service.sync_status(config, job.job_id)
    assert dead.state == "failed" and "never started" in (dead.message or ""), dead.to_dict()
    assert rag_service.wait_for_job(config, again.job_id, timeout_s=60).state == "succeeded"


def test_killing_the_mcp_server_mid_sync_leaves_the_worker_running_and_a_new_server_reports_it(
    config: Config, knowledge: Path, tmp_path: Path
):
    files = max(200, files_for_seconds(tmp_path, 5))  # still running when the server is killed
    write_corpus(knowledge, files)
    first = McpProcess.start(config, stderr_path=tmp_path / "first.log")
    is_error, job = first.call("sync_kb", {})
    assert not is_error, job
    first.kill()  # SIGKILL: no clean shutdown, no chance to stop the worker
    assert worker_pids(config.data_dir), "the worker died with the server"
    second = McpProcess.start(config, stderr_path=tmp_path / "second.log")
    try:

        def final_status() -> dict | None:
            is_error, status = second.call("sync_status", {"job_id": job["job_id"]})
            assert not is_error, status
            return status if status["state"] in job_rows.FINAL_STATES else None

        status = wait_until(final_status, timeout=120, interval=0.2)
        assert status["state"] == "succeeded" and status["counts"]["added"] == files
    finally:
        second.close()
    assert index_problems(config.db_path) == []


@pytest.mark.parametrize("tool", ["sync_kb", "rag_search"])
def test_killing_the_mcp_server_mid_call_leaves_no_stuck_job_and_a_whole_index(
    config: Config, knowledge: Path, tmp_path: Path, tool: str
):
    write_corpus(knowledge, 60)
    run_sync(config)
    write_corpus(knowledge / "more", 30, seed=9)
    server = McpProcess.start(config, stderr_path=tmp_path / "server.log")
    args = {"query": "invoice payment"} if tool == "rag_search" else {}
    server.send_request("tools/call", {"name": tool, "arguments": args})
    server.kill()  # the request is in flight: killed mid-call
    final = wait_until(
        lambda: (v := rag_service.sync_status(config)).state in job_rows.FINAL_STATES and v,
        timeout=60,
    )
    # The kill may land before the request is read (no new job), after the worker started
    # (it finishes on its own) or between the job row and the spawn (reported as never started).
    assert final.state == "succeeded" or "never started" in (final.message or ""), final
    assert index_problems(config.db_path) == []
    assert rag_service.search(config, "invoice", mode="lexical").hits


# -- a foreign lock, a full disk, a read-only data dir ---------------------------------------------
def test_a_foreign_exclusive_lock_of_a_few_seconds_makes_every_tool_wait_not_fail(
    config: Config, knowledge: Path
):
    write_corpus(knowledge, 30)
    run_sync(config)
    write_corpus(knowledge / "more", 30, seed=5)
    with foreign_exclusive_lock(config.db_path, seconds=3):
        hits = rag_service.search(config, "invoice", mode="lexical").hits  # readers never wait
        job = rag_service.start_sync(config)  # waits for the lock, then starts the worker
        status = rag_service.sync_status(config, job.job_id)
    assert hits and status.state in ("queued", "running", "succeeded")
    final = rag_service.wait_for_job(config, job.job_id, timeout_s=60)
    assert final.state == "succeeded" and final.counts["added"] == 30
    assert index_problems(config.db_path) == []


def test_sync_status_answers_while_another_process_holds_the_write_lock(
    config: Config, knowledge: Path
):
    write_corpus(knowledge, 300)
    job = rag_service.start_sync(config)
    wait_until(lambda: rag_service.sync_status(config, job.job_id).state == "running")
    answered = threading.Event()
    with foreign_exclusive_lock(config.db_path, seconds=5):
        threading.Thread(
            target=lambda: (rag_service.sync_status(config, job.job_id), answered.set()),
            daemon=True,
        ).start()
        answered.wait(timeout=2.5)  # a status read needs no lock: generous for a loaded box
        assert answered.is_set(), "sync_status waited for the writer"
    rag_service.cancel_sync(config, job.job_id)
    rag_service.wait_for_job(config, job.job_id, timeout_s=60)


@needs_mount
def test_a_full_disk_fails_the_job_with_a_clear_error_and_a_whole_index(
    knowledge: Path, tmp_path: Path
):
    write_corpus(knowledge, 200, words_per_file=400)
    expected = reference_dump(knowledge, tmp_path / "reference")
    with tmpfs(tmp_path / "tiny", "1m") as tiny:
        config = make_config(knowledge, tiny / "state")
        view = run_sync(config, timeout_s=120)
        assert view.state == "failed"
        assert "disk is full" in (view.message or "")
        assert index_problems(config.db_path) == []
        assert jobs_in_states(config.db_path) == []
        assert rag_service.health(config)["last_job"]["state"] == "failed"
        subprocess.run(["mount", "-o", "remount,size=64m", str(tiny)], check=True)
        again = run_sync(config, timeout_s=120)
        assert again.state == "succeeded"
        assert dump_difference(canonical_dump(config.db_path), expected) == []


# -- files changing under a sync ------------------------------------------------------------------
class _Churn(RecordingObserver):
    """Changes the folder as the sync reaches given files: grow, replace, vanish, rename."""

    def __init__(self, knowledge: Path) -> None:
        super().__init__()
        self.knowledge = knowledge

    def on_file_start(self, rel_path: str) -> None:
        path = self.knowledge / rel_path
        if rel_path == "part1/note-00001.md":
            with path.open("a", encoding="utf-8") as f:
                f.write("\ngrowing line\n")
        elif rel_path == "part2/note-00002.md":
            replacement = path.with_suffix(".tmp")
            replacement.write_text("# Replaced\n\nreplacement body\n", encoding="utf-8")
            os.replace(replacement, path)
        elif rel_path == "part3/note-00003.md":
            path.unlink()
        elif rel_path == "part4/note-00004.md":
            os.rename(self.knowledge / "part4", self.knowledge / "part4-renamed")


def test_files_growing_replaced_vanishing_and_a_renamed_folder_are_reported_then_converge(
    knowledge: Path, tmp_path: Path
):
    write_corpus(knowledge, 60)
    churn = _Churn(knowledge)
    conn = open_index(tmp_path / "state" / "index.sqlite3")
    try:
        counts: dict[str, int] = {}
        rag_sync.sync_files(conn, knowledge, "", ExtractContext(), churn, counts)
    finally:
        conn.close()
    assert "changed while being read" in churn.errors["part1/note-00001.md"]
    assert "changed while being read" in churn.errors["part2/note-00002.md"]
    assert "cannot read" in churn.errors["part3/note-00003.md"]
    assert "cannot read" in churn.errors["part4/note-00004.md"]
    assert all(p.startswith(("part1/", "part2/", "part3/", "part4/")) for p in churn.errors)
    assert index_problems(tmp_path / "state" / "index.sqlite3") == []
    config = make_config(knowledge, tmp_path / "state")
    assert run_sync(config).state == "succeeded"
    expected = reference_dump(knowledge, tmp_path / "reference")
    assert dump_difference(canonical_dump(config.db_path), expected) == []


# -- load -----------------------------------------------------------------------------------------
_SEARCHER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import rag_service
from helpers.config import Config
config = Config.from_json(sys.argv[2])
out = {"ok": 0, "errors": [], "ms": []}
for i in range(int(sys.argv[3])):
    started = time.perf_counter()
    try:
        rag_service.search(config, ["invoice payment", "budget", "marker00042", "zz"][i % 4],
                           mode="lexical")
        out["ok"] += 1
    except Exception as exc:
        out["errors"].append(f"{type(exc).__name__}: {exc}")
    out["ms"].append((time.perf_counter() - started) * 1000)
print(json.dumps(out))
"""


def searchers(config: Config, processes: int, calls: int) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, "-c", _SEARCHER, str(REPO), config.to_json(), str(calls)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]


def test_concurrent_searches_from_many_processes_during_a_sync_all_answer(
    config: Config, knowledge: Path
):
    write_corpus(knowledge, 60)
    run_sync(config)
    write_corpus(knowledge / "more", 500, seed=3)
    job = rag_service.start_sync(config)
    procs = searchers(config, processes=6, calls=10)
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert rag_service.sync_status(config, job.job_id).state in ("running", "succeeded")
    assert [e for r in results for e in r["errors"]] == []
    assert sum(r["ok"] for r in results) == 6 * 10
    rag_service.cancel_sync(config, job.job_id)
    assert rag_service.wait_for_job(config, job.job_id, timeout_s=120).state in (
        "cancelled",
        "succeeded",
    )


_STORMER = """
import random, sys, time
sys.path.insert(0, sys.argv[1])
import rag_service
from helpers.config import Config
config = Config.from_json(sys.argv[2])
rng = random.Random(int(sys.argv[3]))
end = time.monotonic() + float(sys.argv[4])
while time.monotonic() < end:
    job = rag_service.start_sync(config)
    time.sleep(rng.uniform(0, 0.4))
    rag_service.cancel_sync(config, job.job_id)
"""


def test_sync_and_cancel_storms_from_several_processes_keep_one_worker_and_no_orphan_jobs(
    config: Config, knowledge: Path
):
    write_corpus(knowledge, 150)
    run_sync(config)  # the index exists: the storm races on jobs, not on schema creation
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _STORMER, str(REPO), config.to_json(), str(seed), "2"]
        )
        for seed in range(3)
    ]
    # A new worker may already be alive, waiting for the lock, while the last one exits: the
    # single-writer rule is about the lock and the claimed (running) job, so those are sampled.
    most_holders = most_running = 0
    while any(p.poll() is None for p in procs):
        most_holders = max(most_holders, len(set(lock_holders(config.lock_path))))
        running = jobs_in_states(config.db_path, ("running", "cancelling"))
        most_running = max(most_running, len(running))
        time.sleep(0.02)
    assert all(p.returncode == 0 for p in procs)
    wait_until(
        lambda: (
            not worker_pids(config.data_dir)
            and rag_service.sync_status(config).state in job_rows.FINAL_STATES
        ),
        timeout=60,
    )
    rag_service.list_jobs(config)  # reconciles as a status call would
    assert most_holders <= 1 and most_running <= 1
    assert jobs_in_states(config.db_path) == []
    assert index_problems(config.db_path) == []


# -- the extraction child ---------------------------------------------------------------------


def _opening_a_fifo(pid: int) -> bool:
    """The child has read the request and sleeps in open() of the FIFO, waiting for a writer."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner"
    except OSError:
        return False


def test_an_extraction_child_stuck_in_a_file_dies_with_its_killed_worker(tmp_path: Path):
    stuck = tmp_path / "stuck.docx"
    os.mkfifo(stuck)  # opening it blocks forever: a stand-in for a C library that never returns
    worker = subprocess.Popen([sys.executable, "-c", STUCK_SANDBOX_WORKER, str(REPO), str(stuck)])
    children: list[int] = []
    try:
        children = wait_until(lambda: sandbox_children(worker.pid), timeout=30)
        wait_until(lambda: any(_opening_a_fifo(c) for c in children), timeout=30)
        kill_hard(worker.pid)
        worker.wait()
        wait_until(lambda: not any(is_alive(c) for c in children), timeout=30)
    finally:
        worker.kill()
        for child in children:
            kill_hard(child)


@needs_setpriv
def test_a_folder_that_turns_unreadable_keeps_its_indexed_documents(
    config: Config, knowledge: Path
):
    (knowledge / "sub").mkdir()
    (knowledge / "sub" / "a.md").write_text("# A\n\nalphamarker77\n", encoding="utf-8")
    (knowledge / "b.md").write_text("# B\n\nbetamarker77\n", encoding="utf-8")
    run_sync(config)
    (knowledge / "sub").chmod(0)
    try:
        view = run_worker_without_dac_override(config)
    finally:
        (knowledge / "sub").chmod(0o755)
    assert view.state == "succeeded"
    assert any(e["path"] == "sub" and "not readable" in e["message"] for e in view.errors)
    hits = rag_service.search(config, "alphamarker77", mode="lexical").hits
    assert [h.path for h in hits] == ["sub/a.md"]
