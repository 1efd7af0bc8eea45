"""Where Linux-only calls are missing (macOS: no prctl, no enforced RLIMIT_AS, no /proc) the
sandbox, the worker, sync and search still work, with the limits the platform offers.

RAGDOC_SIMULATE_MISSING makes real processes (this one, the worker, the extraction child) act as
if those calls were absent; the test side still reads /proc to check what really happened."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import docx
import pytest
from conftest import REPO
from format_fixtures import make_docx, write_text_pdf
from stress.harness import (
    STUCK_SANDBOX_WORKER,
    is_alive,
    kill_hard,
    sandbox_children,
    wait_until,
)

import rag_service
from helpers import platform_caps
from helpers.config import Config
from helpers.extract.blocks import ExtractionError, ExtractLimits
from helpers.extract.sandbox import SandboxedExtractor

MISSING = "prctl,rlimit_as,proc"
RSS_CAP_BYTES = 128 * 1024 * 1024  # a fresh child is ~45 MB resident; the big DOCX needs ~200 MB
ORPHAN_EXIT_WAIT_S = 15  # the orphaned child polls once a second; generous on a busy machine


@pytest.fixture
def no_linux_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(platform_caps.SIMULATE_ENV, MISSING)


def no_cancel() -> None:
    return None


def test_the_simulation_switch_turns_each_feature_off(no_linux_calls: None):
    assert not platform_caps.has_prctl()
    assert not platform_caps.has_rlimit_as()
    assert not platform_caps.has_proc()
    assert platform_caps.rss_bytes(os.getpid()) > 10 * 2**20  # through `ps`
    assert platform_caps.is_zombie(os.getpid()) is False
    assert len(platform_caps.missing_warnings()) == 3


def big_docx(path: Path, paragraphs: int) -> Path:
    """A DOCX whose document.xml holds `paragraphs` short paragraphs: python-docx keeps the whole
    lxml tree in memory (300,000 of them peak at ~200 MB resident), yet it is no zip bomb."""
    base = path.with_name("base.docx")
    document = docx.Document()
    document.add_paragraph("start")
    document.save(base)
    rng = random.Random(1)
    body = "".join(
        f"<w:p><w:r><w:t>item {i} {rng.randrange(10**9)} alpha</w:t></w:r></w:p>"
        for i in range(paragraphs)
    )
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "word/document.xml":
                text = data.decode()
                start = text.index("<w:body>") + len("<w:body>")
                data = (text[:start] + body + text[start:]).encode()
            dst.writestr(item, data)
    return path


def test_without_a_kernel_cap_the_parent_stops_an_allocation_storm(
    no_linux_calls: None, tmp_path: Path
):
    small = write_text_pdf(tmp_path / "small.pdf", [["a page of text"]])
    big = big_docx(tmp_path / "big.docx", 300_000)
    sandbox = SandboxedExtractor(ExtractLimits(), None, memory_bytes=RSS_CAP_BYTES)
    try:
        assert list(sandbox.extract(small, no_cancel))
        assert sandbox._proc is not None
        limits = Path(f"/proc/{sandbox._proc.pid}/limits").read_text()
        address_space = next(line for line in limits.splitlines() if "address space" in line)
        assert "unlimited" in address_space  # really no kernel cap: the watcher must act
        with pytest.raises(ExtractionError, match="out of memory \\(over 128 MB\\)"):
            list(sandbox.extract(big, no_cancel))
        assert sandbox._proc is None  # killed
        assert list(sandbox.extract(small, no_cancel))  # a fresh child reads the next file
    finally:
        sandbox.close()


def test_without_prctl_a_stuck_child_exits_when_its_worker_is_killed(
    no_linux_calls: None, tmp_path: Path
):
    stuck = tmp_path / "stuck.docx"
    os.mkfifo(stuck)  # opening it blocks the child's main thread forever
    worker = subprocess.Popen([sys.executable, "-c", STUCK_SANDBOX_WORKER, str(REPO), str(stuck)])
    children: list[int] = []
    try:
        children = wait_until(lambda: sandbox_children(worker.pid), timeout=30)
        status = Path(f"/proc/{children[0]}/status").read_text()
        assert f"PPid:\t{worker.pid}" in status
        time.sleep(0.5)  # the child has read the request and is blocked in open()
        kill_hard(worker.pid)
        worker.wait()
        wait_until(lambda: not any(is_alive(c) for c in children), timeout=ORPHAN_EXIT_WAIT_S)
    finally:
        worker.kill()
        for child in children:
            kill_hard(child)


def test_sync_search_and_health_work_without_the_linux_calls(
    no_linux_calls: None, config: Config, knowledge: Path
):
    write_text_pdf(knowledge / "manual.pdf", [["Calibrate the pressure sensor monthly"]])
    make_docx(knowledge / "letter.docx")
    (knowledge / "notes.md").write_text("# Notes\n\nrotate the backup tapes\n", "utf-8")
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert view.state == "succeeded", view.to_dict()
    assert view.counts["added"] == 3 and view.counts.get("failed", 0) == 0
    assert rag_service.search(config, "pressure sensor").to_dict()["hits"][0]["path"] == (
        "manual.pdf"
    )
    assert rag_service.search(config, "backup tapes").to_dict()["hits"][0]["path"] == "notes.md"
    report = rag_service.health(config)
    assert report["platform"]["missing"] == platform_caps.missing_warnings()
    assert any("RLIMIT_AS" in w for w in report["warnings"])
    assert report["status"] == "degraded"
