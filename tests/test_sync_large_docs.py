"""Big documents are written in short transactions under an invisible staging row and swapped in
whole; a cancel or a SIGKILL mid-write never shows half a document; a document cut at the
character limit says so; a stale OCR document is not wiped when the OCR engine is missing."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RecordingObserver, make_config, require_tesseract
from ocr_fixtures import render_page
from stress.harness import (
    REPO,
    canonical_dump,
    index_problems,
    reference_dump,
    run_sync,
    wait_until,
)

import rag_search
import rag_service
from helpers.config import Config
from helpers.extract.blocks import ExtractContext, ExtractLimits, Location
from helpers.extract.sandbox import SandboxedExtractor
from helpers.index import discard
from helpers.index import document_write as sync_write
from helpers.index import pacing as sync_pacing
from helpers.index.document_write import (
    TRUNCATED_NOTE,
    DocumentContent,
    FileProgress,
    write_document,
)
from helpers.lexical.common import hidden_document_ids
from helpers.safety import FileEntry
from helpers.store.codec import section_text
from helpers.store.fold_sql import register_fold
from helpers.store.index_db import open_index
from helpers.text.chunking import Child, Section
from rag_sync import JobCancelled, extract_document, sync_files


def _content(title: str, marker: str, sections: int, children: int) -> DocumentContent:
    built = []
    for s in range(sections):
        kids = tuple(
            Child(f"{title} part {s} piece {c} {marker}{s}x{c} {marker}", Location(page=s + 1))
            for c in range(children)
        )
        built.append(Section("\n".join(k.text for k in kids), Location(page=s + 1), kids))
    return DocumentContent(title, built, [], [], None, False)


def _entry(rel: str) -> FileEntry:
    return FileEntry(rel, Path("/absent") / rel, 100, 1)


def _paths_found(conn: sqlite3.Connection, query: str) -> list[str]:
    result = rag_search.search(conn, query, rag_search.SearchOptions(top_k=20))
    return sorted({hit.path for hit in result.hits})


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Staging from 10 chunks on, 10 rows per transaction (the real sizes need ~2,000 rows)."""
    monkeypatch.setattr(sync_write, "SINGLE_TRANSACTION_CHUNKS", 10)
    monkeypatch.setattr(sync_write, "STAGE_BATCH_CHUNKS", 10)
    monkeypatch.setattr(discard, "DISCARD_BATCH_CHUNKS", 10)
    monkeypatch.setattr(sync_pacing, "BATCH_PAUSE_S", 0.0)


class _Watcher:
    """Between two batches of the staged write, looks at the index from another connection."""

    def __init__(self, db_path: Path, cancel_after_batches: int | None = None) -> None:
        self.db_path = db_path
        self.cancel_after = cancel_after_batches
        self.progress: list[FileProgress] = []
        self.seen: list[tuple[list[str], list[str], list[str]]] = []

    def check_cancel(self) -> None:
        if self.cancel_after is not None and len(self.progress) >= self.cancel_after:
            raise JobCancelled()

    def on_file_progress(self, rel_path: str, size: int, progress: FileProgress) -> None:
        self.progress.append(progress)
        other = sqlite3.connect(self.db_path, isolation_level=None, timeout=0)
        register_fold(other)
        try:
            other.execute("BEGIN IMMEDIATE")  # timeout 0: fails if the writer still held it
            other.execute("COMMIT")
            other.row_factory = sqlite3.Row
            self.seen.append(
                (
                    _paths_found(other, "newmarker"),
                    _paths_found(other, "oldmarker"),
                    index_problems(self.db_path),
                )
            )
        finally:
            other.close()


def test_a_big_document_is_staged_in_short_transactions_and_appears_whole(
    tmp_path: Path, small_batches: None
):
    conn = open_index(tmp_path / "index.sqlite3")
    write_document(conn, _entry("big.txt"), "1" * 64, _content("Old", "oldmarker", 1, 3))
    watcher = _Watcher(tmp_path / "index.sqlite3")
    big = _content("New", "newmarker", 12, 5)
    write_document(conn, _entry("big.txt"), "2" * 64, big, watcher)
    # Six batches, each committed alone: another writer got the lock between them, searches saw
    # only the old version, and the staged rows were never half a document to anyone.
    assert [p.done for p in watcher.progress] == [10, 20, 30, 40, 50, 60]
    assert all(p.total == 60 for p in watcher.progress)
    assert watcher.seen == [([], ["big.txt"], [])] * 6
    assert _paths_found(conn, "newmarker") == ["big.txt"]
    assert _paths_found(conn, "oldmarker") == []
    row = conn.execute("SELECT * FROM documents").fetchone()
    assert (row["path"], row["sha256"], row["chunk_count"]) == ("big.txt", "2" * 64, 60)
    assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 1
    assert hidden_document_ids(conn) == ()
    assert index_problems(tmp_path / "index.sqlite3") == []
    conn.close()


