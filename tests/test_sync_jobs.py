"""The detached worker: persistent jobs, progress, cancel, crash recovery, one writer."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, files_for_seconds, make_config, write_corpus

import rag_service
from helpers.config import Config
from helpers.store.index_db import connect


def wait_until(predicate, timeout: float = 60.0, interval: float = 0.05):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def index_is_consistent(db_path: Path) -> None:
    """Integrity ok, and every document's rows are complete (no half-written document)."""
    conn = connect(db_path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute(
            "SELECT d.id, d.path, d.status, d.chunk_count, d.section_count, "
            "(SELECT COUNT(*) FROM chunks c WHERE c.document_id = d.id) AS chunks, "
            "(SELECT COUNT(*) FROM sections s WHERE s.document_id = d.id) AS sections, "
            "(SELECT COUNT(*) FROM chunks_fts_docsize f JOIN chunks c ON c.id = f.id "
            " WHERE c.document_id = d.id) AS fts FROM documents d"
        ).fetchall()
        for r in rows:
            assert r["chunks"] == r["chunk_count"] == r["fts"], dict(r)
            assert r["sections"] == r["section_count"], dict(r)
        orphans = conn.execute(
            "SELECT COUNT(*) FROM chunks_fts_docsize WHERE id NOT IN (SELECT id FROM chunks)"
        ).fetchone()[0]
        assert orphans == 0
    finally:
        conn.close()


def test_sync_indexes_a_folder_and_a_resync_changes_nothing(config: Config, knowledge: Path):
    write_corpus(knowledge, 20)
    job = rag_service.start_sync(config)
    assert job.state in ("queued", "running")
    done = rag_service.wait_for_job(config, job.job_id, timeout_s=60)
    assert done.state == "succeeded", done.to_dict()
    assert done.counts["added"] == 20
    assert done.percent == 100.0
    again = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert again.counts["unchanged"] == 20 and again.counts["added"] == 0
    index_is_consistent(config.db_path)


def test_changed_removed_and_touched_files_are_detected(config: Config, knowledge: Path):
    paths = write_corpus(knowledge, 5)
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    paths[0].write_text("# Changed\n\nzebra crossing\n", encoding="utf-8")
    paths[1].unlink()
    os.utime(paths[2], None)  # new mtime, same bytes: re-hashed, not re-extracted
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert view.counts["updated"] == 1
    assert view.counts["removed"] == 1
    assert view.counts["unchanged"] == 3
    hits = rag_service.search(config, "zebra crossing", mode="lexical").hits
    assert hits and hits[0].path == paths[0].relative_to(knowledge).as_posix()
    index_is_consistent(config.db_path)


def test_cancel_mid_sync_keeps_committed_documents_searchable(
    config: Config, knowledge: Path, tmp_path: Path
):
    # A corpus this machine needs several seconds for: with grouped writes a fixed 1,200 files
    # could all be written before the cancel arrives.
    count = max(1200, files_for_seconds(tmp_path, CANCEL_CORPUS_SECONDS))
    write_corpus(knowledge, count)
    job = rag_service.start_sync(config)
    wait_until(lambda: rag_service.sync_status(config, job.job_id).completed_files >= 100)
    cancelled = rag_service.cancel_sync(config, job.job_id)
    assert cancelled.state in ("cancelling", "cancelled")
    final = rag_service.wait_for_job(config, job.job_id, timeout_s=60)
    assert final.state == "cancelled", final.to_dict()
    assert 0 < final.counts["added"] < count
    index_is_consistent(config.db_path)
    conn = connect(config.db_path)
    indexed = [r[0] for r in conn.execute("SELECT path FROM documents")]
    conn.close()
    marker = Path(indexed[0]).stem.split("-")[1]
    hits = rag_service.search(config, f"marker{marker}", mode="lexical").hits
    assert hits and hits[0].path == indexed[0]
    resumed = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert resumed.state == "succeeded"
    assert resumed.counts["unchanged"] == final.counts["added"]
    assert resumed.counts["added"] == count - final.counts["added"]


CANCEL_CORPUS_SECONDS = 6  # a cancel or kill after 50-100 files: the rest is most of the job

# The worker publishes progress once a second: a files phase this many seconds long shows at
# least 3 values with room to spare on a loaded machine.
PROGRESS_SECONDS = 8
# A files phase at least this long must have shown 3 values (one a second, and a second's slack);
# a shorter one means the machine sped up after the corpus was sized, and the corpus grows.
PROGRESS_WINDOW_S = 4.0
PROGRESS_ATTEMPTS = 3  # each 4x the files of the one before


def _watch_progress(config: Config, total: int) -> tuple[set[int], float]:
    """Sync `total` files, polling the job: the distinct completed-file counts seen while it ran
    its files phase, and how long that phase was seen running."""
    job = rag_service.start_sync(config)
    seen: set[int] = set()
    first: list[float] = []
    last = [0.0]

    def progressed() -> bool:
        view = rag_service.sync_status(config, job.job_id)
        if view.state == "running" and view.phase == "files":
            seen.add(view.completed_files)
            first[:] = first or [time.monotonic()]
            last[0] = time.monotonic()
        return len(seen) >= 3 or view.state == "succeeded"

    wait_until(progressed, timeout=120)
    view = rag_service.sync_status(config, job.job_id)
    assert view.total_files == total
    if view.state == "running":
        assert view.heartbeat is not None and time.time() - view.heartbeat < 5
    rag_service.wait_for_job(config, job.job_id, timeout_s=120)
    return seen, (last[0] - first[0]) if first else 0.0


def test_progress_is_published_while_the_job_runs(config: Config, knowledge: Path, tmp_path: Path):
    # A fixed corpus finishes before 3 publications on a fast machine: size it to this one, and
    # grow it when the machine ran faster than it was measured (a load that went away).
    total = max(1000, files_for_seconds(tmp_path, PROGRESS_SECONDS))
    for attempt in range(PROGRESS_ATTEMPTS):
        if attempt:
            total *= 4
            knowledge = tmp_path / f"docs-{attempt}"
            knowledge.mkdir()
            config = make_config(knowledge, tmp_path / f"state-{attempt}")
        write_corpus(knowledge, total)
        seen, phase_s = _watch_progress(config, total)
        if len(seen) >= 3 or phase_s >= PROGRESS_WINDOW_S:
            break
    assert len(seen) >= 3, (
        f"progress never moved while running: {sorted(seen)} of {total} in {phase_s:.1f} s"
    )


def test_killed_worker_is_reported_failed_and_the_next_sync_converges(
    config: Config, knowledge: Path, tmp_path: Path
):
    count = max(
        1200, files_for_seconds(tmp_path, CANCEL_CORPUS_SECONDS)
    )  # still running at the kill
    write_corpus(knowledge, count)
    job = rag_service.start_sync(config)
    view = wait_until(
        lambda: (v := rag_service.sync_status(config, job.job_id)).completed_files >= 50 and v
    )
    os.kill(view.pid, signal.SIGKILL)
    dead = wait_until(
        lambda: (v := rag_service.sync_status(config, job.job_id)).state == "failed" and v,
        timeout=30,
    )
    assert "worker died" in dead.message
    index_is_consistent(config.db_path)
    again = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert again.state == "succeeded"
    conn = connect(config.db_path)
    assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == count
    conn.close()
    index_is_consistent(config.db_path)


def _start_sync_in_subprocess(config: Config) -> subprocess.Popen[str]:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]);"
        "import rag_service; from helpers.config import Config;"
        "print(json.dumps(rag_service.start_sync(Config.from_json(sys.argv[2])).to_dict()))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(REPO), config.to_json()],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_concurrent_sync_calls_from_two_processes_start_one_worker(config: Config, knowledge: Path):
    write_corpus(knowledge, 800)
    procs = [_start_sync_in_subprocess(config) for _ in range(4)]
    results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    job_ids = {r["job_id"] for r in results}
    assert len(job_ids) == 1, results
    assert sum(1 for r in results if not r["already_running"]) == 1
    final = rag_service.wait_for_job(config, job_ids.pop(), timeout_s=120)
    assert final.state == "succeeded"
    conn = connect(config.db_path)
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1
    conn.close()


