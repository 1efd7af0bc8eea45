"""Embedding subprocess: the only module that imports onnxruntime and sentencepiece.

    python semantic_worker.py --model-dir DIR [--threads N] [--idle-seconds S] [--cache-dir D]

JSON lines: one request per stdin line, one response per stdout line; logs go to stderr. Ops:
info, embed, count_tokens, search, quit (see `rag_semantic.SemanticWorker` for the client).
Every failure is answered with {"ok": false, "error": ..., "hint": ...}, never a traceback.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import select
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from helpers import vector_pack
from helpers.semantic_model import INSTALL_HINT, ModelError, ModelInfo, load_model_info

log = logging.getLogger("semantic_worker")

DEFAULT_THREADS = 2  # the target machines have 2 cores; the server keeps working meanwhile
# XLM-R / fairseq id layout: SentencePiece id + 1, SentencePiece <unk> (0) -> 3.
BOS_ID, PAD_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
FAIRSEQ_OFFSET = 1
# Deterministic batching: texts sorted by token count, at most this many per batch. Measured on
# 2 threads with ~100-token texts: batch 1 = 49/s, 4 = 66/s, 8 = 64/s, 32 = 54/s.
MAX_BATCH_TEXTS = 8
# Cap on padded tokens per batch (texts x longest), so eight 512-token inputs run as two
# batches of four and attention buffers stay small.
MAX_BATCH_TOKENS = 2048
# Cosine scorer: Cast(float16 -> float32) + MatMul, 3x faster than numpy's astype + matmul
# (14 vs 80 ms per 100k x 384 on 2 threads). Serialized with onnx.helper (opset 17, ir 8) so the
# worker does not need the `onnx` package; tests rebuild it and compare.
SCORER_ONNX = base64.b64decode(
    "CAgSCm1jcC1yYWdkb2M6tAEKJwoHdmVjdG9ycxILdmVjdG9yc19mMzIiBENhc3QqCQoCdG8YAaABAgokCgt2ZWN0b3Jz"
    "X2YzMgoFcXVlcnkSBnNjb3JlcyIGTWF0TXVsEg1jb3NpbmVfc2NvcmVzWh0KB3ZlY3RvcnMSEgoQCAoSDAoDEgFuCgUS"
    "A2RpbVoaCgVxdWVyeRIRCg8IARILCgUSA2RpbQoCCAFiGQoGc2NvcmVzEg8KDQgBEgkKAxIBbgoCCAFCBAoAEBE="
)
# Idle onnxruntime threads sleep instead of spinning: on a busy 2-core machine spinning burned
# 65 % more CPU for the same batches (3.1 vs 1.9 CPU s) and starved the processes beside it.
ALLOW_SPINNING = "0"
MAX_LINE_BYTES = 64 * 1024 * 1024  # one request line; a runaway client cannot exhaust memory


class RequestError(Exception):
    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


class Embedder:
    """SentencePiece (XLM-R ids) + ONNX encoder + mean pooling + L2 normalisation."""

    def __init__(self, info: ModelInfo, threads: int) -> None:
        import onnxruntime as ort
        import sentencepiece as spm

        self.info = info
        # Loading the 250k-piece tokenizer costs ~0.7 s CPU, as much as the session: both
        # release the GIL, so they load side by side on the two cores.
        tokenizer: dict[str, Any] = {}

        def load_tokenizer() -> None:
            try:
                tokenizer["sp"] = spm.SentencePieceProcessor(model_file=str(info.tokenizer_file))
            except Exception as exc:  # re-raised below in the calling thread
                tokenizer["error"] = exc

        loader = threading.Thread(target=load_tokenizer, name="tokenizer-load")
        loader.start()
        try:
            self._load_sessions(ort, info, threads)
        finally:
            loader.join()
        if "error" in tokenizer:
            raise ModelError(
                f"cannot load {info.tokenizer_file}: {tokenizer['error']}",
                "re-download the model (python rag_server.py model fetch)",
            )
        self.sp = tokenizer["sp"]
        if self.sp.unk_id() != 0 or self.sp.piece_to_id("<s>") != 1:
            raise ModelError(
                f"{info.tokenizer_file}: not an XLM-R SentencePiece layout (<unk>=0, <s>=1)",
                "use an XLM-R family model such as paraphrase-multilingual-MiniLM-L12-v2",
            )

    def _load_sessions(self, ort: Any, info: ModelInfo, threads: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # The arena keeps peak buffers for the process lifetime: 484 vs 376 MiB peak RSS (32x100).
        options.enable_cpu_mem_arena = False
        options.add_session_config_entry("session.intra_op.allow_spinning", ALLOW_SPINNING)
        options.log_severity_level = 3
        self.session = ort.InferenceSession(
            str(info.onnx_file), options, providers=["CPUExecutionProvider"]
        )
        self.input_names = [i.name for i in self.session.get_inputs()]
        outputs = [o.name for o in self.session.get_outputs()]
        self.output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        scorer_options = ort.SessionOptions()
        scorer_options.intra_op_num_threads = threads
        scorer_options.add_session_config_entry("session.intra_op.allow_spinning", ALLOW_SPINNING)
        scorer_options.log_severity_level = 3
        self.scorer = ort.InferenceSession(
            SCORER_ONNX, scorer_options, providers=["CPUExecutionProvider"]
        )

    def full_ids(self, text: str, kind: str) -> list[int]:
        """Model ids with <s> and </s>, not truncated (its length is the token count)."""
        prompt = self.info.query_prompt if kind == "query" else self.info.passage_prompt
        pieces = self.sp.encode(prompt + text.strip())
        return [BOS_ID] + [UNK_ID if p == 0 else p + FAIRSEQ_OFFSET for p in pieces] + [EOS_ID]

    def truncate(self, ids: list[int]) -> list[int]:
        limit = self.info.max_seq_length
        return ids if len(ids) <= limit else ids[: limit - 1] + [EOS_ID]

    def embed(self, texts: list[str], kind: str) -> tuple[np.ndarray, list[int]]:
        """float16 unit vectors [n, dim] and each text's full token count."""
        full = [self.full_ids(t, kind) for t in texts]
        seqs = [self.truncate(ids) for ids in full]
        out = np.zeros((len(texts), self.info.dim), dtype=np.float16)
        for batch in plan_batches([len(s) for s in seqs]):
            out[batch] = self._run([seqs[i] for i in batch]).astype(np.float16)
        return out, [len(ids) for ids in full]

    def _run(self, seqs: list[list[int]]) -> np.ndarray:
        width = max(len(s) for s in seqs)
        ids = np.full((len(seqs), width), PAD_ID, dtype=np.int64)
        mask = np.zeros((len(seqs), width), dtype=np.int64)
        for row, seq in enumerate(seqs):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feed = {name: available[name] for name in self.input_names if name in available}
        unknown = [name for name in self.input_names if name not in available]
        if unknown:
            raise ModelError(
                f"{self.info.onnx_file.name}: unsupported model inputs {unknown}",
                "use a sentence-transformers ONNX export (input_ids, attention_mask)",
            )
        hidden = self.session.run([self.output], feed)[0]
        if hidden.ndim == 3:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        else:
            pooled = hidden  # the export already pools
        if pooled.shape[1] != self.info.dim:
            raise ModelError(
                f"model outputs dimension {pooled.shape[1]}, config says {self.info.dim}",
                "check 1_Pooling/config.json word_embedding_dimension",
            )
        return vector_pack.l2_normalise(pooled)

    def scores(self, vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
        feed = {"vectors": vectors, "query": query.reshape(-1, 1).astype(np.float32)}
        return self.scorer.run(["scores"], feed)[0].reshape(-1)


def plan_batches(lengths: list[int]) -> list[list[int]]:
    """Indices grouped shortest first, at most MAX_BATCH_TEXTS and MAX_BATCH_TOKENS padded."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = lengths[index]  # sorted ascending: the newcomer is the longest
        if current and (
            len(current) >= MAX_BATCH_TEXTS or (len(current) + 1) * width > MAX_BATCH_TOKENS
        ):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


# Read-only scans map the file instead of copying every page through SQLite's cache: 60 vs
# 100 ms to read 100k x 384 vectors. Only address space; the kernel pages it in and out.
SCAN_MMAP_BYTES = 256 * 1024 * 1024

Blocks = Iterable[tuple[np.ndarray, np.ndarray]]


class GenerationScanner:
    """Streams a ready generation's blocks; a warm worker keeps the last one in memory.

    Cold workers stream: holding 77 MB of fresh blocks cost 400 ms in page faults versus
    100 ms for reading block by block into reused buffers. Generations are immutable once
    ready, so the warm cache is keyed by (db, id, fingerprint, count, created_at).
    """

    def __init__(self, keep_in_memory: bool) -> None:
        self.keep_in_memory = keep_in_memory
        self.key: tuple[Any, ...] | None = None
        self.blocks: list[tuple[np.ndarray, np.ndarray]] = []

    def scan(
        self,
        db: str,
        generation: int,
        expected_fingerprint: str | None,
        dim: int,
        visit: Callable[[np.ndarray, np.ndarray], None],
    ) -> int:
        """Call visit(chunk_ids, vectors) per block; returns the number of blocks."""
        path = Path(db)
        if not path.is_absolute() or not path.is_file():
            raise RequestError(f"index not found: {db}", "pass the absolute path of the index")
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            key = (str(path), *self._check(conn, generation, expected_fingerprint, dim))
            if self.keep_in_memory and key == self.key:
                blocks: Blocks = self.blocks
            else:
                conn.execute(f"PRAGMA mmap_size = {SCAN_MMAP_BYTES}")
                blocks = self._read(conn, generation, dim)
                if self.keep_in_memory:
                    self.key, self.blocks = None, []  # never a half-read cache
                    self.blocks = list(blocks)
                    self.key, blocks = key, self.blocks
            count = 0
            for ids, vectors in blocks:
                visit(ids, vectors)
                count += 1
            return count
        finally:
            conn.close()

    @staticmethod
    def _check(
        conn: sqlite3.Connection, generation: int, expected_fingerprint: str | None, dim: int
    ) -> tuple[Any, ...]:
        row = conn.execute(
            "SELECT fingerprint, dim, ready, vector_count, created_at "
            "FROM semantic_generations WHERE id = ?",
            (generation,),
        ).fetchone()
        if row is None or not row[2]:
            raise RequestError(
                f"semantic generation {generation} is not ready",
                "run a sync so the semantic index is built",
            )
        fingerprint, gen_dim, _, count, created = row
        if expected_fingerprint and fingerprint != expected_fingerprint:
            raise RequestError(
                "the semantic index was built with another model",
                "run a sync to rebuild the semantic index for the current model",
            )
        if gen_dim != dim:
            raise RequestError(
                f"index dimension {gen_dim} differs from the model's {dim}",
                "run a sync to rebuild the semantic index for the current model",
            )
        return (generation, fingerprint, count, created)

    @staticmethod
    def _read(
        conn: sqlite3.Connection, generation: int, dim: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for ids_blob, vec_blob, n in conn.execute(
            "SELECT chunk_ids, vectors, count FROM semantic_blocks "
            "WHERE generation_id = ? ORDER BY block_no",
            (generation,),
        ):
            yield vector_pack.unpack_ids(ids_blob), vector_pack.unpack_vectors(vec_blob, n, dim)


class Worker:
    """Dispatches requests; the model loads on first use so `info` errors stay cheap."""

    def __init__(
        self, model_dir: Path, threads: int, cache_dir: Path | None, *, warm: bool = False
    ) -> None:
        self.model_dir = model_dir
        self.threads = threads
        self.cache_dir = cache_dir
        self._embedder: Embedder | None = None
        self._fingerprint: str | None = None
        self.scanner = GenerationScanner(keep_in_memory=warm)

    def embedder(self) -> Embedder:
        if self._embedder is None:
            missing = [m for m in ("onnxruntime", "sentencepiece") if not _importable(m)]
            if missing:
                raise RequestError(f"not installed: {', '.join(missing)}", INSTALL_HINT)
            info = load_model_info(self.model_dir, self.cache_dir, with_fingerprint=False)
            started = time.perf_counter()
            self._embedder = Embedder(info, self.threads)
            log.info("loaded %s in %.2f s", info.onnx_file, time.perf_counter() - started)
        return self._embedder

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "info":
            return self.info()
        if op == "embed":
            texts, kind = _texts(request), _kind(request)
            vectors, tokens = self.embedder().embed(texts, kind)
            return {
                "ok": True,
                "count": len(texts),
                "dim": int(vectors.shape[1]),
                "vectors": vector_pack.vectors_to_b64(vectors),
                "tokens": tokens,
            }
        if op == "count_tokens":
            texts, kind = _texts(request), _kind(request)
            embedder = self.embedder()
            return {"ok": True, "tokens": [len(embedder.full_ids(t, kind)) for t in texts]}
        if op == "search":
            return self.search(request)
        raise RequestError(f"unknown op {op!r}", "ops: info, embed, count_tokens, search, quit")

    def info(self) -> dict[str, Any]:
        embedder = self.embedder()
        if self._fingerprint is None:
            self._fingerprint = load_model_info(self.model_dir, self.cache_dir).fingerprint
        info = replace(embedder.info, fingerprint=self._fingerprint)
        return {
            "ok": True,
            "fingerprint": info.fingerprint,
            "dim": info.dim,
            "model_file": str(info.onnx_file),
            "model_name": info.name,
            "max_seq_length": info.max_seq_length,
            "prompts": info.prompts,
        }

    def search(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            db, generation = str(request["db"]), int(request["generation"])
            query, top_k = str(request["query"]), int(request.get("top_k", 10))
        except (KeyError, TypeError, ValueError) as exc:
            raise RequestError(f"bad search request: {exc}", "needs db, generation, query") from exc
        if top_k < 1:
            raise RequestError("top_k must be at least 1", "pass top_k >= 1")
        embedder = self.embedder()
        t0 = time.perf_counter()
        vectors, _ = embedder.embed([query], "query")
        q = vectors[0].astype(np.float32)
        t1 = time.perf_counter()
        top = vector_pack.TopK(top_k)
        blocks = self.scanner.scan(
            db,
            generation,
            request.get("fingerprint"),
            embedder.info.dim,
            lambda ids, block: top.add(ids, embedder.scores(block, q)),
        )
        t2 = time.perf_counter()
        log.info(
            "search generation %s: embed %.0f ms, read+scan %.0f ms (%d blocks)",
            generation,
            (t1 - t0) * 1000,
            (t2 - t1) * 1000,
            blocks,
        )
        return {"ok": True, "hits": [[cid, round(score, 6)] for cid, score in top.result()]}


def _texts(request: dict[str, Any]) -> list[str]:
    texts = request.get("texts")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise RequestError('"texts" must be a list of strings', 'send {"texts": ["..."]}')
    return texts


def _kind(request: dict[str, Any]) -> str:
    kind = request.get("kind", "passage")
    if kind not in ("passage", "query"):
        raise RequestError(f"unknown kind {kind!r}", 'use "passage" or "query"')
    return str(kind)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


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
                raise RequestError("request line too long", "send fewer texts per request")
        line = bytes(self.buffer[:newline])
        del self.buffer[: newline + 1]
        return line


def serve(worker: Worker, reader: LineReader, out: BinaryIO, idle_seconds: float | None) -> int:
    while True:
        try:
            line = reader.readline(idle_seconds)
        except RequestError as exc:
            _reply(out, {"ok": False, "error": str(exc), "hint": exc.hint})
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
            _reply(out, {"ok": False, "error": f"bad JSON: {exc}", "hint": "one object per line"})
            continue
        if request.get("op") == "quit":
            _reply(out, {"ok": True})
            return 0
        try:
            response = worker.handle(request)
        except (RequestError, ModelError) as exc:
            response = {"ok": False, "error": str(exc), "hint": exc.hint}
        except Exception as exc:  # the protocol must survive anything; details go to the log
            log.exception("request %s failed", request.get("op"))
            response = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "hint": "see the semantic worker log",
            }
        _reply(out, response)


def _reply(out: BinaryIO, response: dict[str, Any]) -> None:
    out.write(json.dumps(response, ensure_ascii=False).encode("utf-8") + b"\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="warm mode: exit when idle"
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="model hash cache folder")
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s semantic_worker %(message)s"
    )
    # The protocol owns the real stdout; anything a library prints (even from C) goes to stderr.
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    idle = args.idle_seconds if args.idle_seconds and args.idle_seconds > 0 else None
    worker = Worker(args.model_dir, max(1, args.threads), args.cache_dir, warm=idle is not None)
    return serve(worker, LineReader(sys.stdin.fileno()), protocol_out, idle)


if __name__ == "__main__":
    code = main()
    logging.shutdown()
    sys.stderr.flush()
    # Nothing is left to clean up (read-only SQLite, answers flushed); skipping interpreter and
    # onnxruntime teardown saves ~0.3 s per cold query.
    os._exit(code)
