"""Extraction in a child process with a memory cap and a stall timeout.

Binary formats go through C libraries (pdfium, libxml, zlib, LibreOffice, tesseract) that a
hostile file can send into an endless loop or a multi-gigabyte allocation; Python cannot interrupt
either. The sync worker therefore sends each such file to a long-lived child
(`python -m helpers.extract.sandbox`), reads its blocks as JSON lines, and kills and replaces the
child when it stalls, runs out of memory or dies; that file is reported and the job goes on.
"""

from __future__ import annotations

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

REPO_DIR = Path(__file__).resolve().parents[2]
# No block for this long means the child is stuck (an OCR page takes ~5 s, LibreOffice ~2 s).
STALL_TIMEOUT_S = 180.0
# Address-space cap of the child: a bomb hits MemoryError here instead of eating the machine.
CHILD_MEMORY_BYTES = 3 * 1024**3
POLL_S = 0.2  # how often a waiting parent checks for cancel


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
            return subprocess.Popen(
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

    def close(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            try:
                proc.stdin.close()  # type: ignore[union-attr]
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()

    def _kill(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # the child and its converters
            except OSError:
                self._proc.kill()
            self._proc.wait()
            self._proc = None

    def extract(
        self,
        path: Path,
        check_cancel: Callable[[], None],
        on_progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[TextBlock]:
        """Blocks of `path`; ExtractionError when the child fails, stalls or dies.

        `on_progress(pages done, pages)` follows the child's reading of a multi-page file, in
        step with the blocks (it is called as the caller consumes them)."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._spawn()
        proc = self._proc
        request = {
            "path": str(path),
            "limits": self._limits.__dict__,
            "ocr": self._ocr_options,
        }
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        except OSError as exc:
            self._kill()
            raise ExtractionError(f"extraction helper could not start: {exc}") from exc
        finished = False
        try:
            for message in self._messages(proc, check_cancel):
                if "block" in message:
                    yield _decode(message["block"])
                elif "progress" in message:
                    if on_progress is not None:
                        done, total = message["progress"]
                        on_progress(int(done), int(total))
                elif "error" in message:
                    finished = True
                    raise ExtractionError(message["error"], message.get("hint", ""))
                elif message.get("done"):
                    finished = True
                    return
        finally:
            if not finished:
                self._kill()  # cancelled or abandoned mid-file: the child's state is unknown

    def _check_memory(self, proc: subprocess.Popen[bytes]) -> None:
        """The memory cap from outside, where the kernel offers none (see RSS_POLL_S)."""
        rss = platform_caps.rss_bytes(proc.pid)
        if rss is not None and rss > self._memory:
            raise ExtractionError(
                f"extraction ran out of memory (over {self._memory // 2**20} MB)",
                "the file may be a decompression bomb or corrupt",
            )

    def _messages(
        self, proc: subprocess.Popen[bytes], check_cancel: Callable[[], None]
    ) -> Iterator[dict[str, Any]]:
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        buffer = b""
        last = time.monotonic()
        next_rss = last + RSS_POLL_S
        try:
            while True:
                check_cancel()
                if self._watch_rss and time.monotonic() >= next_rss:
                    next_rss = time.monotonic() + RSS_POLL_S
                    self._check_memory(proc)
                newline = buffer.find(b"\n")
                if newline != -1:
                    line, buffer = buffer[:newline], buffer[newline + 1 :]
                    last = time.monotonic()
                    yield json.loads(line)
                    continue
                if not selector.select(POLL_S):
                    if time.monotonic() - last > self.stall_timeout_s:
                        raise ExtractionError(
                            f"extraction stalled for {self.stall_timeout_s:.0f} s and was stopped",
                            "the file may be malformed; it is retried on the next sync",
                        )
                    continue
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    code = proc.wait()
                    reason = (
                        "ran out of memory"
                        if code in (-9, 137) or code == 3
                        else f"crashed (exit code {code})"
                    )
                    raise ExtractionError(
                        f"extraction {reason}", "the file may be a decompression bomb or corrupt"
                    )
                buffer += chunk
        finally:
            selector.close()


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


def _child_main() -> int:
    from helpers.extract import registry as extractors
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
            for block in extract(path, contexts[key]):
                out.write('{"block": ' + _encode(block) + "}\n")
                out.flush()
            out.write('{"done": true}\n')
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