def test_searches_are_answered_while_a_sync_writes(config: Config, knowledge: Path):
    write_corpus(knowledge, 30, seed=1)
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    write_corpus(knowledge / "more", 800, seed=2)
    job = rag_service.start_sync(config)
    answered = 0
    while rag_service.sync_status(config, job.job_id).state in ("queued", "running"):
        result = rag_service.search(config, "invoice payment", mode="lexical")
        assert result.hits
        answered += 1
    assert answered >= 3
    assert rag_service.sync_status(config, job.job_id).state == "succeeded"


def test_a_corrupt_file_is_reported_and_the_job_goes_on(config: Config, knowledge: Path):
    write_corpus(knowledge, 3)
    (knowledge / "binary.txt").write_bytes(b"\x00\x01\x02PK\x03\x04" * 500)
    (knowledge / "big.txt").write_bytes(b"a" * (2 * 1024 * 1024))
    small_cap = make_config(knowledge, config.data_dir, max_file_bytes=1024 * 1024)
    view = rag_service.wait_for_job(
        small_cap, rag_service.start_sync(small_cap).job_id, timeout_s=60
    )
    assert view.state == "succeeded"
    assert view.counts["added"] == 3 and view.counts["failed"] == 1
    errors = {e["path"]: e["message"] for e in view.errors}
    assert "binary" in errors["binary.txt"].lower()
    # Over the size cap: never read, so skipped (with the hint), not a failed document.
    assert view.skipped["too_large"]["examples"] == ["big.txt"]
    listed = rag_service.list_documents(small_cap, status="failed")
    assert {i["path"] for i in listed["items"]} == {"binary.txt"}
    skipped = rag_service.list_documents(small_cap, status="skipped")["items"]
    assert [(i["path"], i["skip_reason"]) for i in skipped] == [("big.txt", "too_large")]
    # One size-cap rule and unit for the sync's check and the extractor's: MB of 2**20 bytes.
    assert skipped[0]["error"].startswith("file is 2.0 MB, over the 1 MB limit")
    assert "--max-file-mb" in skipped[0]["error"]
    index_is_consistent(config.db_path)


