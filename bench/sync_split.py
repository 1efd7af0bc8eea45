"""The lexical sync's CPU seconds per stage on a real folder (`bench_sync.py --real DIR --split`).

Each stage runs alone over every file of the folder, in the order of the worker's pipeline,
in this process: the format reader's blocks; cleaning and secret redaction
(helpers.extract.document.build_document_text without its chunker); the chunker
(helpers.text.chunking.build_sections); the hub score of every section and the matching form of
every child (both computed again inside the write, counted here on their own); the SQLite write
of every document into a fresh index (helpers.index.document_write.write_document, hub scores and
matching forms included). CPU seconds, not wall: they hold up on a shared box. The hash covers every
section and child (text, location, OCR flag, hub score, matching form), every document's title,
redaction count and truncation: equal hashes mean two revisions write the same rows.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import rag_sync  # noqa: E402
from helpers.extract import document  # noqa: E402
from helpers.extract import registry as extractors  # noqa: E402
from helpers.extract.blocks import ExtractContext, ExtractLimits, TextBlock  # noqa: E402
from helpers.index.document_write import DocumentContent  # noqa: E402
from helpers.safety import FileEntry, walk_files  # noqa: E402
from helpers.secrets import MostlySecret  # noqa: E402
from helpers.store import index_db  # noqa: E402
from helpers.store.codec import section_text  # noqa: E402
from helpers.text.chunking import build_sections  # noqa: E402
from helpers.text.hubs import hub_score  # noqa: E402
from helpers.text.normalize import fold  # noqa: E402


def _no_cancel() -> None:
    return None


def cpu_split(folder: Path, work: Path) -> dict[str, float]:
    """Print and return the CPU seconds per stage; print the output hash."""
    entries = [
        e
        for e in walk_files(folder, extractors.SUPPORTED_SUFFIXES)
        if isinstance(e, FileEntry) and extractors.extractor_for(e.abs_path) is not None
    ]
    limits = ExtractLimits()
    ctx = ExtractContext(limits=limits)
    out: dict[str, float] = {}

    start = time.process_time()
    blocks_of = [list(extractors.extractor_for(e.abs_path)(e.abs_path, ctx)) for e in entries]
    out["read blocks (format readers)"] = time.process_time() - start

    cleaned: list[list[TextBlock]] = []
    heads: list[Any] = []  # DocumentText without sections, None for a mostly-secret file
    original = document.build_sections

    def keep(blocks: Any) -> list[Any]:
        cleaned.append(list(blocks))
        return []

    document.build_sections = keep
    start = time.process_time()
    try:
        for blocks in blocks_of:
            try:
                head = document.build_document_text(iter(blocks), limits.max_text_chars, _no_cancel)
                heads.append(head)
            except MostlySecret:
                heads.append(None)
    finally:
        document.build_sections = original
    out["clean + redact (build_document_text without chunking)"] = time.process_time() - start
    del blocks_of

    start = time.process_time()
    sections_of = [list(build_sections(blocks)) for blocks in cleaned]
    out["chunk (build_sections)"] = time.process_time() - start

    start = time.process_time()
    hubs = [[hub_score(s.text) for s in sections] for sections in sections_of]
    out["hub scores (hub_score per section)"] = time.process_time() - start

    start = time.process_time()
    folds = [[[fold(c.text) for c in s.children] for s in sections] for sections in sections_of]
    out["matching form (fold per child)"] = time.process_time() - start

    conn = index_db.open_index(work / "split.sqlite3")
    contents: list[tuple[FileEntry, DocumentContent]] = []
    for entry, head, sections in zip(entries, heads, sections_of, strict=True):
        if head is not None:
            content = DocumentContent(
                title=head.title or entry.abs_path.stem,
                sections=sections,
                needs_ocr_pages=head.needs_ocr_pages,
                ocr_pages=head.ocr_pages,
                ocr_engine=None,
                truncated=head.truncated,
                redactions=head.redactions,
            )
            contents.append((entry, content))
    start = time.process_time()
    for entry, content in contents:
        rag_sync.write_document(conn, entry, "0" * 64, content)
    out["SQLite write (write_document, hubs + fold inside)"] = time.process_time() - start
    conn.close()

    digest = hashlib.sha256()
    for entry, head, sections, doc_hubs, doc_folds in zip(
        entries, heads, sections_of, hubs, folds, strict=True
    ):
        if head is None:
            digest.update(json.dumps([entry.rel_path, "mostly secret"]).encode())
            continue
        record = [entry.rel_path, head.title, head.redactions, head.truncated, head.needs_ocr_pages]
        digest.update(json.dumps(record, ensure_ascii=False).encode())
        for section, hub, child_folds in zip(sections, doc_hubs, doc_folds, strict=True):
            children = [
                (c.text, c.location.to_dict(), c.ocr, norm)
                for c, norm in zip(section.children, child_folds, strict=True)
            ]
            record = [section.text, section.location.to_dict(), section.ocr, hub, children]
            digest.update(json.dumps(record, ensure_ascii=False).encode())
    chunks = sum(len(s.children) for sections in sections_of for s in sections)
    text_mb = sum(len(s.text.encode()) for sections in sections_of for s in sections) / 1e6
    write = out["SQLite write (write_document, hubs + fold inside)"]
    outside = sum(out.values()) - write
    print(f"CPU split, {len(entries)} files, {text_mb:.1f} MB section text, {chunks} children:")
    for name, seconds in out.items():
        print(f"  {name:52} {seconds:6.2f} s")
    hub, norm = out["hub scores (hub_score per section)"], out["matching form (fold per child)"]
    inside = write - hub - norm
    print(f"  {'outside SQLite (all but the write; hubs, fold once)':52} {outside:6.2f} s")
    print(f"  {'the write without hubs and fold':52} {inside:6.2f} s")
    print(f"  output sha256 {digest.hexdigest()}")
    return out


def bare_fts_seconds(
    texts: list[str], work: Path, row_chars: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """One executemany into a bare trigram FTS5 table in one transaction: the insert floor
    (`clock`: wall time, or process_time for CPU seconds)."""
    rows = [(t[i : i + row_chars],) for t in texts for i in range(0, len(t), row_chars)]
    db = work / f"bare-{clock.__name__}.sqlite3"
    db.unlink(missing_ok=True)  # one fresh table per round (a --work dir is kept between them)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram case_sensitive 0')")
    start = clock()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t(body) VALUES (?)", rows)
    conn.execute("COMMIT")
    seconds = clock() - start
    conn.close()
    return seconds


def cpu_ratio(folder: Path, work: Path, row_chars: int) -> float:
    """The worker's code path (run_job, through rag_service.sync_kb_blocking) run in this
    process, against the bare FTS5 trigram insert of its section text in `row_chars` rows: CPU
    seconds of each, same run (they hold up where wall seconds on a loaded box do not)."""
    import rag_service
    from helpers.config import Config

    data = work / "state-cpu"
    config = Config(folder, data, data / "index.sqlite3", semantic=False)
    start = time.process_time()
    view = rag_service.sync_kb_blocking(config)
    sync = time.process_time() - start
    assert view.state == "succeeded", view.to_dict()
    conn = sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)
    texts = [section_text(row[0]) for row in conn.execute("SELECT text FROM sections ORDER BY id")]
    conn.close()
    insert = bare_fts_seconds(texts, work, row_chars, clock=time.process_time)
    text_mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"in-process sync {sync:.2f} CPU s, bare FTS5 insert {insert:.2f} CPU s", end=": ")
    print(f"{sync / insert:.2f}x, {text_mb / sync:.2f} MB of text per CPU second")
    return sync / insert
