"""CJK keyword search at scale: cjk-channel latency and recall on generated Chinese text.

    python bench/bench_cjk.py [--chunks 100000] [--work /tmp/bench-cjk] [--budget N]

Builds (once; reused while the chunk count matches) an index of Chinese-script chunks: 2,500 Han
characters, Zipf-weighted, grouped into 20,000 one- to three-character "words", also Zipf-
weighted, 60 words a chunk. Then times whole searches and the cjk channel for 2-, 4- and
10-character queries cut from real chunks, and measures how often the channel ranks the source
chunk of a 6- or 10-character substring first (R@1) and in its top 8 (R@8). --budget overrides
helpers.lexical.cjk_pairs.PAIR_POSTINGS_BUDGET. Run by hand; tests never time.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_search  # noqa: E402
from helpers.lexical import cjk_pairs as lexical_cjk  # noqa: E402
from helpers.lexical.common import SearchContext  # noqa: E402
from helpers.store import index_db  # noqa: E402
from helpers.text.cjk import index_text  # noqa: E402

WORDS_PER_CHUNK = 60


def build(db: Path, chunks: int) -> None:
    rng = random.Random(0)
    chars = [chr(0x4E00 + i * 7) for i in range(2500)]
    char_weights = [1 / (i + 1) for i in range(len(chars))]
    words = [
        "".join(rng.choices(chars, char_weights, k=rng.choice((1, 2, 2, 2, 3))))
        for _ in range(20_000)
    ]
    word_weights = [1 / (i + 1) ** 0.9 for i in range(len(words))]
    conn = index_db.open_index(db)
    with index_db.write_transaction(conn):
        conn.execute(
            "INSERT INTO documents(id, path, size, mtime_ns, sha256, format, title, status, "
            "chunk_scheme, section_count, chunk_count, indexed_at) "
            "VALUES (1, 'zh.md', 1, 1, '', 'md', 'zh', 'indexed', 3, ?, ?, 0)",
            (chunks, chunks),
        )
        for i in range(chunks):
            text = "".join(rng.choices(words, word_weights, k=WORDS_PER_CHUNK)) + "。"
            section = conn.execute(
                "INSERT INTO sections(document_id, ordinal, text, location) VALUES (1, ?, ?, '{}')",
                (i, text),
            ).lastrowid
            cid = conn.execute(
                "INSERT INTO chunks(document_id, section_id, ordinal, text, norm_stored, "
                "text_hash, location, ocr) VALUES (1, ?, 0, ?, ?, ?, '{}', 0)",
                (section, text, text, str(i)),
            ).lastrowid
            conn.execute(
                "INSERT INTO chunks_cjk(rowid, grams) VALUES (?, ?)", (cid, index_text(text))
            )
        index_db.index_new_chunks(conn, 1, chunks)
    conn.close()


def timings(conn: sqlite3.Connection, queries: list[str]) -> tuple[list[float], list[float]]:
    whole, channel = [], []
    for query in queries:
        t = time.perf_counter()
        rag_search.search(conn, query, rag_search.SearchOptions())
        whole.append((time.perf_counter() - t) * 1000)
        ctx = SearchContext(conn, rag_search.Query.parse(query), rag_search.Filters())
        t = time.perf_counter()
        lexical_cjk.channel_cjk(ctx)
        channel.append((time.perf_counter() - t) * 1000)
    return whole, channel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-cjk"))
    parser.add_argument("--budget", type=int)
    args = parser.parse_args()
    if args.budget is not None:
        lexical_cjk.PAIR_POSTINGS_BUDGET = args.budget
    args.work.mkdir(parents=True, exist_ok=True)
    db = args.work / "index.sqlite3"
    conn = index_db.open_index(db)
    have = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    conn.close()
    if have != args.chunks:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        t = time.perf_counter()
        build(db, args.chunks)
        print(f"built {args.chunks} chunks in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    conn = index_db.connect(db)
    step = max(1, args.chunks // 200)
    rows = conn.execute(
        "SELECT id, norm FROM chunks WHERE id % ? = 0 ORDER BY id LIMIT 200", (step,)
    ).fetchall()
    rng = random.Random(1)

    def cut(text: str, length: int) -> str:
        start = rng.randrange(0, len(text) - length - 2)
        return text[start : start + length]

    print(f"{args.chunks} chunks, pair budget {lexical_cjk.PAIR_POSTINGS_BUDGET}")
    for label, length, suffix in (("2-char", 2, ""), ("4-char", 4, ""), ("10-char", 10, "？")):
        whole, channel = timings(conn, [cut(row[1], length) + suffix for row in rows[:20]])
        print(
            f"  {label} queries: whole search p50 {statistics.median(whole):.1f} ms, max "
            f"{max(whole):.1f}; cjk channel p50 {statistics.median(channel):.1f} ms, max "
            f"{max(channel):.1f}"
        )
    cases = [(row[0], cut(row[1], n) + s) for row in rows for n, s in ((6, ""), (10, "？"))]
    at1 = at8 = 0
    for chunk_id, query in cases:
        ctx = SearchContext(conn, rag_search.Query.parse(query), rag_search.Filters())
        ids = [cid for cid, _ in lexical_cjk.channel_cjk(ctx).ranked]
        at1 += bool(ids) and ids[0] == chunk_id
        at8 += chunk_id in ids[:8]
    print(f"  source chunk of {len(cases)} substrings: R@1 {at1 / len(cases):.3f}, R@8 "
          f"{at8 / len(cases):.3f}")  # fmt: skip
    conn.close()


if __name__ == "__main__":
    main()
