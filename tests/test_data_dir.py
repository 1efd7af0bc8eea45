"""Default state under ~/.mcp-ragdoc (one sub-folder per knowledge dir), its overrides, the sample
folder only for `demo`, and a clone's old `state/` kept when it indexes the same folder.

Every test here gives its processes a throwaway HOME: none may write to the real home dir."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_config

import rag_service
from helpers import config
from helpers.config import SAMPLE_DIR, add_config_arguments, config_from_args


def parse(*argv: str, demo: bool = False) -> config.Config:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)), demo=demo)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in ("RAGDOC_DATA_DIR", "RAGDOC_KNOWLEDGE_DIR", "RAGDOC_DB"):
        monkeypatch.delenv(name, raising=False)
    return folder


def test_each_knowledge_dir_gets_its_own_folder_under_the_home_state(home: Path, tmp_path: Path):
    one, two = tmp_path / "a" / "docs", tmp_path / "b" / "docs"  # same name, other folders
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    first = parse("--knowledge-dir", str(one))
    second = parse("--knowledge-dir", str(two))
    assert first.data_dir.parent == home / ".mcp-ragdoc"
    assert first.data_dir.name.startswith("docs-")
    assert first.data_dir != second.data_dir
    assert parse("--knowledge-dir", str(one)).data_dir == first.data_dir  # stable
    assert first.db_path == first.data_dir / "index.sqlite3"


def test_the_data_dir_argument_and_variable_override_the_default(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    docs = tmp_path / "docs"
    docs.mkdir()
    monkeypatch.setenv("RAGDOC_DATA_DIR", str(tmp_path / "from-env"))
    assert parse("--knowledge-dir", str(docs)).data_dir == tmp_path / "from-env"
    explicit = parse("--knowledge-dir", str(docs), "--data-dir", str(tmp_path / "arg"))
    assert explicit.data_dir == tmp_path / "arg"


def test_without_a_knowledge_dir_only_demo_runs_and_everything_else_says_what_to_pass(
    home: Path,
):
    server = parse()
    problems = rag_service.check_config(server)
    assert len(problems) == 1 and "--knowledge-dir" in problems[0]
    report = rag_service.health(server)
    assert report["status"] == "error" and "--knowledge-dir" in report["problems"][0]
    assert not (home / ".mcp-ragdoc").exists()  # a misconfigured start creates nothing
    demo = parse(demo=True)
    assert demo.knowledge_dir == SAMPLE_DIR
    assert rag_service.check_config(demo) == []


def test_a_terminal_sync_without_data_dir_writes_under_the_given_home(home: Path, tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text("# Note\n\nquarterly backup schedule\n", encoding="utf-8")
    env = {**os.environ, "HOME": str(home), "RAGDOC_SEMANTIC": "off"}
    env.pop("RAGDOC_DATA_DIR", None)
    command = [sys.executable, str(REPO / "rag_server.py"), "--knowledge-dir", str(docs)]
    sync = subprocess.run([*command, "sync"], capture_output=True, text=True, timeout=120, env=env)
    assert sync.returncode == 0, sync.stderr
    (state,) = (home / ".mcp-ragdoc").iterdir()
    assert (state / "index.sqlite3").is_file()
    found = subprocess.run(
        [*command, "search", "backup", "--json"], capture_output=True, text=True, env=env
    )
    assert json.loads(found.stdout)["hits"][0]["path"] == "note.md"


def test_a_clones_state_folder_is_kept_for_the_folder_it_indexes(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    docs, other = tmp_path / "docs", tmp_path / "other"
    docs.mkdir()
    other.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (docs / name).write_text(f"# {name}\n\nlegacy index text\n", encoding="utf-8")
    (other / "z.md").write_text("# z\n\nsomething else\n", encoding="utf-8")
    legacy = tmp_path / "clone" / "state"
    view = rag_service.wait_for_job(
        make_config(docs, legacy), rag_service.start_sync(make_config(docs, legacy)).job_id
    )
    assert view.state == "succeeded"
    monkeypatch.setattr(config, "LEGACY_DATA_DIR", legacy)
    assert parse("--knowledge-dir", str(docs)).data_dir == legacy
    assert parse("--knowledge-dir", str(other)).data_dir.parent == home / ".mcp-ragdoc"
