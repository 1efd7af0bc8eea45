"""The service boundary: MCP tools, CLI, web console and eval call these functions and nothing else.

Validates every argument (tool input is untrusted; the configuration is not), opens the index
per call (cheap, and safe across threads and processes), and starts the detached sync worker.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import rag_documents
import rag_jobs
import rag_search
from helpers import extractors
from helpers.chunking import CHUNK_SCHEME
from helpers.safety import PathRejected, normalize_user_path, resolve_inside
from rag_config import REPO_DIR, Config, config_problems
from rag_db import SCHEMA_VERSION, connect, migrate, schema_version, write_transaction
from rag_errors import (
    ConfigError,
    IndexMissing,
    InvalidArgument,
    NotFound,
    RagError,
    disk_full_error,
    fault_in_message,
    free_bytes,
    human_bytes,
    index_busy_error,
    read_only_error,
    storage_fault,
)
from rag_jobs import JobView
from rag_results import SearchResult

TOP_K_MIN, TOP_K_MAX = 1, 50  # more than 50 hits floods an agent's context for no gain
QUERY_MAX_CHARS = 1000  # longer "queries" are documents pasted by mistake
MODES = ("hybrid", "lexical", "semantic")
SQLITE_MAX_INT = 2**63 - 1  # a date in year 2999 in nanoseconds overflows SQLite's INTEGER
WORKER_SCRIPT = REPO_DIR / "sync_job_worker.py"
JOB_POLL_S = 0.25
# Below this much free space on the data dir, rag_health warns: indexing a few hundred documents
# can take that much (index + WAL), and a full disk fails the sync.
LOW_FREE_SPACE_BYTES = 256 * 1024 * 1024

__all__ = [
    "RagError",
    "check_config",
    "search",
    "start_sync",
    "sync_status",
    "cancel_sync",
    "list_jobs",
    "health",
    "wait_for_job",
]


# -- configuration -----------------------------------------------------------------------------
def check_config(config: Config) -> list[str]:
    """Problems that stop every tool but rag_health, each phrased with its fix."""
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
    from helpers import ocr_settings

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


def _require_config(config: Config) -> None:
    problems = check_config(config)
    if problems:
        raise ConfigError(problems[0], "fix the launch arguments; rag_health lists all problems")


def _open_read_only(config: Config) -> sqlite3.Connection:
    """A connection that never writes: mode=ro, or immutable when even the WAL's shared-memory
    file cannot be created (a read-only mount after a clean close; nobody can write there)."""
    uri = config.db_path.resolve().as_uri()
    last: sqlite3.Error | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(
            f"{uri}?{query}", uri=True, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            conn.close()
            last = exc
            continue
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA query_only = ON")
        return conn
    assert last is not None
    raise last


def _connect_for_reading(config: Config, read_only: str | None) -> sqlite3.Connection:
    """Read-write when the data dir allows it; read-only when it is read-only, or when a full
    disk leaves no room for the WAL's shared-memory file (reads still work then)."""
    if read_only:
        return _open_read_only(config)
    try:
        conn = connect(config.db_path)
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        _close_failed_connections(exc)
        if storage_fault(exc, config.data_dir) != "full":
            raise
    return _open_read_only(config)


def _close_failed_connections(exc: BaseException) -> None:
    """Close the connections left in the frames an error came through (rag_db.connect can fail
    after opening one). Left to the garbage collector, each keeps the index, its WAL and -shm
    open: a data dir on a full disk then cannot even be unmounted. Those frames are done."""
    tb = exc.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            if isinstance(value, sqlite3.Connection):
                value.close()
        tb = tb.tb_next
    traceback.clear_frames(exc.__traceback__)


def _opening_failed(config: Config, exc: Exception) -> Exception:
    """A damaged index is a ConfigError; a storage fault is re-raised for `_storage_guard`,
    which names what was not done. Either way the connections opened on the way are closed."""
    _close_failed_connections(exc)
    if storage_fault(exc, config.data_dir):
        return exc
    return ConfigError(
        f"index {config.db_path} cannot be opened: {exc}",
        "move the file away and run sync_kb to rebuild it",
    )


