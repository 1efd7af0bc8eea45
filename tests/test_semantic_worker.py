"""The embedding worker over a real subprocess, and model discovery/validation/fingerprints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
from semantic_fixtures import (
    CORPUS,
    EDGE_CASES,
    REAL_MODEL_DIR,
    build_tiny_model,
    real_sentences,
    train_sentencepiece,
)

import semantic_worker
from helpers.semantic import batching
from helpers.semantic import model as semantic_model
from helpers.semantic.client import SemanticWorker, WorkerError, WorkerTimeout
from helpers.semantic.lines import LineReader
from helpers.semantic.model import ModelError, check_availability, load_model_info

HF_REPO_FOLDER = "models--sentence-transformers--paraphrase-multilingual-MiniLM-L12-v2"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def worker(tiny_model: Path, tmp_path: Path):
    with SemanticWorker(tiny_model, log_path=tmp_path / "worker.log", cache_dir=tmp_path) as w:
        yield w


@pytest.fixture(scope="module")
def real_model() -> Path:
    if not (REAL_MODEL_DIR / "onnx").is_dir():
        pytest.fail(f"real model folder missing: {REAL_MODEL_DIR} (shared/ must sit beside main/)")
    return REAL_MODEL_DIR


def spm_count(model: Path, text: str) -> int:
    sp = spm.SentencePieceProcessor(model_file=str(model / "sentencepiece.bpe.model"))
    return len(sp.encode(text)) + 2  # <s> and </s>


def test_worker_round_trip_gives_info_unit_vectors_and_token_counts(
    worker: SemanticWorker, tiny_model: Path, tmp_path: Path
) -> None:
    info = worker.info()
    assert info.fingerprint == load_model_info(tiny_model, tmp_path).fingerprint
    assert info.dim == 32
    assert info.model_file.endswith("model_quantized.onnx")
    assert info.prompts == {"query": "query: ", "passage": "passage: "}
    texts = ["Lake Baikal is deep.", "  Как сбросить пароль?  ", "ต้มยำกุ้ง"]
    embedding = worker.embed(texts, "passage")
    assert embedding.vectors.dtype == np.float16 and embedding.vectors.shape == (3, 32)
    norms = np.linalg.norm(embedding.vectors.astype(np.float32), axis=1)
    assert np.allclose(norms, 1.0, atol=2e-3)
    expected = [spm_count(tiny_model, "passage: " + t.strip()) for t in texts]
    assert list(embedding.tokens) == expected
    assert worker.count_tokens(texts) == expected


def test_query_and_passage_prompts_are_prepended_before_tokenising(
    worker: SemanticWorker, tiny_model: Path, tmp_path: Path
) -> None:
    text = "Lake Baikal"
    query = worker.embed([text], "query")
    passage = worker.embed([text], "passage")
    assert query.tokens[0] == spm_count(tiny_model, "query: Lake Baikal")
    assert passage.tokens[0] == spm_count(tiny_model, "passage: Lake Baikal")
    cosine = float(query.vectors[0].astype(np.float32) @ passage.vectors[0].astype(np.float32))
    assert cosine < 0.999
    plain = build_tiny_model(tmp_path / "plain", prompts={})
    with SemanticWorker(plain, log_path=tmp_path / "plain.log") as no_prompts:
        q = no_prompts.embed([text], "query")
        p = no_prompts.embed([text], "passage")
    assert q.tokens == p.tokens == (spm_count(plain, text),)
    assert np.array_equal(q.vectors, p.vectors)


def test_a_model_without_token_type_ids_is_fed_only_its_own_inputs(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "xlmr", with_token_type_ids=False)
    with SemanticWorker(model, log_path=tmp_path / "w.log") as w:
        embedding = w.embed(["Lake Baikal", "ต้มยำกุ้ง"])
    assert embedding.vectors.shape == (2, 32)
    assert np.allclose(np.linalg.norm(embedding.vectors.astype(np.float32), axis=1), 1, atol=2e-3)


def test_inputs_longer_than_max_seq_length_are_truncated(worker: SemanticWorker) -> None:
    head = " ".join(["Lake Baikal is the deepest lake"] * 20)
    a, b = head + " water boils", head + " Счёт нужно оплатить"
    embedding = worker.embed([a, b])
    assert min(embedding.tokens) > 64  # counts report the full length
    assert np.array_equal(embedding.vectors[0], embedding.vectors[1])  # tails cut at 64


def test_the_same_texts_embed_to_identical_bytes_every_time(worker: SemanticWorker) -> None:
    texts = [f"{word} {n}" for n, word in enumerate(["lake", "пароль", "ไทย"] * 7)]
    first = worker.embed(texts).vectors
    second = worker.embed(texts).vectors
    assert first.tobytes() == second.tobytes()


def test_two_threads_give_the_same_bytes_as_one(tiny_model: Path, tmp_path: Path) -> None:
    texts = [f"{CORPUS[n % len(CORPUS)]} {n}" for n in range(45)]  # six batches
    results = []
    for threads in (1, 2):
        with SemanticWorker(
            tiny_model, log_path=tmp_path / "w.log", cache_dir=tmp_path, threads=threads
        ) as w:
            results.append(w.embed(texts).vectors.tobytes())
    assert len(batching.plan_batches([len(t) for t in texts])) > 2
    assert results[0] == results[1]


def test_the_worker_loads_its_sessions_before_the_first_request(
    tiny_model: Path, tmp_path: Path
) -> None:
    log = tmp_path / "w.log"
    with SemanticWorker(tiny_model, log_path=log, cache_dir=tmp_path) as w:
        deadline = time.monotonic() + 60
        while "sessions loaded" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "sessions loaded" in log.read_text()  # no request was sent yet
        assert w.embed(["Lake Baikal"]).vectors.shape == (1, 32)


def test_query_tokenizer_ids_equal_the_full_tokenizers_on_a_tiny_model(
    tiny_model: Path, tmp_path: Path
) -> None:
    tokenizer = tiny_model / "sentencepiece.bpe.model"
    full = spm.SentencePieceProcessor(model_file=str(tokenizer))
    query = semantic_worker.QueryTokenizer.open(tokenizer, tmp_path)
    assert query is not None
    for text in [*CORPUS, *EDGE_CASES, "words the model never saw: xyzzy ЖЖЖ"]:
        assert query.encode("query: " + text) == full.encode("query: " + text), text


def test_a_bpe_tokenizer_gets_no_query_tokenizer(tmp_path: Path) -> None:
    bpe = tmp_path / "bpe.model"
    bpe.write_bytes(train_sentencepiece(model_type="bpe"))
    assert semantic_worker.QueryTokenizer.open(bpe, tmp_path / "cache") is None
    assert semantic_worker.QueryTokenizer.open(bpe, tmp_path / "cache") is None  # from the index


def test_batches_are_sorted_by_length_and_capped() -> None:
    lengths = [500, 3, 40, 3, 512, 600, 7, 9, 11, 13, 15, 17, 19, 21]
    batches = batching.plan_batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths)
    for batch in batches:
        assert len(batch) <= batching.MAX_BATCH_TEXTS
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= (
            batching.MAX_BATCH_TOKENS
        )


def test_bad_requests_get_json_errors_with_hints_and_no_traceback(tiny_model: Path) -> None:
    requests = [
        "not json",
        json.dumps({"op": "dance"}),
        json.dumps({"op": "embed", "texts": "a string, not a list"}),
        json.dumps({"op": "embed", "kind": "sideways", "texts": ["x"]}),
        json.dumps({"op": "search", "db": "relative.sqlite3", "generation": 1, "query": "x"}),
        json.dumps({"op": "quit"}),
    ]
    done = subprocess.run(
        [sys.executable, str(Path(semantic_worker.__file__)), "--model-dir", str(tiny_model)],
        input="\n".join(requests) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(requests)
    for answer in answers[:-1]:
        assert answer["ok"] is False and answer["error"] and answer["hint"]
    assert answers[-1] == {"ok": True}
    assert "Traceback" not in done.stdout + done.stderr


def test_requests_sent_ahead_are_answered_in_order_with_their_own_results(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A build writes the next embed request before reading the last answer: the worker
    starts it on its pool at once, yet answers strictly in request order, errors included."""
    first = [f"{CORPUS[n % len(CORPUS)]} {n}" for n in range(40)]  # several batches
    second = ["Lake Baikal", "ต้มยำกุ้ง"]
    with SemanticWorker(tiny_model, log_path=tmp_path / "w.log", cache_dir=tmp_path) as w:
        alone = [w.embed(first).vectors, w.embed(second).vectors]
        w.send_embed(first)
        w.send({"op": "dance"})
        w.send_embed(second)
        w.send({"op": "count_tokens", "texts": second})
        one = w.receive_embed()
        with pytest.raises(WorkerError, match="unknown op"):
            w.receive("dance")
        two = w.receive_embed()
        counted = w.receive("count_tokens")["tokens"]
    assert one.vectors.tobytes() == alone[0].tobytes()
    assert two.vectors.tobytes() == alone[1].tobytes()
    assert counted == list(two.tokens)


