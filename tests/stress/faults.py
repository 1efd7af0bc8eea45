"""One SIGKILL fault run: start a sync, kill its worker after a delay, check, re-sync, compare.

Used by tests/test_faults_fast.py (a few runs) and bench/faults/kill_worker.py (hundreds).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import rag_service
from helpers.config import Config
from helpers.store.job_rows import ACTIVE_STATES, FINAL_STATES
from stress.harness import (
    DumpRow,
    canonical_dump,
    dump_difference,
    index_problems,
    is_alive,
    kill_hard,
    run_sync,
    sandbox_children,
    worker_pids,
)

# How long a killed job may take to be reported final. The reconciler needs the flock to be free
# (immediate) for a running job, and QUEUED_GRACE_S (30 s) for a job killed before its claim.
REPORT_TIMEOUT_S = 45.0
ORPHAN_GRACE_S = 10.0  # a sandbox child exits once it sees EOF on its stdin


@dataclass
class KillOutcome:
    delay_s: float
    injected: bool  # a live worker was killed (False: the job had already finished)
    phase_at_kill: str = ""
    files_done_at_kill: int = 0  # as last published (the heartbeat is up to 1 s old)
    documents_at_kill: int = 0  # rows committed when the worker died (0 < n < all: mid-files)
    state_after_kill: str = ""
    seconds_to_report: float = 0.0
    message: str = ""
    problems: list[str] = field(default_factory=list)  # integrity / half-written documents
    converged: bool = True
    difference: list[str] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)  # sandbox children left alive
    resync_state: str = ""

    @property
    def survived(self) -> bool:
        return (
            not self.problems
            and self.converged
            and self.state_after_kill in ("failed", "succeeded", "cancelled")
            and not self.orphans
            and self.resync_state == "succeeded"
        )


def kill_during_sync(
    config: Config,
    delay_s: float,
    expected: list[DumpRow],
    resync_timeout_s: float = 300,
    after_claim: bool = False,
) -> KillOutcome:
    """SIGKILL the worker `delay_s` after sync_kb (or after the worker claimed the job); then
    the four checks of the fault model."""
    job = rag_service.start_sync(config)
    if after_claim:
        deadline = time.monotonic() + 60
        while rag_service.sync_status(config, job.job_id).state == "queued":
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
    time.sleep(delay_s)
    view = rag_service.sync_status(config, job.job_id)
    pids = worker_pids(config.data_dir)
    outcome = KillOutcome(delay_s=delay_s, injected=False)
    children = [c for pid in pids for c in sandbox_children(pid)]
    outcome.phase_at_kill = f"{view.state}/{view.phase}"
    outcome.files_done_at_kill = view.completed_files
    for pid in pids:
        outcome.injected |= kill_hard(pid)
    killed_at = time.monotonic()
    deadline = killed_at + REPORT_TIMEOUT_S
    while True:
        view = rag_service.sync_status(config, job.job_id)
        if view.state in FINAL_STATES or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    outcome.state_after_kill = view.state
    outcome.documents_at_kill = len(canonical_dump(config.db_path))
    outcome.seconds_to_report = time.monotonic() - killed_at
    outcome.message = view.message or ""
    outcome.problems = index_problems(config.db_path)
    orphan_deadline = time.monotonic() + ORPHAN_GRACE_S
    while any(is_alive(c) for c in children) and time.monotonic() < orphan_deadline:
        time.sleep(0.1)
    outcome.orphans = [c for c in children if is_alive(c)]
    if view.state in ACTIVE_STATES:
        return outcome  # stuck: the convergence check would only wait behind it
    again = run_sync(config, resync_timeout_s)
    outcome.resync_state = again.state
    got = canonical_dump(config.db_path)
    outcome.difference = dump_difference(got, expected)
    outcome.converged = not outcome.difference
    outcome.problems += index_problems(config.db_path)
    return outcome


def fresh_data_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path
