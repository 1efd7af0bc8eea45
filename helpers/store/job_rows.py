"""Persistent sync jobs: one writer ever, visible from any process, dead workers detected.

The single-writer rule is enforced twice: a job row in an active state (created under
BEGIN IMMEDIATE, so two callers serialise) and an exclusive flock on `<data-dir>/sync.lock` held
by the worker for its whole life. The kernel drops the flock when the worker dies, however it
dies, which is how a crashed job is told apart from a slow one.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import platform_caps
from helpers.results import JOB
from helpers.store.connection import write_transaction

ACTIVE_STATES = ("queued", "running", "cancelling")
FINAL_STATES = ("cancelled", "succeeded", "failed")
# A queued job whose worker has not taken the lock after this long never started (spawn failed,
# machine overloaded past reason); worker start-up takes well under a second.
QUEUED_GRACE_S = 30.0
# A running job whose heartbeat is this old and whose pid is gone is dead even without the lock
# check (e.g. the data dir is on a file system without flock support).
HEARTBEAT_STALE_S = 15.0
MAX_ERRORS_SHOWN = 200  # per-file errors returned by status; all are kept in the table


@dataclass(frozen=True)
class JobView:
    """The job as every face shows it (MCP, CLI, console)."""

    job_id: str
    state: str
    phase: str
    scope: str
    percent: float
    current_file: str | None
    completed_files: int
    total_files: int
    done_bytes: int
    total_bytes: int
    eta_seconds: float | None
    counts: dict[str, int]
    semantic: dict[str, int]
    errors: list[dict[str, str]]
    error_count: int
    message: str | None
    pid: int | None
    created_at: float
    started_at: float | None
    updated_at: float
    finished_at: float | None
    heartbeat: float | None
    already_running: bool = False
    # Inside the current file: {"done": 120, "total": 2000, "unit": "page"} (None between files)
    file_progress: dict[str, Any] | None = None
    # {reason: {"count", "label", "examples"}} (helpers.skips); {} before the plan and on an
    # index older than schema 7
    skipped: dict[str, Any] = field(default_factory=dict)
    # What the job counts now, in the same words on every face (progress_summary)
    progress: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The keys of helpers.results.JOB, from the fields of the same names."""
        values = {key: getattr(self, key) for key in JOB.full}
        values["percent"] = round(self.percent, 1)
        if self.eta_seconds is not None:
            values["eta_seconds"] = round(self.eta_seconds, 1)
        values["skipped"] = {"total": self.counts.get("skipped", 0), "by_reason": self.skipped}
        return JOB.build(values)


def lock_is_held(lock_path: Path) -> bool:
    """True when some process (the worker) holds the sync lock right now."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def acquire_worker_lock(lock_path: Path, wait_s: float = 10.0) -> int | None:
    """Take the sync lock for this process's life; None if another worker holds it."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by the server that spawned it) is dead for our purposes.
    return platform_caps.is_zombie(pid) is not True  # /proc, else `ps`; unknown = alive


def reconcile_dead_jobs(conn: sqlite3.Connection, lock_path: Path) -> int:
    """Mark active jobs whose worker is gone as failed (caller holds a write transaction)."""
    rows = conn.execute(
        f"SELECT id, state, pid, heartbeat, created_at FROM jobs "
        f"WHERE state IN ({','.join('?' * len(ACTIVE_STATES))})",
        ACTIVE_STATES,
    ).fetchall()
    if not rows:
        return 0
    held = lock_is_held(lock_path)
    now = time.time()
    dead = 0
    for row in rows:
        if (
            row["state"] == "queued"
            and now - row["created_at"] < QUEUED_GRACE_S
            and (row["pid"] is None or _pid_alive(row["pid"]))
        ):
            continue  # still starting (or its pid is not known yet)
        stale = row["heartbeat"] is None or now - row["heartbeat"] > HEARTBEAT_STALE_S
        # The flock is authoritative (the worker holds it from claim to exit); the pid and
        # heartbeat only matter where flock is not honoured (some network file systems).
        if held and not (stale and not _pid_alive(row["pid"])):
            continue
        reason = (
            "worker never started"
            if row["state"] == "queued"
            else f"worker died (pid {row['pid']}); documents committed before it died are "
            "kept, the next sync_kb picks up the rest"
        )
        conn.execute(
            "UPDATE jobs SET state = 'failed', phase = 'done', message = ?, file_progress = NULL, "
            "finished_at = ?, updated_at = ? WHERE id = ?",
            (reason, now, now, row["id"]),
        )
        dead += 1
    return dead


