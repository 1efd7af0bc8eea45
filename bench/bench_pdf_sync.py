"""PDF sync throughput (issue 16, target 2): pages/s end to end against bare baselines.

    nice python bench/bench_pdf_sync.py DIR [--work DIR] [--no-split]
    python bench/bench_pdf_sync.py --assemble DIR     # copy the installed Debian PDFs into DIR

DIR is a folder of real text PDFs; `--assemble` builds ours from the documentation packages
bench/RESULTS.md names (every PDF under SOURCE_ROOTS, `.pdf.gz` unpacked, TeX Live and R left
out: the issue asks for a set other than theirs).
Reports, in one run on one machine:
- end to end: a fresh lexical sync (`--semantic off`) through the service and the detached worker,
  in pages/s;
- bare baselines: pypdfium2 text extraction of every page alone in one process, and one bare FTS5
  trigram insert of that text in ~600-character rows; the end-to-end time as a ratio to both;
- where the time goes, measured in this process file by file: the sandbox child's start and its
  round trip, page text, PDF structure (outline, page labels, running lines, scans check,
  section cuts in `pdf_structure`), the rest of the extractor, cleaning/redaction/chunking, and
  the SQLite writes.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import pypdfium2 as pdfium  # noqa: E402
from bench_sync import bare_fts_seconds, config_for, timed_sync  # noqa: E402

import rag_service  # noqa: E402
import rag_sync  # noqa: E402
from helpers.extract import pdf as pdf_extract  # noqa: E402
from helpers.extract.blocks import ExtractContext, ExtractLimits  # noqa: E402
from helpers.extract.sandbox import SandboxedExtractor  # noqa: E402
from helpers.safety import FileEntry, walk_files  # noqa: E402
from helpers.store import index_db  # noqa: E402

SOURCE_ROOTS = (
    "/usr/share/doc",
    "/usr/share/pari/doc",
    "/usr/share/gap/doc",
    "/usr/share/developers-reference",
    "/usr/share/debian-reference",
)
LEFT_OUT = ("texlive", "texmf", "r-doc", "/R/")


def assemble(out: Path) -> int:
    """Copy every installed PDF under SOURCE_ROOTS into `out`, flat; returns the count."""
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for root in map(Path, SOURCE_ROOTS):
        for path in sorted(root.rglob("*")):
            name = str(path)
            if not path.is_file() or any(part in name for part in LEFT_OUT):
                continue
            if not (name.endswith(".pdf") or name.endswith(".pdf.gz")):
                continue
            flat = name.removeprefix("/usr/share/").replace("/", "__").removesuffix(".gz")
            if name.endswith(".gz"):
                with gzip.open(path) as source, open(out / flat, "wb") as target:
                    shutil.copyfileobj(source, target)
            else:
                shutil.copyfile(path, out / flat)
            count += 1
    return count


def bare_extract(paths: list[Path]) -> tuple[float, float, int, list[str]]:
    """(seconds, CPU seconds, pages, page texts): pypdfium2 alone, every page once."""
    texts: list[str] = []
    cpu = time.process_time()
    start = time.perf_counter()
    for path in paths:
        pdf = pdfium.PdfDocument(str(path))
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        pdf.close()
    return time.perf_counter() - start, time.process_time() - cpu, len(texts), texts


def reap_children(timeout_s: float = 10.0) -> None:
    """Wait for finished children (the detached worker of the first sync) so their CPU is not
    counted in the next measurement's RUSAGE_CHILDREN."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children left
        if pid == 0:
            time.sleep(0.1)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def in_process_sync(folder: Path, work: Path) -> tuple[float, float, float]:
    """(wall, worker CPU, extraction child CPU) of the worker's own code path (run_job) run in
    this process: CPU seconds hold up on a shared box where wall seconds do not."""
    config = config_for(folder, work / "state-cpu")
    reap_children()
    children = children_cpu()
    cpu = time.process_time()
    start = time.perf_counter()
    view = rag_service.sync_kb_blocking(config)
    wall = time.perf_counter() - start
    assert view.state == "succeeded", view.to_dict()
    return wall, time.process_time() - cpu, children_cpu() - children


