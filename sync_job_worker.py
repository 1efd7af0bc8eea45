"""Detached sync worker: `python sync_job_worker.py --job-id ID --config-json JSON`.

Started by rag_service with start_new_session=True, so it outlives the MCP server that started
it. It holds the sync lock for its whole life, keeps its job row current (progress, heartbeat)
once a second from a side thread, and honours cancel between files, inside extraction and during
cleanup. It drives rag_sync (which builds the extraction context, OCR and sandbox) and
generations. Logs go to <data-dir>/logs/worker-<job>.log, never to stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sqlite3
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from helpers.config import Config
from helpers.errors import RagError
from helpers.index.document_write import FileProgress
from helpers.store import job_rows
from helpers.store.connection import release_free_pages
from helpers.store.index_db import connect, open_index, run_backfills, write_transaction
from rag_sync import RAGIGNORE_NAME, JobCancelled, extraction_tools, sync_excludes, sync_files

if TYPE_CHECKING:
    from helpers.semantic.prewarm import WorkerPrewarm

HEARTBEAT_INTERVAL_S = 1.0  # pollers see progress at least this often
# Share of a multi-page file's progress its pages stand for; writing its rows is the rest (in
# reported batches for a big document, at once for a small one). Reading and writing a
# 2,000-page text PDF take about as long here (~10 s each).
READ_SHARE = 0.5

log = logging.getLogger("ragdoc.worker")


@dataclass
class _Progress:
    phase: str = "prepare"
    phase_started_at: float = field(default_factory=time.time)
    total_files: int = 0
    completed_files: int = 0
    total_bytes: int = 0
    done_bytes: int = 0
    current_file: str | None = None
    semantic_done: int = 0
    semantic_total: int = 0
    # Inside the current file: its size, the share of it done (pages read, rows written) and
    # the detail shown as the running job's message ("current file: page 120/2000").
    file_size: int = 0
    file_fraction: float = 0.0
    file_detail: str | None = None
    file_progress: dict[str, int | str] | None = None  # the same as numbers (jobs.file_progress)
    file_has_pages: bool = False

    def advance_file(self, progress: FileProgress) -> None:
        """Pages read, then rows written (a big document): one fraction that only grows."""
        if progress.unit == "page":
            self.file_has_pages = True
            fraction = READ_SHARE * progress.fraction
        elif self.file_has_pages:
            fraction = READ_SHARE + (1 - READ_SHARE) * progress.fraction
        else:
            fraction = progress.fraction
        self.file_fraction = max(self.file_fraction, min(fraction, 1.0))
        self.file_detail = progress.label()
        self.file_progress = {"done": progress.done, "total": progress.total, "unit": progress.unit}

    def published_done_bytes(self) -> int:
        """Bytes of finished files plus the done share of the current one: the job's percent
        moves inside a long file, and never backwards."""
        return self.done_bytes + int(self.file_size * self.file_fraction)


class JobReporter:
    """Keeps progress in memory; a side thread writes it and reads the cancel flag each second."""

    def __init__(self, config: Config, job_id: str) -> None:
        self.config = config
        self.job_id = job_id
        self.progress = _Progress()
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self._errors: list[tuple[str, str]] = []
        self._skipped: dict[str, dict[str, object]] | None = None  # helpers.skips breakdown
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._reader: sqlite3.Connection | None = None  # the main thread's, for check_cancel_now

    # -- SyncObserver --------------------------------------------------------------------------
    def check_cancel(self) -> None:
        if self._cancel.is_set():
            raise JobCancelled()

    def check_cancel_now(self) -> None:
        """check_cancel after reading the flag from the job row (a WAL read, never blocked):
        between the batches of a big document a cancel is seen at once, not a heartbeat later."""
        if not self._cancel.is_set():
            if self._reader is None:
                self._reader = connect(self.config.db_path)
            row = self._reader.execute(
                "SELECT cancel_requested FROM jobs WHERE id = ?", (self.job_id,)
            ).fetchone()
            if row and row["cancel_requested"]:
                self._cancel.set()
        self.check_cancel()

    def on_phase(self, phase: str) -> None:
        with self._lock:
            if phase != self.progress.phase:
                self.progress.phase_started_at = time.time()
            self.progress.phase = phase
            if phase != "files":
                self.progress.current_file = None
                self._end_file()

    def on_plan(self, total_files: int, total_bytes: int) -> None:
        with self._lock:
            self.progress.total_files = total_files
            self.progress.total_bytes = total_bytes

    def on_file_start(self, rel_path: str) -> None:
        with self._lock:
            self.progress.current_file = rel_path
            self._end_file()

    def on_file_progress(self, rel_path: str, size: int, progress: FileProgress) -> None:
        with self._lock:
            p = self.progress
            if rel_path != p.current_file:
                return
            p.file_size = size
            p.advance_file(progress)

    def on_file_done(self, rel_path: str, outcome: str, size: int, error: str | None) -> None:
        """Called when the file's rows are committed: for a file written with others
        (helpers.index.group_write) that may be while a later file is being read."""
        with self._lock:
            self.progress.completed_files += 1
            self.progress.done_bytes += size
            if rel_path == self.progress.current_file:
                self._end_file()

    def _end_file(self) -> None:
        """Caller holds the lock."""
        self.progress.file_size = 0
        self.progress.file_fraction = 0.0
        self.progress.file_detail = None
        self.progress.file_progress = None
        self.progress.file_has_pages = False

    def on_error(self, rel_path: str, message: str) -> None:
        with self._lock:
            self._errors.append((rel_path, message[:2000]))

    def on_skipped(self, breakdown: dict[str, dict[str, object]]) -> None:
        with self._lock:
            self._skipped = breakdown

    def on_semantic(self, done: int, total: int) -> None:
        with self._lock:
            self.progress.semantic_done = done
            self.progress.semantic_total = total

    # -- persistence ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _beat(self) -> None:
        conn = connect(self.config.db_path)
        try:
            while not self._stop.wait(HEARTBEAT_INTERVAL_S):
                try:
                    self.flush(conn)
                except Exception:  # a busy database must not kill the heartbeat
                    log.exception("heartbeat write failed")
        finally:
            conn.close()

    def flush(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            p = self.progress
            counts = dict(self.counts)
            errors, self._errors = self._errors, []
            skipped = None if self._skipped is None else json.dumps(self._skipped)
            values = (
                p.phase,
                p.phase_started_at,
                p.total_files,
                p.completed_files,
                p.total_bytes,
                p.published_done_bytes(),
                p.current_file,
                p.file_detail,
                None if p.file_progress is None else json.dumps(p.file_progress),
                p.semantic_done,
                p.semantic_total,
                time.time(),
                time.time(),
            )
        with write_transaction(conn):
            conn.execute(
                "UPDATE jobs SET phase=?, phase_started_at=?, total_files=?, completed_files=?, "
                "total_bytes=?, "
                "done_bytes=?, current_file=?, message=?, file_progress=?, semantic_done=?, "
                "semantic_total=?, "
                "heartbeat=?, updated_at=? WHERE id=?",
                (*values, self.job_id),
            )
            conn.execute(
                "UPDATE jobs SET added=?, updated=?, unchanged=?, removed=?, failed=?, "
                "skipped=? WHERE id=?",
                (
                    *(
                        counts.get(k, 0)
                        for k in ("added", "updated", "unchanged", "removed", "failed", "skipped")
                    ),
                    self.job_id,
                ),
            )
            if skipped is not None:
                conn.execute(
                    "UPDATE jobs SET skipped_detail = ? WHERE id = ?", (skipped, self.job_id)
                )
            conn.executemany(
                "INSERT INTO job_errors(job_id, path, message) VALUES (?, ?, ?)",
                [(self.job_id, path, message) for path, message in errors],
            )
            row = conn.execute(
                "SELECT cancel_requested FROM jobs WHERE id = ?", (self.job_id,)
            ).fetchone()
        if row and row["cancel_requested"]:
            self._cancel.set()

    def request_cancel_locally(self) -> None:
        self._cancel.set()


def _claim(conn, job_id: str) -> bool:  # type: ignore[no-untyped-def]
    with write_transaction(conn):
        row = job_rows.load_job(conn, job_id)
        if row is None or row["state"] != "queued":
            return False
        now = time.time()
        state = "cancelling" if row["cancel_requested"] else "running"
        conn.execute(
            "UPDATE jobs SET state=?, pid=?, started_at=?, heartbeat=?, updated_at=? WHERE id=?",
            (state, os.getpid(), now, now, now, job_id),
        )
    return True


def _finish(conn, job_id: str, state: str, message: str | None) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    with write_transaction(conn):
        conn.execute(
            "UPDATE jobs SET state=?, phase='done', message=?, current_file=NULL, "
            "finished_at=?, updated_at=?, heartbeat=? WHERE id=?",
            (state, message, now, now, now, job_id),
        )


def run_job(config: Config, job_id: str, handle_sigterm: bool = True) -> int:
    """Run one queued job to its end. `handle_sigterm=False` when a host runs it in its own
    process (rag_service.sync_kb_blocking): its signal handlers stay its own."""
    # The worker keeps index_db's long busy timeout whatever --busy-timeout-s says: that
    # setting bounds how long a tool call waits; a sync must wait out a foreign lock, not fail.
    conn = open_index(config.db_path)
    lock_fd = job_rows.acquire_worker_lock(config.lock_path)
    if lock_fd is None:
        _finish(conn, job_id, "failed", "another sync worker holds the lock")
        return 2
    if not _claim(conn, job_id):
        log.info("job %s is no longer queued; exiting", job_id)
        return 0
    reporter = JobReporter(config, job_id)
    if handle_sigterm:
        signal.signal(signal.SIGTERM, lambda *_: reporter.request_cancel_locally())
    reporter.flush(conn)
    reporter.start()
    row = job_rows.load_job(conn, job_id)
    scope = row["scope"] if row else ""
    prewarm: WorkerPrewarm | None = None
    try:
        prewarm = _semantic_prewarm(conn, config)
        # An upgraded index rebuilds its trigram rows (schema 8) and compacts its rows (schema 9)
        # in batches: the worker owns the rest, a budget at a time with a cancel check between.
        while run_backfills(conn, bounded=True):
            reporter.check_cancel()
        excludes = sync_excludes(config)
        for problem in excludes.problems:
            reporter.on_error(RAGIGNORE_NAME, problem)
        with extraction_tools(config, config.logs_dir / f"worker-{job_id}.log") as (ctx, sandbox):
            sync_files(
                conn,
                config.knowledge_dir,
                scope,
                ctx,
                prewarm.watch(reporter) if prewarm else reporter,
                reporter.counts,
                sandbox,
                excludes if excludes else None,
            )
        reporter.check_cancel()
        reporter.on_phase("semantic")
        message = _semantic_phase(conn, config, reporter, prewarm)
        try:
            release_free_pages(conn)
        except sqlite3.OperationalError as exc:  # e.g. a full disk: the index is whole, larger
            log.warning("free pages kept in the file: %s", exc)
        state = "succeeded"
    except JobCancelled:
        state, message = "cancelled", "cancelled on request; documents indexed so far are kept"
    except Exception as exc:
        log.error("job %s failed: %s", job_id, traceback.format_exc())
        state, message = "failed", failure_message(exc)
    finally:
        if prewarm is not None:  # spawned ahead: never outlives the job, whatever happened
            prewarm.close()
    reporter.stop()
    reporter.on_phase("done")
    conn = _record_end(conn, config, reporter, job_id, state, message)
    conn.close()
    os.close(lock_fd)
    return 0 if state != "failed" else 1


def _record_end(
    conn: sqlite3.Connection,
    config: Config,
    reporter: JobReporter,
    job_id: str,
    state: str,
    message: str | None,
) -> sqlite3.Connection:
    """The job's last progress and its end state, on a fresh connection when the job's own one
    refuses: after a commit failed on a full disk SQLite may keep answering every statement of
    that connection with the same error (its pager stays in the error state) although the
    rolled-back transaction left room for a one-row update. Returns the connection used."""
    try:
        reporter.flush(conn)
        _finish(conn, job_id, state, message)
        return conn
    except sqlite3.OperationalError as exc:
        log.warning("job %s: recording its end on a new connection (%s)", job_id, exc)
        conn.close()
    conn = connect(config.db_path)
    reporter.flush(conn)
    _finish(conn, job_id, state, message)
    return conn


def failure_message(exc: Exception) -> str:
    """What a failed job's row says: our own errors with their hint, anything else in words
    (its traceback is in the worker log). The text keeps SQLite's own words ("database or disk
    is full"), which helpers.store.open_index.with_failure_hint turns into the fix."""
    if isinstance(exc, RagError):
        return str(exc)
    detail = str(exc) or "no details"
    return f"the sync stopped on an unexpected error: {detail} (the worker log has the rest)"