def _read_conn(config: Config) -> sqlite3.Connection:
    """A connection for reading; read-only (no WAL or job writes) when the data dir is."""
    _require_config(config)
    if not config.db_path.exists():
        raise IndexMissing("nothing is indexed yet", "run sync_kb (or `rag_server.py sync`) first")
    read_only = read_only_reason(config)
    try:
        conn = _connect_for_reading(config, read_only)
        conn.execute(f"PRAGMA busy_timeout = {config.busy_timeout_ms}")
        version = schema_version(conn)
    except sqlite3.DatabaseError as exc:
        failure = _opening_failed(config, exc)
        raise failure from (None if failure is exc else exc)
    if version != SCHEMA_VERSION:
        conn.close()
        if version == 0:
            raise IndexMissing("nothing is indexed yet", "run sync_kb first")
        if read_only:
            raise read_only_error(
                f"the index has schema {version} (this program reads {SCHEMA_VERSION})",
                read_only,
            )
        return _write_conn(config, "upgrading the index")
    return conn


def _write_conn(config: Config, action: str) -> sqlite3.Connection:
    """A connection that may write (created and migrated if needed), or a typed refusal."""
    _require_config(config)
    reason = read_only_reason(config)
    if reason:
        raise read_only_error(action, reason)
    try:
        config.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(config.db_path)
        conn.execute(f"PRAGMA busy_timeout = {config.busy_timeout_ms}")
        migrate(conn)
        return conn
    except (sqlite3.DatabaseError, RuntimeError, OSError) as exc:
        failure = _opening_failed(config, exc)
        raise failure from (None if failure is exc else exc)


def _active_job(config: Config) -> tuple[str | None, str | None]:
    """(id, current file) of the newest active job, read without waiting for the writer."""
    try:
        conn = _open_read_only(config)
    except sqlite3.Error:
        return None, None
    try:
        row = conn.execute(
            f"SELECT id, current_file FROM jobs WHERE state IN "
            f"({','.join('?' * len(rag_jobs.ACTIVE_STATES))}) ORDER BY created_at DESC LIMIT 1",
            rag_jobs.ACTIVE_STATES,
        ).fetchone()
    except sqlite3.Error:
        return None, None
    finally:
        conn.close()
    return (row["id"], row["current_file"]) if row else (None, None)


@contextmanager
def _storage_guard(config: Config, action: str) -> Iterator[None]:
    """Raw SQLite/OS errors of the data dir (lock held past the busy timeout, disk full,
    read-only) become typed errors that say what was not done and how to fix it."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        _close_failed_connections(exc)
        fault = storage_fault(exc, config.data_dir)
        if fault == "busy":
            raise index_busy_error(action, config.busy_timeout_s, *_active_job(config)) from exc
        if fault == "full":
            raise disk_full_error(action, config.data_dir) from exc
        if fault == "read_only":
            reason = read_only_reason(config) or f"{config.db_path} cannot be written ({exc})"
            raise read_only_error(action, reason) from exc
        raise


# -- search ------------------------------------------------------------------------------------
def _validate_file_types(file_types: Sequence[str] | None) -> tuple[str, ...]:
    if not file_types:
        return ()
    known = {s.lstrip(".") for s in extractors.SUPPORTED_SUFFIXES}
    out: list[str] = []
    for ft in file_types:
        norm = ft.strip().lower().lstrip(".")
        if norm not in known:
            raise InvalidArgument(
                f"unknown file type {ft!r}", f"use one of: {', '.join(sorted(known))}"
            )
        out.append(norm)
    return tuple(sorted(set(out)))


def _parse_modified_after(value: str | None) -> int | None:
    if not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidArgument(
            f"modified_after {value!r} is not a date", "use ISO 8601, e.g. 2026-01-31"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    try:
        nanoseconds = int(moment.timestamp() * 1_000_000_000)
    except (OverflowError, OSError, ValueError):
        nanoseconds = 0 if moment.year < 1970 else SQLITE_MAX_INT
    return max(-SQLITE_MAX_INT, min(nanoseconds, SQLITE_MAX_INT))


def _require_unicode(value: str, name: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"{name} is not valid Unicode (lone surrogate)", "send UTF-8 text"
        ) from exc


LIST_OFFSET_MAX = 10**9  # far past any real folder; keeps SQLite's INTEGER from overflowing


def validate_search_args(
    query: str, top_k: int, mode: str, path_prefix: str | None
) -> tuple[str, str]:
    """(stripped query, normalised prefix) or InvalidArgument."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query is empty", "pass the words to look for")
    _require_unicode(query, "query")
    if len(query) > QUERY_MAX_CHARS:
        raise InvalidArgument(
            f"query is {len(query)} characters (max {QUERY_MAX_CHARS})", "shorten the query"
        )
    if (
        isinstance(top_k, bool)
        or not isinstance(top_k, int)
        or not (TOP_K_MIN <= top_k <= TOP_K_MAX)
    ):
        raise InvalidArgument(
            f"top_k must be between {TOP_K_MIN} and {TOP_K_MAX}, got {top_k!r}",
            "8 suits most questions",
        )
    if mode not in MODES:
        raise InvalidArgument(f"unknown mode {mode!r}", f"use one of {', '.join(MODES)}")
    try:
        prefix = normalize_user_path(path_prefix) if path_prefix else ""
    except PathRejected as exc:
        raise InvalidArgument(str(exc), exc.hint) from exc
    return query.strip(), prefix


