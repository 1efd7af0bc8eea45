"""Embedding subprocess: the only module that imports onnxruntime and sentencepiece, and of
ours only helpers/ (tests/test_architecture.py checks both).

    python semantic_worker.py --model-dir DIR [--threads N] [--idle-seconds S] [--cache-dir D]
                              [--preload-passages] [--first-pass-min-vectors N]

JSON lines: one request per stdin line, one response per stdout line; logs go to stderr. Ops:
info, embed, count_tokens, search, quit (`helpers.semantic.client.SemanticWorker` is the client).
Every failure is answered with {"ok": false, "error": ..., "hint": ...}, never a traceback.
The ONNX sessions start loading when the process starts, before the first request arrives
(with --preload-passages the passage tokenizer too: a sync spawns its build worker ahead).
--cache-dir keeps what is worth keeping between runs: file hashes and the query tokenizer index;
neither is needed, both are rebuilt when missing. A warm worker (--idle-seconds) holds the last
generation searched; from --first-pass-min-vectors vectors on it also holds its first-pass codes
(helpers/semantic/first_pass.py) and scores exactly only their best candidates.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import logging
import os
import struct
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from helpers.semantic import first_pass, vector_pack, vector_stage
from helpers.semantic.batching import plan_batches
from helpers.semantic.lines import LineReader
from helpers.semantic.model import (
    FETCH_HINT,
    INSTALL_HINT,
    ModelError,
    ModelInfo,
    file_sha256,
    load_model_info,
)
from helpers.semantic.requests import (
    RequestError,
    request_kind,
    request_texts,
    search_args,
    serve,
)
from helpers.semantic.worker_args import parse_worker_args

log = logging.getLogger("semantic_worker")

# XLM-R / fairseq id layout: SentencePiece id + 1, SentencePiece <unk> (0) -> 3.
BOS_ID, PAD_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
FAIRSEQ_OFFSET = 1
# onnxruntime 1.32's SkipLayerNormalization CPU kernel is slower than the Add + Add +
# LayerNormalization it replaces, so the fusion slows the encoder (bench/RESULTS.md "Semantic
# phase vs a bare onnxruntime session"). Every other default fusion is kept.
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]
# Cosine scorer: Cast(float16 -> float32) + MatMul, 3x faster than numpy's astype + matmul
# (14 vs 80 ms per 100k x 384 on 2 threads). Serialized with onnx.helper (opset 17, ir 8) so the
# worker does not need the `onnx` package; tests rebuild it and compare.
SCORER_ONNX = base64.b64decode(
    "CAgSCm1jcC1yYWdkb2M6tAEKJwoHdmVjdG9ycxILdmVjdG9yc19mMzIiBENhc3QqCQoCdG8YAaABAgokCgt2ZWN0b3Jz"
    "X2YzMgoFcXVlcnkSBnNjb3JlcyIGTWF0TXVsEg1jb3NpbmVfc2NvcmVzWh0KB3ZlY3RvcnMSEgoQCAoSDAoDEgFuCgUS"
    "A2RpbVoaCgVxdWVyeRIRCg8IARILCgUSA2RpbQoCCAFiGQoGc2NvcmVzEg8KDQgBEgkKAxIBbgoCCAFCBAoAEBE="
)
# Idle onnxruntime threads sleep instead of spinning: on a busy 2-core machine spinning burns
# CPU for the same batches and starves the processes beside it.
ALLOW_SPINNING = "0"
SUBSET_INDEX = "spm-subset-v1-{sha}.npz"  # under --cache-dir, per tokenizer file content
UNIGRAM, NORMAL_PIECE = 1, 1  # TrainerSpec.model_type and SentencePiece.Type values
SUBSET_MAX_CHARS = 2000  # longer texts go to the full tokenizer (substrings grow as n x 16)


def check_runtime() -> None:
    missing = [m for m in ("onnxruntime", "sentencepiece") if importlib.util.find_spec(m) is None]
    if missing:
        raise RequestError(f"not installed: {', '.join(missing)}", INSTALL_HINT)


def load_tokenizer(info: ModelInfo) -> Any:
    """The XLM-R SentencePiece model: ~0.5 s of CPU for 250k pieces (the GIL is released)."""
    check_runtime()
    import sentencepiece as spm

    path = info.tokenizer_file
    try:
        sp = spm.SentencePieceProcessor(model_file=str(path))
    except Exception as exc:
        raise ModelError(f"cannot load {path}: {exc}", FETCH_HINT) from exc
    if sp.unk_id() != 0 or sp.piece_to_id("<s>") != 1:
        raise ModelError(
            f"{path}: not an XLM-R SentencePiece layout (<unk>=0, <s>=1)",
            "use an XLM-R family model such as paraphrase-multilingual-MiniLM-L12-v2",
        )
    return sp


class QueryTokenizer:
    """Exact SentencePiece ids of a short text without loading every piece (~0.5 s of CPU).

    A Unigram segmentation only uses pieces that occur in the normalised text, and its unknown
    penalty comes from the lowest score (user-defined pieces use the highest): a model of those
    pieces plus every non-normal one gives the same ids in ~2 ms. The sorted piece table is
    built once per tokenizer file (~0.4 s) into the cache dir and loads in ~12 ms.
    """

    def __init__(self, index: Path) -> None:
        import sentencepiece as spm

        self._spm = spm
        with np.load(index) as z:
            self.keys, self.order = z["keys"], z["order"]  # sorted piece bytes, their ids
            self.scores, self.types = z["scores"], z["types"]  # by id
            blob, ends = z["fixed_blob"].tobytes(), z["fixed_ends"].tolist()
            starts = [0, *ends[:-1]]
            self.fixed = {
                int(i): blob[a:b] for i, a, b in zip(z["fixed"], starts, ends, strict=True)
            }
            self.base = z["base"].tobytes()  # the model without pieces
        self.normalizer = spm.SentencePieceProcessor(model_proto=self._model(self.fixed))

    @classmethod
    def open(
        cls, tokenizer_file: Path, cache_dir: Path, *, build: bool = True
    ) -> QueryTokenizer | None:
        """None when the model is not Unigram (or, with build=False, has no index yet); builds
        the index on first use."""
        check_runtime()
        sha = file_sha256(tokenizer_file, cache_dir)
        index = cache_dir / SUBSET_INDEX.format(sha=sha[:16])
        if not build and not index.is_file():
            return None
        tmp = index.with_name(f"{index.name}.{os.getpid()}.tmp")
        try:
            if not index.is_file():
                cache_dir.mkdir(parents=True, exist_ok=True)
                with tmp.open("wb") as out:
                    np.savez(out, **_subset_index(tokenizer_file))
                os.replace(tmp, index)
        except OSError as exc:  # an unwritable cache dir only costs speed
            log.warning("cannot write %s (%s): queries use the full tokenizer", index, exc)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return None
        try:
            with np.load(index) as z:
                if "keys" not in z.files:
                    return None
            return cls(index)
        except (OSError, ValueError) as exc:  # removed or damaged under us: the full tokenizer
            log.warning("cannot read %s (%s): queries use the full tokenizer", index, exc)
            return None

    def encode(self, text: str) -> list[int]:
        norm = self.normalizer.normalize(text).encode("utf-8")
        width = self.keys.dtype.itemsize
        starts = [i for i in range(len(norm)) if norm[i] & 0xC0 != 0x80] + [len(norm)]
        found = set()
        for n, a in enumerate(starts[:-1]):  # every substring on character boundaries
            for b in starts[n + 1 :]:
                if b - a > width:
                    break
                found.add(norm[a:b])
        subs = np.array(sorted(found), dtype=self.keys.dtype)
        at = np.minimum(np.searchsorted(self.keys, subs), len(self.keys) - 1)
        hit = self.keys[at] == subs
        pieces = dict(zip(self.order[at[hit]].tolist(), subs[hit].tolist(), strict=True))
        pieces.update(self.fixed)
        ids = sorted(pieces)
        sp = self._spm.SentencePieceProcessor(model_proto=self._model(pieces))
        return [ids[j] for j in sp.encode(text)]

    def _model(self, pieces: dict[int, bytes]) -> bytes:
        """The base model plus `pieces` in id order (repeated protobuf fields concatenate)."""
        out = [self.base]
        for i in sorted(pieces):
            piece = pieces[i]
            body = b"\x0a" + _varint(len(piece)) + piece + b"\x15"
            body += struct.pack("<f", float(self.scores[i])) + b"\x18" + _varint(int(self.types[i]))
            out.append(b"\x0a" + _varint(len(body)) + body)
        return b"".join(out)


def _subset_index(tokenizer_file: Path) -> dict[str, np.ndarray]:
    """Arrays of the QueryTokenizer index; only {"unsupported"} for a non-Unigram model."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto()
    model.ParseFromString(tokenizer_file.read_bytes())
    if model.trainer_spec.model_type != UNIGRAM:
        return {"unsupported": np.zeros(1)}
    pieces = [p.piece.encode("utf-8") for p in model.pieces]
    scores = np.array([p.score for p in model.pieces], dtype=np.float32)
    types = np.array([p.type for p in model.pieces], dtype=np.uint8)
    normal = np.nonzero(types == NORMAL_PIECE)[0]
    fixed = set(np.nonzero(types != NORMAL_PIECE)[0].tolist())
    fixed |= {int(normal[np.argmin(scores[normal])]), int(normal[np.argmax(scores[normal])])}
    fixed |= {i for i, p in enumerate(pieces) if b"\0" in p}  # numpy byte strings drop NULs
    fixed_ids = sorted(fixed)
    searchable = np.array(sorted(set(range(len(pieces))) - fixed), dtype=np.int32)
    keys = np.array([pieces[i] for i in searchable], dtype=f"S{max(map(len, pieces))}")
    order = np.argsort(keys, kind="stable")
    base = pb.ModelProto()  # the specs only: top-level extras such as self-test samples go
    base.trainer_spec.CopyFrom(model.trainer_spec)
    base.normalizer_spec.CopyFrom(model.normalizer_spec)
    if model.HasField("denormalizer_spec"):
        base.denormalizer_spec.CopyFrom(model.denormalizer_spec)
    return {
        "keys": keys[order],
        "order": searchable[order],
        "scores": scores,
        "types": types,
        "fixed": np.array(fixed_ids, dtype=np.int32),
        "fixed_blob": np.frombuffer(b"".join(pieces[i] for i in fixed_ids), dtype=np.uint8),
        "fixed_ends": np.cumsum([len(pieces[i]) for i in fixed_ids], dtype=np.int64),
        "base": np.frombuffer(base.SerializeToString(), dtype=np.uint8),
    }


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def load_sessions(info: ModelInfo, threads: int) -> tuple[Any, Any]:
    """(encoder, scorer) onnxruntime sessions; ~0.25 s of CPU, mostly reading the weights."""
    check_runtime()
    import onnxruntime as ort

    options = ort.SessionOptions()
    # One thread per run: batches run side by side instead (see Embedder), which avoids a
    # two-thread barrier after each of the ~450 operators of a batch.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # The arena reuses buffers between batches. With batches capped at 1,024 tokens it also
    # lowers peak RSS and saves the page faults of fresh buffers (bench/RESULTS.md "Semantic
    # phase vs a bare onnxruntime session").
    options.enable_cpu_mem_arena = True
    options.log_severity_level = 3
    session = _encoder_session(ort, options, info)
    scorer_options = ort.SessionOptions()
    scorer_options.intra_op_num_threads = threads
    scorer_options.add_session_config_entry("session.intra_op.allow_spinning", ALLOW_SPINNING)
    scorer_options.log_severity_level = 3
    scorer = ort.InferenceSession(SCORER_ONNX, scorer_options, providers=["CPUExecutionProvider"])
    return session, scorer