def _cancel_a_big_rewrite(db: Path) -> tuple[sqlite3.Connection, str, _Watcher]:
    """An indexed 20-chunk big.txt, then a 60-chunk new version cancelled after 3 batches;
    returns the connection, the dump before the rewrite and the watcher."""
    conn = open_index(db)
    write_document(conn, _entry("big.txt"), "1" * 64, _content("Old", "oldmarker", 4, 5))
    before = canonical_dump(db)
    watcher = _Watcher(db, cancel_after_batches=3)
    with pytest.raises(JobCancelled):
        write_document(
            conn, _entry("big.txt"), "2" * 64, _content("New", "newmarker", 12, 5), watcher
        )
    return conn, before, watcher


def test_a_cancel_between_batches_discards_the_staged_rows_and_keeps_the_old_version(
    tmp_path: Path, small_batches: None
):
    conn, before, watcher = _cancel_a_big_rewrite(tmp_path / "index.sqlite3")
    assert len(watcher.progress) == 3
    assert canonical_dump(tmp_path / "index.sqlite3") == before
    assert _paths_found(conn, "oldmarker") == ["big.txt"]
    assert hidden_document_ids(conn) == ()
    assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 20
    assert index_problems(tmp_path / "index.sqlite3") == []
    conn.close()


def test_a_cancel_past_the_discard_budget_ends_at_once_and_the_next_sync_discards_the_rest(
    tmp_path: Path, small_batches: None, monkeypatch: pytest.MonkeyPatch
):
    """A cancel late in a huge write must not keep the job "cancelling" while every staged row
    is deleted: past the budget the rows stay invisible until the next sync removes them."""
    monkeypatch.setattr(sync_write, "CANCEL_DISCARD_BUDGET_S", 0.0)
    conn, before, _ = _cancel_a_big_rewrite(tmp_path / "index.sqlite3")
    assert len(hidden_document_ids(conn)) == 1  # left for the next sync
    assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 20 + 30
    assert _paths_found(conn, "oldmarker") == ["big.txt"]
    assert _paths_found(conn, "newmarker") == []
    assert index_problems(tmp_path / "index.sqlite3") == []
    assert discard.discard_staging(conn) == 1  # what sync_files does first
    assert canonical_dump(tmp_path / "index.sqlite3") == before
    conn.close()


def test_a_big_document_removed_or_failed_leaves_no_rows_behind(
    tmp_path: Path, small_batches: None
):
    conn = open_index(tmp_path / "index.sqlite3")
    write_document(conn, _entry("a.txt"), "1" * 64, _content("A", "oldmarker", 5, 5))
    write_document(conn, _entry("b.txt"), "1" * 64, _content("B", "oldmarker", 5, 5))
    doc_a = conn.execute("SELECT id FROM documents WHERE path = 'a.txt'").fetchone()[0]
    sync_write.remove_document(conn, doc_a)
    sync_write.write_failure(conn, _entry("b.txt"), "2" * 64, "broken")
    rows = conn.execute("SELECT path, status, chunk_count FROM documents").fetchall()
    assert [tuple(r) for r in rows] == [("b.txt", "failed", 0)]
    assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 0
    assert index_problems(tmp_path / "index.sqlite3") == []
    conn.close()


# -- a writer SIGKILLed mid-document ------------------------------------------------------------
_WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from helpers.index import document_write as w
w.SINGLE_TRANSACTION_CHUNKS = w.STAGE_BATCH_CHUNKS = 10
from helpers.index import discard
discard.DISCARD_BATCH_CHUNKS = 10
from helpers.index import pacing
pacing.BATCH_PAUSE_S = 0.05
pacing.LOCK_BURST_S = 0.0  # a gap after every batch: slow enough to be killed mid-document
from pathlib import Path
from helpers.extract.blocks import ExtractContext
from helpers.extract.registry import SUPPORTED_SUFFIXES
from helpers.safety import walk_files
from helpers.store.index_db import open_index
from rag_sync import extract_document, file_sha256

