"""Sync jobs behind the service boundary: start the detached worker (or run it in the caller's
process), report, wait for and cancel jobs, and drive watch mode. rag_service re-exports every
public name here; the faces never import this module.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from helpers import errors
from helpers.bounds import WAIT_SECONDS_MAX
from helpers.config import REPO_DIR, Config
from helpers.errors import (
    IndexMissing,
    InvalidArgument,
    NotFound,
    RagError,
    require_unicode,
    storage_fault,
)
from helpers.index import watch
from helpers.safety import PathRejected, normalize_user_path, resolve_inside
from helpers.store import job_rows
from helpers.store.connection import write_transaction
from helpers.store.job_rows import JobView
from helpers.store.open_index import (
    read_conn,
    read_only_reason,
    require_config,
    storage_guard,
    with_failure_hint,
    write_conn,
)

WORKER_SCRIPT = REPO_DIR / "sync_job_worker.py"
JOB_POLL_S = 0.25


# -- sync jobs ---------------------------------------------------------------------------------
def _spawn_worker(config: Config, job_id: str) -> subprocess.Popen[bytes]:
    log_path = config.logs_dir / f"worker-{job_id}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(WORKER_SCRIPT),
                "--job-id",
                job_id,
                "--config-json",
                config.to_json(),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=str(REPO_DIR),
            start_new_session=True,  # survives the MCP client killing our process group
            close_fds=True,
        )
    # Reap it when it exits so a long-lived server never keeps a zombie that looks alive.
    threading.Thread(target=proc.wait, name=f"reap-{job_id}", daemon=True).start()
    return proc


def _sync_scope(config: Config, path: str | None) -> str:
    if not path:
        return ""
    try:
        scope = normalize_user_path(path)
        target = resolve_inside(config.knowledge_dir, scope)
    except PathRejected as exc:
        raise InvalidArgument(exc.message, exc.hint) from exc
    if not target.is_dir():
        raise InvalidArgument(f"{path!r} is not a folder inside the knowledge dir")
    return scope


def start_sync(config: Config, path: str | None = None) -> JobView:
    """Start the detached worker (or return the job already running); returns at once."""
    scope = _sync_scope(config, path)
    with storage_guard(config, "sync_kb did not start"):
        return _start_sync(config, scope)


def sync_kb_blocking(
    config: Config,
    run_job: Callable[..., None],
    path: str | None = None,
    on_progress: Callable[[JobView], None] | None = None,
) -> JobView:
    """Sync in the calling process and return the final job: for a host that embeds the service
    (not an MCP tool: it blocks). `run_job` is the worker's own code path (the service passes
    sync_job_worker.run_job: the same lock, job row, progress and cancel), so a job started
    here is seen and cancelled like any other. A sync already running is waited for."""
    scope = _sync_scope(config, path)
    with storage_guard(config, "sync did not start"):
        conn = write_conn(config, "sync_kb")
        try:
            job_id, already = job_rows.create_or_get_active(conn, config.lock_path, scope)
        finally:
            conn.close()
    if already:
        return wait_for_job(config, job_id, on_progress)
    done = threading.Event()
    if on_progress is not None:
        threading.Thread(
            target=_report_until, args=(config, job_id, on_progress, done), daemon=True
        ).start()
    try:
        run_job(config, job_id, handle_sigterm=False)
    finally:
        done.set()
    view = sync_status(config, job_id)
    if on_progress is not None:
        on_progress(view)
    return view


def _report_until(
    config: Config, job_id: str, on_progress: Callable[[JobView], None], done: threading.Event
) -> None:
    while not done.wait(JOB_POLL_S):
        try:
            on_progress(sync_status(config, job_id))
        except RagError:
            continue  # a busy read is retried at the next tick


def _start_sync(config: Config, scope: str) -> JobView:
    conn = write_conn(config, "sync_kb")
    try:
        job_id, already = job_rows.create_or_get_active(conn, config.lock_path, scope)
        if not already:
            try:
                proc = _spawn_worker(config, job_id)
            except OSError as exc:
                job_rows.mark_spawn_failed(conn, job_id, f"cannot start worker: {exc}")
            else:
                job_rows.record_spawned_pid(conn, job_id, proc.pid)
        row = job_rows.load_job(conn, job_id)
        assert row is not None
        return job_rows.job_view(conn, row, already_running=already)
    finally:
        conn.close()


def make_watcher(
    config: Config, *, polling: bool | None = None, initial_sync: bool = True
) -> watch.FolderWatcher:
    """Watch mode (helpers.index.watch) starting syncs through start_sync: the one-writer rule
    and the worker start stay here. Refused on a read-only setup, like sync_kb."""
    require_config(config)
    if reason := read_only_reason(config):
        raise errors.ReadOnlyDataDir(
            f"watch mode needs a writable data dir ({reason})",
            "drop --read-only or pass a writable --data-dir",
        )
    return watch.FolderWatcher(
        config,
        lambda scope: watch.SyncStarted(*_started(start_sync(config, scope))),
        lambda job_id: sync_status(config, job_id).state in job_rows.ACTIVE_STATES,
        polling=config.watch_polling if polling is None else polling,
        initial_sync=initial_sync,
    )


def _started(view: JobView) -> tuple[str, bool]:
    return view.job_id, view.already_running


def start_watch_thread(config: Config) -> watch.FolderWatcher | None:
    """--watch of the MCP server and the console: the watcher on a daemon thread; a setup that
    cannot sync is logged and the face goes on without watching."""
    try:
        return watch.start_thread(make_watcher(config))
    except RagError as exc:
        watch.log.error("watch mode not started: %s", exc)
        return None


def _reconcile(conn: sqlite3.Connection, config: Config, *, required: bool) -> None:
    """Mark active jobs whose worker died as failed. Needs a write transaction: it is tiny and
    only runs when a job may be dead. A status read (`required=False`) answers anyway when the
    data dir is read-only or another process holds the lock; a cancel does not."""
    active = conn.execute(
        "SELECT 1 FROM jobs WHERE state IN ('queued','running','cancelling') LIMIT 1"
    ).fetchone()
    if not active or not job_rows.reconcile_needed(conn, config.lock_path):
        return
    if not required and read_only_reason(config):
        return
    try:
        with write_transaction(conn):
            job_rows.reconcile_dead_jobs(conn, config.lock_path)
    except sqlite3.OperationalError as exc:
        if required or storage_fault(exc) not in ("busy", "full", "read_only"):
            raise


def _job_or_latest(
    conn: sqlite3.Connection, config: Config, job_id: str | None, *, for_write: bool = False
) -> JobView:
    _reconcile(conn, config, required=for_write)
    if job_id is not None:
        require_unicode(job_id, "job_id")
    jid = job_id or job_rows.latest_job_id(conn)
    if jid is None:
        raise NotFound("no sync job has run yet", "call sync_kb to start one")
    row = job_rows.load_job(conn, jid)
    if row is None:
        shown = jid if len(jid) <= 64 else jid[:64] + "…"
        raise NotFound(
            f"unknown job id {shown!r}", "call sync_status without job_id for the latest"
        )
    return with_failure_hint(config, job_rows.job_view(conn, row))


def sync_status(config: Config, job_id: str | None = None, wait_seconds: float = 0) -> JobView:
    """The job now; with `wait_seconds` (0-30), as soon as its state, percent or progress count
    changes (or the wait ends), so an agent waits in one call instead of polling in a loop."""
    if not 0 <= wait_seconds <= WAIT_SECONDS_MAX:
        raise InvalidArgument(f"wait_seconds must be between 0 and {WAIT_SECONDS_MAX:g}")
    view = _sync_status_now(config, job_id)
    deadline = time.monotonic() + wait_seconds
    while view.state not in job_rows.FINAL_STATES and time.monotonic() < deadline:
        time.sleep(min(JOB_POLL_S, max(0.0, deadline - time.monotonic())))
        now = _sync_status_now(config, view.job_id)
        moved = now.progress.get("done") != view.progress.get("done")
        if moved or (now.state, now.percent) != (view.state, view.percent):
            return now
        view = now
    return view


def _sync_status_now(config: Config, job_id: str | None) -> JobView:
    with storage_guard(config, "sync_status"):
        conn = read_conn(config)
        try:
            return _job_or_latest(conn, config, job_id)
        finally:
            conn.close()


def cancel_sync(config: Config, job_id: str) -> JobView:
    """Flag the job for cancel; when the flag cannot be written the error says it was not."""
    require_unicode(job_id, "job_id")
    shown = job_id if len(job_id) <= 64 else job_id[:64] + "…"
    if not config.db_path.exists():
        require_config(config)
        raise IndexMissing("nothing is indexed yet", "run sync_kb (or `rag_server.py sync`) first")
    with storage_guard(config, f"cancel of job {shown} was NOT recorded"):
        conn = write_conn(config, f"cancel_sync (job {shown} was NOT cancelled)")
        try:
            view = _job_or_latest(conn, config, job_id, for_write=True)
            if view.state in job_rows.ACTIVE_STATES:
                job_rows.request_cancel(conn, view.job_id)
                view = _job_or_latest(conn, config, view.job_id, for_write=True)
            return view
        finally:
            conn.close()


def list_jobs(config: Config, limit: int = 20) -> list[JobView]:
    if not 1 <= limit <= 500:
        raise InvalidArgument("limit must be between 1 and 500")
    with storage_guard(config, "listing jobs"):
        conn = read_conn(config)
        try:
            views = []
            for jid in job_rows.recent_job_ids(conn, limit):
                row = job_rows.load_job(conn, jid)
                if row is not None:
                    views.append(with_failure_hint(config, job_rows.job_view(conn, row)))
            return views
        finally:
            conn.close()


def wait_for_job(
    config: Config,
    job_id: str,
    on_progress: Callable[[JobView], None] | None = None,
    timeout_s: float | None = None,
) -> JobView:
    """Poll until the job is final (the CLI's foreground sync and `rag_eval --sync`)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        view = sync_status(config, job_id)
        if on_progress:
            on_progress(view)
        if view.state in job_rows.FINAL_STATES:
            return view
        if deadline is not None and time.monotonic() > deadline:
            return view
        time.sleep(JOB_POLL_S)
