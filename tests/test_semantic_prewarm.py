"""The sync's build worker is spawned ahead of the semantic phase (helpers.semantic.prewarm): real
sync jobs, the real model, real worker processes. It is the worker the build uses, a sync that
reads nothing spawns none, and cancel, a failure or a killed sync worker end it."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from conftest import make_config, write_corpus
from secret_fixtures import SECRETS
from semantic_fixtures import (
    EVAL_DIR,
    REAL_MODEL_DIR,
    add_document,
    child_processes,
    real_sentences,
)

import rag_service
import semantic_worker
import sync_job_worker
from helpers.config import Config
from helpers.semantic import generations
from helpers.semantic.client import SemanticWorker
from helpers.semantic.prewarm import WorkerPrewarm
from helpers.store import index_db
from helpers.store.job_rows import JobView

STARTED = re.compile(r"semantic worker (\d+) started ahead: (.+)")
WAIT_S = 120.0  # generous: a loaded 2-core machine; only waits for an event, never timed


@pytest.fixture(scope="module")
def real_model() -> Path:
    if not (REAL_MODEL_DIR / "onnx").is_dir():
        pytest.fail(f"real model folder missing: {REAL_MODEL_DIR} (shared/ must sit beside main/)")
    return REAL_MODEL_DIR


@pytest.fixture
def semantic_config(tmp_path: Path, knowledge: Path, real_model: Path) -> Config:
    return make_config(knowledge, tmp_path / "state", semantic=True, semantic_model_dir=real_model)


def write_notes(root: Path, count: int = 4) -> None:
    topics = ["signing keys", "backup schedule", "invoice terms", "password reset", "holidays"]
    for i in range(count):
        body = f"# Note {i}\n\nHow we handle {topics[i % len(topics)]}: step {i} of the policy.\n"
        (root / f"note{i}.md").write_text(body, encoding="utf-8")


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def job_log(config: Config, job_id: str) -> str:
    path = config.logs_dir / f"worker-{job_id}.log"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def started_ahead(config: Config, job_id: str) -> list[tuple[int, str]]:
    return [(int(pid), why) for pid, why in STARTED.findall(job_log(config, job_id))]


def worker_lines(config: Config) -> list[tuple[int, str]]:
    """(pid, message) of every line of the semantic worker log."""
    path = config.logs_dir / generations.WORKER_LOG
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return [(int(p), m) for p, m in re.findall(r"semantic_worker\[(\d+)\] (.*)", text)]


def detached_sync(config: Config) -> JobView:
    view = rag_service.start_sync(config)
    return rag_service.wait_for_job(config, view.job_id, timeout_s=WAIT_S)


def semantic_children(ignore: frozenset[int] = frozenset()) -> list[int]:
    """Build workers (semantic_worker.py --preload-passages) this test process started, found
    through /proc; `ignore` leaves out those an earlier test left (none should be)."""
    found = []
    for pid, args in child_processes():
        if any(a.endswith(b"semantic_worker.py") for a in args) and (
            b"--preload-passages" in args and alive(pid) and pid not in ignore
        ):
            found.append(pid)
    return found


@pytest.fixture
def earlier_workers() -> frozenset[int]:
    return frozenset(semantic_children())


def vector_and_chunk_counts(config: Config) -> tuple[int, int]:
    conn = index_db.connect(config.db_path)
    try:
        generation = generations.latest_ready_generation(conn)
        (chunks,) = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()
    finally:
        conn.close()
    return (generation.vector_count if generation else 0), chunks


def test_the_build_embeds_with_the_worker_the_sync_started_ahead(
    semantic_config: Config, knowledge: Path
) -> None:
    write_notes(knowledge)
    view = detached_sync(semantic_config)
    assert view.state == "succeeded", view.message
    [(pid, why)] = started_ahead(semantic_config, view.job_id)
    assert why == "note0.md is new"  # spawned at the first file, before it was read
    lines = worker_lines(semantic_config)
    assert {p for p, _ in lines} == {pid}  # no second worker was spawned for the build
    messages = [m for _, m in lines]
    assert any(m.startswith("tokenizer loaded") for m in messages)  # --preload-passages
    assert any(m.startswith("model ready") for m in messages)  # it served the embed requests
    vectors, chunks = vector_and_chunk_counts(semantic_config)
    assert vectors == chunks > 0
    wait_until(lambda: not alive(pid), "the worker to exit with its job")


def test_a_sync_that_reads_nothing_or_only_the_same_bytes_spawns_no_worker(
    semantic_config: Config, knowledge: Path
) -> None:
    write_notes(knowledge)
    assert detached_sync(semantic_config).state == "succeeded"
    before = worker_lines(semantic_config)
    unchanged = detached_sync(semantic_config)
    assert unchanged.state == "succeeded" and unchanged.counts["unchanged"] == 4
    assert started_ahead(semantic_config, unchanged.job_id) == []
    assert worker_lines(semantic_config) == before  # no process was spawned at all
    # Same bytes, new mtime: the files are read again and their chunks do not change, so
    # there is nothing to embed and no worker to start (a checkout or a copy touches many).
    for n in range(4):
        note = knowledge / f"note{n}.md"
        os.utime(note, ns=(note.stat().st_atime_ns, note.stat().st_mtime_ns + 10**9))
    touched = detached_sync(semantic_config)
    assert touched.state == "succeeded" and touched.counts["unchanged"] == 4
    assert touched.total_files == 4  # all four were read again
    assert started_ahead(semantic_config, touched.job_id) == []
    assert worker_lines(semantic_config) == before
    vectors, chunks = vector_and_chunk_counts(semantic_config)
    assert vectors == chunks > 0


def test_a_file_skipped_as_secret_last_time_does_not_start_the_worker_again(
    semantic_config: Config, knowledge: Path
) -> None:
    """A mostly-secret file leaves no documents row, so every sync reads it again; it is not
    new text to embed and starts no worker unless it comes out indexed."""
    write_notes(knowledge)
    (knowledge / "keys.txt").write_text(SECRETS[1].value + "\n", encoding="utf-8")
    first = detached_sync(semantic_config)
    assert first.state == "succeeded" and first.counts["skipped"] >= 1
    before = worker_lines(semantic_config)
    again = detached_sync(semantic_config)
    assert again.state == "succeeded" and again.counts["unchanged"] == 4
    assert again.total_files >= 1  # keys.txt was read again
    assert started_ahead(semantic_config, again.job_id) == []
    assert worker_lines(semantic_config) == before


def test_an_edit_that_keeps_the_size_starts_the_worker_once_the_file_is_read(
    semantic_config: Config, knowledge: Path
) -> None:
    write_notes(knowledge)
    assert detached_sync(semantic_config).state == "succeeded"
    note = knowledge / "note2.md"
    text = note.read_text(encoding="utf-8")
    edited = text.replace("invoice terms", "invoice rules")
    assert len(edited) == len(text) and edited != text
    note.write_text(edited, encoding="utf-8")
    view = detached_sync(semantic_config)
    assert view.state == "succeeded" and view.counts["updated"] == 1
    [(pid, why)] = started_ahead(semantic_config, view.job_id)
    assert why == "note2.md was updated"  # its size said nothing: its outcome did
    assert any(p == pid and m.startswith("model ready") for p, m in worker_lines(semantic_config))
    vectors, chunks = vector_and_chunk_counts(semantic_config)
    assert vectors == chunks > 0


def test_vectors_behind_the_chunks_start_the_worker_with_the_job(
    semantic_config: Config, knowledge: Path
) -> None:
    write_notes(knowledge)
    lexical = make_config(knowledge, semantic_config.data_dir, semantic=False)
    assert detached_sync(lexical).state == "succeeded"
    view = detached_sync(semantic_config)  # nothing to read; every chunk lacks its vector
    assert view.state == "succeeded" and view.counts["unchanged"] == 4
    [(pid, why)] = started_ahead(semantic_config, view.job_id)
    assert why == "the vectors are behind the chunks"
    assert {p for p, _ in worker_lines(semantic_config)} == {pid}
    vectors, chunks = vector_and_chunk_counts(semantic_config)
    assert vectors == chunks > 0


def test_cancel_in_the_lexical_phase_ends_the_worker_started_ahead(
    semantic_config: Config, knowledge: Path, earlier_workers: frozenset[int]
) -> None:
    write_corpus(knowledge, 3000)
    seen: list[tuple[str, list[int]]] = []

    def cancel_once(view: JobView) -> None:
        children = semantic_children(earlier_workers)
        if view.state == "running" and children and not seen:
            seen.append((view.phase, children))
            rag_service.cancel_sync(semantic_config, view.job_id)

    # In this process, which lives on after the job: the job itself must end its worker.
    view = rag_service.sync_kb_blocking(semantic_config, on_progress=cancel_once)
    assert view.state == "cancelled", (view.state, view.message, seen)
    assert len(seen) == 1 and len(seen[0][1]) == 1, seen
    [(phase, [pid])] = seen
    assert phase in ("prepare", "files")  # cancelled while the lexical phase ran
    assert semantic_children(earlier_workers) == [] and not alive(pid)
    assert not any(m.startswith("model ready") for _, m in worker_lines(semantic_config))


def test_a_killed_sync_worker_takes_the_worker_started_ahead_with_it(
    semantic_config: Config, knowledge: Path
) -> None:
    write_corpus(knowledge, 3000)
    job_id = rag_service.start_sync(semantic_config).job_id
    wait_until(lambda: started_ahead(semantic_config, job_id), "the worker to start ahead")
    [(pid, _)] = started_ahead(semantic_config, job_id)
    sync_pid = rag_service.sync_status(semantic_config, job_id).pid
    assert sync_pid and alive(pid)
    os.kill(sync_pid, signal.SIGKILL)
    # Its stdin closes with the sync worker: it exits at that EOF, loaded or not.
    wait_until(lambda: not alive(pid), "the orphaned worker to exit")


def test_a_failing_job_ends_the_worker_started_ahead(
    semantic_config: Config,
    knowledge: Path,
    monkeypatch: pytest.MonkeyPatch,
    earlier_workers: frozenset[int],
) -> None:
    write_notes(knowledge)
    running: list[list[int]] = []

    def fail(*_args: object) -> None:
        running.append(semantic_children(earlier_workers))
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(sync_job_worker.JobReporter, "on_file_done", fail)
    view = rag_service.sync_kb_blocking(semantic_config)  # in this process: its children
    assert view.state == "failed" and "the disk went away" in (view.message or "")
    assert len(running) == 1 and len(running[0]) == 1  # the worker ran while the file was read
    assert semantic_children(earlier_workers) == []
    assert not alive(running[0][0])


def test_a_worker_started_ahead_that_died_is_replaced_by_the_build(
    tmp_path: Path, real_model: Path, earlier_workers: frozenset[int]
) -> None:
    conn = index_db.open_index(tmp_path / "index.sqlite3")
    add_document(conn, "a.md", real_sentences(5)[:12])
    prewarm = WorkerPrewarm(real_model, log_path=tmp_path / "w.log", cache_dir=tmp_path / "c")
    prewarm.start("test")
    dead = prewarm.pid
    assert dead is not None
    os.kill(dead, signal.SIGKILL)
    wait_until(lambda: not prewarm.worker.is_running, "the worker to die")
    result = generations.build_generation(
        conn, real_model, cache_dir=tmp_path / "c", log_path=tmp_path / "w.log", prewarm=prewarm
    )
    assert (result.status, result.embedded) == ("built", 12)
    prewarm.close()
    assert semantic_children(earlier_workers) == []
    conn.close()


def test_a_worker_that_preloads_its_tokenizer_gives_the_same_bytes(
    tmp_path: Path, real_model: Path
) -> None:
    texts = real_sentences(40)
    log = tmp_path / "pre.log"
    with SemanticWorker(real_model, log_path=log, preload_passages=True) as pre:
        wait_until(lambda: "tokenizer loaded" in log.read_text(), "the tokenizer to load")
        preloaded = pre.embed(texts).vectors.tobytes()
    with SemanticWorker(real_model, log_path=tmp_path / "lazy.log") as lazy:
        assert lazy.embed(texts).vectors.tobytes() == preloaded
    assert "tokenizer loaded" not in (tmp_path / "lazy.log").read_text()
    assert len(texts) > 100


def real_passages(per_set: int = 40, width: int = 600) -> list[str]:
    """Windows of the eval sets' Markdown documents (English, Russian, Thai) as the build
    sends them: the passage prompt, then the text."""
    out = []
    for name in ("debfaq-en", "manru", "pyfaq-en", "udhr-en2th"):
        files = sorted((EVAL_DIR / name / "docs").glob("*.md"))
        text = " ".join(f.read_text(encoding="utf-8") for f in files[:20])
        windows = [text[at : at + width] for at in range(0, len(text), width)]
        out.extend(f"passage: {w.strip()}" for w in windows[:per_set])
    return out


def test_until_the_full_tokenizer_loads_passages_get_the_same_ids_from_the_query_tokenizer(
    tmp_path: Path, real_model: Path
) -> None:
    """A build worker tokenizes its first passages with the query tokenizer's index when the
    full tokenizer is still loading: both must give the same ids, hence the same vectors."""
    import sentencepiece as spm

    tokenizer = real_model / "sentencepiece.bpe.model"
    full = spm.SentencePieceProcessor(model_file=str(tokenizer))
    assert semantic_worker.QueryTokenizer.open(tokenizer, tmp_path, build=False) is None
    query = semantic_worker.QueryTokenizer.open(tokenizer, tmp_path)  # builds the index
    assert query is not None
    passages = real_passages()
    assert len(passages) >= 100 and {"ก", "д", "e"} <= set("".join(passages))
    assert [t for t in passages if query.encode(t) != full.encode(t)] == []
    # A build worker with that index in its cache dir gives the bytes of one without it.
    texts = [p.removeprefix("passage: ") for p in passages[:24]]
    with SemanticWorker(
        real_model, log_path=tmp_path / "b.log", cache_dir=tmp_path, preload_passages=True
    ) as bridged:
        first = bridged.embed(texts[:3]).vectors.tobytes()
        rest = bridged.embed(texts[3:]).vectors.tobytes()
    with SemanticWorker(real_model, log_path=tmp_path / "f.log") as plain:
        assert plain.embed(texts[:3]).vectors.tobytes() == first
        assert plain.embed(texts[3:]).vectors.tobytes() == rest


def test_a_model_that_cannot_load_fails_the_job_in_words_and_frees_the_index(
    tmp_path: Path, knowledge: Path
) -> None:
    """Starting the worker ahead reads the model's configs before the job's error handling
    existed for it: a malformed one must fail the job (not leave it 'running' with its lock)."""
    from semantic_fixtures import build_tiny_model

    model = build_tiny_model(tmp_path / "model")
    pooling = model / "1_Pooling" / "config.json"
    pooling.write_text(
        pooling.read_text().replace(
            '"word_embedding_dimension": 32', '"word_embedding_dimension": "abc"'
        )
    )
    config = make_config(knowledge, tmp_path / "state", semantic=True, semantic_model_dir=model)
    write_notes(knowledge)
    view = rag_service.sync_kb_blocking(config)
    assert view.state == "failed", view.to_dict()
    assert "ValueError" not in (view.message or "") and "abc" in (view.message or "")
    again = rag_service.sync_kb_blocking(config)  # the first job let go of the index
    assert again.state == "failed" and again.job_id != view.job_id