def search(
    config: Config,
    query: str,
    top_k: int = 8,
    path_prefix: str | None = None,
    file_types: Sequence[str] | None = None,
    mode: str = "hybrid",
    modified_after: str | None = None,
    channels: Sequence[str] | None = None,
) -> SearchResult:
    query, prefix = validate_search_args(query, top_k, mode, path_prefix)
    filters = rag_search.Filters(
        path_prefix=prefix,
        file_types=_validate_file_types(file_types),
        modified_after_ns=_parse_modified_after(modified_after),
    )
    warnings: list[str] = []
    if channels is not None:
        unknown = [c for c in channels if c not in rag_search.LEXICAL_CHANNELS]
        if unknown:
            raise InvalidArgument(
                f"unknown channel(s) {unknown}", f"use {sorted(rag_search.LEXICAL_CHANNELS)}"
            )
    with _storage_guard(config, "rag_search"):
        result = _search(config, query, top_k, mode, filters, channels, warnings)
    if warnings:
        result = SearchResult(
            query=result.query,
            mode=result.mode,
            hits=result.hits,
            sections=result.sections,
            elapsed_ms=result.elapsed_ms,
            warnings=[*result.warnings, *warnings],
            channels_used=result.channels_used,
        )
    return result


def _search(
    config: Config,
    query: str,
    top_k: int,
    mode: str,
    filters: rag_search.Filters,
    channels: Sequence[str] | None,
    warnings: list[str],
) -> SearchResult:
    conn = _read_conn(config)
    try:
        semantic_hits = None
        if mode in ("hybrid", "semantic"):
            semantic_hits, why_not = _semantic_candidates(config, conn, query)
            if why_not and mode == "semantic":
                raise InvalidArgument(why_not, "use mode='lexical', or enable semantic search")
            if why_not:
                warnings.append(f"{why_not} — lexical results only")
            elif semantic_hits is not None:
                semantic_hits = _apply_filters(conn, semantic_hits, filters)
        options = rag_search.SearchOptions(
            top_k=top_k,
            filters=filters,
            mode=mode,
            channels=tuple(channels) if channels is not None else None,
            knowledge_dir=config.knowledge_dir,
            semantic=semantic_hits,
        )
        return rag_search.search(conn, query, options)
    finally:
        conn.close()


# -- semantic channel -------------------------------------------------------------------------
# A warm query worker per model serves a burst of searches (~50 ms each instead of ~1 s cold)
# and exits by itself after this many idle seconds; the ML runtime never enters this process.
WARM_IDLE_S = 300.0
SEMANTIC_DEPTH = 100  # candidates the semantic channel contributes to fusion
_warm_lock = threading.Lock()
_warm_workers: dict[Path, Any] = {}


