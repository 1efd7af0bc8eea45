"""The extraction child reads and chunks whole documents, and reads the next file ahead while
the worker writes the current one: same sections as in process, failures still reported."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import fields, replace
from pathlib import Path

import pytest
from conftest import RecordingObserver
from format_fixtures import write_text_pdf
from secret_fixtures import SECRETS

import rag_sync
from helpers.extract.blocks import ExtractContext, ExtractionError, ExtractLimits, Location
from helpers.extract.document import (
    DocumentText,
    build_document_text,
    decode_document,
    encode_document,
)
from helpers.extract.registry import extractor_for
from helpers.extract.sandbox import SandboxedExtractor
from helpers.safety import FileEntry, walk_files
from helpers.secrets import MostlySecret
from helpers.store.index_db import open_index
from helpers.text.chunking import Child, Section
from helpers.text.hubs import hub_score
from tests.test_extract_pdf_structure import BOOKMARKS, LABELS, manual_pages, write_structured_pdf


def no_cancel() -> None:
    return None


def in_process(path: Path):
    extract = extractor_for(path)
    assert extract is not None
    blocks = extract(path, ExtractContext())
    return build_document_text(blocks, ExtractLimits().max_text_chars, no_cancel)


@pytest.fixture
def sandbox():
    box = SandboxedExtractor(ExtractLimits(), None)
    yield box
    box.close()


def test_a_document_from_the_child_equals_the_one_read_in_process(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    path = write_structured_pdf(tmp_path / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    here = in_process(path)
    there = sandbox.extract_document(path, no_cancel)
    assert there == here
    sections = {s.location.section_path for s in there.sections}
    assert ("1 Alpha Widgets",) in sections and ("2 Beta Gadgets",) in sections
    assert any(s.location.page_label == "i" for s in there.sections)
    assert decode_document(encode_document(here)) == here


def test_a_prefetched_file_is_read_once_and_a_file_not_prefetched_still_comes_back(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    first = write_text_pdf(tmp_path / "a.pdf", [["alpha page one"], ["alpha page two"]])
    second = write_text_pdf(tmp_path / "b.pdf", [["bravo only page"]])
    sandbox.prefetch(first)
    sandbox.prefetch(first)  # already asked for: ignored
    sandbox.prefetch(second)
    assert sandbox.extract_document(first, no_cancel) == in_process(first)
    assert sandbox.extract_document(second, no_cancel) == in_process(second)
    # prefetched, then another file asked for: the unwanted answer is dropped, not mixed in
    sandbox.prefetch(first)
    assert sandbox.extract_document(second, no_cancel) == in_process(second)
    assert sandbox.extract_document(first, no_cancel) == in_process(first)


def test_closing_with_a_prefetched_file_unread_stops_the_child(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    path = write_structured_pdf(tmp_path / "m.pdf", manual_pages(), BOOKMARKS, LABELS)
    sandbox.prefetch(path)
    child = sandbox._proc
    assert child is not None
    sandbox.close()
    assert sandbox._proc is None and child.poll() is not None


def test_a_mostly_secret_pdf_is_refused_by_the_child_as_in_process(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    lines = [line for secret in SECRETS for line in secret.line().splitlines()]
    path = write_text_pdf(
        tmp_path / "keys.pdf", [lines[i : i + 40] for i in range(0, len(lines), 40)]
    )
    with pytest.raises(MostlySecret) as here:
        in_process(path)
    with pytest.raises(MostlySecret) as there:
        sandbox.extract_document(path, no_cancel)
    assert str(there.value) == str(here.value)


def test_a_corrupt_prefetched_pdf_fails_in_its_turn_and_the_next_file_is_read(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 500)
    good = write_text_pdf(tmp_path / "good.pdf", [["good text after a bad file"]])
    sandbox.prefetch(bad)
    with pytest.raises(ExtractionError, match="corrupt or unreadable PDF"):
        sandbox.extract_document(bad, no_cancel)
    assert sandbox.extract_document(good, no_cancel) == in_process(good)


def test_a_sync_reads_each_file_once_ahead_and_reports_the_corrupt_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    docs = tmp_path / "docs"
    docs.mkdir()
    write_text_pdf(docs / "a.pdf", [["alpha invoice first page"], ["alpha invoice second page"]])
    (docs / "b.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 500)
    write_structured_pdf(docs / "c.pdf", manual_pages(), BOOKMARKS, LABELS)
    write_text_pdf(docs / "d.pdf", [["delta closing page of the set"]])
    hashed: list[str] = []
    real_hash = rag_sync.file_sha256
    monkeypatch.setattr(
        rag_sync, "file_sha256", lambda e, o=None: hashed.append(e.rel_path) or real_hash(e, o)
    )
    box = SandboxedExtractor(ExtractLimits(), None)
    prefetched: list[str] = []
    real_prefetch = box.prefetch
    box.prefetch = lambda p: prefetched.append(p.name) or real_prefetch(p)  # type: ignore[method-assign]
    conn = open_index(tmp_path / "index.sqlite3")
    counts: dict[str, int] = {}
    recorder = RecordingObserver()
    try:
        rag_sync.sync_files(conn, docs, "", ExtractContext(), recorder, counts, box)
    finally:
        box.close()
    assert sorted(hashed) == ["a.pdf", "b.pdf", "c.pdf", "d.pdf"]  # each once, ahead or not
    assert prefetched == ["b.pdf", "c.pdf", "d.pdf"]  # once a.pdf was read, in their order
    assert counts["added"] == 3 and counts["failed"] == 1
    assert "corrupt or unreadable PDF" in recorder.errors["b.pdf"]
    rows = dict(conn.execute("SELECT path, status FROM documents").fetchall())
    assert rows == {"a.pdf": "indexed", "b.pdf": "failed", "c.pdf": "indexed", "d.pdf": "indexed"}
    conn.close()


def _crash(box: SandboxedExtractor) -> None:
    """The child dies of a segmentation fault, as in a C library reading a hostile file (a real
    signal to the real child: no file is known to crash pdfium on demand)."""
    child = box._proc
    assert child is not None
    os.kill(child.pid, signal.SIGSEGV)
    child.wait()


def _recording_sends(box: SandboxedExtractor) -> list[str]:
    """The names of the files sent to a child, in order (each send is one read by a child)."""
    sent: list[str] = []
    real_send = box._send
    box._send = lambda p, d: sent.append(p.name) or real_send(p, d)  # type: ignore[method-assign]
    return sent


def test_a_child_that_dies_on_a_prefetched_file_is_reported_once_and_not_read_again(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    crasher = write_text_pdf(tmp_path / "b.pdf", [["bravo page the child died on"]])
    after = write_text_pdf(tmp_path / "c.pdf", [["charlie page read after the crash"]])
    sent = _recording_sends(sandbox)
    sandbox.prefetch(crasher)
    _crash(sandbox)
    sandbox.prefetch(after)  # the worker asks for the next file before b.pdf's turn
    with pytest.raises(ExtractionError, match=r"crashed \(exit code -11\)"):
        sandbox.extract_document(crasher, no_cancel)
    assert sandbox.extract_document(after, no_cancel) == in_process(after)
    # b.pdf went to one child only (its crash is its answer) and c.pdf was not read by a child
    # that b.pdf's turn then killed
    assert sent == ["b.pdf", "c.pdf"]


def test_a_prefetch_whose_write_meets_the_dead_childs_closed_pipe_keeps_the_crash_for_its_file(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    """The window between a child's death and poll() seeing it: the next prefetch's write
    fails on the closed pipe. The file the child died on still gets the crash, read once."""
    crasher = write_text_pdf(tmp_path / "b.pdf", [["bravo page the child died on"]])
    after = write_text_pdf(tmp_path / "c.pdf", [["charlie page read after the crash"]])
    sent = _recording_sends(sandbox)
    sandbox.prefetch(crasher)
    child = sandbox._proc
    assert child is not None
    os.kill(child.pid, signal.SIGSEGV)
    child.wait()
    real_poll = child.poll
    child.poll = lambda: None  # type: ignore[method-assign]  # the exit not seen yet
    sandbox.prefetch(after)  # its write meets the closed pipe
    child.poll = real_poll  # type: ignore[method-assign]
    with pytest.raises(ExtractionError, match=r"crashed \(exit code -11\)"):
        sandbox.extract_document(crasher, no_cancel)
    assert sandbox.extract_document(after, no_cancel) == in_process(after)
    assert sent.count("b.pdf") == 1


class _Outcomes(RecordingObserver):
    def __init__(self) -> None:
        super().__init__()
        self.reported: list[tuple[str, str]] = []
        self.done: list[tuple[str, str]] = []

    def on_error(self, rel_path: str, message: str) -> None:
        super().on_error(rel_path, message)
        self.reported.append((rel_path, message))

    def on_file_done(self, rel_path: str, outcome: str, size: int, error: str | None) -> None:
        self.done.append((rel_path, outcome))


def test_a_sync_reports_a_file_that_crashed_the_child_ahead_once_and_reads_the_rest_once(
    tmp_path: Path,
):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in "abcd":
        write_text_pdf(docs / f"{name}.pdf", [[f"{name}: invoice page of the set", "total due"]])
    box = SandboxedExtractor(ExtractLimits(), None)
    sent = _recording_sends(box)
    real_prefetch = box.prefetch

    def prefetch(path: Path) -> None:
        real_prefetch(path)
        if path.name == "b.pdf":
            _crash(box)  # the child dies reading b.pdf ahead, while a.pdf is written

    box.prefetch = prefetch  # type: ignore[method-assign]
    conn = open_index(tmp_path / "index.sqlite3")
    counts: dict[str, int] = {}
    observer = _Outcomes()
    try:
        rag_sync.sync_files(conn, docs, "", ExtractContext(), observer, counts, box)
    finally:
        box.close()
    assert [p for p, _ in observer.reported] == ["b.pdf"], observer.reported
    assert "crashed (exit code -11)" in observer.reported[0][1]
    assert sorted(observer.done) == [
        ("a.pdf", "added"),
        ("b.pdf", "failed"),
        ("c.pdf", "added"),
        ("d.pdf", "added"),
    ]
    assert sorted(sent) == ["a.pdf", "b.pdf", "c.pdf", "d.pdf"]  # each read by a child once
    rows = dict(conn.execute("SELECT path, status FROM documents").fetchall())
    assert rows == {"a.pdf": "indexed", "b.pdf": "failed", "c.pdf": "indexed", "d.pdf": "indexed"}
    conn.close()


def test_the_child_scores_hubs_and_the_writer_stores_its_score(
    tmp_path: Path, sandbox: SandboxedExtractor
):
    questions = "\n".join(f"{n}. How do I configure printer queue {n}?" for n in range(1, 13))
    prose = " ".join(["The scanner driver reads one page at a time and keeps no copy."] * 8)
    path = tmp_path / "faq.md"
    path.write_text(f"# Questions\n\n{questions}\n\n# Answers\n\n{prose}\n")
    doc = sandbox.extract_document(path, no_cancel)
    assert doc == in_process(path)
    scores = {s.location.heading_path: s.hub for s in doc.sections}
    assert scores[("Questions",)] == hub_score(doc.sections[0].text) > 0.5
    assert scores[("Answers",)] == 0.0
    # the writer keeps the score the child computed (it does not read the text again)
    entry = next(e for e in walk_files(tmp_path, frozenset({".md"})) if isinstance(e, FileEntry))
    content = rag_sync.extract_document(entry, ExtractContext(), RecordingObserver(), sandbox)
    assert [s.hub for s in content.sections] == [s.hub for s in doc.sections]
    marked = [replace(s, hub=0.25) for s in content.sections]
    conn = open_index(tmp_path / "index.sqlite3")
    rag_sync.write_document(conn, entry, "0" * 64, replace(content, sections=marked))
    assert {row[0] for row in conn.execute("SELECT hub FROM sections")} == {0.25}
    conn.close()


def test_every_field_of_a_section_and_a_child_crosses_the_pipe():
    # encode_document sends fields by position: a field added to Section or Child must be added
    # there too, or the child's value would be lost on the way to the worker.
    assert [f.name for f in fields(Section)] == ["text", "location", "children", "ocr", "hub"]
    assert [f.name for f in fields(Child)] == ["text", "location", "ocr"]
    place = Location(page=3, page_label="iii", section_path=("1 Intro",), heading_path=("A", "B"))
    other = Location(sheet="Q1", cell_range="A1:C9", line_start=4, line_end=9, message=2)
    kids = (Child("A > B\nscanned words", place, True), Child("rows", other, False))
    doc = DocumentText(
        title="T",
        sections=[Section("scanned words rows", place, kids, True, 0.75)],
        needs_ocr_pages=[5],
        ocr_pages=[3],
        any_ocr=True,
        truncated=True,
        redactions=2,
    )
    assert decode_document(json.loads(json.dumps(encode_document(doc)))) == doc
