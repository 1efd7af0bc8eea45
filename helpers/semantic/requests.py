"""What a semantic worker request line says, and the loop that reads them and answers in order.

It stands apart from semantic_worker.py because none of it touches the model: parsing and
validating a request (texts, kind, search arguments) and framing the answers (bad JSON, quit,
an over-long line, one answer per request in request order) are plain protocol work, testable
without onnxruntime or sentencepiece, which stay semantic_worker's alone. The worker is passed in
as anything with `handle` and `submit_embed` (RequestHandler).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol

from helpers.errors import RagError
from helpers.semantic.lines import LineReader, LineTooLong, OrderedReplies, answer

log = logging.getLogger("semantic_worker")


class RequestError(RagError):
    """A request line the worker cannot serve (bad JSON, unknown op, wrong model)."""

    code = "bad_request"


class RequestHandler(Protocol):
    """The worker as serve sees it: an embed answer to wait for, or any other op answered."""

    def submit_embed(self, request: dict[str, Any]) -> Callable[[], dict[str, Any]]: ...

    def handle(self, request: dict[str, Any]) -> dict[str, Any]: ...


def request_texts(request: dict[str, Any]) -> list[str]:
    texts = request.get("texts")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise RequestError('"texts" must be a list of strings', 'send {"texts": ["..."]}')
    return texts


def request_kind(request: dict[str, Any]) -> str:
    kind = request.get("kind", "passage")
    if kind not in ("passage", "query"):
        raise RequestError(f"unknown kind {kind!r}", 'use "passage" or "query"')
    return str(kind)


def search_args(request: dict[str, Any]) -> tuple[str, int, str, int]:
    """(db, generation, query, top_k) of a search request."""
    try:
        db, generation = str(request["db"]), int(request["generation"])
        query, top_k = str(request["query"]), int(request.get("top_k", 10))
    except (KeyError, TypeError, ValueError) as exc:
        raise RequestError(f"bad search request: {exc}", "needs db, generation, query") from exc
    if top_k < 1:
        raise RequestError("top_k must be at least 1", "pass top_k >= 1")
    return db, generation, query, top_k


def serve(
    worker: RequestHandler, reader: LineReader, out: BinaryIO, idle_seconds: float | None
) -> int:
    """Read requests and start them; a writer thread sends the answers in request order. An
    embed request's answer waits for its batches while the next request is already read and
    queued on the pool (the client sends one ahead), so the cores never wait for the pipe."""
    replies = OrderedReplies(out)
    try:
        while True:
            try:
                line = reader.readline(idle_seconds)
            except LineTooLong as exc:
                replies.put(
                    {"ok": False, "error": str(exc), "hint": "send fewer texts per request"}
                )
                return 1
            if line is None:
                log.info("stdin closed or idle for %s s: exiting", idle_seconds)
                return 0
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("request must be a JSON object")
            except ValueError as exc:
                replies.put(
                    {"ok": False, "error": f"bad JSON: {exc}", "hint": "one object per line"}
                )
                continue
            if request.get("op") == "quit":
                replies.put({"ok": True})
                return 0
            op = request.get("op")
            replies.put(
                answer(op, lambda r=request: worker.submit_embed(r))
                if op == "embed"
                else answer(op, lambda r=request: worker.handle(r))
            )
    finally:
        replies.close()