class Quiet:
    def check_cancel(self):
        return None

conn = open_index(Path(sys.argv[2]))
entry = next(e for e in walk_files(Path(sys.argv[3]), SUPPORTED_SUFFIXES) if e.rel_path == "big.md")
content = extract_document(entry, ExtractContext(), Quiet())
w.write_document(conn, entry, file_sha256(entry), content, Quiet())
print("written", flush=True)
"""


def _write_big(path: Path, marker: str, paragraphs: int = 120) -> None:
    body = "\n\n".join(
        f"Paragraph {i} about the {marker} budget, invoice {i} and contract {i * 7}."
        for i in range(paragraphs)
    )
    path.write_text(f"# Big {marker}\n\n{body}\n", encoding="utf-8")


def _kill_writer_when(config: Config, knowledge: Path, sql: str) -> None:
    """Run the staged writer for big.md in a subprocess; SIGKILL it once `sql` returns a row."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(REPO), str(config.db_path), str(knowledge)],
        stdout=subprocess.PIPE,
        text=True,
    )
    watch = sqlite3.connect(config.db_path, isolation_level=None, timeout=30)
    register_fold(watch)
    try:
        wait_until(lambda: watch.execute(sql).fetchone() is not None, timeout=120, interval=0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        watch.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, "the writer finished before it could be killed"


def _search_paths(config: Config, query: str) -> list[str]:
    return sorted({h.path for h in rag_service.search(config, query, mode="lexical").hits})


@pytest.mark.slow
def test_a_writer_killed_mid_document_shows_no_half_document_and_the_next_sync_converges(
    config: Config, knowledge: Path, tmp_path: Path
):
    _write_big(knowledge / "big.md", "alphaold")
    (knowledge / "small.md").write_text("# Small\n\nsmall note about payroll\n", encoding="utf-8")
    assert run_sync(config).state == "succeeded"
    _write_big(knowledge / "big.md", "betanew", paragraphs=150)
    # 1. Killed while the new version is being staged: the old version is what search shows.
    _kill_writer_when(
        config,
        knowledge,
        "SELECT 1 FROM documents WHERE error LIKE 'being written:%' AND chunk_count >= 30",
    )
    assert index_problems(config.db_path) == []
    assert _search_paths(config, "alphaold") == ["big.md"]
    assert _search_paths(config, "betanew") == []
    # 2. Killed after the swap, while the old version's rows are being discarded.
    _kill_writer_when(
        config,
        knowledge,
        "SELECT 1 FROM documents d WHERE error LIKE 'replaced:%' AND EXISTS "
        "(SELECT 1 FROM chunks c WHERE c.document_id = d.id)",
    )
    assert index_problems(config.db_path) == []
    assert _search_paths(config, "betanew") == ["big.md"]
    assert _search_paths(config, "alphaold") == []
    listing = rag_service.list_documents(config)
    listed = [i["path"] for i in listing["items"]]
    assert sorted(listed) == ["big.md", "small.md"]  # the hidden old version is not a file
    assert listing["total"] == 2
    # 3. The next sync discards the leftovers and gives exactly the clean result.
    assert run_sync(config).state == "succeeded"
    assert canonical_dump(config.db_path) == reference_dump(knowledge, tmp_path / "reference")
    conn = open_index(config.db_path)
    assert hidden_document_ids(conn) == ()
    conn.close()


@pytest.mark.slow
def test_cancel_during_a_big_documents_write_in_the_worker_keeps_the_old_version(
    config: Config, knowledge: Path
):
    big = knowledge / "big.txt"
    big.write_text("first version with keepmarker\n", encoding="utf-8")
    assert run_sync(config).state == "succeeded"
    line = " ".join(f"w{i % 997}" for i in range(20_000)) + " "
    # ~5.6 MB on one line: ~36,000 chunks, ~18 batches. The pacer leaves a gap after 0.5 s of
    # back-to-back batches, so the write must outlast a few of those for the cancel to land.
    big.write_text(line * 48, encoding="utf-8")
    job = rag_service.start_sync(config)
    watch = sqlite3.connect(config.db_path, isolation_level=None, timeout=30)
    register_fold(watch)
    staged = "SELECT 1 FROM documents WHERE error LIKE 'being written:%'"
    wait_until(lambda: watch.execute(staged).fetchone() is not None, timeout=240, interval=0.005)
    watch.close()
    # The cancel gets the lock at the pacer's next gap and is seen before the next batch: the
    # batches written so far are discarded.
    rag_service.cancel_sync(config, job.job_id)
    view = rag_service.wait_for_job(config, job.job_id, timeout_s=240)
    assert view.state == "cancelled", view.to_dict()
    assert _search_paths(config, "keepmarker") == ["big.txt"]
    assert index_problems(config.db_path) == []
    conn = open_index(config.db_path)
    assert hidden_document_ids(conn) == ()
    row = conn.execute("SELECT chunk_count, status FROM documents WHERE path = 'big.txt'")
    assert tuple(row.fetchone()) == (1, "indexed")
    conn.close()


# -- the character limit -------------------------------------------------------------------------
def test_a_sandboxed_document_cut_at_the_character_limit_is_marked_truncated(
    knowledge: Path, tmp_path: Path
):
    records = [{"id": i, "note": f"record {i} about the quarterly invoice"} for i in range(400)]
    (knowledge / "records.json").write_text(json.dumps(records), encoding="utf-8")
    (knowledge / "short.json").write_text(json.dumps(records[:3]), encoding="utf-8")
    limits = ExtractLimits(max_text_chars=10_000)  # the JSON extractor's blocks are ~4,000
    sandbox = SandboxedExtractor(limits, None)
    conn = open_index(tmp_path / "index.sqlite3")
    recorder = RecordingObserver()
    try:
        sync_files(conn, knowledge, "", ExtractContext(limits=limits), recorder, {}, sandbox)
    finally:
        sandbox.close()
    docs = {r["path"]: r for r in conn.execute("SELECT path, status, error FROM documents")}
    assert docs["records.json"]["status"] == "indexed"
    assert docs["records.json"]["error"] == TRUNCATED_NOTE
    assert recorder.errors["records.json"].startswith(TRUNCATED_NOTE)
    assert docs["short.json"]["error"] is None and "short.json" not in recorder.errors
    text = "".join(
        section_text(row[0])
        for row in conn.execute(
            "SELECT s.text FROM sections s JOIN documents d ON d.id = s.document_id "
            "WHERE d.path = 'records.json'"
        )
    )
    assert 4000 < len(text) <= 10_000
    conn.close()


def test_extract_document_through_the_sandbox_reports_the_cut(tmp_path: Path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps(["word " * 50] * 200), encoding="utf-8")
    stat = path.stat()
    entry = FileEntry("long.json", path, stat.st_size, stat.st_mtime_ns)
    limits = ExtractLimits(max_text_chars=5000)
    sandbox = SandboxedExtractor(limits, None)
    try:
        content = extract_document(
            entry, ExtractContext(limits=limits), RecordingObserver(), sandbox
        )
    finally:
        sandbox.close()
    assert content.truncated
    assert 0 < sum(len(s.text) for s in content.sections) <= 6000


# -- a stale OCR document while the OCR engine is missing ---------------------------------------
@pytest.mark.slow
def test_a_stale_ocr_document_keeps_its_text_while_the_ocr_engine_is_missing(
    knowledge: Path, tmp_path: Path
):
    require_tesseract()
    render_page(["Warehouse inventory checklist"], dpi=150).save(knowledge / "board.png")
    config = make_config(knowledge, tmp_path / "state")
    assert run_sync(config).state == "succeeded"
    assert _search_paths(config, "inventory checklist") == ["board.png"]
    conn = sqlite3.connect(config.db_path)
    register_fold(conn)
    with conn:
        conn.execute("UPDATE documents SET chunk_scheme = chunk_scheme - 1")  # an older scheme
    conn.close()
    blind = make_config(knowledge, tmp_path / "state", ocr_cmd=str(tmp_path / "no-tesseract"))
    view = run_sync(blind)
    assert view.state == "succeeded"
    warnings = {e["path"]: e["message"] for e in view.errors}
    assert warnings["board.png"].startswith("kept the previous OCR text: OCR engine unavailable")
    assert _search_paths(blind, "inventory checklist") == ["board.png"]
    listed = {i["path"]: i for i in rag_service.list_documents(blind)["items"]}
    assert listed["board.png"]["status"] == "needs_reindex"  # re-read once the engine is back
    view = run_sync(config)
    assert view.state == "succeeded" and view.counts["updated"] == 1 and not view.errors
    listed = {i["path"]: i for i in rag_service.list_documents(config)["items"]}
    assert listed["board.png"]["status"] == "indexed"
    assert _search_paths(config, "inventory checklist") == ["board.png"]