def _encoder_session(ort: Any, options: Any, info: ModelInfo) -> Any:
    """The encoder with every graph optimization except the disabled fusions. A saved optimized
    copy would load 40-70 ms faster but cost ~120 MB of data-dir disk per model: not kept."""
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(
        str(info.onnx_file),
        options,
        ["CPUExecutionProvider"],
        disabled_optimizers=DISABLED_OPTIMIZERS,
    )


class ModelLoad:
    """The sessions load from process start; the tokenizer is chosen by the first request.

    Passages need the full SentencePiece model (~0.3-0.5 s of CPU); a search only needs its
    query's pieces (QueryTokenizer). `passages=True` (a build worker) loads the full model from
    process start too, beside the sessions, so a worker spawned ahead of its first request is
    ready for it. Errors surface as answers to requests.
    """

    def __init__(
        self, model_dir: Path, cache_dir: Path | None, threads: int, *, passages: bool = False
    ) -> None:
        self.cache_dir = cache_dir
        self.started = time.perf_counter()
        self.sessions_ready = 0.0  # seconds after start
        loader = ThreadPoolExecutor(1, "model-load")  # its exceptions re-raise in result()
        self.info = loader.submit(load_model_info, model_dir, cache_dir, with_fingerprint=False)
        self.sessions = loader.submit(self._load_sessions, threads)
        # A thread of its own: sentencepiece releases the GIL while it parses (0.4 s for both
        # side by side against 0.5 + 0.2 s one after the other).
        self.tokenizer: Future[Any] | None = None
        if passages:
            self.tokenizer = ThreadPoolExecutor(1, "tokenizer-load").submit(self._load_tokenizer)
        self.pool = ThreadPoolExecutor(threads, "embed") if threads > 1 else None
        self._embedders: dict[bool, Embedder] = {}

    def _load_tokenizer(self) -> Any:
        sp = load_tokenizer(self.info.result())
        log.info("tokenizer loaded %.2f s after start", time.perf_counter() - self.started)
        return sp

    def _load_sessions(self, threads: int) -> tuple[Any, Any]:
        sessions = load_sessions(self.info.result(), threads)
        self.sessions_ready = time.perf_counter() - self.started
        log.info("sessions loaded %.2f s after start", self.sessions_ready)
        return sessions

    def embedder(self, for_query: bool = False) -> Embedder:
        """Full tokenizer, or the query tokenizer for short texts when a cache dir is given."""
        for_query = for_query and self.cache_dir is not None
        if for_query not in self._embedders:
            info = self.info.result()  # a missing or broken folder is the first thing to report
            if for_query:
                encode = self._query_encode(info)
            elif self.tokenizer is not None:
                encode = self._passage_encode(info, self.tokenizer)
            else:
                encode = load_tokenizer(info).encode
            session, scorer = self.sessions.result()
            self._embedders[for_query] = Embedder(info, encode, session, scorer, self.pool)
            log.info(
                "%s ready %.2f s after start (sessions loaded at %.2f s)",
                "query path" if for_query else "model",
                time.perf_counter() - self.started,
                self.sessions_ready,
            )
        return self._embedders[for_query]

    def _passage_encode(self, info: ModelInfo, full: Future[Any]) -> Callable[[str], list[int]]:
        """The full tokenizer once it has loaded. Before that, the query tokenizer gives the
        same ids (~5-15 ms a text) when its index is already in the cache dir (a search built
        it): a small phase does not wait for the full model."""
        query = None
        if self.cache_dir is not None and not full.done():
            query = QueryTokenizer.open(info.tokenizer_file, self.cache_dir, build=False)
        if query is not None:
            log.info("passages use the query tokenizer until the full one has loaded")

        def encode(text: str) -> list[int]:
            if query is None or full.done() or len(text) > SUBSET_MAX_CHARS:
                return full.result().encode(text)
            return query.encode(text)

        return encode

    def _query_encode(self, info: ModelInfo) -> Callable[[str], list[int]]:
        assert self.cache_dir is not None
        query = QueryTokenizer.open(info.tokenizer_file, self.cache_dir)

        def encode(text: str) -> list[int]:
            if query is not None and len(text) <= SUBSET_MAX_CHARS:
                return query.encode(text)
            return self.embedder().sp_encode(text)  # not Unigram, or a very long text

        return encode


