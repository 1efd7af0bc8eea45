"""Opening the index for the service: configuration checks, read-only detection, connections that
never write, and raw SQLite/OS errors of the data dir turned into typed errors with their fix.

rag_service and rag_health call this module; the faces never do (they call rag_service).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from helpers.config import Config, config_problems
from helpers.errors import (
    ConfigError,
    IndexMissing,
    disk_full_error,
    fault_in_message,
    free_bytes,
    human_bytes,
    index_busy_error,
    read_only_error,
    storage_fault,
)
from helpers.store import job_rows
from helpers.store.backfill import (
    TRIGRAM_REBUILD,
    UNITS_REBUILD,
    run_resumable,
    trigram_backfill_pending,
    units_rebuild_pending,
)
from helpers.store.index_db import (
    READABLE_FROM_VERSION,
    SCHEMA_VERSION,
    closed_on_error,
    connect,
    connect_read_only,
    migrate,
    schema_version,
)
from helpers.store.job_rows import JobView

log = logging.getLogger(__name__)

# IndexBusy names the job holding the lock; a WAL read never waits for a writer, so this bound
# only matters when the index is being recovered, and it keeps the error from waiting twice.
ACTIVE_JOB_WAIT_MS = 1_000


# -- configuration -----------------------------------------------------------------------------
def check_config(config: Config) -> list[str]:
    """Problems that stop every tool but rag_health, each phrased with its fix."""
    if not config.knowledge_dir_given:  # nothing to check, and no data dir to create
        return config_problems(config)
    problems: list[str] = []
    kd = config.knowledge_dir
    if not kd.exists():
        problems.append(f"knowledge dir {kd} does not exist: create it or pass --knowledge-dir")
    elif not kd.is_dir():
        problems.append(f"knowledge dir {kd} is not a folder: pass a folder to --knowledge-dir")
    elif not os.access(kd, os.R_OK | os.X_OK):
        problems.append(f"knowledge dir {kd} is not readable: fix its permissions")
    problems.extend(_data_dir_problems(config))
    problems.extend(config_problems(config))
    problems.extend(_ocr_config_problems(config))
    if config.db_path.exists() and not os.access(config.db_path, os.R_OK):
        problems.append(f"index {config.db_path} is not readable: fix permissions or pass --db")
    return problems


def _data_dir_problems(config: Config) -> list[str]:
    """A data dir that cannot be made is a problem; a read-only one is not (reads work)."""
    data = config.data_dir
    if config.read_only:
        if not data.is_dir():
            return [f"data dir {data} does not exist (--read-only never makes it): pass --data-dir"]
        return []
    try:
        data.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return [f"data dir {data} cannot be created ({exc.strerror}): pass --data-dir"]
    if read_only_reason(config) is None:
        try:
            config.logs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return [f"logs dir {config.logs_dir} cannot be created ({exc.strerror})"]
    return []


def read_only_reason(config: Config) -> str | None:
    """Why the index cannot be written (the --read-only switch, a read-only mount, missing
    permission), or None when it can. Searches still work; sync_kb and cancel_sync are refused."""
    if config.read_only:
        return f"{config.data_dir} is served read-only (--read-only / RAGDOC_READ_ONLY)"
    for folder in dict.fromkeys((config.data_dir, config.db_path.parent)):
        if folder.is_dir() and not os.access(folder, os.W_OK):
            return f"{folder} is not writable ({_why_not_writable(folder)})"
    if config.db_path.exists() and not os.access(config.db_path, os.W_OK):
        return f"index {config.db_path} is not writable ({_why_not_writable(config.db_path)})"
    return None


def _why_not_writable(path: Path) -> str:
    try:
        read_only_mount = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only_mount = False
    return "read-only file system" if read_only_mount else "no write permission"


def _ocr_config_problems(config: Config) -> list[str]:
    from helpers.ocr import settings as ocr_settings

    problems: list[str] = []
    langs_problem = ocr_settings.langs_problem(config.ocr_langs)
    if langs_problem:
        problems.append(f"--ocr-langs: {langs_problem}")
    if config.ocr_vlm_url:
        try:
            ocr_settings.require_loopback(config.ocr_vlm_url)
        except ValueError as exc:
            problems.append(f"--ocr-vlm-url: {exc}")
        if not config.ocr_vlm_model:
            problems.append("--ocr-vlm-url needs --ocr-vlm-model (the model name to ask for)")
    return problems


def require_config(config: Config) -> None:
    problems = check_config(config)
    if problems:
        raise ConfigError(problems[0], "fix the launch arguments; rag_health lists all problems")


# -- connections -------------------------------------------------------------------------------
def open_read_only(config: Config) -> sqlite3.Connection:
    """A connection that never writes (helpers.store.read_only.connect_read_only) with the
    configured timeout."""
    return connect_read_only(config.db_path, busy_timeout_ms=config.busy_timeout_ms)


def connect_for_reading(config: Config, read_only: str | None) -> sqlite3.Connection:
    """Read-write when the data dir allows it; read-only when it is read-only, or when a full
    disk leaves no room for the WAL's shared-memory file (reads still work then)."""
    if not read_only:
        try:
            conn = connect(config.db_path, busy_timeout_ms=config.busy_timeout_ms)
            with closed_on_error(conn):
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            if storage_fault(exc, config.data_dir) != "full":
                raise
    return open_read_only(config)


