"""Semantic channel speed and memory: run by hand, report the numbers (tests never time).

1. Semantic-phase throughput on N threads with the real model: texts/s of build_generation
   (spawn, load, IPC and SQLite writes included) over ~100-token texts or the distinct children
   of a synced index (--from-index: on a copy of that index when --chunks covers it, the real
   semantic phase), each run beside two bare onnxruntime sessions over the same texts in the
   same run: the baseline (tokenized up front, length-sorted batches, intra-op threads = N,
   default optimizations) and the worker's own session settings side by side; the ratios to
   both, and texts per CPU second (the load-proof measure on a shared machine).
2. Cold query latency: spawn + model load + query embed + exact scan of V vectors (default
   100k, random unit vectors stored as a ready generation of the model's fingerprint), with
   the worker's own split (load, embed, scan) read from its log.
3. Warm query latency: the same through a worker kept alive (--idle-seconds).
4. Peak RSS (VmHWM) of the worker in each role.
5. (--only user --docs DIR) The semantic phase as a user sees it: real sync jobs of a copy of
   DIR, timed from the end of the lexical phase, with the worker started ahead and without,
   beside the bare session and build_generation alone; then one new small file (a tiny phase).
6. (--only tiny --docs DIR) That tiny phase of one edit, many rounds, before / after.

Every timing is repeated (--runs, --queries) and reported as best and median beside the load
average: the target machines have 2 cores shared with other work.

    python bench/bench_semantic.py [--model-dir DIR] [--threads 2] [--chunks 512]
                                   [--vectors 100000] [--queries 7] [--runs 3]
                                   [--only throughput,cold,warm] [--from-index DB]
    python bench/bench_semantic.py --only user --docs DIR [--runs 3]
    python bench/bench_semantic.py --only tiny --docs DIR [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import semantic_worker  # noqa: E402
from helpers.semantic import (  # noqa: E402
    batching,
    generations,  # noqa: E402
    vector_pack,
)
from helpers.semantic.model import load_model_info  # noqa: E402
from helpers.store import index_db  # noqa: E402
from tests.semantic_fixtures import REAL_MODEL_DIR, add_document  # noqa: E402

SENTENCES = [
    "The contract must be signed by both parties before it becomes valid.",
    "Regular exercise reduces the risk of heart disease and diabetes.",
    "Please remember to back up your files before installing the update.",
    "Search engines rank documents by estimating their relevance to a query.",
    "Договор вступает в силу после подписания обеими сторонами.",
    "Резервное копирование выполняется каждую ночь в два часа.",
    "Счёт необходимо оплатить в течение тридцати календарных дней.",
    "Перед установкой обновления сохраните свои файлы.",
    "สัญญาจะมีผลบังคับใช้เมื่อทั้งสองฝ่ายลงนามแล้ว",
    "กรุณาสำรองไฟล์ของคุณก่อนติดตั้งการอัปเดต",
    "ใบแจ้งหนี้ต้องชำระภายในสามสิบวัน",
    "การออกกำลังกายสม่ำเสมอช่วยลดความเสี่ยงของโรคหัวใจ",
]
CPU_RATES: dict[str, list[float]] = {}  # texts per CPU second, by what ran
TARGET_TOKENS = 100  # with "passage: ", <s> and </s>, like the PROVENANCE benchmark


def peak_rss_mib(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_chunks(worker: generations.SemanticWorker, count: int) -> list[str]:
    """`count` distinct multilingual texts of about TARGET_TOKENS tokens each."""
    texts: list[str] = []
    i = 0
    while len(texts) < count:
        parts: list[str] = [f"Section {len(texts)}."]
        while True:
            parts.append(SENTENCES[i % len(SENTENCES)])
            i += 1
            if len(" ".join(parts)) > 380:
                break
        texts.append(" ".join(parts))
    tokens = worker.count_tokens(texts)
    trimmed = []
    for text, n in zip(texts, tokens, strict=True):
        while n > TARGET_TOKENS + 5:  # drop words from the end until close to the target
            text = text.rsplit(" ", 1)[0]
            n = worker.count_tokens([text])[0]
        trimmed.append(text)
    return trimmed


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (contention-proof work measure)."""
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spread(values: list[float], unit: str = "", scale: float = 1.0, digits: int = 1) -> str:
    """'best X, median Y' where best is the largest rate or the smallest time."""
    best = max(values) if unit.endswith("/s") else min(values)
    med = statistics.median(values)
    return f"best {best * scale:.{digits}f}{unit}, median {med * scale:.{digits}f}{unit}"


