"""The lexical index lifecycle: plan the changes, extract and write each document atomically.

Every document becomes visible in one BEGIN IMMEDIATE transaction (old rows out, new rows in; a
big one is staged in short batches first, see helpers.index.document_write), so a cancel or a
killed worker never leaves a half-written document and searches keep working throughout (WAL).
The caller (sync_job_worker) supplies progress and cancel through `SyncObserver`.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from helpers.config import Config
from helpers.excludes import RAGIGNORE_NAME, ExcludeRules, rules_in_force
from helpers.extract import registry as extractors
from helpers.extract.blocks import (
    ExtractContext,
    ExtractionError,
    ExtractLimits,
)
from helpers.extract.document import build_document_text
from helpers.extract.failures import extraction_failure
from helpers.extract.formats import IN_PROCESS_SUFFIXES
from helpers.extract.registry import format_of
from helpers.extract.sandbox import PREFETCH_FILES, SandboxedExtractor
from helpers.index.discard import (
    discard_staging,
    mark_purge_pending,
    purge_pending,
    purge_removed_text,
)
from helpers.index.document_write import (
    TRUNCATED_NOTE,
    DocumentContent,
    FileProgress,
    JobCancelled,
    immediate_cancel_check,
    page_list,
    remove_document,
    report_file_progress,
    stop_on_cancel,
    write_document,
)
from helpers.index.group_write import WriteGroup, remove_documents
from helpers.index.plan import ExistingDoc, plan_sync, too_large_skip
from helpers.safety import (
    FileEntry,
    FileReplaced,
    SkippedEntry,
    open_verified,
    still_same_file,
)
from helpers.secrets import (
    DETECTOR_VERSION,
    MostlySecret,
    find_secrets,
)
from helpers.skips import ERROR_REASONS, FileSkipped, SkipReason, SkipRecord, SkipTally
from helpers.store import skipped_files
from helpers.store.codec import section_text
from helpers.store.connection import write_transaction
from helpers.text.chunking import CHUNK_SCHEME

# The write side lives in helpers.index.document_write; these names stay importable from here.
__all__ = [
    "DocumentContent",
    "JobCancelled",
    "RAGIGNORE_NAME",
    "SyncObserver",
    "extract_document",
    "plan_sync",
    "sync_files",
    "write_document",
]

HASH_BLOCK_BYTES = 1024 * 1024  # streaming sha256: constant memory for any file size
# Formats the worker may read itself (helpers.extract.formats IN_PROCESS_SUFFIXES: our own
# streaming code) stay in the worker when small: below this the round trip costs more than
# moving their chunking to the child's core saves. Bigger ones go to the child with the
# read-ahead, so their chunking runs beside the worker's writes (bench/RESULTS.md "Issue 16 on
# the merged tree, third session"). Everything else always goes to the sandbox.
CHILD_TEXT_MIN_BYTES = 4 * 1024
COUNT_KEYS = (
    "added",
    "updated",
    "unchanged",
    "removed",
    "failed",
    "skipped",
)  # a heading this early in the file is taken as its title


class SyncObserver(Protocol):
    def check_cancel(self) -> None:
        """Raise JobCancelled when a cancel was requested."""

    def on_phase(self, phase: str) -> None: ...

    def on_plan(self, total_files: int, total_bytes: int) -> None: ...

    def on_file_start(self, rel_path: str) -> None: ...

    def on_file_done(self, rel_path: str, outcome: str, size: int, error: str | None) -> None: ...

    def on_error(self, rel_path: str, message: str) -> None: ...

    # Optional: `on_file_progress(rel_path, size, FileProgress)` is called, when the observer has
    # it, with the pages read (PDF, TIFF) and the chunk rows of a staged write.


def record_skips(
    conn: sqlite3.Connection,
    scope: str,
    skipped: list[SkippedEntry],
    observer: SyncObserver,
    tally: SkipTally,
) -> None:
    """Count every skip by reason (the job's breakdown) and store the list for rag_list; only
    faults (unreadable folders) also become job errors, so 50,000 skips never drown them."""
    records = [SkipRecord(s.rel_path, s.kind, s.reason, s.is_dir) for s in skipped]
    for record in records:
        tally.add(record)
        if record.reason in ERROR_REASONS:
            observer.on_error(record.rel_path, f"skipped: {record.detail}")
    with write_transaction(conn):
        skipped_files.replace_scope(conn, scope, records, getattr(observer, "job_id", None))
    _report_skips(observer, tally)


def _report_skips(observer: SyncObserver, tally: SkipTally) -> None:
    on_skipped = getattr(observer, "on_skipped", None)
    if on_skipped is not None:
        on_skipped(tally.to_dict())


def file_sha256(entry: FileEntry, observer: SyncObserver | None = None) -> str:
    """Hash the planned file through a descriptor opened without following links."""
    digest = hashlib.sha256()
    with os.fdopen(open_verified(entry), "rb") as f:
        while chunk := f.read(HASH_BLOCK_BYTES):
            digest.update(chunk)
            if observer is not None:
                observer.check_cancel()
    return digest.hexdigest()


def extract_document(
    entry: FileEntry,
    ctx: ExtractContext,
    observer: SyncObserver,
    sandbox: SandboxedExtractor | None = None,
) -> DocumentContent:
    """Run the format's extractor and chunk its blocks, in the sandbox child when given (the
    child hands back whole sections); raises ExtractionError for unreadable files."""
    extract = extractors.extractor_for(entry.abs_path)
    if extract is None:
        raise ExtractionError(f"unsupported format: {entry.abs_path.suffix}")

    def on_pages(done: int, total: int) -> None:
        progress = FileProgress(done, total, "page")
        report_file_progress(observer, entry.rel_path, entry.size, progress)

    try:
        if sandbox is not None and _sandboxed(entry):
            doc = sandbox.extract_document(entry.abs_path, observer.check_cancel, on_pages)
        else:
            source = extract(entry.abs_path, replace(ctx, on_progress=on_pages))
            doc = build_document_text(source, ctx.limits.max_text_chars, observer.check_cancel)
    except (ExtractionError, FileSkipped):
        raise
    except Exception as exc:  # noqa: BLE001 - a library bug on a hostile file must not stop the job
        raise extraction_failure(exc, format_of(entry.abs_path)) from exc
    # A single image has no page numbers but is OCR text all the same.
    ocr_engine = (getattr(ctx.ocr, "engine", None) or "ocr") if doc.any_ocr else None
    return DocumentContent(
        title=doc.title or entry.abs_path.stem,
        sections=doc.sections,
        needs_ocr_pages=doc.needs_ocr_pages,
        ocr_pages=doc.ocr_pages,
        ocr_engine=ocr_engine,
        truncated=doc.truncated,
        redactions=doc.redactions,
    )


def sync_files(
    conn: sqlite3.Connection,
    knowledge_dir: Path,
    scope: str,
    ctx_base: ExtractContext,
    observer: SyncObserver,
    counts: dict[str, int],
    sandbox: SandboxedExtractor | None = None,
    excluded: Callable[[str, bool], bool] | None = None,
) -> None:
    """Plan, index the candidates, remove what disappeared, keeping `counts` current."""
    for key in COUNT_KEYS:
        counts.setdefault(key, 0)
    observer.on_phase("prepare")
    # Staged rows of a worker that was killed mid-document (invisible, but they take space).
    discard_staging(conn, stop_on_cancel(observer))
    plan = plan_sync(conn, knowledge_dir, scope, ctx_base.limits.max_file_bytes, excluded)
    counts["unchanged"] = plan.unchanged
    tally = SkipTally()
    record_skips(conn, scope, plan.skipped, observer, tally)
    counts["skipped"] = tally.total
    observer.on_plan(len(plan.candidates), sum(e.size for e in plan.candidates))
    observer.on_phase("files")
    ctx = ExtractContext(
        limits=ctx_base.limits,
        ocr=ctx_base.ocr,
        ocr_unavailable_hint=ctx_base.ocr_unavailable_hint,
        ocr_min_chars=ctx_base.ocr_min_chars,
        should_cancel=lambda: observer.check_cancel() or False,
    )
    purge: list[str] = []  # documents whose old text held a secret this detector version finds
    candidates = plan.candidates
    hashed: dict[str, str | OSError] = {}  # read ahead of their turn (see _read_ahead)
    # The files the child reads: the others are never read ahead, so each look ahead skips
    # them by name instead of asking _sandboxed again for every one of the next files.
    through_child = {e.rel_path for e in candidates if sandbox is not None and _sandboxed(e)}
    check_cancel_now = immediate_cancel_check(observer)
    group = WriteGroup(conn, observer)  # small documents share a transaction (group_write)
    try:
        for number, entry in enumerate(candidates):
            group.before_file(entry)
            check_cancel_now()
            observer.on_file_start(entry.rel_path)
            old = plan.existing.get(entry.rel_path)
            following = candidates[number + 1 : number + 1 + PREFETCH_FILES]

            def read_ahead(following: list[FileEntry] = following) -> None:
                for entry_ahead in following if sandbox is not None else ():
                    if entry_ahead.rel_path in hashed or entry_ahead.rel_path not in through_child:
                        continue
                    if not sandbox.can_prefetch():
                        return  # later files wait: the child must get them in their order
                    old_ahead = plan.existing.get(entry_ahead.rel_path)
                    _read_ahead(conn, entry_ahead, old_ahead, ctx, observer, sandbox, hashed)

            try:
                outcome, error = _sync_one(
                    conn,
                    entry,
                    old,
                    ctx,
                    observer,
                    sandbox,
                    purge,
                    hashed.pop(entry.rel_path, None),
                    read_ahead,
                    group,
                )
            except FileSkipped as skip:
                outcome, error = "skipped", None
                _skip_after_reading(conn, entry, old, skip, observer, tally)

            def report(
                entry: FileEntry = entry, outcome: str = outcome, error: str | None = error
            ) -> None:
                counts[outcome] += 1
                if error:
                    observer.on_error(entry.rel_path, error)
                observer.on_file_done(entry.rel_path, outcome, entry.size, error)

            group.after_commit(report)  # once the file's rows are committed
        group.flush()
    except BaseException:
        group.discard()  # cancelled or failed: the files of the open group are not written
        raise
    observer.on_phase("cleanup")

    def removed(count: int) -> None:
        counts["removed"] += count

    removed_ids = [doc_id for doc_id, _path in plan.removed]
    remove_documents(conn, removed_ids, observer.check_cancel, removed, stop_on_cancel(observer))
    if purge or purge_pending(conn):
        purge_removed_text(conn)


def _sync_one(
    conn: sqlite3.Connection,
    entry: FileEntry,
    old: ExistingDoc | None,
    ctx: ExtractContext,
    observer: SyncObserver,
    sandbox: SandboxedExtractor | None,
    purge: list[str] | None,
    hashed: str | OSError | None,
    before_write: Callable[[], None] | None,
    writes: WriteGroup,
) -> tuple[str, str | None]:
    """Index one file; returns (outcome, error message or None). A file that is mostly secret
    material is skipped (its old rows removed); `purge` collects the paths whose previous text,
    read by an older detector version, held secrets this one redacts. `hashed` is the file's
    hash (or the error reading it) when read ahead; `before_write` runs once the file is read,
    before its rows are written (the caller starts reading the next file there). The rows go to
    `writes`, written with other files' rows; the caller reports the outcome once they are
    committed."""
    limits: ExtractLimits = ctx.limits
    if entry.size > limits.max_file_bytes:  # plan_sync skips these; a direct caller may not
        raise FileSkipped(SkipReason.TOO_LARGE, too_large_skip(entry, limits.max_file_bytes).reason)
    try:
        if isinstance(hashed, OSError):
            raise hashed
        sha = hashed if hashed is not None else file_sha256(entry, observer)
    except FileReplaced as exc:
        return "failed", f"{exc}: not read (it is checked again on the next sync)"
    except OSError as exc:
        reason = f"cannot read file: {exc.strerror or exc}"
        writes.write_failure(entry, "", reason)
        return "failed", reason
    # Same bytes: keep the rows. Failed files are always retried (the cause may be outside the
    # file: permissions, a missing converter), and scans are retried once OCR is available.
    current_detector = old is not None and old.detector_version == DETECTOR_VERSION
    kept = _kept_as_is(conn, old, sha, ctx)
    if kept == "same":
        writes.update_stat_only(old.id, entry)  # type: ignore[union-attr]
        return "unchanged", None
    if kept == "ocr":
        writes.update_stat_only(old.id, entry, DETECTOR_VERSION)  # type: ignore[union-attr]
        return "unchanged", (
            "kept the previous OCR text: OCR engine unavailable, so the document was not "
            "re-read with the current chunking (it will be once the engine is back; "
            f"hint: {ctx.ocr_unavailable_hint or 'install tesseract-ocr'})"
        )
    try:
        content = extract_document(entry, ctx, observer, sandbox)
        _check_unchanged_while_read(entry)
    except MostlySecret:
        # sync_files records the skip (reason `secret`) and removes the old rows; a secret the
        # older detector let into them is purged from the FTS segments too.
        if old is not None and purge is not None and not current_detector:
            mark_purge_pending(conn)
            purge.append(entry.rel_path)
        raise
    except ExtractionError as exc:
        reason = str(exc)
        writes.write_failure(entry, sha, reason)
        return "failed", reason
    if purge is not None and old is not None and not current_detector and content.redactions:
        mark_purge_pending(conn)  # before the old text is deleted: a cancel cannot lose it
        purge.append(entry.rel_path)
    if before_write is not None:
        before_write()
    writes.write_document(entry, sha, content)
    problems = []
    if content.needs_ocr_pages:
        problems.append(
            f"no text layer on pages {page_list(content.needs_ocr_pages)}"
            f" (hint: {ctx.ocr_unavailable_hint or 'install tesseract-ocr'})"
        )
    if content.truncated:
        problems.append(
            f"{TRUNCATED_NOTE} ({ctx.limits.max_text_chars:,} characters): the rest is not "
            "searchable (hint: split the file)"
        )
    return ("updated" if old is not None else "added"), "; ".join(problems) or None


def _kept_as_is(
    conn: sqlite3.Connection, old: ExistingDoc | None, sha: str, ctx: ExtractContext
) -> str | None:
    """ "same" when the stored rows stay (same bytes, scheme and detector; failed files are
    always retried, scans once OCR is available), "ocr" when stored OCR text is kept because
    the engine is missing (re-chunking it needs the engine), None when the file is read."""
    if old is None or old.sha256 != sha:
        return None
    current_detector = old.detector_version == DETECTOR_VERSION
    if (
        old.chunk_scheme == CHUNK_SCHEME
        and old.reader_current
        and current_detector
        and (old.status == "indexed" or (old.status == "needs_ocr" and ctx.ocr is None))
    ):
        return "same"
    if (
        old.status == "indexed"
        and ctx.ocr is None
        and _has_ocr_text(conn, old.id)
        and (current_detector or _stored_text_is_clean(conn, old.id))
    ):
        return "ocr"
    return None


def _read_ahead(
    conn: sqlite3.Connection,
    entry: FileEntry,
    old: ExistingDoc | None,
    ctx: ExtractContext,
    observer: SyncObserver,
    sandbox: SandboxedExtractor,
    hashed: dict[str, str | OSError],
) -> None:
    """Hash a file ahead of its turn and, when it will be read through the sandbox, have the
    child start on it while this process writes the current one (two cores: reading overlaps
    writing; the child takes the requests in order).
    Only a file that is read anyway is started, so an unchanged folder costs nothing more."""
    if entry.size > ctx.limits.max_file_bytes or not _sandboxed(entry):
        return
    try:
        sha = file_sha256(entry, observer)
    except OSError as exc:  # FileReplaced too: reported in the file's own turn
        hashed[entry.rel_path] = exc
        return
    hashed[entry.rel_path] = sha
    if _kept_as_is(conn, old, sha, ctx) is None and extractors.extractor_for(entry.abs_path):
        sandbox.prefetch(entry.abs_path)


def _sandboxed(entry: FileEntry) -> bool:
    if entry.abs_path.suffix.lower() not in IN_PROCESS_SUFFIXES:
        return True
    return entry.size >= CHILD_TEXT_MIN_BYTES


def _skip_after_reading(
    conn: sqlite3.Connection,
    entry: FileEntry,
    old: ExistingDoc | None,
    skip: FileSkipped,
    observer: SyncObserver,
    tally: SkipTally,
) -> None:
    """A file the extraction path refused (FileSkipped): its earlier copy leaves the index."""
    if old is not None:
        remove_document(conn, old.id, stop_on_cancel(observer))
    record = SkipRecord(entry.rel_path, skip.reason, skip.detail)
    tally.add(record)
    with write_transaction(conn):
        skipped_files.add(conn, record, getattr(observer, "job_id", None))
    _report_skips(observer, tally)


def _has_ocr_text(conn: sqlite3.Connection, doc_id: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM chunks WHERE document_id = ? AND ocr = 1 LIMIT 1", (doc_id,)
    ).fetchone()
    return row is not None


def _stored_text_is_clean(conn: sqlite3.Connection, doc_id: int) -> bool:
    """True when no section of an indexed document holds a secret the detector finds (kept OCR
    text is re-checked rather than re-read when the OCR engine is missing)."""
    rows = conn.execute("SELECT text FROM sections WHERE document_id = ?", (doc_id,))
    return not any(find_secrets(section_text(row["text"])) for row in rows)


def _check_unchanged_while_read(entry: FileEntry) -> None:
    if entry.abs_path.is_symlink() or not still_same_file(entry):
        raise ExtractionError(
            "file was replaced during the sync (link or another file)",
            "it is checked again on the next sync_kb",
        )
    try:
        st = entry.abs_path.stat()
    except FileNotFoundError as exc:
        raise ExtractionError("file vanished while being read") from exc
    if st.st_size != entry.size or st.st_mtime_ns != entry.mtime_ns:
        raise ExtractionError(
            "file changed while being read", "it is read again on the next sync_kb"
        )


# -- the extraction tools of one job ------------------------------------------------------------
def ocr_options(config: Config) -> dict[str, object]:
    """The OcrConfig fields for the extraction child (it builds its own OCR function)."""
    return {
        "langs": config.ocr_langs,
        "tesseract_cmd": config.ocr_cmd,
        "vlm_url": config.ocr_vlm_url,
        "vlm_model": config.ocr_vlm_model,
    }


def build_extract_context(config: Config) -> ExtractContext:
    """Limits from the config, plus OCR when an engine is installed."""
    from helpers.ocr import engine as ocr

    ocr_config = ocr.OcrConfig(**ocr_options(config))  # type: ignore[arg-type]
    status = ocr.ocr_status(ocr_config)
    return ExtractContext(
        limits=ExtractLimits(max_file_bytes=config.max_file_bytes),
        ocr=ocr.make_ocr_function(ocr_config) if status.available else None,
        ocr_unavailable_hint=status.hint or "install tesseract-ocr",
    )


def sync_excludes(config: Config) -> ExcludeRules:
    """The exclude rules a sync applies: <knowledge-dir>/.ragignore, --exclude, and the data dir
    when it lies inside the knowledge dir (never index our own state). Their `problems` (an
    unreadable .ragignore, invalid lines) are reported as job errors under RAGIGNORE_NAME."""
    return rules_in_force(
        config.knowledge_dir, config.excludes, config.data_dir, config.db_path.parent
    )


@contextmanager
def extraction_tools(
    config: Config, log_path: Path
) -> Iterator[tuple[ExtractContext, SandboxedExtractor]]:
    """The context (limits, OCR) and the sandboxed extraction child a sync job reads files
    with; both are closed when the job ends, however it ends."""
    ctx = build_extract_context(config)
    sandbox = SandboxedExtractor(ctx.limits, ocr_options(config), log_path=log_path)
    try:
        yield ctx, sandbox
    finally:
        sandbox.close()
        close_ocr = getattr(ctx.ocr, "close", None)
        if close_ocr is not None:
            close_ocr()  # harmless when unused; the extraction child closes the one that ran
