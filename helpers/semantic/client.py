"""Client of `semantic_worker.py`: spawn it, speak its JSON-lines protocol, enforce timeouts.

No ML import here (numpy only, to decode vectors). Every failure becomes a typed
`SemanticError` whose hint names the worker log, so callers never see a raw pipe error.
The worker reads its requests with `helpers/semantic/lines.LineReader`, the other end of the
same line framing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import queue
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from helpers.errors import RagError
from helpers.semantic import vector_pack
from helpers.semantic.allowed import AllowedRanges
from helpers.semantic.worker_args import DEFAULT_THREADS, WorkerArgs

WORKER_SCRIPT = Path(__file__).resolve().parents[2] / "semantic_worker.py"
# Per request: model load (~0.5-1 s) plus one embed request (~0.5 s for 64 texts of 100
# tokens on 2 cores); generous for slow or busy machines, short enough to notice a hung worker.
DEFAULT_TIMEOUT_S = 120.0
CLOSE_WAIT_S = 5.0  # a worker asked to quit exits at once; after this it is killed

Kind = Literal["passage", "query"]


class SemanticError(RagError):
    """Base of the semantic channel's errors; `hint` says what to do."""

    code = "semantic_failed"


class WorkerError(SemanticError):
    """The worker answered {"ok": false}."""


class WorkerCrashed(SemanticError):
    """The worker exited (or was killed) before answering."""


class WorkerTimeout(SemanticError):
    """The worker did not answer in time and was killed."""


@dataclass(frozen=True)
class WorkerInfo:
    fingerprint: str
    dim: int
    model_file: str
    model_name: str
    max_seq_length: int
    prompts: dict[str, str]


@dataclass(frozen=True)
class Embedding:
    vectors: np.ndarray  # float16 [n, dim], unit rows
    tokens: tuple[int, ...]  # per text, with <s> and </s>, before truncation