def _semantic_prewarm(conn: sqlite3.Connection, config: Config) -> WorkerPrewarm | None:
    """The semantic phase's worker, spawned ahead so its model loads during the lexical phase
    (helpers.semantic.prewarm); None when semantic search is off or no model is usable."""
    if not config.semantic:
        return None
    from helpers.semantic import prewarm as semantic_prewarm

    return semantic_prewarm.prewarm_for_sync(conn, config)


def _semantic_phase(
    conn: sqlite3.Connection,
    config: Config,
    reporter: JobReporter,
    prewarm: WorkerPrewarm | None = None,
) -> str | None:
    """Build vectors for new/changed chunks when semantic search is enabled and available.

    A failed build never fails the job: the lexical index is complete and searchable, the
    previous vector generation stays in use, and the reason is reported. Returns that reason.
    """
    if not config.semantic:
        return None
    from helpers.semantic import generations

    try:
        generations.sync_phase(
            conn,
            config,
            progress=reporter.on_semantic,
            should_cancel=reporter.check_cancel,
            prewarm=prewarm,
        )
    except RagError as exc:  # the model, the worker or the vector store
        message = f"semantic index not updated: {exc}"
        reporter.on_error("(semantic index)", message)
        log.error(message)
        return message
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--config-json", required=True)
    args = parser.parse_args(argv)
    config = Config.from_json(args.config_json)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return run_job(config, args.job_id)


if __name__ == "__main__":
    sys.exit(main())
