"""Excludes: <knowledge-dir>/.ragignore (gitignore syntax) and --exclude / RAGDOC_EXCLUDE leave
files out of the index, remove ones indexed before, report them as excluded, and no sync_kb
argument can bring them back."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_config

import rag_service
from helpers.config import Config, add_config_arguments, config_from_args


def _sync(config: Config, path: str | None = None):  # type: ignore[no-untyped-def]
    view = rag_service.wait_for_job(
        config, rag_service.start_sync(config, path).job_id, timeout_s=120
    )
    assert view.state == "succeeded", view.message
    return view


def _indexed(config: Config) -> list[str]:
    return [i["path"] for i in rag_service.list_documents(config)["items"]]


def _write(root: Path, rel: str, text: str = "# T\n\ngamma words\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_ragignore_and_exclude_flags_leave_files_out_and_report_them(
    knowledge: Path, tmp_path: Path
):
    for rel in ("guide.md", "build/out.md", "notes/draft.md", "notes/keep.md", "a/b/tmp.txt"):
        _write(knowledge, rel)
    (knowledge / ".ragignore").write_text(
        "# generated output\nbuild/\nnotes/*.md\n!notes/keep.md\n**/tmp.txt\n!\n", encoding="utf-8"
    )
    config = make_config(knowledge, tmp_path / "state", excludes=("guide.md",))
    view = _sync(config)
    assert _indexed(config) == ["notes/keep.md"]
    assert view.skipped["excluded"]["count"] == 4  # build/ counts once: it is never entered
    assert set(view.skipped["excluded"]["examples"]) == {
        "build/",
        "notes/draft.md",
        "a/b/tmp.txt",
        "guide.md",
    }
    assert ".ragignore" in view.skipped["hidden"]["examples"]  # the rules file is not indexed
    # the lone '!' is reported, the other rules still apply
    assert [e["path"] for e in view.errors] == [".ragignore"]
    assert "line 6" in view.errors[0]["message"]
    report = rag_service.health(config)
    assert report["excludes"]["ragignore"] is True
    assert report["excludes"]["patterns"][-1] == "guide.md"
    assert any("line 6" in w for w in report["warnings"])


def test_a_new_exclude_removes_indexed_files_on_the_next_sync(config: Config, knowledge: Path):
    _write(knowledge, "keep.md")
    _write(knowledge, "private/diary.md", "# Diary\n\nomega secret plans\n")
    _sync(config)
    assert _indexed(config) == ["keep.md", "private/diary.md"]
    (knowledge / ".ragignore").write_text("private/\n", encoding="utf-8")
    view = _sync(config)
    assert view.counts["removed"] == 1
    assert _indexed(config) == ["keep.md"]
    assert rag_service.search(config, "omega plans", mode="lexical").hits == []
    listed = rag_service.list_documents(config, status="skipped")["items"]
    assert {(i["display_path"], i["skip_reason"]) for i in listed} >= {("private/", "excluded")}


def test_a_sync_kb_path_argument_never_unexcludes(config: Config, knowledge: Path):
    _write(knowledge, "drafts/one.md")
    _write(knowledge, "drafts/deep/two.md")
    _write(knowledge, "ok.md")
    (knowledge / ".ragignore").write_text("drafts/\n", encoding="utf-8")
    _sync(config)
    for path in ("drafts", "drafts/deep"):
        view = _sync(config, path)
        assert view.counts["added"] == 0
        assert view.skipped["excluded"]["examples"] == [path + "/"]
    assert _indexed(config) == ["ok.md"]


def test_exclude_arguments_and_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    monkeypatch.setenv("RAGDOC_EXCLUDE", f"*.tmp, build/{os.pathsep}node_modules/")
    args = parser.parse_args(
        ["--knowledge-dir", str(tmp_path), "--exclude", "*.bak", "--exclude", "old/"]
    )
    config = config_from_args(args)
    assert config.excludes == ("*.tmp", "build/", "node_modules/", "*.bak", "old/")
    assert Config.from_json(config.to_json()) == config  # reaches the worker intact


def test_exclude_given_before_and_after_a_command_keeps_both(tmp_path: Path):
    """argparse copies a command's option values over the namespace: without joining them the
    globs given before the command would be dropped and those files indexed."""
    knowledge, data = tmp_path / "kb", tmp_path / "data"
    for rel in ("keep.md", "before/a.md", "after/b.md"):
        _write(knowledge, rel)
    command = [sys.executable, str(REPO / "rag_server.py"), "--knowledge-dir", str(knowledge)]
    command += ["--data-dir", str(data), "--semantic", "off", "--exclude", "before/", "sync"]
    command += ["--exclude", "after/", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    assert _indexed(make_config(knowledge, data)) == ["keep.md"]
