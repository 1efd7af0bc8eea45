"""Hostile input: hundreds of bad files beside good ones; the job never crashes, reports each bad
file with its reason, and indexes every good file."""

from __future__ import annotations

import sqlite3
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import make_config, needs_setpriv, require_tool
from hostile_fixtures import (
    FAILED,
    IGNORED,
    INDEXED,
    REPORTED,
    SKIPPED,
    XXE_TOKEN,
    HostileCase,
    HostileCorpus,
    bind_unreadable_file,
    make_hostile_corpus,
    unbind,
)
from stress.harness import (
    can_mount,
    canonical_dump,
    index_problems,
    run_sync,
    run_worker_without_dac_override,
)

import rag_service
from helpers.config import Config
from helpers.extract.blocks import ExtractContext, ExtractLimits
from helpers.extract.registry import extractor_for
from helpers.extract.textio import READ_CHUNK_CHARS
from helpers.safety import FileEntry
from helpers.store.fold_sql import register_fold
from helpers.store.job_rows import JobView
from rag_sync import extract_document

MIN_HOSTILE_CASES = 200
TEST_BIG_TEXT_BYTES = 2 * 1024 * 1024  # the sync copy; the 20 MB file is streamed below


@dataclass
class HostileSync:
    corpus: HostileCorpus
    config: Config
    view: JobView
    documents: dict[str, sqlite3.Row]
    errors: dict[str, list[str]]
    unreadable: str | None


def _load(config: Config, job_id: str) -> tuple[dict[str, sqlite3.Row], dict[str, list[str]]]:
    conn = sqlite3.connect(config.db_path)
    register_fold(conn)  # the checks read chunks.norm (migration 12)
    conn.row_factory = sqlite3.Row
    try:
        docs = {r["path"]: r for r in conn.execute("SELECT * FROM documents")}
        errors: dict[str, list[str]] = {}
        for r in conn.execute("SELECT path, message FROM job_errors WHERE job_id = ?", (job_id,)):
            errors.setdefault(r["path"], []).append(r["message"])
        # Skips are reported by reason in skipped_files (rag_list(status="skipped")), not as
        # one job error each; a skipped folder is one row.
        for r in conn.execute("SELECT path, detail FROM skipped_files"):
            errors.setdefault(r["path"], []).append(f"skipped: {r['detail']}")
        return docs, errors
    finally:
        conn.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileSync]:
    root = tmp_path_factory.mktemp("hostile")
    corpus = make_hostile_corpus(root / "docs", big_text_bytes=TEST_BIG_TEXT_BYTES)
    unreadable_path = corpus.root / "special" / "unreadable.md"
    unreadable = None
    if can_mount() and bind_unreadable_file(unreadable_path):
        unreadable = "special/unreadable.md"
        corpus.add(unreadable, "read raises EIO", FAILED)
    config = make_config(corpus.root, root / "state")
    try:
        view = run_sync(config, timeout_s=600)
        documents, errors = _load(config, view.job_id)
        yield HostileSync(corpus, config, view, documents, errors, unreadable)
    finally:
        if unreadable:
            unbind(unreadable_path)


def _mismatch(case: HostileCase, run: HostileSync) -> str | None:
    doc = run.documents.get(case.rel_path)
    errors = [
        m
        for path, messages in run.errors.items()
        if path == case.rel_path or case.rel_path.startswith(path + "/")
        for m in messages
    ]
    if case.expect == FAILED:
        if doc is None or doc["status"] != "failed" or not doc["error"]:
            return "expected a failed row with a reason"
        if not errors:
            return "failure not in the job's errors"
    elif case.expect == SKIPPED:
        if doc is not None or not any(m.startswith("skipped: ") for m in errors):
            return "expected a 'skipped: <reason>' job error and no row"
    elif case.expect == IGNORED:
        if doc is not None:
            return "expected to be ignored, but it has a row"
    elif case.expect == INDEXED:
        if doc is None or doc["status"] != "indexed":
            return "expected indexed"
    elif case.expect == REPORTED:
        if doc is None:
            return "expected a row (indexed, or failed with a reason)"
        if doc["status"] == "failed" and not doc["error"]:
            return "failed without a reason"
    return None


def test_the_job_survives_over_200_hostile_files_and_reports_each_one(hostile: HostileSync):
    assert len(hostile.corpus.cases) >= MIN_HOSTILE_CASES
    assert hostile.view.state == "succeeded", hostile.view.to_dict()
    mismatches = {
        f"{c.category}: {c.rel_path!r}": why
        for c in hostile.corpus.cases
        if (why := _mismatch(c, hostile))
    }
    assert not mismatches
    assert hostile.view.counts["failed"] >= len(
        [c for c in hostile.corpus.cases if c.expect == FAILED]
    )


