"""The terminal commands: same index, results on stdout, progress and errors on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO, server_args

import rag_service
from helpers.config import Config
from helpers.store import job_rows, open_index


def cli(config: Config, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            *server_args(config),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_sync_search_status_health_and_jobs_from_the_terminal(config: Config, knowledge: Path):
    (knowledge / "manual.md").write_text(
        "# Manual\n\n## Backup\nRun the nightly backup before upgrading.\n", encoding="utf-8"
    )
    (knowledge / "ไทย.txt").write_text("การประชุมประจำเดือน กร\n", encoding="utf-8")
    sync = cli(config, "sync")
    assert sync.returncode == 0, sync.stderr
    assert "succeeded" in sync.stdout
    assert "%" in sync.stderr  # the progress bar goes to stderr
    found = cli(config, "search", "nightly backup", "--json")
    assert found.returncode == 0
    result = json.loads(found.stdout)
    assert result["hits"][0]["path"] == "manual.md"
    assert result["hits"][0]["location_label"].startswith("Manual > Backup")
    short = json.loads(cli(config, "search", "กร", "--json").stdout)
    assert short["hits"] and short["hits"][0]["path"] == "ไทย.txt"
    text = cli(config, "search", "backup", "--explain")
    assert "manual.md" in text.stdout and "channels:" in text.stdout
    status = json.loads(cli(config, "status", "--json").stdout)
    assert status["state"] == "succeeded" and status["counts"]["added"] == 2
    health = json.loads(cli(config, "health", "--json").stdout)
    assert health["documents"]["indexed"] == 2 and health["schema_version"] >= 1
    jobs = cli(config, "jobs")
    assert status["job_id"] in jobs.stdout


def test_errors_go_to_stderr_with_a_nonzero_exit(config: Config):
    result = cli(config, "search", "anything")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "sync" in result.stderr


def test_detached_sync_returns_before_the_worker_finishes(config: Config, knowledge: Path):
    (knowledge / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    started = json.loads(cli(config, "sync", "--detach", "--json").stdout)
    assert started["state"] in ("queued", "running", "succeeded")
    final = cli(config, "status", started["job_id"], "--json")
    assert json.loads(final.stdout)["job_id"] == started["job_id"]


def test_demo_runs_on_the_default_sample_folder(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, str(REPO / "rag_server.py"), "--data-dir", str(tmp_path), "demo"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "contracts/service-agreement.md" in result.stdout
    assert "reports/sales-report-2026.txt" in result.stdout
    assert "th/meeting-notes.md" in result.stdout


def test_the_progress_line_counts_embedded_texts_during_the_semantic_phase(config: Config):
    """The seed's bar said `0/0 files` for the whole semantic phase (most of a first sync)."""
    from rag_service import progress_line
    from sync_job_worker import JobReporter

    conn = open_index.write_conn(config, "sync_kb")
    job_id, _ = job_rows.create_or_get_active(conn, config.lock_path, "")
    reporter = JobReporter(config, job_id)
    reporter.on_plan(0, 0)
    reporter.on_phase("semantic")
    reporter.on_semantic(1200, 9000)
    reporter.flush(conn)
    line = progress_line(rag_service.sync_status(config, job_id))
    conn.close()
    assert "semantic 1200/9000 texts embedded" in line
    assert "files" not in line
