"""Extraction in a child process with a memory cap and a stall timeout.

Binary formats go through C libraries (pdfium, libxml, zlib, LibreOffice, tesseract) that a
hostile file can send into an endless loop or a multi-gigabyte allocation; Python cannot interrupt
either. The sync worker therefore sends each such file to a long-lived child
(`python -m helpers.extract.sandbox`), reads its blocks as JSON lines, and kills and replaces the
child when it stalls, runs out of memory or dies; that file is reported and the job goes on.

The child can be asked for the next file before the worker has written the current one
(`prefetch`): a side thread drains its output into a buffer of at most PREFETCH_BUFFER_BYTES, so
on two cores the next PDF is read while the worker writes this one, and memory stays bounded.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from helpers import platform_caps
from helpers.extract.blocks import (
    BlockKind,
    ExtractContext,
    ExtractionError,
    ExtractLimits,
    Location,
    TextBlock,
)
from helpers.extract.document import DocumentText, decode_document, encode_document
from helpers.secrets import MostlySecret
from helpers.skips import FileSkipped, SkipReason

REPO_DIR = Path(__file__).resolve().parents[2]
# No block for this long means the child is stuck (an OCR page takes ~5 s, LibreOffice ~2 s).
STALL_TIMEOUT_S = 180.0
# Address-space cap of the child: a bomb hits MemoryError here instead of eating the machine.
CHILD_MEMORY_BYTES = 3 * 1024**3
POLL_S = 0.2  # how often a waiting parent checks for cancel
# Child output read ahead of the worker: a 1,000-page manual is ~3 MB of block JSON, so a whole
# prefetched manual fits; past this the child blocks on its pipe until the worker catches up.
PREFETCH_BUFFER_BYTES = 16 * 1024**2
READ_BYTES = 1 << 16
# Files the child may be asked for ahead of the one being read: with one, a big manual after a
# small one leaves the worker waiting (the write of the small file ends long before the read of
# the big one); a few even out the sizes. Small documents are written in groups
# (helpers.index.group_write, up to GROUP_MAX_S of files per transaction): the read-ahead must
# outlast a group write so the child keeps reading through it (bench/RESULTS.md "Issue 16 on
# the merged tree, third session"). Memory stays bounded by the pump's buffer, not by this count.
PREFETCH_FILES = 32


PR_SET_PDEATHSIG = 1  # prctl option: signal this process when its parent dies
# Without a kernel memory cap (macOS) the parent samples the child's RSS this often; an
# allocation storm grows a few hundred MB per second, so the overshoot stays well under a GB.
RSS_POLL_S = 0.5
PARENT_POLL_S = 1.0  # without prctl the child checks this often whether its worker is gone


def _die_with_parent() -> None:
    """A child stuck in a hostile file must not outlive a killed worker: Linux prctl, else the
    child's own watcher thread (`_watch_parent`, started when the child runs)."""
    if platform_caps.has_prctl():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watcher thread covers it
    os.setpgid(0, 0)  # own process group: LibreOffice helpers are killed with it


