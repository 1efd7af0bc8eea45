"""rag_health: what is configured, indexed and broken, with the fix for each problem.

Never reads document bodies and never raises; rag_service re-exports `health`,
`semantic_state` and `ocr_state` (the faces call rag_service only).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from helpers import platform_caps
from helpers.config import Config
from helpers.errors import fault_in_message, free_bytes, human_bytes, storage_fault
from helpers.excludes import RAGIGNORE_NAME, rules_in_force
from helpers.extract import registry as extractors
from helpers.lexical.common import NOT_STAGING, STAGING_RANGE, hidden_document_ids
from helpers.results import DISK, HEALTH, LAST_JOB
from helpers.secrets import DETECTOR_VERSION
from helpers.store import job_rows, skipped_files
from helpers.store.backfill import trigram_backfill_left
from helpers.store.batched import rows_in
from helpers.store.index_db import schema_version
from helpers.store.open_index import (
    check_config,
    connect_for_reading,
    read_only_reason,
    with_failure_hint,
)
from helpers.text.chunking import CHUNK_SCHEME

# Below this much free space on the data dir, rag_health warns: indexing a few hundred documents
# can take that much (index + WAL), and a full disk fails the sync.
LOW_FREE_SPACE_BYTES = 256 * 1024 * 1024
# store.documents.list_documents' rule: a big document being written, or an old version being
# discarded (index.document_write), lives under a staging path; it is no file of the knowledge dir.
LAST_JOB_KEYS = LAST_JOB.full


def semantic_state(config: Config, conn: sqlite3.Connection | None = None) -> dict[str, Any]:
    """off / unavailable / not_built / outdated / ready, with the fix, model and vector count."""
    from helpers.semantic import model as semantic_model

    cache_dir = config.data_dir / semantic_model.CACHE_SUBDIR
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
    from helpers.semantic import generations

    state = generations.generation_state(
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
        from helpers.ocr import engine as ocr
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
        "needs_reindex_documents": 0,
        "secrets": {},
        "last_job": None,
        "semantic": {},
        "ocr": _safe(lambda: ocr_state(config)),
        "supported_formats": sorted(s.lstrip(".") for s in extractors.SUPPORTED_SUFFIXES),
        "problems": problems,
        "warnings": [],
        "read_only": None,
        "disk": {},
        # what the last syncs saw and did not index (skipped_files.summary); empty before schema 7
        "skipped": {},
        "excludes": {},
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
            conn = connect_for_reading(config, read_only)
            try:
                conn.execute("BEGIN")  # one snapshot: the counts agree with each other
                _fill_index_stats(conn, config, report)
                conn.execute("COMMIT")
                report["semantic"] = _safe(lambda: semantic_state(config, conn))
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            if storage_fault(exc) == "busy":
                report["warnings"].append(f"index is busy ({exc}): retry in a few seconds")
            else:
                problems.append(
                    f"index {config.db_path} cannot be read ({exc}): move it away and sync"
                )
    elif not problems:
        report["warnings"].append("nothing is indexed yet: run sync_kb")
    _fill_disk_state(config, report)
    report["platform"] = {"system": sys.platform, "missing": platform_caps.missing_warnings()}
    report["warnings"].extend(report["platform"]["missing"])
    if not problems:
        _fill_excludes(config, report)
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
    return HEALTH.build(report)


def _fill_disk_state(config: Config, report: dict[str, Any]) -> None:
    """Free space of the data dir, a warning below LOW_FREE_SPACE_BYTES, and the fix when the
    last sync failed on a full disk."""
    free = free_bytes(config.data_dir)
    report["disk"] = DISK.build(
        {"data_dir_free_bytes": free, "low_free_space_bytes": LOW_FREE_SPACE_BYTES}
    )
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


def _fill_excludes(config: Config, report: dict[str, Any]) -> None:
    """The exclude patterns in force (.ragignore + --exclude) and any line that was ignored."""
    rules = rules_in_force(  # exactly what a sync applies (rag_sync.sync_excludes)
        config.knowledge_dir, config.excludes, config.data_dir, config.db_path.parent
    )
    report["excludes"] = {
        "ragignore": (config.knowledge_dir / RAGIGNORE_NAME).is_file(),
        "patterns": list(rules.patterns),
    }
    report["warnings"] += [f"excludes: {p}" for p in rules.problems]


def _safe(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # health must answer even when a subsystem is broken
        return {"state": "error", "hint": f"{type(exc).__name__}: {exc}"}


def _secret_stats(conn: sqlite3.Connection) -> dict[str, Any]:
    """Redactions in the index (schema 6; an older index counts every document as read by an
    older detector)."""
    columns = {r["name"] for r in conn.execute("PRAGMA table_info(documents)")}
    where = f"status != 'failed' AND {NOT_STAGING}"
    if "redactions" not in columns:
        older = conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", STAGING_RANGE)
        return {
            "detector_version": DETECTOR_VERSION,
            "documents_redacted": 0,
            "redactions": 0,
            "older_detector_documents": older.fetchone()[0],
        }
    row = conn.execute(
        "SELECT COALESCE(SUM(redactions > 0), 0) AS docs, COALESCE(SUM(redactions), 0) AS spans, "
        "COALESCE(SUM(detector_version != ?), 0) AS older "
        f"FROM documents WHERE {where}",
        (DETECTOR_VERSION, *STAGING_RANGE),
    ).fetchone()
    return {
        "detector_version": DETECTOR_VERSION,
        "documents_redacted": row["docs"],
        "redactions": row["spans"],
        "older_detector_documents": row["older"],
    }


def _fill_index_stats(conn: sqlite3.Connection, config: Config, report: dict[str, Any]) -> None:
    """Counts of what rag_list and rag_search can show: staging rows are left out."""
    report["schema_version"] = schema_version(conn)
    if report["schema_version"] == 0:
        report["warnings"].append("nothing is indexed yet: run sync_kb")
        return
    by_status = {
        r["status"]: r["n"]
        for r in conn.execute(
            f"SELECT status, COUNT(*) AS n FROM documents WHERE {NOT_STAGING} GROUP BY status",
            STAGING_RANGE,
        )
    }
    report["documents"] = {"total": sum(by_status.values()), **by_status}
    staging = hidden_document_ids(conn)
    for key, table_sql in (
        ("sections", "SELECT COUNT(*) FROM sections"),
        ("chunks", "SELECT COUNT(*) FROM chunks"),
    ):
        report[key] = conn.execute(table_sql).fetchone()[0]
        # usually no staging document; the document_id index answers this
        in_staging = table_sql + " WHERE document_id IN ({marks})"
        report[key] -= sum(row[0] for row in rows_in(conn, in_staging, staging))
    report["needs_reindex_documents"] = conn.execute(
        f"SELECT COUNT(*) FROM documents WHERE chunk_scheme != ? AND {NOT_STAGING}",
        (CHUNK_SCHEME, *STAGING_RANGE),
    ).fetchone()[0]
    if report["needs_reindex_documents"]:
        report["warnings"].append(
            f"{report['needs_reindex_documents']} documents use an older chunking scheme: "
            "run sync_kb"
        )
    left = trigram_backfill_left(conn)
    if left:
        report["warnings"].append(
            f"the substring index is being rebuilt after an upgrade: {left} of "
            f"{report['chunks']} chunks to go, which substring and Thai searches miss until then; "
            "each search moves it on, sync_kb finishes it"
        )
    report["secrets"] = _secret_stats(conn)
    if report["secrets"]["older_detector_documents"]:
        report["warnings"].append(
            f"{report['secrets']['older_detector_documents']} documents were indexed before the "
            "current secret detector: run sync_kb so that secrets in them are redacted"
        )
    if by_status.get("failed"):
        report["warnings"].append(f"{by_status['failed']} files failed to index: see rag_list")
    if by_status.get("needs_ocr"):
        report["warnings"].append(
            f"{by_status['needs_ocr']} documents have scanned pages without OCR text"
        )
    report["skipped"] = skipped_files.summary(conn)
    jid = job_rows.latest_job_id(conn)
    if jid:
        row = job_rows.load_job(conn, jid)
        if row is not None:
            view = with_failure_hint(config, job_rows.job_view(conn, row)).to_dict()
            report["last_job"] = {k: view[k] for k in LAST_JOB_KEYS}