def create_or_get_active(conn: sqlite3.Connection, lock_path: Path, scope: str) -> tuple[str, bool]:
    """(job id, already_running): the active job if there is one, else a new queued job."""
    with write_transaction(conn):
        reconcile_dead_jobs(conn, lock_path)
        row = conn.execute(
            f"SELECT id FROM jobs WHERE state IN ({','.join('?' * len(ACTIVE_STATES))}) "
            "ORDER BY created_at DESC LIMIT 1",
            ACTIVE_STATES,
        ).fetchone()
        if row:
            return row["id"], True
        job_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]
        now = time.time()
        conn.execute(
            "INSERT INTO jobs(id, state, phase, scope, created_at, updated_at) "
            "VALUES (?, 'queued', 'prepare', ?, ?, ?)",
            (job_id, scope, now, now),
        )
        return job_id, False


def record_spawned_pid(conn: sqlite3.Connection, job_id: str, pid: int) -> None:
    """Remember the worker's pid at once, so a worker that dies before claiming is seen."""
    with write_transaction(conn):
        conn.execute(
            "UPDATE jobs SET pid = ? WHERE id = ? AND state = 'queued' AND pid IS NULL",
            (pid, job_id),
        )


def reconcile_needed(conn: sqlite3.Connection, lock_path: Path) -> bool:
    """Whether an active job may be dead: only then is a write transaction worth taking (a
    live worker may be holding the write lock for a large document)."""
    if not lock_is_held(lock_path):
        return True
    rows = conn.execute(
        "SELECT pid, heartbeat FROM jobs WHERE state IN ('running', 'cancelling')"
    ).fetchall()
    now = time.time()
    return any(
        (r["heartbeat"] is None or now - r["heartbeat"] > HEARTBEAT_STALE_S)
        and not _pid_alive(r["pid"])
        for r in rows
    )


def mark_spawn_failed(conn: sqlite3.Connection, job_id: str, message: str) -> None:
    now = time.time()
    with write_transaction(conn):
        conn.execute(
            "UPDATE jobs SET state = 'failed', phase = 'done', message = ?, finished_at = ?, "
            "updated_at = ? WHERE id = ? AND state = 'queued'",
            (message, now, now, job_id),
        )


def request_cancel(conn: sqlite3.Connection, job_id: str) -> bool:
    """Flag an active job for cooperative cancel; False when it is already final."""
    with write_transaction(conn):
        cur = conn.execute(
            "UPDATE jobs SET cancel_requested = 1, "
            "state = CASE WHEN state = 'running' THEN 'cancelling' ELSE state END, "
            "updated_at = ? WHERE id = ? AND state IN ('queued', 'running', 'cancelling')",
            (time.time(), job_id),
        )
        return cur.rowcount > 0