def _watch_parent() -> None:
    """Exit (with the process group: converters too) once the worker that started us is gone;
    a blocked open() or C call in the main thread does not stop this thread."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:
                try:
                    os.killpg(0, signal.SIGKILL)
                finally:
                    os._exit(1)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _encode(block: TextBlock) -> str:
    return json.dumps(
        {
            "t": block.text,
            "l": block.location.to_dict(),
            "k": str(block.kind),
            "h": block.table_header,
            "o": block.ocr,
        },
        ensure_ascii=False,
    )


def _decode(data: dict[str, Any]) -> TextBlock:
    return TextBlock(
        data["t"], Location.from_dict(data["l"]), BlockKind(data["k"]), data["h"], data["o"]
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child and its converters
    except OSError:
        proc.kill()


class _Pump:
    """Reads one child's stdout on a side thread into lines, holding at most `limit` bytes.

    Where the kernel cannot cap the child's memory it also samples the child's RSS while it
    reads, so a child running ahead on a prefetched file is watched even when nobody waits."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        limit: int,
        memory: int | None,
        on_oom: Callable[[], None],
    ) -> None:
        self._proc = proc
        self._limit = limit
        self._memory = memory
        self._on_oom = on_oom
        self._lines: deque[bytes | None] = deque()  # None: the child's stdout is closed
        self._held = 0
        self._cond = threading.Condition()
        self._stop = False
        self.oom = False
        self._thread = threading.Thread(target=self._run, name="sandbox-pump", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        partial: list[bytes] = []  # the pieces of the line not yet ended
        next_rss = time.monotonic() + RSS_POLL_S
        try:
            while True:
                with self._cond:
                    while self._held > self._limit and not self._stop:
                        self._cond.wait(RSS_POLL_S)
                        next_rss = self._watch_rss(next_rss)
                    if self._stop:
                        return
                if not selector.select(RSS_POLL_S):
                    next_rss = self._watch_rss(next_rss)
                    continue
                next_rss = self._watch_rss(next_rss)
                try:
                    chunk = os.read(fd, READ_BYTES)
                except OSError:
                    chunk = b""
                if not chunk:
                    return
                if b"\n" not in chunk:  # a long line (a whole document) arrives in many reads
                    partial.append(chunk)
                    continue
                lines = chunk.split(b"\n")
                partial.append(lines[0])
                lines[0] = b"".join(partial)  # joined once: re-joining per read is quadratic
                partial = [lines.pop()]
                if lines:
                    with self._cond:
                        self._lines.extend(lines)
                        self._held += sum(len(line) for line in lines)
                        self._cond.notify_all()
        finally:
            selector.close()
            with self._cond:
                self._lines.append(None)
                self._cond.notify_all()

    def _watch_rss(self, next_rss: float) -> float:
        """The memory cap from outside, where the kernel offers none (see RSS_POLL_S)."""
        if self._memory is None or time.monotonic() < next_rss:
            return next_rss
        rss = platform_caps.rss_bytes(self._proc.pid)
        if rss is not None and rss > self._memory and not self.oom:
            self.oom = True
            self._on_oom()
        return time.monotonic() + RSS_POLL_S

    def get(self, timeout: float) -> bytes | None | bool:
        """The next line, None at the end of the child's output, False after `timeout`."""
        with self._cond:
            if not self._lines:
                self._cond.wait(timeout)
            if not self._lines:
                return False
            line = self._lines.popleft()
            if line is not None:
                self._held -= len(line)
                self._cond.notify_all()
            else:
                self._lines.appendleft(None)  # the end stays the end
            return line

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=5)