class Embedder:
    """SentencePiece (XLM-R ids) + ONNX encoder + mean pooling + L2 normalisation."""

    def __init__(
        self,
        info: ModelInfo,
        sp_encode: Callable[[str], list[int]],
        session: Any,
        scorer: Any,
        pool: ThreadPoolExecutor | None,
    ) -> None:
        self.info = info
        self.sp_encode = sp_encode  # text -> SentencePiece ids
        self.session = session
        self.scorer = scorer
        self.input_names = [i.name for i in session.get_inputs()]
        outputs = [o.name for o in session.get_outputs()]
        self.output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        # The batches of one request run on the pool's threads at once (session.run releases
        # the GIL); the batches are fixed first, so which thread runs one never changes a vector.
        self.pool = pool

    def full_ids(self, text: str, kind: str) -> list[int]:
        """Model ids with <s> and </s>, not truncated (its length is the token count)."""
        prompt = self.info.query_prompt if kind == "query" else self.info.passage_prompt
        pieces = self.sp_encode(prompt + text.strip())
        return [BOS_ID] + [UNK_ID if p == 0 else p + FAIRSEQ_OFFSET for p in pieces] + [EOS_ID]

    def truncate(self, ids: list[int]) -> list[int]:
        limit = self.info.max_seq_length
        return ids if len(ids) <= limit else ids[: limit - 1] + [EOS_ID]

    def embed(self, texts: list[str], kind: str) -> tuple[np.ndarray, list[int]]:
        """float16 unit vectors [n, dim] and each text's full token count."""
        return self.submit(texts, kind)()

    def submit(self, texts: list[str], kind: str) -> Callable[[], tuple[np.ndarray, list[int]]]:
        """Start embedding on the pool; the returned call waits for the result. The batches
        of the next request queue behind these, so the pool never idles between requests."""
        full = [self.full_ids(t, kind) for t in texts]
        seqs = [self.truncate(ids) for ids in full]
        batches = plan_batches([len(s) for s in seqs])
        # Biggest batches first (padded tokens): two threads then finish together instead of
        # one running the longest batch alone at the end. Order never changes a vector.
        batches.sort(key=lambda b: -len(b) * len(seqs[b[-1]]))

        def run(batch: list[int]) -> np.ndarray:
            return self._run([seqs[i] for i in batch])

        futures = None
        if self.pool is not None and len(batches) > 1:
            futures = [self.pool.submit(run, batch) for batch in batches]

        def finish() -> tuple[np.ndarray, list[int]]:
            out = np.zeros((len(texts), self.info.dim), dtype=np.float16)
            results: Iterable[np.ndarray] = (
                map(run, batches) if futures is None else (f.result() for f in futures)
            )
            for batch, vectors in zip(batches, results, strict=True):
                out[batch] = vectors.astype(np.float16)
            return out, [len(ids) for ids in full]

        return finish

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


