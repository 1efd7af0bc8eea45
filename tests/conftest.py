"""Shared fixtures: real folders, real configs, real worker processes."""

from __future__ import annotations

import random
import sqlite3
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from rag_config import Config  # noqa: E402

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


def undo_migration_7(conn: sqlite3.Connection) -> None:
    """An index as schema 6 left it (no skipped_files, no jobs.skipped_detail)."""
    conn.execute("DROP TABLE skipped_files")
    conn.execute("ALTER TABLE jobs DROP COLUMN skipped_detail")
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")


def undo_migration_4(conn: sqlite3.Connection) -> None:
    """An index as schema 3 left it (no bigram index, no jobs.file_progress; nor any later
    migration's tables and columns)."""
    undo_migration_7(conn)
    conn.execute("DROP TRIGGER chunks_cjk_ad")
    conn.execute("DROP TABLE chunks_cjk_vocab")
    conn.execute("DROP TABLE chunks_cjk")
    conn.execute("ALTER TABLE jobs DROP COLUMN file_progress")
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")


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