def _semantic_candidates(
    config: Config, conn: sqlite3.Connection, query: str
) -> tuple[list[tuple[int, float]] | None, str | None]:
    """(chunk id, cosine) candidates, or (None, why not) when semantic search cannot answer."""
    light = semantic_state(config)  # off / unavailable decided without importing numpy
    if light["state"] != "ready":
        return None, f"semantic search {light['state']}: {light['hint']}"
    import rag_semantic
    from helpers.semantic_model import ModelError

    cache_dir = config.data_dir / SEMANTIC_CACHE
    state = rag_semantic.semantic_state(
        conn, config.semantic_model_dir, config.semantic, cache_dir, check_chunks=False
    )
    if state.state not in ("ready", "stale"):
        return None, f"semantic search {state.state}: {state.hint}"
    model_dir = light["model_dir"]
    # A read-only data dir has no log to append to; the worker's stderr is dropped instead.
    log_path = config.logs_dir / "semantic-query.log"
    if read_only_reason(config):
        log_path = Path(os.devnull)
    try:
        with _warm_lock:
            worker = _warm_workers.get(model_dir)
            if worker is None or not worker.is_running:
                worker = rag_semantic.SemanticWorker(
                    model_dir, log_path=log_path, cache_dir=cache_dir, idle_seconds=WARM_IDLE_S
                )
                _warm_workers[model_dir] = worker
            hits = rag_semantic.query(
                config.db_path,
                model_dir,
                query,
                SEMANTIC_DEPTH,
                cache_dir=cache_dir,
                log_path=log_path,
                worker=worker,
            )
    except (rag_semantic.SemanticError, ModelError) as exc:
        return None, f"semantic search failed: {exc} (hint: {exc.hint})"
    except OSError as exc:  # e.g. the model-hash cache cannot be saved on a read-only data dir
        return None, f"semantic search failed: {exc} (hint: check the data dir {config.data_dir})"
    return hits, None


def _apply_filters(
    conn: sqlite3.Connection, hits: list[tuple[int, float]], filters: rag_search.Filters
) -> list[tuple[int, float]]:
    """The vector scan sees the whole index: keep the candidates the filters allow."""
    if not hits:
        return hits
    where, params = filters.sql()
    ids = [cid for cid, _ in hits]
    allowed = {
        row[0]
        for row in conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
            f"WHERE c.id IN ({','.join('?' * len(ids))}) AND {where}",
            (*ids, *params),
        )
    }
    return [(cid, score) for cid, score in hits if cid in allowed]


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


def start_sync(config: Config, path: str | None = None) -> JobView:
    """Start the detached worker (or return the job already running); returns at once."""
    scope = ""
    if path:
        try:
            scope = normalize_user_path(path)
            target = resolve_inside(config.knowledge_dir, scope)
        except PathRejected as exc:
            raise InvalidArgument(str(exc), exc.hint) from exc
        if not target.is_dir():
            raise InvalidArgument(f"{path!r} is not a folder inside the knowledge dir")
    with _storage_guard(config, "sync_kb did not start"):
        return _start_sync(config, scope)


def _start_sync(config: Config, scope: str) -> JobView:
    conn = _write_conn(config, "sync_kb")
    try:
        job_id, already = rag_jobs.create_or_get_active(conn, config.lock_path, scope)
        if not already:
            try:
                proc = _spawn_worker(config, job_id)
            except OSError as exc:
                rag_jobs.mark_spawn_failed(conn, job_id, f"cannot start worker: {exc}")
            else:
                rag_jobs.record_spawned_pid(conn, job_id, proc.pid)
        row = rag_jobs.load_job(conn, job_id)
        assert row is not None
        return rag_jobs.job_view(conn, row, already_running=already)
    finally:
        conn.close()


def _reconcile(conn: sqlite3.Connection, config: Config, *, required: bool) -> None:
    """Mark active jobs whose worker died as failed. Needs a write transaction: it is tiny and
    only runs when a job may be dead. A status read (`required=False`) answers anyway when the
    data dir is read-only or another process holds the lock; a cancel does not."""
    active = conn.execute(
        "SELECT 1 FROM jobs WHERE state IN ('queued','running','cancelling') LIMIT 1"
    ).fetchone()
    if not active or not rag_jobs.reconcile_needed(conn, config.lock_path):
        return
    if not required and read_only_reason(config):
        return
    try:
        with write_transaction(conn):
            rag_jobs.reconcile_dead_jobs(conn, config.lock_path)
    except sqlite3.OperationalError as exc:
        if required or storage_fault(exc) not in ("busy", "full", "read_only"):
            raise


def _job_or_latest(
    conn: sqlite3.Connection, config: Config, job_id: str | None, *, for_write: bool = False
) -> JobView:
    _reconcile(conn, config, required=for_write)
    if job_id is not None:
        _require_unicode(job_id, "job_id")
    jid = job_id or rag_jobs.latest_job_id(conn)
    if jid is None:
        raise NotFound("no sync job has run yet", "call sync_kb to start one")
    row = rag_jobs.load_job(conn, jid)
    if row is None:
        shown = jid if len(jid) <= 64 else jid[:64] + "…"
        raise NotFound(
            f"unknown job id {shown!r}", "call sync_status without job_id for the latest"
        )
    return _with_failure_hint(config, rag_jobs.job_view(conn, row))