def test_line_reader_reassembles_long_lines_and_reports_idle_and_eof() -> None:
    read_fd, write_fd = os.pipe()
    reader = LineReader(read_fd)
    long_line = b"x" * 300_000  # several os.read calls
    assert reader.readline(timeout=0.01) is None  # nothing written yet: idle
    writer = threading.Thread(target=os.write, args=(write_fd, long_line + b"\nsecond\ntail"))
    writer.start()
    try:
        assert reader.readline(timeout=30) == long_line
        assert reader.readline(timeout=30) == b"second"
        writer.join()
        os.close(write_fd)
        assert reader.readline(timeout=30) == b"tail"  # a last line without newline
        assert reader.readline(timeout=30) is None  # end of input
    finally:
        os.close(read_fd)


def test_worker_exits_on_end_of_input_and_after_idle_seconds(tiny_model: Path) -> None:
    script = str(Path(semantic_worker.__file__))
    eof = subprocess.run(
        [sys.executable, script, "--model-dir", str(tiny_model)],
        input="",
        capture_output=True,
        timeout=60,
    )
    assert eof.returncode == 0 and eof.stdout == b""
    idle = subprocess.Popen(
        [sys.executable, script, "--model-dir", str(tiny_model), "--idle-seconds", "0.3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert idle.wait(timeout=60) == 0  # stdin still open: only the idle timer ends it
    finally:
        idle.kill()
        idle.communicate()


def test_a_missing_model_folder_is_reported_with_the_fetch_hint(tmp_path: Path) -> None:
    with (
        SemanticWorker(tmp_path / "nowhere", log_path=tmp_path / "w.log") as w,
        pytest.raises(WorkerError) as error,
    ):
        w.info()
    assert "not found" in str(error.value)
    assert "model fetch" in error.value.hint and "--semantic-model-dir" in error.value.hint


def test_a_request_past_its_timeout_kills_the_worker(tiny_model: Path, tmp_path: Path) -> None:
    w = SemanticWorker(tiny_model, log_path=tmp_path / "w.log").start()
    pid = w.pid
    assert pid is not None
    with pytest.raises(WorkerTimeout):
        w.request({"op": "embed", "texts": ["x"] * 2000}, timeout_s=0.001)
    assert w.pid is None
    assert not Path(f"/proc/{pid}").exists() or "Z" in _proc_state(pid)
    assert w.embed(["a fresh worker answers"]).vectors.shape == (1, 32)
    w.close()


def test_a_warm_worker_that_exited_when_idle_is_restarted_on_the_next_request(
    tiny_model: Path, tmp_path: Path
) -> None:
    with SemanticWorker(tiny_model, log_path=tmp_path / "w.log", idle_seconds=0.2) as w:
        first = w.embed(["Lake Baikal"])
        old_pid = w.pid
        deadline = time.monotonic() + 60
        while w.is_running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not w.is_running  # it left on its own
        second = w.embed(["Lake Baikal"])
        assert w.pid != old_pid
    assert np.array_equal(first.vectors, second.vectors)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def test_scorer_constant_is_the_cast_matmul_graph_built_with_onnx_helper() -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["vectors"], ["vectors_f32"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["vectors_f32", "query"], ["scores"]),
        ],
        "cosine_scores",
        [
            helper.make_tensor_value_info("vectors", TensorProto.FLOAT16, ["n", "dim"]),
            helper.make_tensor_value_info("query", TensorProto.FLOAT, ["dim", 1]),
        ],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="mcp-ragdoc"
    )
    model.ir_version = 8
    assert onnx.load_from_string(semantic_worker.SCORER_ONNX) == model
    onnx.checker.check_model(model)


