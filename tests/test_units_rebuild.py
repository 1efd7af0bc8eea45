"""A units rebuild (migration 14, a tokenizer change) runs batch by batch: a short write lock each,
a cursor in meta, the units channel off until it ends, syncs during it kept consistent, and a
worker killed with SIGKILL in the middle resumed to what a rebuild in one go writes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest
from conftest import rebuilt_unit_vocab, synced_written, unit_vocab

import rag_service
from helpers.config import Config
from helpers.lexical import units as lexical_units
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.store import backfill, index_db, units
from helpers.store.connection import write_transaction
from helpers.store.open_index import read_conn
from helpers.store.read_only import connect_read_only

REPO = Path(__file__).resolve().parents[1]
TOPICS = (
    "copper",
    "silver",
    "tin",
    "zinc",
    "lead",
    "iron",
    "nickel",
    "cobalt",
    "gold",
    "zirconium",
)
QUERY = "smelting furnace"


def _write(docs: Path) -> None:
    docs.mkdir(parents=True)
    for i, metal in enumerate(TOPICS):
        (docs / f"{metal}.md").write_text(
            f"# Working {metal}\n\nA smelting furnace for {metal} runs at its own heat; "
            f"the ore is crushed, washed and roasted {i + 1} times before it goes in.\n",
            "utf-8",
        )


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def _unit_rows(db: Path) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(
            "SELECT d.path, u.first_ordinal, u.last_ordinal, u.page, u.lang, u.lang_runs "
            "FROM units u JOIN documents d ON d.id = u.document_id ORDER BY 1, 2"
        ).fetchall()


def _ranked(config: Config) -> list[tuple[int, int, float]]:
    with closing(read_conn(config)) as conn:
        return lexical_units.ranked_units(SearchContext(conn, Query.parse(QUERY), Filters()))


def _stale_tokenizer(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE meta SET value = '0' WHERE key = ?", (units.UNIT_VERSION_KEY,))
        conn.commit()


def _pending(db: Path) -> str | None:
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT value FROM meta WHERE key = ?", (units.UNITS_REBUILD_KEY,)
        ).fetchone()
    return row[0] if row else None


class _Killed(BaseException):
    pass


def test_a_rebuild_runs_in_batches_with_the_channel_off_until_it_ends(
    synced: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, vocab, ranked = _unit_rows(synced.db_path), unit_vocab(synced.db_path), _ranked(synced)
    assert len(ranked) == len(TOPICS)
    _stale_tokenizer(synced.db_path)
    monkeypatch.setattr(units, "UNITS_REBUILD_DOCUMENTS", 3)
    monkeypatch.setattr(units, "UNITS_REBUILD_BATCH_S", 60.0)  # batches by count here

    def killed(_: float) -> None:
        raise _Killed

    monkeypatch.setattr(backfill.time, "sleep", killed)
    with pytest.raises(_Killed):  # killed after the first committed batch
        index_db.open_index(synced.db_path)
    assert _pending(synced.db_path) is not None
    assert len(_unit_rows(synced.db_path)) == 3
    with closing(connect_read_only(synced.db_path)) as conn:  # a reader that heals nothing
        ctx = SearchContext(conn, Query.parse(QUERY), Filters())
        assert lexical_units.ranked_units(ctx) == []  # three documents' units would rank three

    # A sync after the killed rebuild finishes it before it reads files, then writes the
    # changed documents' units as usual (a sync between a batch's read and its write:
    # test_a_batch_read_before_a_sync_leaves_what_the_sync_wrote).
    (synced.knowledge_dir / "zinc.md").write_text(
        "# Zinc\n\nA smelting furnace for zinc, rewritten.\n", "utf-8"
    )
    (synced.knowledge_dir / "tin.md").unlink()
    monkeypatch.setattr(backfill.time, "sleep", lambda _: None)
    monkeypatch.setattr(backfill, "OPEN_BACKFILL_BUDGET_S", 0.0)  # the worker finishes it
    assert rag_service.sync_kb_blocking(synced).state == "succeeded"
    assert _pending(synced.db_path) is None
    assert unit_vocab(synced.db_path) == rebuilt_unit_vocab(synced.db_path, tmp_path)
    assert {row[0] for row in _unit_rows(synced.db_path)} == {
        f"{metal}.md" for metal in TOPICS if metal != "tin"
    }
    assert len(_ranked(synced)) == len(TOPICS) - 1
    assert rows != _unit_rows(synced.db_path) and vocab != unit_vocab(synced.db_path)


def test_a_search_advances_a_pending_rebuild_when_no_sync_runs(
    synced: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stale_tokenizer(synced.db_path)
    monkeypatch.setattr(units, "UNITS_REBUILD_DOCUMENTS", 3)
    monkeypatch.setattr(units, "UNITS_REBUILD_BATCH_S", 60.0)

    def killed(_: float) -> None:
        raise _Killed

    monkeypatch.setattr(backfill.time, "sleep", killed)
    with pytest.raises(_Killed):
        index_db.open_index(synced.db_path)
    assert _pending(synced.db_path) is not None
    monkeypatch.setattr(backfill.time, "sleep", lambda _: None)
    result = rag_service.search(synced, QUERY, mode="lexical")  # one open budget: all of it
    assert _pending(synced.db_path) is None
    assert len({hit.path for hit in result.hits}) > 1
    assert len(_ranked(synced)) == len(TOPICS)


def test_a_batch_read_before_a_sync_leaves_what_the_sync_wrote(
    synced: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's units are prepared without the write lock; a sync may write in between: the
    document it rewrote keeps the sync's units, one it is rewriting (staging) gets none."""
    monkeypatch.setattr(units, "UNITS_REBUILD_BATCH_S", 60.0)
    with closing(index_db.connect(synced.db_path)) as conn:
        ids = dict(conn.execute("SELECT path, id FROM documents").fetchall())
        with write_transaction(conn):
            units.start_rebuild(conn)
        batch = units.prepare_rebuild(conn, 0)
        assert batch is not None and len(batch.documents) == len(TOPICS)
        with write_transaction(conn):  # what a sync does meanwhile
            fresh = units.prepare_units("Zinc", [("A zinc furnace, rewritten.", ((), None))])
            units.write_units(conn, ids["zinc.md"], fresh)
            conn.execute("UPDATE documents SET status = 'staging' WHERE id = ?", (ids["tin.md"],))
        with write_transaction(conn):
            assert units.write_rebuild(conn, batch) == (max(ids.values()) + 1, len(TOPICS))
        per_doc = dict(
            conn.execute(
                "SELECT d.path, COUNT(u.id) FROM documents d "
                "LEFT JOIN units u ON u.document_id = d.id GROUP BY d.id"
            ).fetchall()
        )
        rewritten = fresh[0].tokens.split()[-1]  # the stem of `rewritten`, in its language
        zinc = conn.execute(
            "SELECT COUNT(*) FROM units_fts WHERE units_fts MATCH ?", (f'"{rewritten}"',)
        ).fetchone()[0]
    assert per_doc == {f"{metal}.md": 0 if metal == "tin" else 1 for metal in TOPICS}
    assert zinc == 1  # the sync's unit, not the batch's older text