def test_every_good_file_beside_the_hostile_ones_is_indexed_and_found(hostile: HostileSync):
    missing = {}
    for rel, mark in hostile.corpus.good.items():
        hits = rag_service.search(hostile.config, mark, mode="lexical", top_k=3).hits
        if not hits or hits[0].path != rel:
            missing[rel] = [h.path for h in hits]
    assert not missing


def test_the_index_stays_consistent_after_the_hostile_sync(hostile: HostileSync):
    assert index_problems(hostile.config.db_path) == []


def test_no_external_entity_link_or_outside_file_reaches_the_index(hostile: HostileSync):
    conn = sqlite3.connect(hostile.config.db_path)
    register_fold(conn)
    try:
        for needle in (XXE_TOKEN, "root:x:0:0", "hostilesecret99"):
            count = conn.execute(
                "SELECT COUNT(*) FROM chunks WHERE instr(text, ?) > 0", (needle,)
            ).fetchone()[0]
            assert count == 0, needle
    finally:
        conn.close()
    assert rag_service.search(hostile.config, XXE_TOKEN, mode="lexical").hits == []


def test_a_file_whose_read_fails_is_reported_with_the_os_error(hostile: HostileSync):
    require_tool(
        hostile.unreadable is not None,
        "root and mount --bind (a file whose read raises EIO)",
        "run the tests as root in a VM",
    )
    doc = hostile.documents[hostile.unreadable]
    assert doc["status"] == "failed" and "Input/output error" in doc["error"]


def test_a_second_sync_of_the_hostile_folder_retries_the_failures_and_converges(
    hostile: HostileSync,
):
    before = canonical_dump(hostile.config.db_path)
    again = run_sync(hostile.config, timeout_s=600)
    assert again.state == "succeeded"
    assert again.counts["failed"] == hostile.view.counts["failed"]
    assert canonical_dump(hostile.config.db_path) == before


def test_links_fifos_and_sockets_are_reported_as_skipped_with_a_reason(hostile: HostileSync):
    silent = [
        c.rel_path
        for c in hostile.corpus.cases
        if c.category in ("symbolic link", "FIFO", "unix socket")
        and c.rel_path not in hostile.errors
    ]
    assert silent == []


def test_a_20_mb_single_line_text_file_streams_in_bounded_pieces(tmp_path: Path):
    from hostile_fixtures import write_one_line

    path = tmp_path / "one-line.txt"
    write_one_line(path, 20 * 1024 * 1024)
    extract = extractor_for(path)
    assert extract is not None
    tracemalloc.start()
    try:
        total = longest = blocks = 0
        for block in extract(path, ExtractContext()):
            blocks += 1
            total += len(block.text)
            longest = max(longest, len(block.text))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    expected = min(20 * 1024 * 1024, ExtractLimits().max_text_chars)
    assert total >= expected - blocks  # every character up to the limit arrives (trimmed pieces)
    assert longest <= READ_CHUNK_CHARS
    assert peak < 16 * 1024 * 1024  # bounded: far below the file's 20 MB


@needs_setpriv
def test_a_permission_denied_file_is_reported_failed_and_its_neighbours_indexed(
    config: Config, knowledge: Path
):
    (knowledge / "open.md").write_text("# Open\n\nopenmarker31\n", encoding="utf-8")
    locked = knowledge / "locked.md"
    locked.write_text("# Locked\n\nlockedmarker31\n", encoding="utf-8")
    locked.chmod(0)
    view = run_worker_without_dac_override(config)
    assert view.state == "succeeded", view.to_dict()
    errors = {e["path"]: e["message"] for e in view.errors}
    assert "Permission denied" in errors["locked.md"]
    listed = rag_service.list_documents(config, status="failed")["items"]
    assert [(i["path"], "Permission denied" in i["error"]) for i in listed] == [("locked.md", True)]
    assert rag_service.search(config, "openmarker31", mode="lexical").hits[0].path == "open.md"


class _NoCancel:
    def check_cancel(self) -> None:
        return None


def test_a_document_cut_at_the_character_limit_is_marked_truncated(tmp_path: Path):
    path = tmp_path / "long.txt"
    path.write_text("word " * 4000, encoding="utf-8")
    stat = path.stat()
    entry = FileEntry("long.txt", path, stat.st_size, stat.st_mtime_ns)
    ctx = ExtractContext(limits=ExtractLimits(max_text_chars=5000))
    content = extract_document(entry, ctx, _NoCancel())
    assert sum(len(s.text) for s in content.sections) < 20_000
    assert content.truncated
