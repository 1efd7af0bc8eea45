"""Small documents written in groups (helpers.index.group_write): one transaction for several files,
whole or not at all, each file reported only once its rows are committed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import RecordingObserver, write_corpus
from stress.harness import canonical_dump, index_problems, reference_dump

import rag_sync
from helpers.extract.blocks import ExtractContext
from helpers.index import group_write
from helpers.index.document_write import JobCancelled
from helpers.store.fold_sql import register_fold
from helpers.store.index_db import open_index


class _Watcher(RecordingObserver):
    """Records, for every file reported done, whether another connection already sees it and
    how many documents it sees; cancels (raises) at file number `cancel_at` when given."""

    def __init__(self, db_path: Path, cancel_at: int | None = None) -> None:
        super().__init__()
        self.reader = sqlite3.connect(db_path, isolation_level=None, timeout=30)
        register_fold(self.reader)
        self.done: list[tuple[str, str, bool, int]] = []
        self.started = 0
        self.cancel_at = cancel_at

    def on_file_start(self, rel_path: str) -> None:
        self.started += 1

    def check_cancel_now(self) -> None:
        if self.cancel_at is not None and self.started >= self.cancel_at:
            raise JobCancelled()

    def on_file_done(self, rel_path: str, outcome: str, size: int, error: str | None) -> None:
        seen = self.reader.execute("SELECT 1 FROM documents WHERE path = ?", (rel_path,)).fetchone()
        visible = self.reader.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        self.done.append((rel_path, outcome, seen is not None, visible))


def _sync(db: Path, knowledge: Path, observer: RecordingObserver) -> dict[str, int]:
    conn = open_index(db)
    counts: dict[str, int] = {}
    try:
        rag_sync.sync_files(conn, knowledge, "", ExtractContext(), observer, counts)
    finally:
        conn.close()
    return counts


def _paths(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT path FROM documents")}
    finally:
        conn.close()


def test_small_files_are_committed_several_at_a_time_and_reported_once_visible(
    knowledge: Path, tmp_path: Path
):
    write_corpus(knowledge, 120, words_per_file=60)
    db = tmp_path / "index.sqlite3"
    watcher = _Watcher(db)
    counts = _sync(db, knowledge, watcher)
    assert counts["added"] == 120 and len(watcher.done) == 120
    assert all(seen for _path, _outcome, seen, _visible in watcher.done)  # commit, then report
    # Several files become visible per commit: far fewer distinct counts than files.
    assert len({visible for *_rest, visible in watcher.done}) < 120 / 5
    assert index_problems(db) == []
    assert canonical_dump(db) == reference_dump(knowledge, tmp_path / "reference")


def test_a_corrupt_file_in_a_group_is_reported_and_the_rest_of_the_group_lands(
    knowledge: Path, tmp_path: Path
):
    write_corpus(knowledge, 40, words_per_file=40)
    (knowledge / "part3" / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    db = tmp_path / "index.sqlite3"
    watcher = _Watcher(db)
    counts = _sync(db, knowledge, watcher)
    assert counts["added"] == 40 and counts["failed"] == 1
    assert "part3/broken.docx" in watcher.errors
    conn = sqlite3.connect(db)
    status = conn.execute("SELECT status FROM documents WHERE path = 'part3/broken.docx'")
    assert status.fetchone()[0] == "failed"
    conn.close()
    assert len(_paths(db)) == 41
    assert index_problems(db) == []


def test_a_write_failing_inside_a_group_leaves_none_of_the_group(knowledge: Path, tmp_path: Path):
    write_corpus(knowledge, 30, words_per_file=40)
    db = tmp_path / "index.sqlite3"
    conn = open_index(db)
    # A real SQLite error inside the group's transaction, at one file among the others.
    conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON documents WHEN new.path = 'part5/note-00015.md' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    )
    conn.close()
    watcher = _Watcher(db)
    with pytest.raises(sqlite3.IntegrityError, match="refused by the test"):
        _sync(db, knowledge, watcher)
    visible = _paths(db)
    assert "part5/note-00015.md" not in visible
    reported = {path for path, *_rest in watcher.done}
    assert reported == visible  # what was reported is exactly what was committed
    assert len(visible) < 29  # the failed file's group mates went with it
    assert index_problems(db) == []


def test_a_cancel_drops_the_open_group_and_the_next_sync_converges(
    knowledge: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    write_corpus(knowledge, 200, words_per_file=40)
    monkeypatch.setattr(group_write, "GROUP_CHUNKS", 20)  # ~20 one-chunk files per group
    db = tmp_path / "index.sqlite3"
    watcher = _Watcher(db, cancel_at=150)
    with pytest.raises(JobCancelled):
        _sync(db, knowledge, watcher)
    visible = _paths(db)
    assert {path for path, *_rest in watcher.done} == visible
    assert 100 < len(visible) < 150  # the groups before the cancel, not the open one
    assert index_problems(db) == []
    counts = _sync(db, knowledge, RecordingObserver())
    assert counts["added"] == 200 - len(visible)
    assert canonical_dump(db) == reference_dump(knowledge, tmp_path / "reference")


def test_a_resync_of_changed_and_removed_files_gives_the_fresh_index(
    knowledge: Path, tmp_path: Path
):
    paths = write_corpus(knowledge, 150, words_per_file=50)
    db = tmp_path / "index.sqlite3"
    _sync(db, knowledge, RecordingObserver())
    write_corpus(knowledge, 100, words_per_file=70, seed=11)  # the first 100 files change
    for path in paths[100:130]:
        path.unlink()
    counts = _sync(db, knowledge, RecordingObserver())
    assert (counts["updated"], counts["removed"], counts["unchanged"]) == (100, 30, 20)
    assert index_problems(db) == []
    conn = sqlite3.connect(db)
    register_fold(conn)  # the checks read chunks.norm (migration 12)
    for table in ("chunks_fts", "chunks_words"):
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    words = conn.execute("SELECT COUNT(*) FROM chunks_words").fetchone()[0]
    assert words == conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    conn.close()
    assert canonical_dump(db) == reference_dump(knowledge, tmp_path / "reference")


def test_removed_documents_are_deleted_in_bounded_batches(
    knowledge: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    write_corpus(knowledge, 60, words_per_file=40)
    db = tmp_path / "index.sqlite3"
    _sync(db, knowledge, RecordingObserver())
    conn = open_index(db)
    rows = conn.execute("SELECT id, path FROM documents ORDER BY id").fetchall()
    batches: list[int] = []
    monkeypatch.setattr(group_write, "GROUP_CHUNKS", 10)  # a few documents per transaction
    group_write.remove_documents(conn, [r[0] for r in rows[:45]], lambda: None, batches.append)
    conn.close()
    assert sum(batches) == 45 and len(batches) >= 5 and max(batches) <= 10  # rows <= 10 each
    assert _paths(db) == {r[1] for r in rows[45:]}
    assert index_problems(db) == []
