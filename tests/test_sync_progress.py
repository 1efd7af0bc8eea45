"""Progress inside one long file: the pages read (PDF, TIFF, scans being OCRed) reach the
observer in order, and the running job's percent and "current file: page N/M" detail move
while the real worker reads one long PDF."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from conftest import require_tesseract, require_tool
from ocr_fixtures import render_page, save_scanned_pdf
from stress.corpora import make_long_pdf
from stress.harness import sandbox_children, wait_until, worker_pids

import rag_service
from helpers.config import Config
from helpers.extract.blocks import ExtractContext, ExtractLimits
from helpers.extract.sandbox import SandboxedExtractor
from helpers.index.document_write import FileProgress
from helpers.ocr import engine as ocr
from helpers.safety import FileEntry
from helpers.store.job_rows import FINAL_STATES, JobView
from rag_sync import extract_document

_PAGE_DETAIL = re.compile(r"^current file: page (\d+)/(\d+)$")
OCR_OPTIONS = {"langs": "eng", "tesseract_cmd": "tesseract"}


class _Pages:
    """A sync observer that records the progress reported inside the file."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int, int]] = []

    def check_cancel(self) -> None:
        return None

    def on_file_progress(self, rel_path: str, size: int, progress: FileProgress) -> None:
        assert progress.unit == "page"
        self.seen.append((rel_path, size, progress.done, progress.total))


def _entry(path: Path) -> FileEntry:
    stat = path.stat()
    return FileEntry(path.name, path, stat.st_size, stat.st_mtime_ns)


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox-child", "in-process"])
def test_a_long_pdf_reports_every_page_in_order(tmp_path: Path, sandboxed: bool):
    pdf = make_long_pdf(tmp_path / "manual.pdf", 150, lines_per_page=4)
    observer = _Pages()
    sandbox = SandboxedExtractor(ExtractLimits(), None) if sandboxed else None
    try:
        content = extract_document(_entry(pdf), ExtractContext(), observer, sandbox)
    finally:
        if sandbox is not None:
            sandbox.close()
    size = pdf.stat().st_size
    assert observer.seen == [("manual.pdf", size, done, 150) for done in range(151)]
    assert content.sections[-1].location.page == 150


def test_a_scanned_pdf_being_ocred_in_the_sandbox_reports_each_page(tmp_path: Path):
    require_tesseract()
    pages = [render_page([f"Scanned page number {n} of the ledger"], dpi=120) for n in (1, 2, 3)]
    pdf = save_scanned_pdf(pages, tmp_path / "scan.pdf", dpi=120)
    observer = _Pages()
    sandbox = SandboxedExtractor(ExtractLimits(), OCR_OPTIONS)
    try:
        content = extract_document(_entry(pdf), ExtractContext(), observer, sandbox)
    finally:
        sandbox.close()
    assert [(done, total) for _, _, done, total in observer.seen] == [
        (0, 3),
        (1, 3),
        (2, 3),
        (3, 3),
    ]
    assert content.ocr_pages == [1, 2, 3]


def test_a_multi_page_tiff_being_ocred_reports_each_page(tmp_path: Path):
    function = ocr.make_ocr_function(ocr.OcrConfig(**OCR_OPTIONS))
    require_tool(function is not None, "tesseract-ocr", "apt-get install tesseract-ocr")
    first, second = (render_page([f"Fax sheet {n} shipping order"], dpi=120) for n in (1, 2))
    tiff = tmp_path / "fax.tiff"
    first.save(tiff, save_all=True, append_images=[second])
    observer = _Pages()
    try:
        content = extract_document(_entry(tiff), ExtractContext(ocr=function), observer)
    finally:
        function.close()
    assert [(done, total) for _, _, done, total in observer.seen] == [(0, 2), (1, 2), (2, 2)]
    assert [s.location.page for s in content.sections] == [1, 2]


# -- the real worker -----------------------------------------------------------------------------
PAGES = 600
# The extraction child is frozen (SIGSTOP) once it has written this much: while it reads a file
# for the worker it writes one progress line per page (~24 bytes; the document follows at the
# end), so this is a few dozen of the 600 pages and the worker is certainly inside the file.
FREEZE_AFTER_BYTES = 2_000


def _sandbox_child(config: Config) -> int | None:
    for pid in worker_pids(config.data_dir):
        children = sandbox_children(pid)
        if children:
            return children[0]
    return None


def _bytes_written(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def _after_two_heartbeats(config: Config, job_id: str) -> JobView:
    """The job as published by the second heartbeat from now (the first may predate what the
    worker has just read)."""
    for _ in range(2):
        beat = rag_service.sync_status(config, job_id).heartbeat or 0.0
        wait_until(lambda b=beat: (rag_service.sync_status(config, job_id).heartbeat or 0) > b)
    return rag_service.sync_status(config, job_id)


def _page(view: JobView) -> tuple[int, int] | None:
    match = _PAGE_DETAIL.match(view.message or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


@pytest.mark.slow
def test_the_jobs_percent_and_page_detail_move_inside_a_long_pdf(config: Config, knowledge: Path):
    make_long_pdf(knowledge / "manual.pdf", PAGES, lines_per_page=10)
    job = rag_service.start_sync(config)
    child = wait_until(lambda: _sandbox_child(config), timeout=120)
    try:
        _bytes_written(child)
    except OSError as exc:
        require_tool(False, "a readable /proc/PID/io", f"run on Linux with procfs ({exc})")
    wait_until(lambda: _bytes_written(child) >= FREEZE_AFTER_BYTES, timeout=120, interval=0.002)
    os.kill(child, signal.SIGSTOP)  # the worker can read no further page of the file
    try:
        frozen = _after_two_heartbeats(config, job.job_id)
    finally:
        os.kill(child, signal.SIGCONT)
    views = [frozen]
    while views[-1].state not in FINAL_STATES:
        views.append(rag_service.sync_status(config, job.job_id))
    page = _page(frozen)
    assert page is not None and 0 < page[0] < PAGES and page[1] == PAGES, frozen.to_dict()
    assert frozen.file_progress == {"done": page[0], "total": PAGES, "unit": "page"}
    assert frozen.current_file == "manual.pdf" and frozen.completed_files == 0
    assert 0 < frozen.done_bytes < frozen.total_bytes and 0 < frozen.percent < 99
    pages = [p[0] for p in map(_page, views) if p is not None]
    assert pages == sorted(pages)
    done = [v.done_bytes for v in views]
    assert done == sorted(done)
    final = views[-1]
    assert final.state == "succeeded", final.to_dict()
    assert final.done_bytes == final.total_bytes and final.percent == 100.0
    assert final.message is None and final.file_progress is None
