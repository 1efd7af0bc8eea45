"""The service boundary: MCP tools, CLI, web console and eval call these functions and nothing
else below them (tests/test_architecture.py holds them to it).

Validates every argument (tool input is untrusted; the configuration is not) against the one
set of bounds (helpers.bounds), opens the index per call (cheap, and safe across threads and
processes), and starts the detached sync worker. A search is one call into rag_search (one
connection); the service then shapes the answer (confidence band, answer budget) without
reading again. Opening the index and its typed storage errors live in helpers.store.open_index,
the health report in helpers.health; their public names are re-exported here.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import rag_search
from helpers.bounds import (
    ANSWER_MAX_CHARS_CAP,
    ANSWER_MAX_CHARS_MIN,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    LIST_LIMIT_MIN,
    NEIGHBOURS_DEFAULT,
    NEIGHBOURS_MAX,
    OFFSET_MAX,
    QUERY_MAX_CHARS,
    TOP_K_DEFAULT,
    TOP_K_MAX,
    TOP_K_MIN,
)
from helpers.config import Config
from helpers.errors import Forbidden, InvalidArgument, NotFound, RagError, require_unicode
from helpers.extract import registry as extractors
from helpers.health import health, ocr_state, semantic_state
from helpers.index import sync_control
from helpers.index.sync_control import (
    cancel_sync,
    list_jobs,
    make_watcher,
    start_sync,
    start_watch_thread,
    sync_status,
    wait_for_job,
)
from helpers.ranking import answer_budget, confidence
from helpers.results import DETAILS, SearchResult
from helpers.safety import PathRejected, normalize_user_path, resolve_inside
from helpers.store import documents, skipped_files
from helpers.store.job_rows import FINAL_STATES, JobView, eta_text, progress_line
from helpers.store.open_index import (
    check_config,
    read_conn,
    read_only_reason,
    storage_guard,
)
from rag_search import LEXICAL_CHANNELS

MODES = ("hybrid", "lexical", "semantic")
SQLITE_MAX_INT = 2**63 - 1  # a date in year 2999 in nanoseconds overflows SQLite's INTEGER

# The faces (rag_server, rag_cli, web_ui, main, rag_eval) import this module and the shared
# config/error/result modules only (tests/test_architecture.py checks it): the job, channel,
# health and storage names they use are re-exported here.
__all__ = [
    "FINAL_STATES",
    "LEXICAL_CHANNELS",
    "JobView",
    "RagError",
    "TOP_K_MAX",
    "fetch_model",
    "open_original",
    "progress_line",
    "eta_text",
    "InvalidArgument",
    "check_config",
    "read_only_reason",
    "search",
    "validate_search_args",
    "start_sync",
    "sync_kb_blocking",
    "make_watcher",
    "start_watch_thread",
    "sync_status",
    "cancel_sync",
    "list_jobs",
    "wait_for_job",
    "health",
    "semantic_state",
    "ocr_state",
    "list_documents",
    "read_document",
]


def sync_kb_blocking(
    config: Config,
    path: str | None = None,
    on_progress: Callable[[JobView], None] | None = None,
) -> JobView:
    """Sync in the calling process and return the final job (for a host that embeds the
    service; it blocks): the worker's own code path, lock, job row, progress and cancel."""
    import sync_job_worker  # the service starts the worker; in-process here, detached otherwise

    return sync_control.sync_kb_blocking(config, sync_job_worker.run_job, path, on_progress)


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