# --- model folder: discovery, validation, fingerprint ----------------------------------------


def test_fingerprint_changes_with_the_onnx_file_and_the_prompts(
    tiny_model: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "model"
    shutil.copytree(tiny_model, copy)
    cache = tmp_path / "cache"
    first = load_model_info(copy, cache).fingerprint
    assert (cache / semantic_model.HASH_CACHE_FILE).is_file()
    assert load_model_info(copy, cache).fingerprint == first
    other = build_tiny_model(tmp_path / "other", seed=7)
    shutil.copy(other / "onnx" / "model_quantized.onnx", copy / "onnx" / "model_quantized.onnx")
    second = load_model_info(copy, cache).fingerprint
    assert second != first
    settings = copy / "config_sentence_transformers.json"
    settings.write_text(json.dumps({"prompts": {"query": "q: ", "passage": "p: "}}))
    third = load_model_info(copy, cache)
    assert third.fingerprint not in (first, second)
    assert third.prompts == {"query": "q: ", "passage": "p: "}


def test_discovery_uses_the_snapshot_refs_main_points_at_in_the_hf_cache(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "hub" / HF_REPO_FOLDER
    shutil.copytree(tiny_model, repo / "snapshots" / "abc123")
    (repo / "snapshots" / "incomplete").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123\n")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    found = semantic_model.discover_model_dir(None)
    assert found == repo / "snapshots" / "abc123"
    assert (
        load_model_info(found).name == "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    assert semantic_model.discover_model_dir(None) is None
    explicit = tmp_path / "explicit"
    assert semantic_model.discover_model_dir(explicit) == explicit.resolve()


def test_an_incomplete_folder_names_every_missing_file(tiny_model: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    (broken / "sentencepiece.bpe.model").unlink()
    shutil.rmtree(broken / "onnx")
    with pytest.raises(ModelError) as error:
        load_model_info(broken)
    message = str(error.value)
    assert "sentencepiece.bpe.model" in message and "onnx/model_quantized.onnx" in message
    assert "model fetch" in error.value.hint


def test_the_onnx_file_is_chosen_by_cpu_features(tmp_path: Path) -> None:
    onnx_dir = tmp_path / "onnx"
    onnx_dir.mkdir()
    for name in ("model_qint8_avx512_vnni.onnx", "model_quint8_avx2.onnx", "model.onnx"):
        (onnx_dir / name).write_bytes(b"")

    def pick(*features: str) -> str | None:
        chosen = semantic_model.choose_onnx_file(tmp_path, frozenset(features))
        return chosen.name if chosen else None

    assert pick("avx512f", "avx512_vnni", "avx2") == "model_qint8_avx512_vnni.onnx"
    assert pick("avx2") == "model_quint8_avx2.onnx"
    assert pick("arm64") == "model.onnx"
    (onnx_dir / "model_quantized.onnx").write_bytes(b"")
    assert pick() == "model_quantized.onnx"


def test_availability_is_off_unavailable_or_ready_with_the_fix_in_the_hint(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    off = check_availability(tiny_model, enabled=False, cache_dir=tmp_path)
    assert off.state == "off" and "--semantic on" in off.hint
    missing = check_availability(None, enabled=True, cache_dir=tmp_path)
    assert missing.state == "unavailable" and "model fetch" in missing.hint
    ready = check_availability(tiny_model, enabled=True, cache_dir=tmp_path)
    assert ready.state == "ready" and ready.model is not None and ready.model.dim == 32


# --- the real model (must exist: CI lays shared/ beside the repo) -----------------------------


def test_real_model_gives_unit_384_dim_vectors_with_e5_prompts(
    real_model: Path, tmp_path: Path
) -> None:
    texts = ["How do I reset my password?", "Как сбросить пароль?", "วิธีรีเซ็ตรหัสผ่าน"]
    with SemanticWorker(real_model, log_path=tmp_path / "w.log", cache_dir=tmp_path) as w:
        info = w.info()
        embedding = w.embed(texts, "query")
    assert info.dim == 384 and info.max_seq_length == 512
    assert info.prompts == {"query": "query: ", "passage": "passage: "}
    assert embedding.vectors.shape == (3, 384)
    norms = np.linalg.norm(embedding.vectors.astype(np.float32), axis=1)
    assert np.allclose(norms, 1.0, atol=2e-3)
    assert list(embedding.tokens) == [spm_count(real_model, "query: " + t) for t in texts]


def test_real_query_tokenizer_ids_equal_the_full_tokenizers_on_real_sentences(
    real_model: Path, tmp_path: Path
) -> None:
    tokenizer = real_model / "sentencepiece.bpe.model"
    full = spm.SentencePieceProcessor(model_file=str(tokenizer))
    query = semantic_worker.QueryTokenizer.open(tokenizer, tmp_path)
    assert query is not None
    texts = [f"query: {t}" for t in [*real_sentences(), *EDGE_CASES]]
    mismatched = [t for t in texts if query.encode(t) != full.encode(t)]
    assert mismatched == []
    assert len(texts) > 300


def reference_vectors(model: Path, texts: list[str]) -> np.ndarray:
    """The embedding path before the speed work: onnxruntime defaults (every fusion), two
    intra-op threads, batches of up to 8 texts / 2,048 padded tokens run one after another."""
    import onnxruntime as ort

    sp = spm.SentencePieceProcessor(model_file=str(model / "sentencepiece.bpe.model"))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(
        str(model / "onnx" / "model_quantized.onnx"), options, ["CPUExecutionProvider"]
    )
    seqs = [[0] + [3 if p == 0 else p + 1 for p in sp.encode("passage: " + t)] + [2] for t in texts]
    order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
    out = np.zeros((len(texts), 384), dtype=np.float32)
    batch: list[int] = []
    for index in [*order, None]:
        width = len(seqs[index]) if index is not None else 0
        if batch and (index is None or len(batch) >= 8 or (len(batch) + 1) * width > 2048):
            longest = max(len(seqs[i]) for i in batch)
            ids = np.full((len(batch), longest), 1, dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(batch):
                ids[row, : len(seqs[i])], mask[row, : len(seqs[i])] = seqs[i], 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids}
            hidden = session.run(None, feed)[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            out[batch] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
            batch = []
        if index is not None:
            batch.append(index)
    return out


def test_real_model_vectors_stay_equivalent_to_the_previous_settings(
    real_model: Path, tmp_path: Path
) -> None:
    texts = real_sentences()
    vectors = []
    for _ in range(2):  # two fresh workers: the same bytes every time
        with SemanticWorker(real_model, log_path=tmp_path / "w.log", cache_dir=tmp_path) as w:
            vectors.append(w.embed(texts).vectors)
    assert vectors[0].tobytes() == vectors[1].tobytes()
    cosines = np.sum(vectors[0].astype(np.float32) * reference_vectors(real_model, texts), axis=1)
    assert len(texts) > 250
    assert cosines.min() >= 0.99
    assert np.median(cosines) >= 0.995


def test_a_worker_that_dies_with_a_request_in_flight_is_a_crash_not_a_silent_respawn(
    worker: SemanticWorker,
) -> None:
    """A pipelined build sends request k+1 before reading answer k: if the worker died on k,
    a fresh worker must not answer k+1 in k's place (every later batch would get the vectors
    of the next one)."""
    from helpers.semantic.client import WorkerCrashed

    worker.info()  # started and answering
    pid = worker.pid
    worker.send_embed(["first request"])
    os.kill(pid, 9)
    deadline = time.monotonic() + 10
    while worker.is_running and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(WorkerCrashed):
        worker.send_embed(["second request"])
    # With nothing in flight a dead worker is replaced, as an idle-timed-out one always was.
    assert worker.embed(["after the crash"]).vectors.shape == (1, 32)
    assert worker.pid != pid
