"""A running sync job in its semantic phase, as the real JobReporter writes it, for the tests
that check every face shows the same progress (terminal, MCP, console API, console page)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import sync_job_worker
from helpers.config import Config
from helpers.store import job_rows, open_index

DONE, TOTAL, IN_PHASE_S = 1200, 9000, 60.0
TEXT = f"{DONE}/{TOTAL} texts embedded, {DONE / IN_PHASE_S:.0f}/s"
ETA_S = IN_PHASE_S * (TOTAL - DONE) / DONE  # 390 s: the phase's own rate, not the whole job's


@contextmanager
def semantic_phase_job(config: Config) -> Iterator[str]:
    """A running job 60 s into its semantic phase, 1,200 of 9,000 texts embedded; yields its id.
    This process plays its worker (holds the sync lock, owns the job's pid); the heartbeat is
    not started, so every face reads the same row."""
    conn = open_index.write_conn(config, "test")
    job_id, _ = job_rows.create_or_get_active(conn, config.lock_path, "")
    lock = job_rows.acquire_worker_lock(config.lock_path)
    assert lock is not None and sync_job_worker._claim(conn, job_id)
    reporter = sync_job_worker.JobReporter(config, job_id)
    reporter.on_plan(40, 4_000_000)
    reporter.on_phase("files")
    for i in range(40):
        reporter.on_file_done(f"doc{i}.md", "added", 100_000, None)
    reporter.on_phase("semantic")
    reporter.progress.phase_started_at = time.time() - IN_PHASE_S
    reporter.on_semantic(DONE, TOTAL)
    reporter.flush(conn)
    conn.close()
    try:
        yield job_id
    finally:
        os.close(lock)
