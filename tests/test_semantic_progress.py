"""Semantic-phase progress: texts embedded of the total, their rate and that phase's own ETA, in
the same words in the terminal (`ragdoc status`, the sync bar), the MCP sync_status result and
the console's API, all read from the job row the real JobReporter writes. (The console page
itself is tested in real Chromium in test_web_browser.py.)"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import pytest
from conftest import REPO, server_args
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from progress_fixtures import DONE, ETA_S, IN_PHASE_S, TEXT, TOTAL, semantic_phase_job
from web_fixtures import Http, running_console

import rag_service
import sync_job_worker
from helpers.config import Config
from helpers.store import job_rows, open_index


@dataclass(frozen=True)
class SemanticJob:
    config: Config
    job_id: str


@pytest.fixture
def semantic_job(config: Config) -> Iterator[SemanticJob]:
    with semantic_phase_job(config) as job_id:
        yield SemanticJob(config, job_id)


def test_the_job_view_counts_texts_with_the_phases_rate_and_eta(semantic_job: SemanticJob):
    view = rag_service.sync_status(semantic_job.config, semantic_job.job_id)
    assert view.state == "running" and view.phase == "semantic"
    assert view.progress == {
        "unit": "texts",
        "done": DONE,
        "total": TOTAL,
        "text": TEXT,
        "per_second": pytest.approx(DONE / IN_PHASE_S, rel=0.01),
    }
    assert view.eta_seconds == pytest.approx(ETA_S, rel=0.01)
    line = rag_service.progress_line(view)
    assert f"running/semantic {TEXT} ETA {view.eta_seconds:.0f}s" in line
    assert "files" not in line


def test_terminal_mcp_and_console_show_the_same_progress_and_eta(semantic_job: SemanticJob):
    config, job_id = semantic_job.config, semantic_job.job_id
    status = subprocess.run(
        [sys.executable, *server_args(config), "status", job_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    terminal_eta = status.stdout.split(f"  {TEXT} ETA ", 1)[1].split("s", 1)[0]

    async def mcp_status() -> dict:
        transport = StdioTransport(command=sys.executable, args=server_args(config), cwd=str(REPO))
        async with Client(transport) as client:
            result = await client.call_tool("sync_status", {"job_id": job_id})
            return result.structured_content

    mcp = anyio.run(mcp_status)
    with running_console(config) as server:
        reply = Http(server.port).get(f"/api/sync/status?job_id={job_id}")
    assert reply.status == 200
    console = reply.json()
    assert mcp["progress"] == console["progress"]
    assert mcp["progress"]["text"] == TEXT
    assert mcp["eta_seconds"] == console["eta_seconds"] == pytest.approx(ETA_S, rel=0.01)
    assert float(terminal_eta) == pytest.approx(mcp["eta_seconds"], abs=1)


def test_outside_the_semantic_phase_the_progress_counts_files(config: Config):
    conn = open_index.write_conn(config, "test")
    job_id, _ = job_rows.create_or_get_active(conn, config.lock_path, "")
    reporter = sync_job_worker.JobReporter(config, job_id)
    reporter.on_plan(40, 4000)
    reporter.on_phase("files")
    for i in range(7):
        reporter.on_file_done(f"doc{i}.md", "added", 100, None)
    reporter.flush(conn)
    conn.close()
    view = rag_service.sync_status(config, job_id)
    assert view.progress["text"] == "7/40 files" and view.progress["unit"] == "files"
    assert view.progress["per_second"] is None
    assert "7/40 files" in rag_service.progress_line(view)
