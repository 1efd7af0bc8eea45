"""The extraction child: a stuck or memory-hungry file is stopped and reported; the next file
is read by a fresh child."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from format_fixtures import make_docx, soffice_convert, write_text_pdf
from openpyxl import Workbook

import rag_service
from helpers.config import Config
from helpers.extract.blocks import ExtractionError, ExtractLimits
from helpers.extract.sandbox import SandboxedExtractor
from rag_sync import JobCancelled


def no_cancel() -> None:
    return None


def test_blocks_come_back_with_their_locations(tmp_path: Path):
    pdf = write_text_pdf(tmp_path / "two.pdf", [["first page text"], ["second page text"]])
    sandbox = SandboxedExtractor(ExtractLimits(), None)
    try:
        blocks = list(sandbox.extract(pdf, no_cancel))
    finally:
        sandbox.close()
    pages = {b.location.page for b in blocks}
    assert pages == {1, 2}
    assert any("second page text" in b.text for b in blocks if b.location.page == 2)


def test_a_file_that_stalls_the_child_is_stopped_and_the_next_file_still_works(tmp_path: Path):
    # A legacy .doc goes through a LibreOffice conversion that yields nothing for ~1-2 s: with a
    # stall limit shorter than that it stands in for a file that hangs a C library.
    good = make_docx(tmp_path / "good.docx")
    legacy = soffice_convert(good, "doc", tmp_path / "legacy")
    sandbox = SandboxedExtractor(ExtractLimits(), None, stall_timeout_s=0.3)
    try:
        with pytest.raises(ExtractionError, match="stalled"):
            list(sandbox.extract(legacy, no_cancel))
        assert sandbox._proc is None  # the stuck child was killed
        sandbox.stall_timeout_s = 60  # a fresh child needs a moment to import its libraries
        assert list(sandbox.extract(good, no_cancel))
    finally:
        sandbox.close()


def test_a_memory_cap_turns_an_allocation_storm_into_a_reported_error(tmp_path: Path):
    # openpyxl holds every shared string of a workbook in memory, even in read-only mode: a
    # sheet of 20,000 unique 2.4 KB strings needs far more than the cap allows.
    book = Workbook(write_only=True)
    sheet = book.create_sheet("big")
    for i in range(20_000):
        sheet.append([f"{i:06d} " + os.urandom(1200).hex()])
    xlsx = tmp_path / "strings.xlsx"
    book.save(xlsx)
    sandbox = SandboxedExtractor(ExtractLimits(), None, memory_bytes=128 * 1024 * 1024)
    try:
        with pytest.raises(ExtractionError) as err:
            list(sandbox.extract(xlsx, no_cancel))
        assert "memory" in str(err.value) or "crashed" in str(err.value)
    finally:
        sandbox.close()
    roomy = SandboxedExtractor(ExtractLimits(), None)
    try:
        blocks = list(roomy.extract(xlsx, no_cancel))
        assert len(blocks) > 1000 and blocks[0].location.sheet == "big"
    finally:
        roomy.close()


def test_cancel_while_waiting_for_the_child_kills_it(tmp_path: Path):
    legacy = soffice_convert(make_docx(tmp_path / "a.docx"), "doc", tmp_path / "legacy")
    calls = {"n": 0}

    def cancel_soon() -> None:
        calls["n"] += 1
        if calls["n"] > 3:
            raise JobCancelled()

    sandbox = SandboxedExtractor(ExtractLimits(), None)
    with pytest.raises(JobCancelled):
        list(sandbox.extract(legacy, cancel_soon))
    assert sandbox._proc is None  # the child was killed mid-conversion, not left running
    sandbox.close()


def test_sync_reports_a_corrupt_binary_document_and_indexes_the_rest(
    config: Config, knowledge: Path
):
    write_text_pdf(knowledge / "fine.pdf", [["quarterly revenue table"]])
    (knowledge / "broken.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(4000))
    (knowledge / "broken.docx").write_bytes(b"PK\x03\x04" + os.urandom(2000))
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert view.state == "succeeded"
    assert view.counts["added"] == 1 and view.counts["failed"] == 2
    hits = rag_service.search(config, "quarterly revenue", mode="lexical").hits
    assert hits[0].path == "fine.pdf" and hits[0].location["page"] == 1