_SLOW_REBUILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from helpers.store import backfill, index_db, units
    units.UNITS_REBUILD_DOCUMENTS = 2
    units.UNITS_REBUILD_BATCH_S = 60.0
    backfill.BACKFILL_PAUSE_S = 30.0  # a batch, then a long pause to be killed in
    conn = index_db.connect(Path(sys.argv[1]))
    index_db.migrate(conn, full_backfill=True)
    """
)


def test_a_rebuild_killed_with_sigkill_resumes_to_a_rebuild_in_one_go(
    synced: Config, tmp_path: Path
) -> None:
    expected_rows = _unit_rows(synced.db_path)
    expected_vocab = rebuilt_unit_vocab(synced.db_path, tmp_path)
    _stale_tokenizer(synced.db_path)
    child = subprocess.Popen(
        [sys.executable, "-c", _SLOW_REBUILD, str(synced.db_path), str(REPO)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while _pending(synced.db_path) in (None, "0") and time.monotonic() < deadline:
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            time.sleep(0.05)
        assert _pending(synced.db_path) not in (None, "0")  # a batch is in, the rest is not
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert len(_unit_rows(synced.db_path)) == 2
    with closing(index_db.open_index(synced.db_path)) as conn:
        index_db.run_backfills(conn)
        conn.execute("INSERT INTO units_fts(units_fts) VALUES ('integrity-check')")
    assert _pending(synced.db_path) is None
    assert _unit_rows(synced.db_path) == expected_rows
    assert unit_vocab(synced.db_path) == expected_vocab
    assert len(_ranked(synced)) == len(TOPICS)