class SandboxedExtractor:
    """Parent side: one child per sync job, replaced after any failure."""

    def __init__(
        self,
        limits: ExtractLimits,
        ocr_options: dict[str, Any] | None,
        log_path: Path | None = None,
        stall_timeout_s: float = STALL_TIMEOUT_S,
        memory_bytes: int = CHILD_MEMORY_BYTES,
    ) -> None:
        self._limits = limits
        self._ocr_options = ocr_options
        self._log_path = log_path
        self.stall_timeout_s = stall_timeout_s
        self._memory = memory_bytes
        self._watch_rss = False  # set per child: True where the kernel cannot cap its memory
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: _Pump | None = None
        # Requests sent whose answer is not read yet: (path, whole document or blocks).
        self._pending: deque[tuple[Path, bool]] = deque()

    def _spawn(self) -> subprocess.Popen[bytes]:
        memory = self._memory

        capped = platform_caps.has_rlimit_as()
        self._watch_rss = not capped

        def limit_memory() -> None:
            if capped:
                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            _die_with_parent()

        stderr = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "helpers.extract.sandbox"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=str(REPO_DIR),
                preexec_fn=limit_memory,
                env={**os.environ, "OMP_THREAD_LIMIT": "1", "PYTHONUNBUFFERED": "1"},
            )
        finally:
            if self._log_path:
                stderr.close()  # type: ignore[union-attr]
        self._pump = _Pump(
            proc, PREFETCH_BUFFER_BYTES, memory if self._watch_rss else None, lambda: _kill(proc)
        )
        return proc

    def close(self) -> None:
        if self._pending:
            self._kill()  # a prefetched file nobody will read: do not wait for the child
        if self._proc is not None:
            proc, self._proc = self._proc, None
            try:
                proc.stdin.close()  # type: ignore[union-attr]
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            self._stop_pump()

    def _stop_pump(self) -> None:
        if self._pump is not None:
            self._pump.stop()
            self._pump = None

    def _kill(self) -> None:
        if self._proc is not None:
            _kill(self._proc)
            self._proc.wait()
            self._proc = None
        self._stop_pump()
        self._pending.clear()

    def _send(self, path: Path, document: bool) -> None:
        if self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._proc = self._spawn()
        request = {
            "path": str(path),
            "limits": self._limits.__dict__,
            "ocr": self._ocr_options,
            "document": document,
        }
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())  # type: ignore[union-attr]
            self._proc.stdin.flush()  # type: ignore[union-attr]
        except OSError as exc:
            if not self._pending:
                self._kill()
            # else the child died with files asked for (its pipe closed before poll() saw the
            # exit): the first of them gets the crash as its answer in its turn, read once.
            raise ExtractionError(f"extraction helper could not start: {exc}") from exc
        self._pending.append((path, document))

    def can_prefetch(self) -> bool:
        return len(self._pending) < PREFETCH_FILES

    def prefetch(self, path: Path) -> None:
        """Start reading `path` into a document now; it waits (bounded) for the
        `extract_document(path)` that must follow, in the order asked; a failure shows there.
        Ignored when the child is already PREFETCH_FILES ahead, and once it has died with
        files asked for: the first of them gets the crash as its answer in its turn (a child
        started now would be killed then, and that file read a second time)."""
        if len(self._pending) >= PREFETCH_FILES or (path, True) in self._pending:
            return
        if self._pending and (self._proc is None or self._proc.poll() is not None):
            return
        with contextlib.suppress(ExtractionError):  # extract_document() retries and reports it
            self._send(path, True)

    def _start(self, path: Path, document: bool) -> tuple[subprocess.Popen[bytes], _Pump]:
        if self._pending and self._pending[0] != (path, document):
            self._kill()  # prefetched something else: its answer is not wanted
        if not self._pending:
            self._send(path, document)
        assert self._proc is not None and self._pump is not None
        return self._proc, self._pump

    def extract_document(
        self,
        path: Path,
        check_cancel: Callable[[], None],
        on_progress: Callable[[int, int], None] | None = None,
    ) -> DocumentText:
        """The child reads and chunks `path` (helpers.extract.document.build_document_text);
        ExtractionError when it fails, stalls or dies, FileSkipped when it refuses the file."""
        proc, pump = self._start(path, True)
        finished = False
        try:
            for message in self._messages(proc, pump, check_cancel):
                if "progress" in message:
                    if on_progress is not None:
                        done, total = message["progress"]
                        on_progress(int(done), int(total))
                    continue
                finished = True
                self._pending.popleft()
                if "document" in message:
                    return decode_document(message["document"])
                if "skip" in message:
                    skip = FileSkipped(SkipReason(message["skip"]), message.get("detail", ""))
                    if skip.reason == SkipReason.SECRET:
                        raise MostlySecret(skip.detail)
                    raise skip
                raise ExtractionError(message.get("error", "no answer"), message.get("hint", ""))
            raise AssertionError("unreachable: _messages ends only by raising")
        finally:
            if not finished:
                self._kill()  # cancelled or abandoned mid-file: the child's state is unknown

    def extract(
        self,
        path: Path,
        check_cancel: Callable[[], None],
        on_progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[TextBlock]:
        """Blocks of `path`; ExtractionError when the child fails, stalls or dies.

        `on_progress(pages done, pages)` follows the child's reading of a multi-page file, in
        step with the blocks (it is called as the caller consumes them)."""
        proc, pump = self._start(path, False)
        finished = False
        try:
            for message in self._messages(proc, pump, check_cancel):
                if "block" in message:
                    yield _decode(message["block"])
                elif "progress" in message:
                    if on_progress is not None:
                        done, total = message["progress"]
                        on_progress(int(done), int(total))
                elif "error" in message:
                    finished = True
                    self._pending.popleft()
                    raise ExtractionError(message["error"], message.get("hint", ""))
                elif message.get("done"):
                    finished = True
                    self._pending.popleft()
                    return
        finally:
            if not finished:
                self._kill()  # cancelled or abandoned mid-file: the child's state is unknown

    def _messages(
        self, proc: subprocess.Popen[bytes], pump: _Pump, check_cancel: Callable[[], None]
    ) -> Iterator[dict[str, Any]]:
        last = time.monotonic()  # the stall clock runs from when this file is waited for
        while True:
            check_cancel()
            line = pump.get(POLL_S)
            if line is False:
                if time.monotonic() - last > self.stall_timeout_s:
                    raise ExtractionError(
                        f"extraction stalled for {self.stall_timeout_s:.0f} s and was stopped",
                        "the file may be malformed; it is retried on the next sync",
                    )
                continue
            if line is None:
                if pump.oom:
                    raise ExtractionError(
                        f"extraction ran out of memory (over {self._memory // 2**20} MB)",
                        "the file may be a decompression bomb or corrupt",
                    )
                code = proc.wait()
                reason = (
                    "ran out of memory"
                    if code in (-9, 137) or code == 3
                    else f"crashed (exit code {code})"
                )
                raise ExtractionError(
                    f"extraction {reason}", "the file may be a decompression bomb or corrupt"
                )
            last = time.monotonic()
            yield json.loads(line)  # type: ignore[arg-type]


# -- child -------------------------------------------------------------------------------------
def _child_context(
    request: dict[str, Any], on_progress: Callable[[int, int], None]
) -> ExtractContext:
    limits = ExtractLimits(**request["limits"])
    ocr_function = None
    hint = "install tesseract-ocr"
    options = request.get("ocr")
    if options:
        from helpers.ocr import engine as ocr

        config = ocr.OcrConfig(**options)
        status = ocr.ocr_status(config)
        hint = status.hint or hint
        if status.available:
            ocr_function = ocr.make_ocr_function(config)
    return ExtractContext(
        limits=limits, ocr=ocr_function, ocr_unavailable_hint=hint, on_progress=on_progress
    )


def _never() -> None:
    """The child is never asked to stop: the worker kills it on cancel."""


def _child_main() -> int:
    from helpers.extract import registry as extractors
    from helpers.extract.document import build_document_text
    from helpers.extract.failures import extraction_failure
    from helpers.extract.registry import format_of

    if not platform_caps.has_prctl():
        _watch_parent()

    out = sys.stdout
    contexts: dict[str, ExtractContext] = {}

    def report_pages(done: int, total: int) -> None:
        out.write(f'{{"progress": [{int(done)}, {int(total)}]}}\n')
        out.flush()

    for line in sys.stdin:
        request = json.loads(line)
        key = json.dumps([request["limits"], request.get("ocr")], sort_keys=True)
        if key not in contexts:
            contexts[key] = _child_context(request, report_pages)
        path = Path(request["path"])
        try:
            extract = extractors.extractor_for(path)
            if extract is None:
                raise ExtractionError(f"unsupported format: {path.suffix}")
            ctx = contexts[key]
            if request.get("document"):
                doc = build_document_text(extract(path, ctx), ctx.limits.max_text_chars, _never)
                out.write(json.dumps({"document": encode_document(doc)}, ensure_ascii=False))
                out.write("\n")
            else:
                for block in extract(path, ctx):
                    # Flushed with each page's progress and at the end: one write per page,
                    # not per block (the parent's stall clock needs a sign of life per page).
                    out.write('{"block": ' + _encode(block) + "}\n")
                out.write('{"done": true}\n')
        except FileSkipped as skip:
            out.write(json.dumps({"skip": str(skip.reason), "detail": skip.detail}) + "\n")
        except Exception as exc:  # noqa: BLE001 - a hostile file: report it, keep serving
            failure = extraction_failure(exc, format_of(path))
            out.write(json.dumps({"error": failure.message, "hint": failure.hint}) + "\n")
        out.flush()
    for ctx in contexts.values():  # the OCR here is the one that ran: stop its vision server
        close = getattr(ctx.ocr, "close", None)
        if close is not None:
            close()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
