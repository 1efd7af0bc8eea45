"""Shared fixtures: real folders, real configs, real worker processes."""

from __future__ import annotations

import builtins
import functools
import os
import random
import re
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from helpers.config import Config  # noqa: E402

F = TypeVar("F", bound=Callable[..., Any])


def require_tool(available: bool, what: str, fix: str) -> None:
    """Skip a test whose outside tool (OCR engine, LibreOffice, mount rights, a model, a data
    set) is missing; with `CI` set, FAIL it, so a broken install step never silently drops
    that coverage (as the browser test does)."""
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing on CI: {fix}", pytrace=False)
    pytest.skip(f"{what} is missing: {fix}", allow_module_level=True)


def needs_tool(available: Callable[[], object], what: str, fix: str) -> Callable[[F], F]:
    """`require_tool` as a decorator, in place of `pytest.mark.skipif(not available, ...)`;
    `available` is asked when the test runs, not at import."""

    def wrap(test: F) -> F:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            require_tool(bool(available()), what, fix)
            return test(*args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap


def _can_mount() -> bool:
    from stress.harness import can_mount

    return can_mount()


def tesseract_available() -> bool:
    from helpers.ocr import engine as ocr

    return ocr.ocr_status(ocr.OcrConfig()).available


def require_tesseract() -> None:
    require_tool(tesseract_available(), "tesseract-ocr", "apt-get install tesseract-ocr")


# The outside tools the suite needs; tools/install_test_deps.sh installs every one.
SOFFICE_FIX = "apt-get install libreoffice-writer libreoffice-calc libreoffice-impress"
needs_mount = needs_tool(
    _can_mount, "root with CAP_SYS_ADMIN to mount a tmpfs", "run the tests as root in a VM"
)
needs_setpriv = needs_tool(
    lambda: os.geteuid() == 0 and shutil.which("setpriv"),
    "root and setpriv",
    "run the tests as root; apt-get install util-linux",
)
needs_soffice = needs_tool(
    lambda: shutil.which("soffice") or shutil.which("libreoffice"), "LibreOffice", SOFFICE_FIX
)


_EXCEPTION_NAMES = sorted(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
# Our internals in a user's message: an exception type (builtin or any `...Error`), a traceback,
# a parser's object repr.
PYTHON_INTERNALS = re.compile(
    r"\b(?:" + "|".join(_EXCEPTION_NAMES) + r"|\w+Error|BadZipFile)\b|Traceback|object has no "
    r"attribute|lxml\.|<class '"
)


def assert_plain_words(exc: Exception) -> None:
    """A user-facing error: a message and a hint, and no Python exception type name in either."""
    message, hint = getattr(exc, "message", ""), getattr(exc, "hint", "")
    assert message, f"no message: {exc!r}"
    assert hint, f"no hint in {message!r}"
    found = PYTHON_INTERNALS.search(f"{message} {hint}")
    assert found is None, f"internals {found.group(0)!r} in {message!r} (hint: {hint!r})"


WORDS = [
    "invoice",
    "payment",
    "contract",
    "server",
    "search",
    "index",
    "document",
    "report",
    "budget",
    "meeting",
    "quarter",
    "revenue",
    "customer",
    "support",
    "agreement",
    "notice",
    "termination",
    "upgrade",
]


def _home_state_entries() -> set[str]:
    home = Path.home() / ".mcp-ragdoc"
    return {p.name for p in home.iterdir()} if home.is_dir() else set()


@pytest.fixture(scope="session", autouse=True)
def no_state_in_the_real_home() -> object:
    """The default data dir is ~/.mcp-ragdoc: a test (or a server it starts) that forgets to
    pass --data-dir or a throwaway HOME would write there; this fails the run instead."""
    before = _home_state_entries()
    yield
    added = _home_state_entries() - before
    assert not added, f"tests wrote state into the real home dir: {sorted(added)}"


def downgraded_copy(
    db_path: Path, target: Path, undo: Callable[[sqlite3.Connection], None]
) -> Path:
    """A copy of the index at `db_path` in the new folder `target`, rewritten by `undo` (e.g.
    undo_migration_9) into what an older schema left: the migration tests start from it."""
    from helpers.store.fold_sql import register_fold

    target.mkdir()
    db = target / "index.sqlite3"
    with closing(sqlite3.connect(db_path)) as source, closing(sqlite3.connect(db)) as out:
        register_fold(out)  # chunks.norm and the triggers over it (migration 12)
        source.backup(out)
        undo(out)
        out.commit()
    return db


def unit_vocab(db: Path) -> dict[str, tuple[int, int]]:
    """Term -> (units holding it, occurrences) as units_fts's index holds them."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'units_fts', 'row')")
        return {row[0]: (row[1], row[2]) for row in conn.execute("SELECT term, doc, cnt FROM v")}


def rebuilt_unit_vocab(db: Path, tmp: Path) -> dict[str, tuple[int, int]]:
    """The unit vocabulary a rebuild from the stored sections gives (on a copy in `tmp`): a
    contentless table kept right by every delete equals it."""
    from helpers.store import index_db, units
    from helpers.store.connection import write_transaction

    copy = tmp / f"rebuilt-{len(list(tmp.iterdir()))}.sqlite3"
    with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(copy)) as out:
        source.backup(out)
    with closing(index_db.connect(copy)) as conn, write_transaction(conn):
        units.rebuild_units(conn)
    return unit_vocab(copy)


def undo_migration_14(conn: sqlite3.Connection) -> None:
    """An index as schema 13 left it: no line languages, units of the tokenizer version before
    (their rows of units_fts stay as written: the upgrade rebuilds the table whole)."""
    conn.execute("ALTER TABLE units DROP COLUMN lang_runs")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'unit_tokens_version'")
    conn.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")


def undo_migration_13(conn: sqlite3.Connection) -> None:
    """An index as schema 12 left it: no stored first-pass codes."""
    conn.execute("DROP TABLE IF EXISTS semantic_codes")
    conn.execute("DROP TABLE IF EXISTS semantic_code_sets")
    conn.execute("UPDATE meta SET value = '12' WHERE key = 'schema_version'")


def undo_migration_12(conn: sqlite3.Connection) -> None:
    """An index as schema 11 left it: chunks.norm_stored holds fold(text) wherever lower(text)
    does not give it, under migration 8's generated column and triggers; doc_names_fts follows
    doc_names inserts through a trigger (and migration 13 undone)."""
    from helpers.store import index_db, migrations
    from helpers.store.fold_sql import register_fold

    undo_migration_13(conn)
    register_fold(conn)
    conn.execute("UPDATE chunks SET norm_stored = norm WHERE norm_stored = char(1)")
    for trigger in ("fts_ad", "fts_au", "words_ad", "words_au", "ocr_ad", "ocr_au"):
        conn.execute(f"DROP TRIGGER chunks_{trigger}")
    conn.execute("ALTER TABLE chunks DROP COLUMN norm")
    (schema_8,) = [m for m in migrations.MIGRATIONS if m.version == 8]
    for statement in index_db._split_statements(schema_8.sql):
        if statement.startswith(("CREATE TRIGGER IF NOT EXISTS chunks_", "ALTER TABLE chunks ADD")):
            conn.execute(statement)
    (schema_2,) = [m for m in migrations.MIGRATIONS if m.version == 2]
    for statement in index_db._split_statements(schema_2.sql):
        if statement.startswith("CREATE TRIGGER IF NOT EXISTS doc_names_ai"):
            conn.execute(statement)
    conn.execute("DELETE FROM meta WHERE key = 'fold_chunks_next'")
    conn.execute("UPDATE meta SET value = '11' WHERE key = 'schema_version'")


def undo_migration_11(conn: sqlite3.Connection) -> None:
    """An index as schema 10 left it: no units, no unit BM25 table (and migration 12 undone)."""
    undo_migration_12(conn)
    conn.execute("DROP TABLE IF EXISTS units_vocab")
    conn.execute("DROP TABLE IF EXISTS units_fts")
    conn.execute("DROP TABLE IF EXISTS units")
    conn.execute("DELETE FROM meta WHERE key = 'unit_tokens_version'")
    conn.execute("UPDATE meta SET value = '10' WHERE key = 'schema_version'")


def undo_migration_9(conn: sqlite3.Connection) -> None:
    """An index as schema 8 left it: sections.text plain, every chunk's location the whole JSON
    object, chunks.text_hash the hex sha256 of its text."""
    import hashlib
    import json

    from helpers.store.codec import child_location, section_text

    undo_migration_12(conn)  # units (11) stay: a read-only schema-8 copy answers as it is
    sections = conn.execute("SELECT id, text, location FROM sections").fetchall()
    conn.executemany(
        "UPDATE sections SET text = ? WHERE id = ?", [(section_text(t), i) for i, t, _ in sections]
    )
    where = {i: loc for i, _, loc in sections}
    conn.executemany(
        "UPDATE chunks SET location = ?, text_hash = ? WHERE id = ?",
        [
            (
                json.dumps(child_location(loc, where[sid]).to_dict()),
                hashlib.sha256(text.encode()).hexdigest(),
                cid,
            )
            for cid, sid, text, loc in conn.execute(
                "SELECT id, section_id, text, location FROM chunks"
            ).fetchall()
        ],
    )
    conn.execute("DELETE FROM meta WHERE key IN ('compact_sections_next', 'compact_chunks_next')")
    conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")


def undo_migration_8(conn: sqlite3.Connection) -> None:
    """An index as schema 7 left it: chunks.norm a stored copy of fold(text), chunks_fts a
    plain trigram table over the folded title, path and chunk text, one copy of each per chunk,
    written by the sync (no triggers)."""
    from helpers.store import index_db, migrations
    from helpers.text.normalize import fold

    undo_migration_9(conn)

    conn.create_function("fold", 1, fold, deterministic=True)
    for trigger in ("fts_ad", "fts_au", "words_ad", "words_au", "ocr_ad", "ocr_au"):
        conn.execute(f"DROP TRIGGER chunks_{trigger}")
    conn.execute("DROP TABLE chunks_fts")
    conn.execute("UPDATE chunks SET norm_stored = norm WHERE norm_stored = ''")
    conn.execute("ALTER TABLE chunks DROP COLUMN norm")
    conn.execute("ALTER TABLE chunks RENAME COLUMN norm_stored TO norm")
    for statement in index_db._split_statements(migrations.MIGRATIONS[1].sql):
        if statement.startswith("CREATE TRIGGER IF NOT EXISTS chunks_"):
            conn.execute(statement)
    conn.execute(
        "CREATE VIRTUAL TABLE chunks_fts USING fts5("
        "title, path, body, tokenize = 'trigram case_sensitive 0')"
    )
    conn.execute(
        "INSERT INTO chunks_fts(rowid, title, path, body) SELECT c.id, fold(d.title), "
        "fold(d.path), c.norm FROM chunks c JOIN documents d ON d.id = c.document_id"
    )
    conn.execute("DELETE FROM meta WHERE key = 'trigram_backfill_next'")
    conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")


def undo_migration_7(conn: sqlite3.Connection) -> None:
    """An index as schema 6 left it (no skipped_files, no jobs.skipped_detail)."""
    undo_migration_8(conn)
    conn.execute("DROP TABLE skipped_files")
    conn.execute("ALTER TABLE jobs DROP COLUMN skipped_detail")
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")


def undo_migration_6(conn: sqlite3.Connection) -> None:
    """An index as schema 5 left it (no redaction count or secret-detector version, nor what
    later migrations added)."""
    undo_migration_7(conn)
    conn.execute("ALTER TABLE documents DROP COLUMN redactions")
    conn.execute("ALTER TABLE documents DROP COLUMN detector_version")
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")


def undo_migration_5(conn: sqlite3.Connection) -> None:
    """An index as schema 4 left it (no sections.hub, nor what later migrations added)."""
    undo_migration_6(conn)
    conn.execute("ALTER TABLE sections DROP COLUMN hub")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")


def undo_migration_4(conn: sqlite3.Connection) -> None:
    """An index as schema 3 left it (no bigram index, no jobs.file_progress)."""
    undo_migration_5(conn)
    conn.execute("DROP TRIGGER chunks_cjk_ad")
    conn.execute("DROP TABLE chunks_cjk_vocab")
    conn.execute("DROP TABLE chunks_cjk")
    conn.execute("ALTER TABLE jobs DROP COLUMN file_progress")
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")


def server_args(config: Config) -> list[str]:
    """`rag_server.py` with this config's folders, lexical only: the MCP server, or with a
    command after it the terminal commands."""
    return [
        str(REPO / "rag_server.py"),
        "--knowledge-dir",
        str(config.knowledge_dir),
        "--data-dir",
        str(config.data_dir),
        "--semantic",
        "off",
    ]


def synced_written(tmp_path: Path, write: Callable[[Path], None]) -> Config:
    """A folder written by `write` under tmp_path/docs, synced lexically into tmp_path/state."""
    import rag_service

    docs = tmp_path / "docs"
    write(docs)
    config = make_config(docs, tmp_path / "state")
    assert rag_service.sync_kb_blocking(config).state == "succeeded"
    return config


def make_config(knowledge: Path, data: Path, **overrides: object) -> Config:
    base = {"semantic": False}
    base.update(overrides)
    return Config(
        knowledge_dir=knowledge.resolve(),
        data_dir=data.resolve(),
        db_path=(data / "index.sqlite3").resolve(),
        **base,  # type: ignore[arg-type]
    )


@pytest.fixture
def knowledge(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    return root


@pytest.fixture
def config(tmp_path: Path, knowledge: Path) -> Config:
    return make_config(knowledge, tmp_path / "state")


def synced_folder(root: Path, files: dict[str, str]) -> Config:
    """A knowledge dir under `root` holding `files` (relative path -> text), synced lexically."""
    knowledge = root / "docs"
    for rel, text in files.items():
        path = knowledge / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    config = make_config(knowledge, root / "state")
    import rag_service

    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    return config


def write_corpus(root: Path, count: int, words_per_file: int = 300, seed: int = 7) -> list[Path]:
    """`count` Markdown files of random business words (a folder that takes a while to sync)."""
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        path = root / f"part{i % 10}" / f"note-{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = " ".join(rng.choice(WORDS) for _ in range(words_per_file))
        path.write_text(f"# Note {i}\n\n{body}\n\nmarker{i:05d}\n", encoding="utf-8")
        paths.append(path)
    return paths


class RecordingObserver:
    """A rag_sync observer that only keeps each file's error; a test overrides the hook it needs
    (e.g. on_file_start to change the folder just before a file is read)."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}

    def check_cancel(self) -> None:
        return None

    def on_phase(self, phase: str) -> None:
        return None

    def on_plan(self, total_files: int, total_bytes: int) -> None:
        return None

    def on_file_start(self, rel_path: str) -> None:
        return None

    def on_file_done(self, rel_path: str, outcome: str, size: int, error: str | None) -> None:
        return None

    def on_error(self, rel_path: str, message: str) -> None:
        self.errors[rel_path] = message


# Files of write_corpus synced to measure this machine (files_for_seconds).
PROBE_FILES = 400


def files_for_seconds(tmp_path: Path, seconds: float) -> int:
    """How many corpus files this machine syncs in `seconds`, measured in this run: an empty
    sync (worker start) and a PROBE_FILES one; their difference is the per-file cost."""
    import rag_service  # only for the tests that size a corpus

    cost = []
    for count in (0, PROBE_FILES):
        docs = tmp_path / f"probe-{count}"
        docs.mkdir()
        write_corpus(docs, count)
        probe = make_config(docs, tmp_path / f"probe-state-{count}")
        started = time.monotonic()
        view = rag_service.wait_for_job(probe, rag_service.start_sync(probe).job_id, timeout_s=120)
        assert view.state == "succeeded", view.to_dict()
        cost.append(time.monotonic() - started)
    per_file = max(cost[1] - cost[0], 1e-3) / PROBE_FILES
    return int(seconds / per_file)