def load_job(conn: sqlite3.Connection, job_id: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def latest_job_id(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT id FROM jobs ORDER BY created_at DESC LIMIT 1").fetchone()
    return row["id"] if row else None


def recent_job_ids(conn: sqlite3.Connection, limit: int) -> list[str]:
    rows = conn.execute("SELECT id FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,))
    return [r["id"] for r in rows]


def job_view(conn: sqlite3.Connection, row: sqlite3.Row, already_running: bool = False) -> JobView:
    errors = [
        {"path": e["path"], "message": e["message"]}
        for e in conn.execute(
            "SELECT path, message FROM job_errors WHERE job_id = ? ORDER BY id LIMIT ?",
            (row["id"], MAX_ERRORS_SHOWN),
        )
    ]
    error_count = conn.execute(
        "SELECT COUNT(*) FROM job_errors WHERE job_id = ?", (row["id"],)
    ).fetchone()[0]
    return JobView(
        job_id=row["id"],
        state=row["state"],
        phase=row["phase"],
        scope=row["scope"],
        percent=_percent(row),
        current_file=row["current_file"],
        completed_files=row["completed_files"],
        total_files=row["total_files"],
        done_bytes=row["done_bytes"],
        total_bytes=row["total_bytes"],
        eta_seconds=_eta(row),
        counts={
            k: row[k] for k in ("added", "updated", "unchanged", "removed", "failed", "skipped")
        },
        semantic={"done": row["semantic_done"], "total": row["semantic_total"]},
        errors=errors,
        error_count=error_count,
        message=row["message"],
        pid=row["pid"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        heartbeat=row["heartbeat"],
        already_running=already_running,
        file_progress=_file_progress(row),
        skipped=_json_column(row, "skipped_detail"),
        progress=progress_summary(row),
    )


def progress_summary(row: sqlite3.Row) -> dict[str, Any]:
    """{"unit", "done", "total", "text", "per_second"}: texts embedded during the semantic
    phase (the bar's last tenth, but most of a first sync's time), files otherwise. The CLI
    bar, the console and sync_status all show this text, so they never disagree.
    per_second is the semantic phase's own rate (texts/s), None before it is known."""
    rate = None
    if row["phase"] == "semantic" and row["semantic_total"]:
        unit, done, total = "texts", row["semantic_done"], row["semantic_total"]
        text = f"{done}/{total} texts embedded"
        started = _newer_column(row, "phase_started_at")
        elapsed = (row["updated_at"] or time.time()) - started if started else 0.0
        if done > 0 and elapsed > 0:
            rate = round(done / elapsed, 1)
            text += f", {rate:.0f}/s"
    else:
        unit, done, total = "files", row["completed_files"], row["total_files"]
        text = f"{done}/{total} files"
    return {"unit": unit, "done": done, "total": total, "text": text, "per_second": rate}


def _newer_column(row: sqlite3.Row, name: str) -> Any:
    """A column a later migration added: None on an older index read as it is (read-only)."""
    # sqlite3.Row: `name in row` would test the values, not the column names.
    columns = row.keys()
    return row[name] if name in columns else None


def _file_progress(row: sqlite3.Row) -> dict[str, Any] | None:
    """The current file's progress; None between files and on an index older than the column."""
    raw = _newer_column(row, "file_progress")
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _json_column(row: sqlite3.Row, name: str) -> dict[str, Any]:
    raw = _newer_column(row, name)
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# Share of the progress bar each phase owns: files dominate; the semantic build, when it runs,
# takes the last part (it is the slow part on a CPU).
_FILES_SHARE_WITH_SEMANTIC = 0.90


def _percent(row: sqlite3.Row) -> float:
    if row["state"] == "succeeded":
        return 100.0
    if row["phase"] == "prepare":
        return 0.0
    total_bytes = row["total_bytes"] or 0
    if total_bytes:
        files_fraction = min(1.0, row["done_bytes"] / total_bytes)
    elif row["total_files"]:
        files_fraction = min(1.0, row["completed_files"] / row["total_files"])
    else:
        files_fraction = 1.0 if row["phase"] in ("cleanup", "semantic", "done") else 0.0
    if row["semantic_total"]:
        semantic_fraction = row["semantic_done"] / row["semantic_total"]
        share = _FILES_SHARE_WITH_SEMANTIC
        return 100.0 * (share * files_fraction + (1 - share) * semantic_fraction)
    return 99.0 * files_fraction if row["phase"] != "done" else 100.0 * files_fraction


def _eta(row: sqlite3.Row) -> float | None:
    """Seconds left. In the semantic phase, from that phase's own rate: it owns a tenth of the
    bar but embedding can take most of the job, so a whole-job rate would say "10 s" for minutes.
    """
    if row["state"] not in ("running", "cancelling") or not row["started_at"]:
        return None
    now = row["updated_at"] or time.time()
    phase_started = _newer_column(row, "phase_started_at")
    if row["phase"] == "semantic" and phase_started:
        done, total = row["semantic_done"], row["semantic_total"]
        in_phase = now - phase_started
        if not total or done <= 0 or in_phase <= 0:
            return None
        return max(0.0, in_phase * (total - done) / done)
    elapsed = now - row["started_at"]
    fraction = _percent(row) / 100.0
    if fraction <= 0.01 or elapsed <= 0:
        return None
    return max(0.0, elapsed * (1 - fraction) / fraction)


# -- one line of progress (the terminal sync and rag_eval --sync print it) ----------------------
PROGRESS_BAR_WIDTH = 30


def progress_line(view: JobView) -> str:
    filled = int(PROGRESS_BAR_WIDTH * view.percent / 100)
    bar = "#" * filled + "-" * (PROGRESS_BAR_WIDTH - filled)
    eta = eta_text(view)
    current = f" {view.current_file}" if view.current_file else ""
    progress = view.progress or {
        "unit": "files",
        "text": f"{view.completed_files}/{view.total_files} files",
    }
    done = progress["text"]
    if progress["unit"] == "files" and view.skipped:
        done += f" skipped {skipped_line(view.skipped)}"
    return f"[{bar}] {view.percent:5.1f}% {view.state}/{view.phase} {done}{eta}{current}"


def eta_text(view: JobView) -> str:
    """' ETA 900s' (the semantic phase's own estimate in that phase), '' when unknown."""
    return f" ETA {view.eta_seconds:.0f}s" if view.eta_seconds is not None else ""


def skipped_line(breakdown: dict[str, Any]) -> str:
    """'unsupported 233, hidden 4' from a job's skipped breakdown (largest first)."""
    return ", ".join(f"{reason} {item['count']}" for reason, item in breakdown.items())
