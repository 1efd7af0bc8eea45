"""The semantic worker's JSON-lines protocol: requests read with an idle timeout, answers
written in request order.

The worker (which imports only helpers/) reads and answers with it; its client,
helpers.semantic.client, writes the lines. A line is one JSON request, bounded so a runaway client
cannot exhaust memory.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from helpers.errors import RagError

log = logging.getLogger("semantic_worker")

MAX_LINE_BYTES = 64 * 1024 * 1024  # one request line; a runaway client cannot exhaust memory


class LineTooLong(ValueError):
    """A request line past MAX_LINE_BYTES."""


class LineReader:
    """Lines from a file descriptor with an idle timeout (select + os.read: no hidden buffer)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.eof = False

    def readline(self, timeout: float | None) -> bytes | None:
        """A line without its newline; None on EOF or when `timeout` seconds pass idle."""
        scanned = 0  # bytes already searched for a newline: long lines stay linear
        while (newline := self.buffer.find(b"\n", scanned)) < 0:
            if self.eof:
                rest = bytes(self.buffer)
                self.buffer.clear()
                return rest or None
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return None
            data = os.read(self.fd, 1 << 16)
            self.eof = not data
            scanned = len(self.buffer)
            self.buffer += data
            if len(self.buffer) > MAX_LINE_BYTES:
                raise LineTooLong(f"request line longer than {MAX_LINE_BYTES} bytes")
        line = bytes(self.buffer[:newline])
        del self.buffer[: newline + 1]
        return line


# -- the answer side: in request order, whatever finishes first --------------------------------
Answer = dict[str, Any]


def answer(
    op: object, start: Callable[[], Answer | Callable[[], Answer]]
) -> Answer | Callable[[], Answer]:
    """start() gives an answer or (embed) a call that waits for one; every failure, now or
    later, becomes {"ok": false, "error", "hint"}, never a traceback on the protocol."""
    try:
        started = start()
    except Exception as exc:
        return failure(op, exc)
    if not callable(started):
        return started

    def later() -> Answer:
        try:
            return started()
        except Exception as exc:
            return failure(op, exc)

    return later


def failure(op: object, exc: Exception) -> Answer:
    """Our own errors with their hint; anything else named, its traceback in the log only."""
    if isinstance(exc, RagError):
        return {"ok": False, "error": exc.message, "hint": exc.hint}
    log.error("request %s failed", op, exc_info=exc)  # the protocol must survive anything
    return {
        "ok": False,
        "error": f"{type(exc).__name__}: {exc}",
        "hint": "see the semantic worker log",
    }


class OrderedReplies:
    """Writes answers in request order from its own thread; an item is an answer or a call
    that waits for one (an embed whose batches are still on the pool). close() returns once
    everything queued is written."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.queue: queue.SimpleQueue[Answer | Callable[[], Answer] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._write_all, name="replies", daemon=True)
        self.thread.start()

    def put(self, item: Answer | Callable[[], Answer]) -> None:
        self.queue.put(item)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()

    def _write_all(self) -> None:
        while (item := self.queue.get()) is not None:
            response = item() if callable(item) else item
            self.out.write(json.dumps(response, ensure_ascii=False).encode("utf-8") + b"\n")
            self.out.flush()
