"""Nothing skipped silently: every file a sync sees and does not index is counted by reason in
the job, listed by rag_list(status="skipped") and summed in rag_health, without one job error
per file."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import make_config

import rag_service
import rag_sync
from helpers.config import Config
from helpers.skips import EXAMPLES_PER_REASON, FileSkipped, SkipReason
from helpers.store.index_db import open_index
from rag_sync import build_extract_context

UNSUPPORTED_FILES = 1200  # enough to show errors are not flooded, small enough for CI


def _sync(config: Config, path: str | None = None):  # type: ignore[no-untyped-def]
    view = rag_service.wait_for_job(
        config, rag_service.start_sync(config, path).job_id, timeout_s=120
    )
    assert view.state == "succeeded", view.message
    return view


def _mixed_folder(root: Path) -> None:
    (root / "guide.md").write_text("# Guide\n\nalpha words here\n", encoding="utf-8")
    logs = root / "logs"
    logs.mkdir()
    for i in range(UNSUPPORTED_FILES):
        (logs / f"trace-{i:05d}.bin").write_bytes(b"\x00\x01" + bytes(10))
    for i in range(7):
        (root / f"figure-{i}.eps").write_text("%!PS\n")
    (root / ".cache").mkdir()
    (root / ".cache" / "x.md").write_text("# hidden\n")
    (root / ".notes.md").write_text("# hidden\n")
    (root / "credentials.md").write_text("key material\n")
    os.symlink(root / "guide.md", root / "link.md")
    os.mkfifo(root / "pipe.txt")
    (root / "huge.txt").write_bytes(b"a" * (2 * 1024 * 1024))


def test_every_skipped_file_is_counted_by_reason_without_flooding_errors(
    knowledge: Path, tmp_path: Path
):
    _mixed_folder(knowledge)
    config = make_config(knowledge, tmp_path / "state", max_file_bytes=1024 * 1024)
    view = _sync(config)
    assert view.counts["added"] == 1
    counts = {reason: item["count"] for reason, item in view.skipped.items()}
    assert counts == {
        "unsupported": UNSUPPORTED_FILES + 7,
        "hidden": 2,  # the .cache folder counts once, its files are never walked
        "sensitive": 1,
        "symlink": 1,
        "special": 1,
        "too_large": 1,
    }
    assert view.counts["skipped"] == sum(counts.values())
    assert view.errors == [] and view.error_count == 0
    assert all(len(item["examples"]) <= EXAMPLES_PER_REASON for item in view.skipped.values())
    assert view.skipped["hidden"]["examples"] == [".cache/", ".notes.md"]
    assert view.to_dict()["skipped"]["total"] == view.counts["skipped"]
    # rag_list pages through every one of them, with the reason
    page = rag_service.list_documents(config, status="skipped", limit=1000)
    assert page["total"] == view.counts["skipped"] and page["next_offset"] == 1000
    rest = rag_service.list_documents(config, status="skipped", limit=1000, offset=1000)
    items = page["items"] + rest["items"]
    assert rest["next_offset"] is None and len(items) == page["total"]
    reasons = {i["path"]: i["skip_reason"] for i in items}
    assert reasons["logs/trace-00042.bin"] == "unsupported"
    assert reasons["pipe.txt"] == "special" and reasons["huge.txt"] == "too_large"
    only_logs = rag_service.list_documents(config, status="skipped", path_prefix="logs")
    assert only_logs["total"] == UNSUPPORTED_FILES
    # rag_health: the most common unsupported extensions
    report = rag_service.health(config)
    assert report["skipped"]["top_unsupported_extensions"][:2] == [
        {"extension": ".bin", "count": UNSUPPORTED_FILES},
        {"extension": ".eps", "count": 7},
    ]
    assert report["skipped"]["by_reason"] == counts


def test_a_scoped_sync_refreshes_only_its_folder_and_a_fixed_file_leaves_the_list(
    config: Config, knowledge: Path
):
    (knowledge / "a").mkdir()
    (knowledge / "b").mkdir()
    (knowledge / "a" / "one.xyz").write_text("x")
    (knowledge / "b" / "two.xyz").write_text("x")
    _sync(config)
    (knowledge / "a" / "one.xyz").rename(knowledge / "a" / "one.txt")
    view = _sync(config, "a")
    assert view.skipped == {}
    listed = rag_service.list_documents(config, status="skipped")["items"]
    assert [i["path"] for i in listed] == ["b/two.xyz"]  # outside the scope: kept
    assert [i["path"] for i in rag_service.list_documents(config)["items"]] == ["a/one.txt"]


def test_a_file_refused_after_reading_leaves_the_index_and_is_reported(
    config: Config, knowledge: Path, monkeypatch: pytest.MonkeyPatch
):
    """The FileSkipped API (for detectors that decide on content, e.g. secret material)."""
    (knowledge / "keys.md").write_text("# Keys\n\nbeta words\n", encoding="utf-8")
    (knowledge / "fine.md").write_text("# Fine\n\nbeta words\n", encoding="utf-8")
    _sync(config)
    real = rag_sync.extract_document

    def refuse_keys(entry, *args, **kwargs):  # type: ignore[no-untyped-def]
        if entry.rel_path == "keys.md":
            raise FileSkipped(SkipReason.SECRET, "mostly private key material")
        return real(entry, *args, **kwargs)

    monkeypatch.setattr(rag_sync, "extract_document", refuse_keys)
    (knowledge / "keys.md").write_text("# Keys\n\nbeta words changed\n", encoding="utf-8")

    class Observer:
        job_id = None
        skipped: dict[str, dict[str, object]] = {}

        def check_cancel(self) -> None: ...
        def on_phase(self, phase: str) -> None: ...
        def on_plan(self, total_files: int, total_bytes: int) -> None: ...
        def on_file_start(self, rel_path: str) -> None: ...
        def on_file_done(self, *args: object) -> None: ...
        def on_error(self, rel_path: str, message: str) -> None: ...

        def on_skipped(self, breakdown: dict[str, dict[str, object]]) -> None:
            Observer.skipped = breakdown

    counts: dict[str, int] = {}
    with closing(open_index(config.db_path)) as conn:
        rag_sync.sync_files(
            conn, config.knowledge_dir, "", build_extract_context(config), Observer(), counts
        )
    assert counts["skipped"] == 1 and counts["failed"] == 0
    assert Observer.skipped["secret"]["examples"] == ["keys.md"]
    assert [i["path"] for i in rag_service.list_documents(config)["items"]] == ["fine.md"]
    listed = rag_service.list_documents(config, status="skipped")["items"]
    assert [(i["path"], i["skip_reason"], i["error"]) for i in listed] == [
        ("keys.md", "secret", "mostly private key material")
    ]
    with closing(sqlite3.connect(config.db_path)) as conn:
        assert (
            conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE norm LIKE '%changed%'").fetchone()[
                0
            ]
            == 0
        )