def _opening_failed(config: Config, exc: Exception) -> Exception:
    """A damaged index is a ConfigError; a storage fault is re-raised for `storage_guard`,
    which names what was not done."""
    if storage_fault(exc, config.data_dir):
        return exc
    return ConfigError(
        f"index {config.db_path} cannot be opened: {exc}",
        "move the file away and run sync_kb to rebuild it",
    )


def read_conn(config: Config) -> sqlite3.Connection:
    """A connection for reading; read-only (no WAL or job writes) when the data dir is."""
    require_config(config)
    if not config.db_path.exists():
        raise IndexMissing("nothing is indexed yet", "run sync_kb (or `rag_server.py sync`) first")
    read_only = read_only_reason(config)
    try:
        conn = connect_for_reading(config, read_only)
        with closed_on_error(conn):
            version = schema_version(conn)
    except sqlite3.DatabaseError as exc:
        failure = _opening_failed(config, exc)
        raise failure from (None if failure is exc else exc)
    if read_only and READABLE_FROM_VERSION <= version < SCHEMA_VERSION:
        return conn  # an older index on a read-only mount: read as it is, never migrated
    if version != SCHEMA_VERSION:
        conn.close()
        if version == 0:
            raise IndexMissing("nothing is indexed yet", "run sync_kb first")
        if read_only:
            raise read_only_error(
                f"the index has schema {version} (this program reads {SCHEMA_VERSION})",
                read_only,
            )
        return write_conn(config, "upgrading the index")
    if not read_only and (trigram_backfill_pending(conn) or units_rebuild_pending(conn)):
        # The rows not rebuilt yet are missing from the trigram channels; while units are being
        # rebuilt the units channel is off.
        _advance_backfill(config)
    return conn


def _advance_backfill(config: Config) -> None:
    """Best effort: one budget of migration 8's trigram rebuild and of a units rebuild, so
    searches heal an upgraded index even when no sync runs; a writer holding the lock (a sync,
    which finishes them) wins."""
    try:
        conn = connect(config.db_path, busy_timeout_ms=config.busy_timeout_ms)
    except sqlite3.Error:
        return
    try:
        run_resumable(conn, (TRIGRAM_REBUILD, UNITS_REBUILD), bounded=True)
    except sqlite3.OperationalError as exc:
        log.info("backfill left for later: %s", exc)
    except Exception:  # noqa: BLE001 - a stored row the rebuild cannot read never fails a search
        log.warning("backfill failed; the search goes on without it", exc_info=True)
    finally:
        conn.close()


def write_conn(config: Config, action: str) -> sqlite3.Connection:
    """A connection that may write (created and migrated if needed), or a typed refusal."""
    require_config(config)
    reason = read_only_reason(config)
    if reason:
        raise read_only_error(action, reason)
    try:
        config.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(config.db_path, busy_timeout_ms=config.busy_timeout_ms)
        with closed_on_error(conn):
            migrate(conn)
        return conn
    except (sqlite3.DatabaseError, RuntimeError, OSError) as exc:
        failure = _opening_failed(config, exc)
        raise failure from (None if failure is exc else exc)


# -- faults ------------------------------------------------------------------------------------
def _active_job(config: Config) -> tuple[str | None, str | None]:
    """(id, current file) of the newest active job, read without waiting for the writer."""
    try:
        conn = connect_read_only(config.db_path, busy_timeout_ms=ACTIVE_JOB_WAIT_MS)
    except sqlite3.Error:
        return None, None
    try:
        row = conn.execute(
            f"SELECT id, current_file FROM jobs WHERE state IN "
            f"({','.join('?' * len(job_rows.ACTIVE_STATES))}) ORDER BY created_at DESC LIMIT 1",
            job_rows.ACTIVE_STATES,
        ).fetchone()
    except sqlite3.Error:
        return None, None
    finally:
        conn.close()
    return (row["id"], row["current_file"]) if row else (None, None)


@contextmanager
def storage_guard(config: Config, action: str) -> Iterator[None]:
    """Raw SQLite/OS errors of the data dir (lock held past the busy timeout, disk full,
    read-only) become typed errors that say what was not done and how to fix it."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        fault = storage_fault(exc, config.data_dir)
        if fault == "busy":
            raise index_busy_error(action, config.busy_timeout_s, *_active_job(config)) from exc
        if fault == "full":
            raise disk_full_error(action, config.data_dir) from exc
        if fault == "read_only":
            reason = read_only_reason(config) or f"{config.db_path} cannot be written ({exc})"
            raise read_only_error(action, reason) from exc
        raise


def with_failure_hint(config: Config, view: JobView) -> JobView:
    """A job that failed on a full disk or a read-only data dir says how to fix it."""
    if view.state != "failed" or not view.message or "hint:" in view.message:
        return view
    fault = fault_in_message(view.message)
    if fault == "full":
        free = human_bytes(free_bytes(config.data_dir))
        hint = f"free space on {config.data_dir} ({free} free), then run sync_kb again"
    elif fault == "read_only":
        hint = f"the data dir {config.data_dir} became read-only; pass a writable --data-dir"
    else:
        return view
    return replace(view, message=f"{view.message} — hint: {hint}")
