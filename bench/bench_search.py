"""Lexical search latency at 100k chunks, and the worst case of the OCR-fuzzy channel.

    python bench/bench_search.py [--data-dir /tmp/bench-search] [--chunks 100000] [--rounds 3]

Builds (once; reused while the chunk count matches) an index of generated documents written
directly through rag_sync.write_document: words drawn with a Zipf law from the eval sets'
English, Russian and Thai text (or a synthetic vocabulary without them), 20 chunks per document,
every tenth document marked OCR with misread letters. Then times rag_search.search with all
channels on a query mix, and the fuzzy channel on a long query of misspelled words.
Results go to stdout; progress to stderr.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.extract.blocks import Location  # noqa: E402
from helpers.lexical.common import SearchContext  # noqa: E402
from helpers.lexical.ocr_fuzzy import channel_fuzzy  # noqa: E402
from helpers.lexical.query_terms import parse_query  # noqa: E402
from helpers.safety import FileEntry  # noqa: E402
from helpers.store.index_db import open_index  # noqa: E402
from helpers.text.chunking import Child, Section  # noqa: E402
from helpers.text.normalize import fold  # noqa: E402
from rag_search import SearchOptions, search  # noqa: E402
from rag_sync import DocumentContent, write_document  # noqa: E402

EVAL_DIR = Path("/work/shared/eval")
CHUNKS_PER_DOC = 20
WORDS_PER_CHUNK = 60  # about the 112-token children of helpers.text.chunking
OCR_EVERY = 10  # every tenth document is an OCR'd scan
SEED = 7
_WORD = re.compile(r"[^\W\d_]{2,}")
_OCR_SWAPS = (("m", "rn"), ("o", "0"), ("l", "1"), ("e", "c"), ("а", "a"))


def vocabulary() -> list[str]:
    """Words by falling frequency: the eval sets' text, or a synthetic list without it."""
    counts: dict[str, int] = {}
    for path in sorted(EVAL_DIR.glob("*/docs/*.md")):
        for word in _WORD.findall(fold(path.read_text(encoding="utf-8", errors="replace"))):
            counts[word] = counts.get(word, 0) + 1
    if counts:
        return sorted(counts, key=lambda w: (-counts[w], w))
    rng = random.Random(SEED)
    letters = "abcdefghijklmnopqrstuvwxyzабвгдежзиклмнопрстуфхцчшщыэюя"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(30000)]


def misread(word: str, rng: random.Random) -> str:
    for good, bad in rng.sample(_OCR_SWAPS, len(_OCR_SWAPS)):
        if good in word:
            return word.replace(good, bad, 1)
    return word


def build(db_path: Path, total_chunks: int) -> None:
    conn = open_index(db_path)
    have = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    if have == total_chunks:
        sys.stderr.write(f"reusing {db_path} ({have} chunks)\n")
        conn.close()
        return
    if have:
        raise SystemExit(f"{db_path} holds {have} chunks: pass a fresh --data-dir")
    vocab = vocabulary()
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    rng = random.Random(SEED)
    started = time.perf_counter()
    for doc in range(total_chunks // CHUNKS_PER_DOC):
        ocr = doc % OCR_EVERY == 0
        folder = ("reports", "contracts", "notes", "manuals", "th")[doc % 5]
        rel = f"{folder}/{' '.join(rng.choices(vocab[:3000], k=2))}-{doc}.md".replace(" ", "_")
        children = []
        for ordinal in range(CHUNKS_PER_DOC):
            words = rng.choices(vocab, weights=weights, k=WORDS_PER_CHUNK)
            if ocr:
                words = [misread(w, rng) if rng.random() < 0.15 else w for w in words]
            children.append(Child(" ".join(words), Location(page=ordinal + 1), ocr))
        groups = [tuple(children[i : i + 4]) for i in range(0, CHUNKS_PER_DOC, 4)]
        sections = [Section("\n".join(c.text for c in g), g[0].location, g, ocr) for g in groups]
        content = DocumentContent(rel.rsplit("/", 1)[-1], sections, [], [], None, False)
        entry = FileEntry(rel, Path("/nonexistent") / rel, 1000, 1)
        write_document(conn, entry, f"{doc:064x}", content)
        if doc % 500 == 0:
            elapsed = time.perf_counter() - started
            sys.stderr.write(f"  {doc * CHUNKS_PER_DOC} chunks, {elapsed:.0f} s\n")
    sys.stderr.write(f"built {total_chunks} chunks in {time.perf_counter() - started:.0f} s\n")
    conn.close()


def query_mix(vocab: list[str], rng: random.Random) -> list[str]:
    """Eval questions (en/ru/th), 1-3 word keyword queries, short and filename queries."""
    import json

    queries: list[str] = []
    for name in ("debfaq-en", "pyfaq-en", "manru", "udhr-th2th"):
        golden = EVAL_DIR / name / "golden.json"
        if golden.exists():
            items = json.loads(golden.read_text(encoding="utf-8"))["queries"]
            queries += [q["query"] for q in rng.sample(items, min(25, len(items)))]
    mid = vocab[200:5000]
    queries += [" ".join(rng.sample(mid, k)) for k in (1, 2, 3) for _ in range(20)]
    queries += ["Q1", "ИП", "ใจ", "C++ AND (foo", 'NEAR(x "y', "report.md", "contracts/"]
    return queries


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="/tmp/bench-search")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    db_path = Path(args.data_dir) / "index.sqlite3"
    build(db_path, args.chunks)
    conn = open_index(db_path)
    rng = random.Random(SEED)
    vocab = vocabulary()
    queries = query_mix(vocab, rng)
    warm = [*queries[:5], "ทุกคนมีสิทธิ", "отчётов", "Q1"]  # page cache, Thai dictionary, stemmers
    for q in warm:
        search(conn, q, SearchOptions(top_k=8))
    timings: list[float] = []
    for _ in range(args.rounds):
        for q in queries:
            started = time.perf_counter()
            search(conn, q, SearchOptions(top_k=8))
            timings.append((time.perf_counter() - started) * 1000)
    print(f"chunks: {conn.execute('SELECT COUNT(*) FROM chunks').fetchone()[0]}")
    print(f"lexical search, all channels, {len(queries)} queries x {args.rounds} rounds:")
    print(
        f"  p50 {statistics.median(timings):.1f} ms  p95 {percentile(timings, 0.95):.1f} ms  "
        f"max {max(timings):.1f} ms"
    )
    ocr_words = [w for w in vocab[300:3000] if len(w) >= 7][:12]
    long_query = " ".join(misread(misread(w, rng), rng) + "x" for w in ocr_words)
    ctx_timings: list[float] = []
    total_timings: list[float] = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        ctx = SearchContext(conn, parse_query(long_query), SearchOptions().filters)
        result = channel_fuzzy(ctx)
        ctx_timings.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        search(conn, long_query, SearchOptions(top_k=8))
        total_timings.append((time.perf_counter() - started) * 1000)
    print(f"fuzzy worst case ({len(ocr_words)} misspelled words): {long_query[:80]}...")
    print(
        f"  fuzzy channel {max(ctx_timings):.1f} ms (max of {args.rounds}), "
        f"{len(result.ranked)} OCR chunks; whole search {max(total_timings):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