def _with_failure_hint(config: Config, view: JobView) -> JobView:
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


def sync_status(config: Config, job_id: str | None = None) -> JobView:
    with _storage_guard(config, "sync_status"):
        conn = _read_conn(config)
        try:
            return _job_or_latest(conn, config, job_id)
        finally:
            conn.close()


def cancel_sync(config: Config, job_id: str) -> JobView:
    """Flag the job for cancel; when the flag cannot be written the error says it was not."""
    _require_unicode(job_id, "job_id")
    shown = job_id if len(job_id) <= 64 else job_id[:64] + "…"
    if not config.db_path.exists():
        _require_config(config)
        raise IndexMissing("nothing is indexed yet", "run sync_kb (or `rag_server.py sync`) first")
    with _storage_guard(config, f"cancel of job {shown} was NOT recorded"):
        conn = _write_conn(config, f"cancel_sync (job {shown} was NOT cancelled)")
        try:
            view = _job_or_latest(conn, config, job_id, for_write=True)
            if view.state in rag_jobs.ACTIVE_STATES:
                rag_jobs.request_cancel(conn, view.job_id)
                view = _job_or_latest(conn, config, view.job_id, for_write=True)
            return view
        finally:
            conn.close()


def list_jobs(config: Config, limit: int = 20) -> list[JobView]:
    if not 1 <= limit <= 500:
        raise InvalidArgument("limit must be between 1 and 500")
    with _storage_guard(config, "listing jobs"):
        conn = _read_conn(config)
        try:
            views = []
            for jid in rag_jobs.recent_job_ids(conn, limit):
                row = rag_jobs.load_job(conn, jid)
                if row is not None:
                    views.append(_with_failure_hint(config, rag_jobs.job_view(conn, row)))
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
        if view.state in rag_jobs.FINAL_STATES:
            return view
        if deadline is not None and time.monotonic() > deadline:
            return view
        time.sleep(JOB_POLL_S)


# -- health ------------------------------------------------------------------------------------
SEMANTIC_CACHE = "cache"  # model-hash cache under the data dir (hashing 118 MB each call is slow)


def semantic_state(config: Config, conn: sqlite3.Connection | None = None) -> dict[str, Any]:
    """off / unavailable / not_built / stale / ready, with the fix, the model and vector count."""
    from helpers import semantic_model

    cache_dir = config.data_dir / SEMANTIC_CACHE
    availability = semantic_model.check_availability(
        config.semantic_model_dir, enabled=config.semantic, cache_dir=cache_dir
    )
    if conn is None or availability.state != "ready":
        light: dict[str, Any] = {
            "state": availability.state,
            "reason": availability.reason,
            "hint": availability.hint,
        }
        if conn is None and availability.model is not None:
            light["model_dir"] = availability.model.model_dir
        if conn is not None:  # health: the same keys as a ready report
            row = conn.execute(
                "SELECT vector_count FROM semantic_generations WHERE ready = 1 "
                "ORDER BY id DESC LIMIT 1"
            ).fetchone()
            light.update(model=None, vectors=row[0] if row else 0)
        return light
    import rag_semantic

    state = rag_semantic.semantic_state(
        conn, config.semantic_model_dir, config.semantic, cache_dir, check_chunks=False
    )
    return {
        "state": state.state,
        "reason": state.reason,
        "hint": state.hint,
        "model": state.model_name,
        "vectors": state.vector_count,
    }


def ocr_state(config: Config) -> dict[str, Any]:
    try:
        from helpers import ocr
    except ImportError:
        return {"state": "unavailable", "hint": "apt-get install tesseract-ocr"}
    status = ocr.ocr_status(ocr.OcrConfig(langs=config.ocr_langs, tesseract_cmd=config.ocr_cmd))
    return {
        "state": "available" if status.available else "unavailable",
        "engine": status.engine,
        "version": status.version,
        "langs_missing": list(status.langs_missing),
        "hint": status.hint,
    }