def test_status_of_unknown_job_and_missing_index_give_actionable_errors(config: Config):
    with pytest.raises(rag_service.RagError) as missing:
        rag_service.sync_status(config)
    assert "sync_kb" in str(missing.value)
    (config.knowledge_dir / "a.md").write_text("# A\n\nhello world\n", encoding="utf-8")
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    with pytest.raises(rag_service.RagError) as unknown:
        rag_service.sync_status(config, "no-such-job")
    assert "unknown job id" in str(unknown.value)


def test_broken_configuration_is_described_by_health_and_refused_by_tools(tmp_path: Path):
    broken = make_config(tmp_path / "does-not-exist", tmp_path / "state")
    report = rag_service.health(broken)
    assert report["status"] == "error"
    assert any("--knowledge-dir" in p for p in report["problems"])
    with pytest.raises(rag_service.RagError) as err:
        rag_service.start_sync(broken)
    assert "knowledge dir" in str(err.value)
    with pytest.raises(rag_service.RagError):
        rag_service.search(broken, "anything")


def test_unreadable_index_file_is_reported_not_crashed(config: Config, knowledge: Path):
    (knowledge / "a.md").write_text("# A\n\nhello\n", encoding="utf-8")
    config.data_dir.mkdir(parents=True)
    config.db_path.write_bytes(b"this is not a database" * 100)
    report = rag_service.health(config)
    assert report["status"] == "error"
    with pytest.raises(rag_service.RagError) as err:
        rag_service.search(config, "hello")
    assert "move the file away" in str(err.value)
    with pytest.raises(sqlite3.DatabaseError):
        connect(config.db_path).execute("SELECT * FROM documents")


def test_unsafe_ocr_settings_are_configuration_errors(tmp_path: Path, knowledge: Path):
    bad = make_config(
        knowledge, tmp_path / "s", ocr_vlm_url="http://10.0.0.5:8080/v1", ocr_langs="eng;ls"
    )
    problems = rag_service.check_config(bad)
    assert any("--ocr-vlm-url" in p and "loopback" in p for p in problems)
    assert any("--ocr-langs" in p for p in problems)
    with pytest.raises(rag_service.RagError):
        rag_service.start_sync(bad)


def test_the_semantic_phase_eta_comes_from_that_phases_own_rate(tmp_path: Path):
    from helpers.store import job_rows
    from helpers.store.index_db import open_index

    conn = open_index(tmp_path / "index.sqlite3")
    now = time.time()
    # Files took 10 s (90 % of the bar); 100 of 1,000 texts embedded in the 100 s since.
    conn.execute(
        "INSERT INTO jobs(id, state, phase, scope, created_at, started_at, updated_at, "
        "phase_started_at, total_files, completed_files, total_bytes, done_bytes, "
        "semantic_done, semantic_total) VALUES ('j', 'running', 'semantic', '', ?, ?, ?, ?, "
        "10, 10, 1000, 1000, 100, 1000)",
        (now - 110, now - 110, now, now - 100),
    )
    row = conn.execute("SELECT * FROM jobs WHERE id = 'j'").fetchone()
    view = job_rows.job_view(conn, row)
    assert view.eta_seconds == pytest.approx(900, rel=0.01)  # the whole-job rate said ~10 s
    assert 90 < view.percent < 92
    conn.close()


def test_the_worker_records_when_each_phase_started(config: Config, knowledge: Path):
    write_corpus(knowledge, 5)
    job = rag_service.start_sync(config)
    wait_until(lambda: rag_service.sync_status(config, job.job_id).state == "succeeded")
    conn = connect(config.db_path)
    row = conn.execute(
        "SELECT started_at, phase_started_at, finished_at FROM jobs WHERE id = ?", (job.job_id,)
    ).fetchone()
    conn.close()
    assert row["started_at"] <= row["phase_started_at"] <= row["finished_at"]