def load_average() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def index_texts(index: Path, count: int) -> list[str]:
    """The distinct child texts of a synced index (what a sync really embeds), first `count`."""
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT text FROM chunks GROUP BY text ORDER BY MIN(id) LIMIT ?", (count,)
        ).fetchall()
    finally:
        conn.close()
    return [row[0] for row in rows]


def bare_session_rate(
    model: Path, texts: list[str], threads: int, runs: int, *, side_by_side: bool = False
) -> list[float]:
    """Texts/s of a bare onnxruntime session over `texts`, the ceiling the semantic phase is
    measured against: every text tokenized once up front (not timed), one length-sorted list cut
    into batches of MAX_BATCH_TEXTS, intra-op threads = `threads`, one InferenceSession with the
    default graph optimizations, the same mean pooling and L2 normalisation. One rate per run.
    `side_by_side`: the worker's session settings (one intra-op thread, `threads` batches at
    once, SkipLayerNormFusion off), which isolates what the pipeline around the model costs."""
    import onnxruntime as ort
    import sentencepiece as spm

    info = load_model_info(model, None, with_fingerprint=False)
    sp = spm.SentencePieceProcessor(model_file=str(info.tokenizer_file))
    limit = info.max_seq_length
    seqs = []
    for text in texts:
        ids = [0] + [3 if p == 0 else p + 1 for p in sp.encode(info.passage_prompt + text.strip())]
        seqs.append((ids[: limit - 1] if len(ids) >= limit else ids) + [2])
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    feeds = []
    for start in range(0, len(order), batching.MAX_BATCH_TEXTS):
        batch = [seqs[i] for i in order[start : start + batching.MAX_BATCH_TEXTS]]
        ids = np.full((len(batch), max(map(len, batch))), 1, dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1 if side_by_side else threads
    options.log_severity_level = 3
    # The worker's own session settings for the side-by-side ceiling (see its docstring).
    disabled = semantic_worker.DISABLED_OPTIMIZERS if side_by_side else []
    session = ort.InferenceSession(
        str(info.onnx_file), options, ["CPUExecutionProvider"], disabled_optimizers=disabled
    )
    names = {i.name for i in session.get_inputs()}

    def run(feed: dict[str, np.ndarray]) -> np.ndarray:
        hidden = session.run(None, {k: v for k, v in feed.items() if k in names})[0]
        weights = feed["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        return vector_pack.l2_normalise(pooled).astype(np.float16)

    rates = []
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            list(pool.map(run, feeds) if side_by_side else map(run, feeds))
            rates.append(len(texts) / (time.perf_counter() - t0))
            CPU_RATES.setdefault(f"bare{'-side' if side_by_side else ''}", []).append(
                len(texts) / (time.process_time() - c0)
            )
    return rates


def fresh_build_index(work: Path, run: int, texts: list[str], index: Path | None) -> Path:
    """An index whose semantic phase embeds `texts`: a copy of the synced index without its
    vectors (the real chunk layout, duplicates included), or one document of `texts`."""
    db = work / f"build{run}.sqlite3"
    if index is None:
        conn = index_db.open_index(db)
        add_document(conn, "bench.md", texts)
        conn.close()
        return db
    src = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    dst = sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.execute("DELETE FROM semantic_blocks")
    dst.execute("DELETE FROM semantic_generations")
    dst.commit()
    dst.close()
    return db


def bench_throughput(
    model: Path, threads: int, count: int, runs: int, work: Path, index: Path | None
) -> None:
    with generations.SemanticWorker(
        model, log_path=work / "worker.log", cache_dir=work / "cache", threads=threads
    ) as worker:
        t0 = time.perf_counter()
        worker.embed(["warm up"])
        load_s = time.perf_counter() - t0
        texts = index_texts(index, count) if index else make_chunks(worker, count)
        tokens = worker.count_tokens(texts)
    count = len(texts)
    print(
        f"{count} distinct texts, mean {statistics.mean(tokens):.0f} tokens (min {min(tokens)}, "
        f"max {max(tokens)}), {threads} threads; worker spawn + load + first embed {load_s:.2f} s"
    )
    whole = index is not None and count >= len(index_texts(index, 10**9))
    bare, side, ends, steadies = [], [], [], []
    for run in range(runs):  # alternated, so a burst of load on the shared box hits both
        bare.extend(bare_session_rate(model, texts, threads, 1))
        side.extend(bare_session_rate(model, texts, threads, 1, side_by_side=True))
        db = fresh_build_index(work, run, texts, index if whole else None)
        conn = index_db.connect(db)
        stamps: list[float] = []
        t0, c0 = time.perf_counter(), os.times()
        result = generations.build_generation(
            conn,
            model,
            cache_dir=work / "cache",
            log_path=work / "worker.log",
            threads=threads,
            progress=lambda done, total, stamps=stamps: stamps.append(time.perf_counter()),
        )
        ends.append(result.embedded / (time.perf_counter() - t0))
        c1 = os.times()  # the worker has exited and been waited for: its CPU is in children_*
        cpu = sum(c1[:4]) - sum(c0[:4])
        CPU_RATES.setdefault("ours", []).append(result.embedded / cpu)
        first = min(len(stamps) - 1, 1)
        steadies.append(
            (result.embedded - (first and generations.EMBED_REQUEST_TEXTS))
            / (stamps[-1] - stamps[first])
        )
        conn.close()
        assert result.embedded == count, (result.embedded, count)
        print(
            f"  run {run + 1}: bare session {bare[-1]:.1f} texts/s (side by side "
            f"{side[-1]:.1f}); semantic phase {ends[-1]:.1f} texts/s end to end, "
            f"{steadies[-1]:.1f} steady = {ends[-1] / bare[-1]:.2f} / {steadies[-1] / bare[-1]:.2f}"
            f" of bare ({ends[-1] / side[-1]:.2f} / {steadies[-1] / side[-1]:.2f} of side by "
            f"side); {load_average()}"
        )

    def ratio(ours: list[float], base: list[float]) -> float:
        return statistics.median(o / b for o, b in zip(ours, base, strict=True))

    print(
        f"semantic phase ({'the whole synced index' if whole else 'one document of the texts'}), "
        f"{count} texts, {runs} runs: end to end incl. spawn + load {spread(ends, ' texts/s')}; "
        f"steady after the first request {spread(steadies, ' texts/s')}; bare onnxruntime "
        f"session {spread(bare, ' texts/s')}, side by side {spread(side, ' texts/s')}\n"
        f"RATIO to bare (median of runs): end to end {ratio(ends, bare):.2f}, steady "
        f"{ratio(steadies, bare):.2f}; to bare side by side: end to end {ratio(ends, side):.2f}, "
        f"steady {ratio(steadies, side):.2f}; {load_average()}"
    )
    cpu = {k: statistics.median(v) for k, v in CPU_RATES.items()}
    print(
        f"texts per CPU second (contention-proof; ours = sync process + worker, spawn and load "
        f"included): ours {cpu['ours']:.1f}, bare {cpu['bare']:.1f}, bare side by side "
        f"{cpu['bare-side']:.1f}"
    )


@dataclass(frozen=True)
class JobRun:
    """One real sync job, with the semantic phase as the user sees it."""

    job_s: float  # the whole job, wall
    lexical_s: float  # job start to the end of the lexical phase
    phase_s: float  # end of the lexical phase to the end of the semantic build
    embedded: int
    cpu_s: float  # this process + its children (extraction child, semantic worker)


def job_run(docs: Path, data: Path, model: Path, *, prewarm: bool) -> JobRun:
    """A real sync job of `docs` (sync_job_worker.run_job through rag_service.sync_kb_blocking,
    in this process). The phase clock starts when the job enters generations.sync_phase,
    i.e. when the lexical phase has ended, and stops when the build returns. `prewarm=False`
    runs the job without the worker started ahead (the code before it: spawn at phase start)."""
    import rag_service
    import sync_job_worker
    from helpers.config import Config

    config = Config(
        knowledge_dir=docs.resolve(),
        data_dir=data.resolve(),
        db_path=(data / "index.sqlite3").resolve(),
        semantic=True,
        semantic_model_dir=model,
    )
    marks: dict[str, object] = {}
    original_phase, original_prewarm = generations.sync_phase, sync_job_worker._semantic_prewarm

    def timed_phase(*args: object, **kwargs: object) -> object:
        marks["lexical_end"] = time.perf_counter()
        result = original_phase(*args, **kwargs)  # type: ignore[arg-type]
        marks["end"], marks["result"] = time.perf_counter(), result
        return result

    generations.sync_phase = timed_phase  # type: ignore[assignment]
    if not prewarm:
        sync_job_worker._semantic_prewarm = lambda _conn, _config: None  # type: ignore[assignment]
    try:
        t0, c0 = time.perf_counter(), os.times()
        view = rag_service.sync_kb_blocking(config)
        t1, c1 = time.perf_counter(), os.times()
    finally:
        generations.sync_phase = original_phase
        sync_job_worker._semantic_prewarm = original_prewarm
    assert view.state == "succeeded", view.message
    result = marks["result"]
    assert isinstance(result, generations.BuildResult), result
    lexical_end, end = float(marks["lexical_end"]), float(marks["end"])  # type: ignore[arg-type]
    return JobRun(
        t1 - t0, lexical_end - t0, end - lexical_end, result.embedded, sum(c1[:4]) - sum(c0[:4])
    )


EDIT_TEXT = (
    "# Bench edit {n}\n\nA note added between two syncs: the release checklist now asks for a "
    "signed changelog.\n\n## Rollback\n\nKeep the previous build for a week in case run {n} "
    "must be undone.\n"
)


def bench_user_view(model: Path, threads: int, runs: int, work: Path, source: Path) -> None:
    """The semantic phase as a user sees it, beside the bare session and today's figure.

    Each run, on a copy of `source`: a fresh sync job with the worker started ahead and one
    without it (order alternated), the bare onnxruntime session over the texts those jobs
    embed, build_generation alone on a copy of the synced index without its vectors (today's
    figure: spawn and load inside the clock), then one new small file synced by both (the tiny
    phase of a single edit, 1-10 texts)."""
    import shutil

    rows: dict[str, list[JobRun]] = {}
    bare: list[float] = []
    builds: list[float] = []
    texts: list[str] = []
    for run in range(runs):
        docs = work / f"docs{run}"
        shutil.copytree(source, docs)
        order = [True, False] if run % 2 == 0 else [False, True]
        for prewarm in order:
            data = work / f"data{run}-{'pre' if prewarm else 'cold'}"
            rows.setdefault(f"full {prewarm}", []).append(
                job_run(docs, data, model, prewarm=prewarm)
            )
        db = work / f"data{run}-pre" / "index.sqlite3"
        if not texts:
            texts = index_texts(db, 10**9)
        bare.extend(bare_session_rate(model, texts, threads, 1))
        build_db = fresh_build_index(work, run, texts, db)
        conn = index_db.connect(build_db)
        t0 = time.perf_counter()
        built = generations.build_generation(
            conn, model, cache_dir=work / "cache", log_path=work / "worker.log", threads=threads
        )
        builds.append(built.embedded / (time.perf_counter() - t0))
        conn.close()
        (docs / f"bench-edit-{run}.md").write_text(EDIT_TEXT.format(n=run), encoding="utf-8")
        for prewarm in order:
            data = work / f"data{run}-{'pre' if prewarm else 'cold'}"
            rows.setdefault(f"edit {prewarm}", []).append(
                job_run(docs, data, model, prewarm=prewarm)
            )
        full_pre, full_cold = rows["full True"][-1], rows["full False"][-1]
        edit_pre, edit_cold = rows["edit True"][-1], rows["edit False"][-1]
        print(
            f"  run {run + 1}: bare {bare[-1]:.1f} texts/s; phase as the user sees it "
            f"{full_pre.embedded / full_pre.phase_s:.1f} texts/s with the worker started ahead "
            f"({full_pre.phase_s:.2f} s), {full_cold.embedded / full_cold.phase_s:.1f} without "
            f"({full_cold.phase_s:.2f} s); build_generation alone {builds[-1]:.1f}; one new file "
            f"({edit_pre.embedded} texts): phase {edit_pre.phase_s:.2f} s ahead / "
            f"{edit_cold.phase_s:.2f} s without, job {edit_pre.job_s:.2f} / "
            f"{edit_cold.job_s:.2f} s; {load_average()}"
        )

    def med(key: str, value: str) -> float:
        return statistics.median(getattr(r, value) for r in rows[key])

    def rate_ratio(key: str) -> float:
        return statistics.median(
            r.embedded / r.phase_s / b for r, b in zip(rows[key], bare, strict=True)
        )

    count = rows["full True"][0].embedded
    print(
        f"USER VIEW {source.name}: {count} texts embedded by a fresh sync, {runs} runs (medians):"
        f"\n  phase from the end of the lexical phase: with the worker started ahead "
        f"{count / med('full True', 'phase_s'):.1f} texts/s ({med('full True', 'phase_s'):.2f} s)"
        f", without {count / med('full False', 'phase_s'):.1f} texts/s "
        f"({med('full False', 'phase_s'):.2f} s); bare session {statistics.median(bare):.1f} "
        f"texts/s; build_generation alone (today's figure) {statistics.median(builds):.1f} "
        f"texts/s\n  RATIO to bare (median of runs): ahead {rate_ratio('full True'):.2f}, "
        f"without {rate_ratio('full False'):.2f}, build_generation alone "
        f"{statistics.median(b / r for b, r in zip(builds, bare, strict=True)):.2f}"
        f"\n  whole job: ahead {med('full True', 'job_s'):.2f} s (lexical "
        f"{med('full True', 'lexical_s'):.2f} s, {med('full True', 'cpu_s'):.2f} CPU s), without "
        f"{med('full False', 'job_s'):.2f} s (lexical {med('full False', 'lexical_s'):.2f} s, "
        f"{med('full False', 'cpu_s'):.2f} CPU s)"
        f"\n  one new file ({rows['edit True'][0].embedded} texts): phase ahead "
        f"{med('edit True', 'phase_s'):.2f} s, without {med('edit False', 'phase_s'):.2f} s; job "
        f"ahead {med('edit True', 'job_s'):.2f} s ({med('edit True', 'cpu_s'):.2f} CPU s), "
        f"without {med('edit False', 'job_s'):.2f} s ({med('edit False', 'cpu_s'):.2f} CPU s); "
        f"{load_average()}"
    )


def bench_tiny(model: Path, rounds: int, work: Path, source: Path) -> None:
    """The tiny phase of one edit (1-10 texts), many times: one full sync of a copy of
    `source`, copied to three data dirs; then each round adds one small file and syncs all
    three, in rotating order: without the worker started ahead and without the query
    tokenizer's index (the code before this change), with the worker ahead, and with the
    worker ahead and the index a first search leaves in the cache dir."""
    import shutil

    docs = work / "tiny-docs"
    shutil.copytree(source, docs)
    job_run(docs, work / "tiny-base", model, prewarm=True)
    variants = {"before": (False, False), "ahead": (True, False), "ahead+index": (True, True)}
    for name, (_, index) in variants.items():
        shutil.copytree(work / "tiny-base", work / f"tiny-{name}")
        if index:
            tokenizer = model / "sentencepiece.bpe.model"
            semantic_worker.QueryTokenizer.open(tokenizer, work / f"tiny-{name}" / "cache")
    runs: dict[str, list[JobRun]] = {name: [] for name in variants}
    names = list(variants)
    for n in range(rounds):
        (docs / f"tiny-edit-{n}.md").write_text(EDIT_TEXT.format(n=n), encoding="utf-8")
        for name in names[n % 3 :] + names[: n % 3]:
            prewarm = variants[name][0]
            runs[name].append(job_run(docs, work / f"tiny-{name}", model, prewarm=prewarm))
    wins = sum(a.phase_s <= b.phase_s for a, b in zip(runs["ahead"], runs["before"], strict=True))
    print(
        f"TINY {source.name}: one new file per round ({runs['before'][0].embedded} texts), "
        f"{rounds} rounds, medians: "
        + "; ".join(
            f"{name}: phase {statistics.median(r.phase_s for r in rs):.2f} s, job "
            f"{statistics.median(r.job_s for r in rs):.2f} s, "
            f"{statistics.median(r.cpu_s for r in rs):.2f} CPU s"
            for name, rs in runs.items()
        )
        + f"; ahead's phase <= before's in {wins}/{rounds} rounds; {load_average()}"
    )


def insert_random_generation(
    conn: sqlite3.Connection, fingerprint: str, model_name: str, dim: int, vectors: int
) -> int:
    """A ready generation of `vectors` seeded random unit vectors: a large index without a sync."""
    rng = np.random.default_rng(0)
    with index_db.write_transaction(conn):
        gen = conn.execute(
            "INSERT INTO semantic_generations(fingerprint, model_name, dim, ready, vector_count, "
            "created_at, finished_at) VALUES (?, ?, ?, 1, ?, ?, ?)",
            (fingerprint, model_name, dim, vectors, time.time(), time.time()),
        ).lastrowid
        for block_no, start in enumerate(range(0, vectors, vector_pack.BLOCK_SIZE)):
            n = min(vector_pack.BLOCK_SIZE, vectors - start)
            block = vector_pack.l2_normalise(rng.standard_normal((n, dim)))
            conn.execute(
                "INSERT INTO semantic_blocks VALUES (?, ?, ?, ?, ?, ?)",
                (
                    gen,
                    block_no,
                    n,
                    vector_pack.pack_ids(np.arange(start + 1, start + n + 1)),
                    vector_pack.pack_hashes([bytes(16)] * n),
                    vector_pack.pack_vectors(block.astype(np.float16)),
                ),
            )
    return int(gen)


def make_big_index(model: Path, vectors: int, work: Path) -> Path:
    """A ready generation of `vectors` random unit vectors under the model's fingerprint."""
    info = load_model_info(model, work / "cache")
    db = work / "query.sqlite3"
    conn = index_db.open_index(db)
    insert_random_generation(conn, info.fingerprint, info.name, info.dim, vectors)
    conn.close()
    return db


READY = re.compile(r"query path ready ([\d.]+) s after start \(sessions loaded at ([\d.]+) s\)")
SEARCHED = re.compile(r"embed (\d+) ms, read\+scan (\d+) ms")


def worker_split(log: Path, since: int) -> str:
    """Medians of the worker's own timings logged after byte `since` of its log."""
    text = log.read_text(encoding="utf-8", errors="replace")[since:]
    ready = [(float(m.group(1)), float(m.group(2))) for m in READY.finditer(text)]
    searches = [(int(e), int(r)) for e, r in SEARCHED.findall(text)]
    if not (ready and searches):
        return "worker split: not found in the log"
    return (
        f"worker split (medians): query path ready "
        f"{statistics.median(r for r, _ in ready):.2f} s after the worker started loading (ONNX "
        f"sessions loaded at {statistics.median(s for _, s in ready):.2f} s); query embed "
        f"{statistics.median(e for e, _ in searches)} ms; read + scan "
        f"{statistics.median(r for _, r in searches)} ms"
    )


def bench_queries(
    model: Path, threads: int, vectors: int, queries: int, work: Path, modes: set[str]
) -> None:
    db = make_big_index(model, vectors, work)
    q = "How long do I have to pay the invoice?"
    log = work / "query.log"
    log.touch()
    if "cold" in modes:
        t0 = time.perf_counter()
        generations.query(db, model, q, 10, cache_dir=work / "cache", log_path=log)
        print(
            "first cold query (a new cache dir: builds the query tokenizer index): "
            f"{(time.perf_counter() - t0) * 1000:.0f} ms"
        )
        since = log.stat().st_size
        cold = []
        for _ in range(queries):
            t0 = time.perf_counter()
            hits = generations.query(
                db, model, q, 10, cache_dir=work / "cache", log_path=log, threads=threads
            )
            cold.append(time.perf_counter() - t0)
            assert len(hits) == 10
        print(
            f"cold query over {vectors} vectors, {queries} runs: "
            f"{spread(cold, ' ms', 1000, 0)} (max {max(cold) * 1000:.0f} ms); {load_average()}"
        )
        print("  " + worker_split(log, since))
    if "warm" not in modes:
        return
    with generations.SemanticWorker(
        model, log_path=log, cache_dir=work / "cache", threads=threads, idle_seconds=120
    ) as warm:
        t0 = time.perf_counter()
        generations.query(db, model, q, 10, cache_dir=work / "cache", log_path=log, worker=warm)
        first = time.perf_counter() - t0
        times = []
        for i in range(queries * 3):
            t0 = time.perf_counter()
            generations.query(
                db, model, f"{q} {i}", 10, cache_dir=work / "cache", log_path=log, worker=warm
            )
            times.append(time.perf_counter() - t0)
        rss = peak_rss_mib(warm.pid)
    print(
        f"warm query over {vectors} vectors, {len(times)} runs: {spread(times, ' ms', 1000)} "
        f"(first call incl. load {first * 1000:.0f} ms); warm worker peak RSS {rss:.0f} MiB; "
        f"{load_average()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=REAL_MODEL_DIR)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=512)
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=7)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6, help="--only tiny: edits synced")
    parser.add_argument("--only", default="throughput,cold,warm")
    parser.add_argument(
        "--from-index",
        type=Path,
        help="embed the child texts of this synced index.sqlite3 instead of ~100-token ones",
    )
    parser.add_argument(
        "--docs",
        type=Path,
        help="--only user: the folder a real sync job indexes (copied; never written)",
    )
    args = parser.parse_args()
    modes = set(args.only.split(","))
    print(f"model {args.model_dir}; cpus {os.cpu_count()}; {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "throughput" in modes:
            bench_throughput(
                args.model_dir, args.threads, args.chunks, args.runs, work, args.from_index
            )
        if "user" in modes:
            if args.docs is None:
                parser.error("--only user needs --docs DIR")
            bench_user_view(args.model_dir, args.threads, args.runs, work, args.docs)
        if "tiny" in modes:
            if args.docs is None:
                parser.error("--only tiny needs --docs DIR")
            bench_tiny(args.model_dir, args.rounds, work, args.docs)
        if modes & {"cold", "warm"}:
            bench_queries(args.model_dir, args.threads, args.vectors, args.queries, work, modes)
    print(f"at the end: {load_average()}")


if __name__ == "__main__":
    main()