def health(config: Config) -> dict[str, Any]:
    """Never reads document bodies and never raises: a broken setup is described, with fixes."""
    problems = check_config(config)
    report: dict[str, Any] = {
        "status": "ok",
        "knowledge_dir": str(config.knowledge_dir),
        "data_dir": str(config.data_dir),
        "db_path": str(config.db_path),
        "schema_version": None,
        "chunk_scheme": CHUNK_SCHEME,
        "documents": {},
        "sections": 0,
        "chunks": 0,
        "stale_documents": 0,
        "last_job": None,
        "semantic": {},
        "ocr": _safe(lambda: ocr_state(config)),
        "supported_formats": sorted(s.lstrip(".") for s in extractors.SUPPORTED_SUFFIXES),
        "problems": problems,
        "warnings": [],
        "read_only": None,
        "disk": {},
    }
    read_only = None if problems else read_only_reason(config)
    report["read_only"] = read_only
    if read_only and not config.read_only:  # the --read-only switch is a choice, not a fault
        report["warnings"].append(
            f"data dir is read-only ({read_only}): searches work; sync_kb and cancel_sync "
            "are refused until it is writable"
        )
    if not problems and config.db_path.exists():
        try:
            conn = _connect_for_reading(config, read_only)
            try:
                conn.execute(f"PRAGMA busy_timeout = {config.busy_timeout_ms}")
                _fill_index_stats(conn, config, report)
                report["semantic"] = _safe(lambda: semantic_state(config, conn))
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            _close_failed_connections(exc)
            if storage_fault(exc) == "busy":
                report["warnings"].append(f"index is busy ({exc}): retry in a few seconds")
            else:
                problems.append(
                    f"index {config.db_path} cannot be read ({exc}): move it away and sync"
                )
    elif not problems:
        report["warnings"].append("nothing is indexed yet: run sync_kb")
    _fill_disk_state(config, report)
    if not report["semantic"]:
        report["semantic"] = _safe(lambda: semantic_state(config))
    if report["semantic"].get("state") not in ("ready", "off"):
        report["warnings"].append(
            f"semantic search {report['semantic'].get('state')}: {report['semantic'].get('hint')}"
        )
    if problems:
        report["status"] = "error"
    elif report["warnings"]:
        report["status"] = "degraded"
    return report


def _fill_disk_state(config: Config, report: dict[str, Any]) -> None:
    """Free space of the data dir, a warning below LOW_FREE_SPACE_BYTES, and the fix when the
    last sync failed on a full disk."""
    free = free_bytes(config.data_dir)
    report["disk"] = {
        "data_dir_free_bytes": free,
        "low_free_space_bytes": LOW_FREE_SPACE_BYTES,
    }
    where = f"{config.data_dir} ({human_bytes(free)} free)"
    last = report.get("last_job") or {}
    if last.get("state") == "failed" and fault_in_message(last.get("message") or "") == "full":
        report["warnings"].append(
            f"the last sync (job {last.get('job_id')}) failed because the disk is full: "
            f"free space on {where} (or pass a --data-dir on a larger disk), then run sync_kb"
        )
    elif free is not None and free < LOW_FREE_SPACE_BYTES:
        report["warnings"].append(
            f"low free space on {where}, below {human_bytes(LOW_FREE_SPACE_BYTES)}: "
            "a sync may fill the disk; free space or pass a --data-dir on a larger disk"
        )


