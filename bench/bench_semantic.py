"""Semantic channel speed and memory: run by hand, report the numbers (tests never time).

1. Embedding throughput on N threads with the real model: chunks/s for ~100-token chunks,
   through the worker alone and through build_generation (SQLite writes included).
2. Cold query latency: spawn + model load + query embed + exact scan of V vectors (default
   100k, random unit vectors stored as a ready generation of the model's fingerprint).
3. Warm query latency: the same through a worker kept alive (--idle-seconds).
4. Peak RSS (VmHWM) of the worker in each role.

    python bench/bench_semantic.py [--model-dir DIR] [--threads 2] [--chunks 512]
                                   [--vectors 100000] [--queries 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import rag_db  # noqa: E402
import rag_semantic  # noqa: E402
from helpers import vector_pack  # noqa: E402
from helpers.semantic_model import load_model_info  # noqa: E402
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
TARGET_TOKENS = 100  # with "passage: ", <s> and </s>, like the PROVENANCE benchmark


def peak_rss_mib(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_chunks(worker: rag_semantic.SemanticWorker, count: int) -> list[str]:
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


def bench_throughput(model: Path, threads: int, count: int, work: Path) -> list[str]:
    with rag_semantic.SemanticWorker(
        model, log_path=work / "worker.log", cache_dir=work / "cache", threads=threads
    ) as worker:
        t0 = time.perf_counter()
        worker.embed(["warm up"])
        load_s = time.perf_counter() - t0
        texts = make_chunks(worker, count)
        tokens = worker.count_tokens(texts)
        t0 = time.perf_counter()
        for start in range(0, len(texts), rag_semantic.EMBED_REQUEST_TEXTS):
            worker.embed(texts[start : start + rag_semantic.EMBED_REQUEST_TEXTS])
        embed_s = time.perf_counter() - t0
        rss = peak_rss_mib(worker.pid)
    print(
        f"worker embed: {count} chunks, mean {statistics.mean(tokens):.0f} tokens "
        f"(min {min(tokens)}, max {max(tokens)}), {threads} threads: "
        f"{count / embed_s:.1f} chunks/s ({embed_s:.2f} s); model load + first embed "
        f"{load_s:.2f} s; worker peak RSS {rss:.0f} MiB"
    )
    conn = rag_db.open_index(work / "build.sqlite3")
    add_document(conn, "bench.md", texts)
    stamps: list[float] = []
    t0 = time.perf_counter()
    result = rag_semantic.build_generation(
        conn,
        model,
        cache_dir=work / "cache",
        log_path=work / "worker.log",
        threads=threads,
        progress=lambda done, total: stamps.append(time.perf_counter()),
    )
    total_s = time.perf_counter() - t0
    steady = (count - rag_semantic.EMBED_REQUEST_TEXTS) / (stamps[-1] - stamps[1])
    print(
        f"build_generation: {result.embedded} chunks in {total_s:.2f} s end to end "
        f"({result.embedded / total_s:.1f} chunks/s incl. spawn+load); steady "
        f"{steady:.1f} chunks/s after the first request"
    )
    conn.close()
    return texts


def make_big_index(model: Path, vectors: int, work: Path) -> Path:
    """A ready generation of `vectors` random unit vectors under the model's fingerprint."""
    info = load_model_info(model, work / "cache")
    db = work / "query.sqlite3"
    conn = rag_db.open_index(db)
    rng = np.random.default_rng(0)
    with rag_db.write_transaction(conn):
        gen = conn.execute(
            "INSERT INTO semantic_generations(fingerprint, model_name, dim, ready, vector_count, "
            "created_at, finished_at) VALUES (?, ?, ?, 1, ?, ?, ?)",
            (info.fingerprint, info.name, info.dim, vectors, time.time(), time.time()),
        ).lastrowid
        for block_no, start in enumerate(range(0, vectors, vector_pack.BLOCK_SIZE)):
            n = min(vector_pack.BLOCK_SIZE, vectors - start)
            block = vector_pack.l2_normalise(rng.standard_normal((n, info.dim)))
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
    conn.close()
    return db


def bench_queries(model: Path, threads: int, vectors: int, queries: int, work: Path) -> None:
    db = make_big_index(model, vectors, work)
    q = "How long do I have to pay the invoice?"
    cold = []
    for _ in range(queries):
        t0 = time.perf_counter()
        hits = rag_semantic.query(
            db,
            model,
            q,
            10,
            cache_dir=work / "cache",
            log_path=work / "worker.log",
            threads=threads,
        )
        cold.append(time.perf_counter() - t0)
        assert len(hits) == 10
    print(
        f"cold query over {vectors} vectors: median {statistics.median(cold) * 1000:.0f} ms, "
        f"min {min(cold) * 1000:.0f} ms, max {max(cold) * 1000:.0f} ms ({queries} runs)"
    )
    with rag_semantic.SemanticWorker(
        model,
        log_path=work / "worker.log",
        cache_dir=work / "cache",
        threads=threads,
        idle_seconds=120,
    ) as warm:
        t0 = time.perf_counter()
        rag_semantic.query(
            db, model, q, 10, cache_dir=work / "cache", log_path=work / "worker.log", worker=warm
        )
        first = time.perf_counter() - t0
        times = []
        for i in range(queries * 3):
            t0 = time.perf_counter()
            rag_semantic.query(
                db,
                model,
                f"{q} {i}",
                10,
                cache_dir=work / "cache",
                log_path=work / "worker.log",
                worker=warm,
            )
            times.append(time.perf_counter() - t0)
        rss = peak_rss_mib(warm.pid)
    print(
        f"warm query over {vectors} vectors: median {statistics.median(times) * 1000:.1f} ms, "
        f"min {min(times) * 1000:.1f} ms ({len(times)} runs; first call incl. load "
        f"{first * 1000:.0f} ms); warm worker peak RSS {rss:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=REAL_MODEL_DIR)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=512)
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=7)
    args = parser.parse_args()
    print(f"model {args.model_dir}; cpus {os.cpu_count()}; load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bench_throughput(args.model_dir, args.threads, args.chunks, work)
        bench_queries(args.model_dir, args.threads, args.vectors, args.queries, work)
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
