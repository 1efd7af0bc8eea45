"""rag_service.sync_kb_blocking: a host embedding the service syncs in its own process through the
worker's own code path (lock, job row, progress, cancel) and gets the final job back."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from conftest import write_corpus

import rag_service
from helpers.config import Config
from helpers.store.job_rows import FINAL_STATES, JobView


def test_a_blocking_sync_runs_here_and_returns_the_final_job(config: Config, knowledge: Path):
    (knowledge / "guide.md").write_text("# Guide\n\nrotate the signing keys yearly\n", "utf-8")
    (knowledge / "broken.pdf").write_bytes(b"%PDF-1.7 not really a pdf")
    handler = signal.getsignal(signal.SIGTERM)
    seen: list[JobView] = []
    view = rag_service.sync_kb_blocking(config, on_progress=seen.append)
    assert view.state == "succeeded"
    assert seen and seen[-1].state == "succeeded"
    assert [e["path"] for e in view.to_dict()["errors"]] == ["broken.pdf"]  # reported, not fatal
    assert rag_service.list_jobs(config)[0].job_id == view.job_id
    hits = rag_service.search(config, "signing keys").to_dict()["hits"]
    assert hits[0]["path"] == "guide.md"
    assert signal.getsignal(signal.SIGTERM) is handler  # the host keeps its own handlers
    again = rag_service.sync_kb_blocking(config)
    assert again.job_id != view.job_id
    assert again.counts["unchanged"] == 1  # the good file; the broken one is retried


def test_a_blocking_sync_records_this_process_and_honours_a_cancel(config: Config, knowledge: Path):
    # Big enough that the files phase spans several one-second progress publications on a fast
    # machine (300 files finished before the first one showed a completed file).
    files = 3000
    write_corpus(knowledge, files)
    cancelled = threading.Event()
    pids: list[int | None] = []

    def cancel_once(view: JobView) -> None:
        if view.state == "running" and view.completed_files and not cancelled.is_set():
            cancelled.set()
            pids.append(view.pid)
            rag_service.cancel_sync(config, view.job_id)

    view = rag_service.sync_kb_blocking(config, on_progress=cancel_once)
    assert cancelled.is_set()
    assert pids == [os.getpid()]  # the job ran in this process, not a detached worker
    assert view.state == "cancelled"
    assert 0 < view.counts["added"] < files  # what was committed stays


def test_a_blocking_sync_waits_for_a_sync_already_running(config: Config, knowledge: Path):
    write_corpus(knowledge, 120)
    detached = rag_service.start_sync(config)
    view = rag_service.sync_kb_blocking(config)
    assert view.job_id == detached.job_id
    assert view.state in FINAL_STATES and view.state == "succeeded"