def _safe(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # health must answer even when a subsystem is broken
        return {"state": "error", "hint": f"{type(exc).__name__}: {exc}"}


def _fill_index_stats(conn: sqlite3.Connection, config: Config, report: dict[str, Any]) -> None:
    report["schema_version"] = schema_version(conn)
    if report["schema_version"] == 0:
        report["warnings"].append("nothing is indexed yet: run sync_kb")
        return
    by_status = {
        r["status"]: r["n"]
        for r in conn.execute("SELECT status, COUNT(*) AS n FROM documents GROUP BY status")
    }
    report["documents"] = {"total": sum(by_status.values()), **by_status}
    report["sections"] = conn.execute("SELECT COUNT(*) FROM sections").fetchone()[0]
    report["chunks"] = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    report["stale_documents"] = conn.execute(
        "SELECT COUNT(*) FROM documents WHERE chunk_scheme != ?", (CHUNK_SCHEME,)
    ).fetchone()[0]
    if report["stale_documents"]:
        report["warnings"].append(
            f"{report['stale_documents']} documents use an older chunking scheme: run sync_kb"
        )
    if by_status.get("failed"):
        report["warnings"].append(f"{by_status['failed']} files failed to index: see rag_list")
    if by_status.get("needs_ocr"):
        report["warnings"].append(
            f"{by_status['needs_ocr']} documents have scanned pages without OCR text"
        )
    jid = rag_jobs.latest_job_id(conn)
    if jid:
        row = rag_jobs.load_job(conn, jid)
        if row is not None:
            view = _with_failure_hint(config, rag_jobs.job_view(conn, row))
            report["last_job"] = {
                k: view.to_dict()[k]
                for k in (
                    "job_id",
                    "state",
                    "phase",
                    "percent",
                    "counts",
                    "error_count",
                    "message",
                    "finished_at",
                )
            }


# -- listing and reading -----------------------------------------------------------------------
def list_documents(
    config: Config,
    path_prefix: str | None = None,
    status: str | None = None,
    limit: int = 100,
    offset: int = 0,
    sort: str = "path",
    descending: bool = False,
    contains: str | None = None,
) -> dict[str, Any]:
    """Indexed files (paged server-side) with status, size, chunk count and failure reason."""
    if not 1 <= limit <= 1000:
        raise InvalidArgument(f"limit must be between 1 and 1000, got {limit}")
    if not 0 <= offset <= LIST_OFFSET_MAX:
        raise InvalidArgument(f"offset must be between 0 and {LIST_OFFSET_MAX}")
    if status is not None and status not in rag_documents.STATUSES:
        raise InvalidArgument(
            f"unknown status {status!r}", f"use one of {', '.join(rag_documents.STATUSES)}"
        )
    if sort not in rag_documents.LIST_SORT_COLUMNS:
        raise InvalidArgument(
            f"unknown sort {sort!r}", f"use one of {', '.join(rag_documents.LIST_SORT_COLUMNS)}"
        )
    try:
        prefix = normalize_user_path(path_prefix) if path_prefix else ""
    except PathRejected as exc:
        raise InvalidArgument(str(exc), exc.hint) from exc
    query = rag_documents.ListQuery(
        path_prefix=prefix,
        status=status,
        contains=(contains or "").strip(),
        sort=sort,
        descending=descending,
        limit=limit,
        offset=offset,
    )
    with _storage_guard(config, "rag_list"):
        conn = _read_conn(config)
        try:
            return rag_documents.list_documents(conn, config.knowledge_dir, query)
        finally:
            conn.close()


def read_document(
    config: Config,
    path: str,
    section_id: int | None = None,
    location: dict[str, Any] | None = None,
    before: int = 1,
    after: int = 1,
    offset: int = 0,
) -> dict[str, Any]:
    """The section at a hit (by section_id or location) with neighbours, or the whole document."""
    try:
        rel = normalize_user_path(path)
    except PathRejected as exc:
        raise InvalidArgument(str(exc), exc.hint) from exc
    if not 0 <= before <= 20 or not 0 <= after <= 20:
        raise InvalidArgument("before and after must be between 0 and 20")
    if not 0 <= offset <= LIST_OFFSET_MAX:
        raise InvalidArgument(f"offset must be between 0 and {LIST_OFFSET_MAX}")
    allowed = {"page", "sheet", "cell_range", "slide", "heading", "line"}
    if location and set(location) - allowed:
        raise InvalidArgument(
            f"unknown location keys {sorted(set(location) - allowed)}",
            f"use {sorted(allowed)}",
        )
    for key, value in (location or {}).items():
        numeric = key in ("page", "slide", "line")
        if numeric and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidArgument(f"location {key!r} must be a whole number, got {value!r}")
        if not numeric and not isinstance(value, str):
            raise InvalidArgument(f"location {key!r} must be text, got {value!r}")
        if isinstance(value, str):
            _require_unicode(value, f"location {key!r}")
    with _storage_guard(config, "rag_read"):
        conn = _read_conn(config)
        try:
            doc = rag_documents.find_document(conn, rel)
            if doc is None:
                raise NotFound(
                    f"{rel!r} is not indexed", "use rag_list or rag_search to find paths"
                )
            result = rag_documents.read_sections(
                conn,
                doc,
                section_id=section_id,
                location=location,
                before=before,
                after=after,
                offset=offset,
            )
        finally:
            conn.close()
    if not result["found"]:
        raise NotFound(
            f"no section of {rel!r} matches {section_id or location}",
            "pass a section_id from rag_search, or omit location to read from the start",
        )
    return result