class Worker:
    """Dispatches requests; the model loads in the background from `preload()` or first use."""

    def __init__(
        self,
        model_dir: Path,
        threads: int,
        cache_dir: Path | None,
        *,
        warm: bool = False,
        passages: bool = False,
        first_pass_min_vectors: int | None = None,
    ) -> None:
        self.model_dir = model_dir
        self.threads = threads
        self.cache_dir = cache_dir
        self.passages = passages  # load the full tokenizer from the start (a build worker)
        self._load: ModelLoad | None = None
        self._fingerprint: str | None = None
        self.scanner = vector_pack.GenerationScanner(keep_in_memory=warm)
        self.first_pass = None  # a cold worker streams: it keeps no codes between requests
        if warm:
            self.first_pass = first_pass.FirstPassCache(
                threads,
                first_pass.MIN_VECTORS
                if first_pass_min_vectors is None
                else first_pass_min_vectors,
            )

    def preload(self) -> None:
        """Start loading now, so the first request finds the sessions (nearly) ready."""
        if self._load is None:
            self._load = ModelLoad(
                self.model_dir, self.cache_dir, self.threads, passages=self.passages
            )

    def embedder(self, for_query: bool = False) -> Embedder:
        self.preload()
        assert self._load is not None
        return self._load.embedder(for_query)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "info":
            return self.info()
        if op == "embed":
            return self.submit_embed(request)()
        if op == "count_tokens":
            texts, kind = request_texts(request), request_kind(request)
            embedder = self.embedder()
            return {"ok": True, "tokens": [len(embedder.full_ids(t, kind)) for t in texts]}
        if op == "search":
            return self.search(request)
        raise RequestError(f"unknown op {op!r}", "ops: info, embed, count_tokens, search, quit")

    def submit_embed(self, request: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        """The embed answer as a call that waits for the pool (serve writes it in order)."""
        texts, kind = request_texts(request), request_kind(request)
        finish = self.embedder().submit(texts, kind)

        def answer() -> dict[str, Any]:
            vectors, tokens = finish()
            return {
                "ok": True,
                "count": len(texts),
                "dim": int(vectors.shape[1]),
                "vectors": vector_pack.vectors_to_b64(vectors),
                "tokens": tokens,
            }

        return answer

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
        db, generation, query, top_k = search_args(request)
        self.preload()
        assert self._load is not None
        target = (db, generation, request.get("fingerprint"), self._load.info.result().dim)
        if not self._load.sessions.done():  # the model is still loading: start the vectors' side
            vector_stage.prepare(self.scanner, self.first_pass, request, target)
        embedder = self.embedder(for_query=True)
        t0 = time.perf_counter()
        vectors, _ = embedder.embed([query], "query")
        q = vectors[0].astype(np.float32)
        t1 = time.perf_counter()
        stage = vector_stage.top_hits(
            self.scanner,
            self.first_pass,
            request,
            target,
            q,
            lambda v: embedder.scores(v, q),
            top_k,
        )
        log.info(
            "search generation %s: embed %.0f ms, %s", generation, (t1 - t0) * 1000, stage.summary
        )
        return {"ok": True, "hits": [[cid, round(score, 6)] for cid, score in stage.hits]}


def main(argv: list[str] | None = None) -> int:
    args = parse_worker_args(argv, __doc__.splitlines()[0])
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s semantic_worker[%(process)d] %(message)s",
    )
    # The protocol owns the real stdout; anything a library prints (even from C) goes to stderr.
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker(
        args.model_dir,
        args.threads,
        args.cache_dir,
        warm=args.idle_seconds is not None,
        passages=args.preload_passages,
        first_pass_min_vectors=args.first_pass_min_vectors,
    )
    worker.preload()
    return serve(worker, LineReader(sys.stdin.fileno()), protocol_out, args.idle_seconds)


if __name__ == "__main__":
    code = main()
    logging.shutdown()
    sys.stderr.flush()
    # Nothing is left to clean up (read-only SQLite, answers flushed); skipping interpreter and
    # onnxruntime teardown saves ~0.3 s per cold query.
    os._exit(code)