class SemanticWorker:
    """One `semantic_worker.py` subprocess; use as a context manager.

    The worker starts loading its model as soon as it is spawned, before the first request.
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        log_path: Path,
        cache_dir: Path | None = None,
        threads: int = DEFAULT_THREADS,
        idle_seconds: float | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        preload_passages: bool = False,
        first_pass_min_vectors: int | None = None,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.log_path = Path(log_path)
        self.cache_dir = cache_dir
        self.threads = threads
        self.idle_seconds = idle_seconds
        self.timeout_s = timeout_s
        self.preload_passages = preload_passages  # a build worker: the tokenizer too
        self.first_pass_min_vectors = first_pass_min_vectors  # warm: first pass from this size
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        # Requests sent and not yet answered: a worker that dies with some in flight is a crash
        # of those requests, never silently replaced (its successor would answer the next
        # request in the place of the lost one).
        self._unanswered = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> SemanticWorker:
        if self._proc is not None:
            return self
        command = WorkerArgs(
            self.model_dir,
            self.threads,
            self.cache_dir,
            self.idle_seconds,
            self.preload_passages,
            self.first_pass_min_vectors,
        ).command(WORKER_SCRIPT)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._lines = queue.Queue()  # a fresh queue: nothing stale from a killed predecessor
        self._unanswered = 0
        with self.log_path.open("ab") as log_file:
            pipe = subprocess.PIPE
            self._proc = subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=log_file)
        threading.Thread(
            target=_pump_lines, args=(self._proc.stdout, self._lines), daemon=True
        ).start()
        return self

    def __enter__(self) -> SemanticWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, payload: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request and wait for its answer; typed errors for every failure.

        A worker that already exited (idle timeout in warm mode) is replaced first.
        """
        self.send(payload)
        return self.receive(str(payload.get("op")), timeout_s)

    def send(self, payload: dict[str, Any]) -> None:
        """Write one request without waiting; `receive` returns the answers in request order.
        A build sends the next embed request before reading the last answer, so the worker
        never waits for the caller between requests."""
        if self._proc is not None and self._proc.poll() is not None:
            if self._unanswered:
                raise self._crashed()
            self.kill()
        proc = self.start()._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(payload, ensure_ascii=False).encode("utf-8") + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._crashed() from exc
        self._unanswered += 1

    def receive(self, op: str, timeout_s: float | None = None) -> dict[str, Any]:
        """The answer to the oldest request not yet received."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            line = self._lines.get(timeout=limit)
        except queue.Empty:
            self.kill()
            raise WorkerTimeout(
                f"semantic worker gave no answer to {op!r} in {limit:.0f} s",
                f"the machine may be overloaded; see {self.log_path}",
            ) from None
        if line is None:
            raise self._crashed()
        self._unanswered = max(0, self._unanswered - 1)
        try:
            response = json.loads(line)
        except ValueError as exc:
            self.kill()
            raise WorkerCrashed(
                f"semantic worker wrote a non-JSON line: {line[:200]!r}", f"see {self.log_path}"
            ) from exc
        if not response.get("ok"):
            raise WorkerError(str(response.get("error")), str(response.get("hint") or ""))
        return response

    def info(self) -> WorkerInfo:
        r = self.request({"op": "info"})
        return WorkerInfo(**{f.name: r[f.name] for f in dataclasses.fields(WorkerInfo)})

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> Embedding:
        self.send_embed(texts, kind)
        return self.receive_embed()

    def send_embed(self, texts: Sequence[str], kind: Kind = "passage") -> None:
        self.send({"op": "embed", "kind": kind, "texts": list(texts)})

    def receive_embed(self) -> Embedding:
        r = self.receive("embed")
        vectors = vector_pack.vectors_from_b64(r["vectors"], r["count"], r["dim"])
        return Embedding(vectors, tuple(r["tokens"]))

    def count_tokens(self, texts: Sequence[str], kind: Kind = "passage") -> list[int]:
        payload = {"op": "count_tokens", "kind": kind, "texts": list(texts)}
        return list(self.request(payload)["tokens"])

    def search(
        self,
        db_path: Path,
        generation: int,
        query: str,
        top_k: int,
        *,
        fingerprint: str | None = None,
        allowed: AllowedRanges | None = None,
    ) -> list[tuple[int, float]]:
        """Exact cosine top-k of `query` over one ready generation (chunk id, score); with
        `allowed`, over those chunk ids only (an exact search filter)."""
        db = str(Path(db_path).resolve())
        payload = {"op": "search", "db": db, "generation": generation, "query": query}
        if allowed is not None:
            payload["allowed"] = allowed.encode()
        r = self.request({**payload, "top_k": top_k, "fingerprint": fingerprint})
        return [(int(cid), float(score)) for cid, score in r["hits"]]

    def close(self) -> None:
        """Ask the worker to quit; kill it if it does not within CLOSE_WAIT_S."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        try:
            if proc.poll() is None:
                proc.stdin.write(b'{"op":"quit"}\n')
                proc.stdin.flush()
        except OSError:
            pass  # it already exited
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        self._unanswered = 0
        if proc is not None:
            proc.kill()
            proc.wait()
            if proc.stdin is not None:
                with contextlib.suppress(OSError):  # a broken pipe to a dead process
                    proc.stdin.close()

    def _crashed(self) -> WorkerCrashed:
        code = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = self._proc.wait(timeout=CLOSE_WAIT_S) if self._proc else None
        self.kill()
        return WorkerCrashed(
            f"semantic worker exited (code {code}) before answering", f"see {self.log_path}"
        )


def _pump_lines(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    """Move stdout lines into a queue so requests can wait with a timeout; None marks EOF.

    This thread owns the stream and closes it at EOF (closing it from another thread while a
    read is blocked is unsafe).
    """
    try:
        for line in iter(stream.readline, b""):
            lines.put(line)
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)
        stream.close()
