"""The request side of the semantic worker's JSON-lines protocol: lines read with an idle timeout.

The worker (which imports only helpers/) reads with it; its client, rag_semantic_client, writes
the lines. A line is one JSON request, bounded so a runaway client cannot exhaust memory.
"""

from __future__ import annotations

import os
import select

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