def validate_search_args(
    query: str, top_k: int, mode: str, path_prefix: str | None
) -> tuple[str, str]:
    """(stripped query, normalised prefix) or InvalidArgument."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query is empty", "pass the words to look for")
    require_unicode(query, "query")
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
            f"{TOP_K_DEFAULT} suits most questions",
        )
    if mode not in MODES:
        raise InvalidArgument(f"unknown mode {mode!r}", f"use one of {', '.join(MODES)}")
    try:
        prefix = normalize_user_path(path_prefix) if path_prefix else ""
    except PathRejected as exc:
        raise InvalidArgument(exc.message, exc.hint) from exc
    return query.strip(), prefix


def search(
    config: Config,
    query: str,
    top_k: int = TOP_K_DEFAULT,
    path_prefix: str | None = None,
    file_types: Sequence[str] | None = None,
    mode: str = "hybrid",
    modified_after: str | None = None,
    channels: Sequence[str] | None = None,
    max_chars: int | None = None,
    detail: str = "full",
) -> SearchResult:
    """Ranked hits with a confidence band; `max_chars` bounds the serialised response
    (answer_budget.fit: copies collapsed, sections cut to windows), `detail` picks the shape."""
    query, prefix = validate_search_args(query, top_k, mode, path_prefix)
    _validate_answer_args(max_chars, detail)
    filters = rag_search.Filters(
        path_prefix=prefix,
        file_types=_validate_file_types(file_types),
        modified_after_ns=_parse_modified_after(modified_after),
    )
    if channels is not None:
        unknown = [c for c in channels if c not in LEXICAL_CHANNELS]
        if unknown:
            raise InvalidArgument(
                f"unknown channel(s) {unknown}", f"use {sorted(LEXICAL_CHANNELS)}"
            )
    options = rag_search.SearchOptions(
        top_k=top_k,
        filters=filters,
        mode=mode,
        channels=tuple(channels) if channels is not None else None,
        knowledge_dir=config.knowledge_dir,
    )
    with storage_guard(config, "rag_search"):
        result = rag_search.run(config, query, options)
    result = result.with_changes(confidence=confidence.assess(result), detail=detail)
    if max_chars is None or not result.hits:
        return result
    return answer_budget.fit(result, max_chars)


def _validate_answer_args(max_chars: int | None, detail: str) -> None:
    if detail not in DETAILS:
        raise InvalidArgument(f"unknown detail {detail!r}", f"use one of {', '.join(DETAILS)}")
    if max_chars is not None and (
        isinstance(max_chars, bool)
        or not isinstance(max_chars, int)
        or not ANSWER_MAX_CHARS_MIN <= max_chars <= ANSWER_MAX_CHARS_CAP
    ):
        raise InvalidArgument(
            f"max_chars must be between {ANSWER_MAX_CHARS_MIN} and {ANSWER_MAX_CHARS_CAP}, "
            f"got {max_chars!r}",
            "omit it for the default budget; rag_read returns whole sections",
        )


# -- listing and reading -----------------------------------------------------------------------
def list_documents(
    config: Config,
    path_prefix: str | None = None,
    status: str | None = None,
    limit: int = LIST_LIMIT_DEFAULT,
    offset: int = 0,
    sort: str = "path",
    descending: bool = False,
    contains: str | None = None,
) -> dict[str, Any]:
    """Indexed files (paged server-side) with status, size, chunk count and failure reason."""
    if not LIST_LIMIT_MIN <= limit <= LIST_LIMIT_MAX:
        raise InvalidArgument(
            f"limit must be between {LIST_LIMIT_MIN} and {LIST_LIMIT_MAX}, got {limit}"
        )
    if not 0 <= offset <= OFFSET_MAX:
        raise InvalidArgument(f"offset must be between 0 and {OFFSET_MAX}")
    if status is not None and status not in documents.STATUSES:
        raise InvalidArgument(
            f"unknown status {status!r}", f"use one of {', '.join(documents.STATUSES)}"
        )
    if sort not in documents.LIST_SORT_COLUMNS:
        raise InvalidArgument(
            f"unknown sort {sort!r}", f"use one of {', '.join(documents.LIST_SORT_COLUMNS)}"
        )
    try:
        prefix = normalize_user_path(path_prefix) if path_prefix else ""
    except PathRejected as exc:
        raise InvalidArgument(exc.message, exc.hint) from exc
    query = documents.ListQuery(
        path_prefix=prefix,
        status=status,
        contains=(contains or "").strip(),
        sort=sort,
        descending=descending,
        limit=limit,
        offset=offset,
    )
    with storage_guard(config, "rag_list"):
        conn = read_conn(config)
        try:
            if status == "skipped":  # files seen and not indexed, with the reason
                return skipped_files.list_skipped(
                    conn, config.knowledge_dir, prefix, query.contains, limit, offset, descending
                )
            return documents.list_documents(conn, config.knowledge_dir, query)
        finally:
            conn.close()


def read_document(
    config: Config,
    path: str,
    section_id: int | None = None,
    location: dict[str, Any] | None = None,
    before: int = NEIGHBOURS_DEFAULT,
    after: int = NEIGHBOURS_DEFAULT,
    offset: int = 0,
) -> dict[str, Any]:
    """The section at a hit (by section_id or location) with neighbours, or the whole document."""
    try:
        rel = normalize_user_path(path)
    except PathRejected as exc:
        raise InvalidArgument(exc.message, exc.hint) from exc
    if not 0 <= before <= NEIGHBOURS_MAX or not 0 <= after <= NEIGHBOURS_MAX:
        raise InvalidArgument(f"before and after must be between 0 and {NEIGHBOURS_MAX}")
    if not 0 <= offset <= OFFSET_MAX:
        raise InvalidArgument(f"offset must be between 0 and {OFFSET_MAX}")
    allowed = {"page", "sheet", "cell_range", "slide", "heading", "line"}
    allowed |= {"message", "attachment"}  # inside a mail container (.mbox, .eml)
    if location and set(location) - allowed:
        raise InvalidArgument(
            f"unknown location keys {sorted(set(location) - allowed)}",
            f"use {sorted(allowed)}",
        )
    for key, value in (location or {}).items():
        numeric = key in ("page", "slide", "line") or key == "message"
        if numeric and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidArgument(f"location {key!r} must be a whole number, got {value!r}")
        if not numeric and not isinstance(value, str):
            raise InvalidArgument(f"location {key!r} must be text, got {value!r}")
        if isinstance(value, str):
            require_unicode(value, f"location {key!r}")
    with storage_guard(config, "rag_read"):
        conn = read_conn(config)
        try:
            doc = documents.find_document(conn, rel)
            if doc is None:
                raise NotFound(
                    f"{rel!r} is not indexed", "use rag_list or rag_search to find paths"
                )
            result = documents.read_sections(
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


# -- originals and the model, for the faces --------------------------------------------------
@contextmanager
def open_original(config: Config, path: str | None) -> Iterator[tuple[BinaryIO, Path, int]]:
    """(read-only handle, resolved path, size) of the original at `path`, for the console's
    "open" link: inside the knowledge dir, not hidden or sensitive, a format the index reads,
    and a regular file (Forbidden otherwise; NotFound when it does not exist)."""
    if not path:
        raise InvalidArgument("path is required", "pass a path from a search hit or the list")
    try:
        real = resolve_inside(config.knowledge_dir, path)
    except PathRejected as exc:
        raise Forbidden(exc.message, exc.hint) from exc
    if real.suffix.lower() not in extractors.SUPPORTED_SUFFIXES:
        raise Forbidden(
            f"{path!r} is not a document format the index reads",
            "only indexed document formats are served",
        )
    try:
        # O_NOFOLLOW: a link swapped in after the check is still refused; O_NONBLOCK: a FIFO
        # never hangs the thread (it fails the regular-file test below instead).
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise NotFound(f"{path!r} does not exist", "sync again: the file was removed") from exc
    except OSError as exc:
        raise Forbidden(f"{path!r} cannot be opened: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Forbidden(f"{path!r} is not a regular file")
        yield handle, real, info.st_size


def fetch_model(
    cache_dir: str | None, base_url: str, progress: Callable[[str, int, int | None], None]
) -> Any:
    """Download the default semantic model into the Hugging Face cache (or `cache_dir`)."""
    from helpers.semantic.generations import fetch_model as fetch  # numpy, HTTP: only when asked

    return fetch(Path(cache_dir) if cache_dir else None, base_url, progress)