class Timers:
    """Wraps module attributes so the time spent inside them is summed per name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.process_time() - start

        self._undo.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()


class _Observer:
    def check_cancel(self) -> None:
        return None


# The structure work in helpers/extract/pdf.py, by the names it calls (those present are timed).
STRUCTURE_NAMES = (
    "outline",
    "page_labels",
    "section_starts",
    "clean_page_text",
    "_split_sections",
    "_has_drawn_content",
    "edge_keys",
    "running_lines_at",
)
PAGE_TEXT_NAMES = ("_page_text", "_read_page", "_page_texts")


def split(paths: list[Path], work: Path) -> dict[str, float]:
    """CPU seconds per stage, each measured alone, file by file in this process (the sandbox
    lines: the child's CPU seconds, from RUSAGE_CHILDREN once it has exited)."""
    out: dict[str, float] = {}
    limits = ExtractLimits()
    # Sandbox: the child's start (first request on the smallest file), then every file through
    # it (block decoding included) against the same extraction in this process.
    reap_children()
    smallest = min(paths, key=lambda p: p.stat().st_size)
    children = children_cpu()
    sandbox = SandboxedExtractor(limits, None)
    list(sandbox.extract(smallest, lambda: None))
    sandbox.close()
    out["sandbox child: start + 1 small file"] = children_cpu() - children
    children = children_cpu()
    sandbox = SandboxedExtractor(limits, None)
    for path in paths:
        if hasattr(sandbox, "extract_document"):
            sandbox.extract_document(path, lambda: None)
        else:
            list(sandbox.extract(path, lambda: None))
    sandbox.close()
    label = "document (extract + chunk)" if hasattr(sandbox, "extract_document") else "blocks"
    out[f"sandbox child: all files, {label}"] = children_cpu() - children

    timers = Timers()
    for name in PAGE_TEXT_NAMES:
        if hasattr(pdf_extract, name):
            timers.wrap(pdf_extract, name, "page text (pdfium)")
    for name in STRUCTURE_NAMES:
        if hasattr(pdf_extract, name):
            timers.wrap(pdf_extract, name, f"structure: {name}")
    if hasattr(pdf_extract.RunningLines, "at"):
        # includes the page text it reads ahead of the page being cleaned
        timers.wrap(pdf_extract.RunningLines, "at", "structure: RunningLines.at (+page text)")
    ctx = ExtractContext(limits=limits)
    blocks_of: dict[Path, list[Any]] = {}
    start = time.process_time()
    try:
        for path in paths:
            blocks_of[path] = list(pdf_extract.extract(path, ctx))
    finally:
        timers.restore()
    out["extract in process (all)"] = time.process_time() - start
    out.update(timers.seconds)

    # Cleaning, redaction and chunking: extract_document over the blocks already read.
    conn = index_db.open_index(work / "split.sqlite3")
    entries = {
        e.abs_path: e
        for e in walk_files(paths[0].parent, frozenset({".pdf"}))
        if isinstance(e, FileEntry)
    }
    original = rag_sync.extractors.extractor_for
    contents = []
    start = time.process_time()
    try:
        for path in paths:
            blocks = blocks_of.pop(path)
            rag_sync.extractors.extractor_for = _feeder(blocks)
            contents.append(rag_sync.extract_document(entries[path], ctx, _Observer()))
    finally:
        rag_sync.extractors.extractor_for = original
    out["clean + redact + chunk"] = time.process_time() - start
    start = time.process_time()
    for path, content in zip(paths, contents, strict=True):
        rag_sync.write_document(conn, entries[path], "0" * 64, content, _Observer())
    out["SQLite writes"] = time.process_time() - start
    conn.close()
    return out


def _feeder(blocks: list[Any]) -> Callable[[Path], Callable[..., Any]]:
    return lambda _path: lambda _p, _ctx: iter(blocks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--assemble", action="store_true", help="build the set into FOLDER")
    parser.add_argument("--work", type=Path)
    parser.add_argument("--no-split", action="store_true", help="skip the per-stage split")
    parser.add_argument("--split-only", action="store_true", help="only the per-stage split")
    args = parser.parse_args()
    folder = args.folder.resolve()
    if args.assemble:
        print(f"{assemble(folder)} PDFs copied into {folder}")
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-pdf-"))
    paths = sorted(p for p in folder.rglob("*.pdf") if p.is_file())
    try:
        bare_s, bare_cpu, pages, texts = bare_extract(paths)
        if args.split_only:
            print(f"{pages:,} pages; bare pypdfium2 text {bare_cpu:.1f} CPU s; split, CPU s:")
            for name, seconds in split(paths, work).items():
                print(f"    {name:44} {seconds:7.1f} s  {seconds / bare_cpu:5.2f}x bare extraction")
            return
        fts_cpu = time.process_time()
        fts_s = bare_fts_seconds(texts, work)
        fts_cpu = time.process_time() - fts_cpu
        del texts
        config = config_for(folder, work / "state")
        wall, worker, counts = timed_sync(config)
        floor = bare_s + fts_s
        size_mb = sum(p.stat().st_size for p in paths) / 1e6
        print(f"{len(paths)} PDFs, {pages:,} pages, {size_mb:.0f} MB")
        print(
            f"  end to end: {wall:.1f} s wall (worker {worker:.1f} s) = {pages / wall:.0f} pages/s"
        )
        print(f"    counts {counts}")
        print(f"  bare pypdfium2 text: {bare_s:.1f} s = {pages / bare_s:.0f} pages/s")
        print(f"  bare FTS5 trigram insert: {fts_s:.1f} s")
        print(
            f"  ratio end to end / bare extraction {wall / bare_s:.2f}x, "
            f"/ (bare extraction + bare insert) {wall / floor:.2f}x"
        )
        cpu_wall, worker_cpu, child_cpu = in_process_sync(folder, work)
        bare_total = bare_cpu + fts_cpu
        print(
            f"  CPU seconds: bare extraction {bare_cpu:.1f} + bare insert {fts_cpu:.1f}; "
            f"in-process sync ({cpu_wall:.1f} s wall): worker {worker_cpu:.1f} + "
            f"extraction child {child_cpu:.1f}"
        )
        print(
            f"    ratios to bare extraction + insert CPU: worker+child "
            f"{(worker_cpu + child_cpu) / bare_total:.2f}x, the busier of the two "
            f"{max(worker_cpu, child_cpu) / bare_total:.2f}x (two idle cores: "
            f"~{pages / max(worker_cpu, child_cpu):.0f} pages/s)"
        )
        if not args.no_split:
            print("  split (each stage alone, CPU seconds):")
            for name, seconds in split(paths, work).items():
                print(f"    {name:44} {seconds:7.1f} s  {seconds / bare_cpu:5.2f}x bare extraction")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
