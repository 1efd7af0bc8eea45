"""Scale harness, lexical side: search latency at ~100k, ~300k and 1M chunks, hostile queries.

    python bench/bench_lexical_scale.py --source-db DATA/index.sqlite3 [--source-db ...] \
        [--text-root /usr/share/doc] [--text-root /usr/share/man] --golden SET/golden.json \
        [--golden ...] [--sizes 100000,300000,1000000] [--work /tmp/lexscale] \
        [--per-set 15] [--reuse]

Passages: the chunk texts of the given real indexes, then plain-text paragraphs of the given
folders (Debian documentation, man pages with their roff requests stripped), deduplicated.
Where they run out, perturbed copies follow: each copy of a real passage has about one word in
eight replaced by a word of another random passage and a few neighbours swapped, so no two
passages are the same (checked by hash); such text is for timing only. Each size is its own index
(WORK/SIZE/index.sqlite3: a copy of the smaller one, grown; --reuse measures them again without
building), filled with documents of CHUNKS_PER_DOC chunks written by rag_sync.write_document
(the sync's own writer), and each size is measured before the next is added:

- typical: rag_service.search(mode="lexical", top_k=8) over the real golden queries (PER_SET
  per set, one warm-up pass first), p50 and p95;
- hostile: each query of `hostile_queries` (three runs, the median), as a ratio to the typical
  p50 of the same size, with the channels the response says were cut short.

Prints one JSON object per size; bench/notes/s-scale.md holds the figures and conclusions.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rag_service  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.extract.blocks import Location  # noqa: E402
from helpers.safety import FileEntry  # noqa: E402
from helpers.store.index_db import open_index  # noqa: E402
from helpers.text.chunking import Child, Section  # noqa: E402
from rag_sync import DocumentContent, write_document  # noqa: E402

CHUNKS_PER_DOC = 50
CHUNKS_PER_SECTION = 5
PASSAGE_MIN_CHARS = 120  # shorter paragraphs are merged with the next one
PASSAGE_MAX_CHARS = 700  # about the chunker's child size
SWAP_SHARE = 0.125  # words of a perturbed copy replaced by another passage's word
SEED = 11
_ROFF = re.compile(r"\\f[BIRP]|\\\(..|\\[-&e]|\\s[-+]?\d")


def real_passages(dbs: list[Path], roots: list[Path]) -> list[str]:
    seen: set[bytes] = set()
    out: list[str] = []

    def keep(text: str) -> None:
        text = " ".join(text.split())
        key = hashlib.blake2b(text.encode(), digest_size=8).digest()
        if len(text) >= PASSAGE_MIN_CHARS // 2 and key not in seen:
            seen.add(key)
            out.append(text[:PASSAGE_MAX_CHARS])

    for db in dbs:
        conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
        for (text,) in conn.execute("SELECT text FROM chunks ORDER BY id"):
            keep(text)
        conn.close()
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            for paragraph in _paragraphs(path):
                keep(paragraph)
    return out


def _paragraphs(path: Path) -> Iterator[str]:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile):
        return
    if b"\0" in raw[:4096]:
        return
    text = raw.decode("utf-8", errors="replace")
    if "/man" in str(path):
        lines = [ln for ln in text.splitlines() if not ln.startswith((".", "'"))]
        text = _ROFF.sub("", "\n".join(lines))
    buffer = ""
    for block in re.split(r"\n\s*\n", text):
        buffer = f"{buffer} {block}".strip()
        if len(buffer) >= PASSAGE_MIN_CHARS:
            yield buffer
            buffer = ""


def passages(real: list[str], seed: int) -> Iterator[str]:
    """The real passages, then perturbed copies of them, round after round, none repeated."""
    yield from real
    rng = random.Random(seed)
    seen: set[bytes] = set()
    while True:
        for text in real:
            words = text.split()
            for _ in range(max(1, int(len(words) * SWAP_SHARE))):
                donor = real[rng.randrange(len(real))].split()
                words[rng.randrange(len(words))] = donor[rng.randrange(len(donor))]
            if len(words) > 3:
                at = rng.randrange(len(words) - 1)
                words[at], words[at + 1] = words[at + 1], words[at]
            copy = " ".join(words)
            key = hashlib.blake2b(copy.encode(), digest_size=8).digest()
            if key not in seen:
                seen.add(key)
                yield copy


def grow(db: Path, source: Iterator[str], target: int, have: int) -> float:
    """Adds documents until the index holds `target` chunks; returns the seconds it took."""
    conn = open_index(db)
    docs = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    started = time.perf_counter()
    while have < target:
        texts = [next(source) for _ in range(min(CHUNKS_PER_DOC, target - have))]
        children = [Child(t, Location(page=i + 1)) for i, t in enumerate(texts)]
        step = CHUNKS_PER_SECTION
        sections = [
            Section(
                "\n".join(c.text for c in children[i : i + step]),
                children[i].location,
                tuple(children[i : i + step]),
            )
            for i in range(0, len(children), step)
        ]
        rel = f"part{docs // 1000:03d}/doc{docs:06d}.md"
        content = DocumentContent(f"doc {docs}", sections, [], [], None, False)
        entry = FileEntry(rel, Path("/nonexistent") / rel, 1000, 1)
        write_document(conn, entry, f"{docs:064x}", content)
        have += len(texts)
        docs += 1
        if docs % 200 == 0:
            sys.stderr.write(f"  {have} chunks, {time.perf_counter() - started:.0f} s\n")
    conn.close()
    return time.perf_counter() - started


def checkpoint(db: Path) -> None:
    """Folds the WAL into the file, so a copy of the file alone is the whole index."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def query_mix(goldens: list[Path], per_set: int, rng: random.Random) -> list[str]:
    queries: list[str] = []
    for golden in goldens:
        items = json.loads(golden.read_text(encoding="utf-8"))["queries"]
        queries += [q["query"] for q in rng.sample(items, min(per_set, len(items)))]
    return queries


def hostile_queries(real: list[str], rng: random.Random) -> dict[str, str]:
    """Queries that cost the most per character: common trigrams and words, long pastes."""
    paragraph = ""
    while len(paragraph) < 1000:
        paragraph += " " + real[rng.randrange(len(real))]
    words = sorted({w.lower() for t in real[:5000] for w in re.findall(r"[a-z]{4,}", t)})
    common = ["the", "and", "for", "with", "that", "this", "from", "are", "not", "you"]
    return {
        "the_x200": " ".join(["the"] * 200)[:1000],
        "eee_run": "e" * 1000,
        "ing_run": "ing" * 333,
        "paste_1000": paragraph.strip()[:1000],
        "or_100_words": " OR ".join(rng.sample(words, 100))[:1000],
        "stop_words_only": "the of and to in is it that was for on are as with by at",
        "common_x10": " ".join(common),
        "short_prefixes": "con pro pre dis per com int tra sub",
        "one_letter_words": "a b c d e f g h i j k l m n o p",
        "thai_run": "ที่" * 300,
        "cyrillic_paste": " ".join(t for t in real if re.search("[а-я]{4}", t))[:1000],
        "thai_paste": " ".join(t for t in real if re.search("[\u0e01-\u0e2e]{4}", t))[:1000],
    }


def timed(config: Config, query: str) -> tuple[float, list[str]]:
    started = time.perf_counter()
    result = rag_service.search(config, query, top_k=8, mode="lexical")
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, list(getattr(result, "truncated_channels", []) or [])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def measure(config: Config, queries: list[str], hostile: dict[str, str]) -> dict[str, object]:
    for query in queries:  # warm: page cache, stemmers, the Thai dictionary
        timed(config, query)
    typical = [timed(config, q)[0] for q in queries]
    p50 = statistics.median(typical)
    worst: dict[str, object] = {}
    for name, query in hostile.items():
        runs = [timed(config, query) for _ in range(3)]
        ms = statistics.median(r[0] for r in runs)
        worst[name] = {"ms": round(ms, 1), "x_p50": round(ms / p50, 2), "cut": runs[0][1]}
    return {
        "typical_p50_ms": round(p50, 1),
        "typical_p95_ms": round(percentile(typical, 0.95), 1),
        "queries": len(queries),
        "hostile": worst,
        "worst_x_p50": max(v["x_p50"] for v in worst.values()),  # type: ignore[index]
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-db", action="append", type=Path, default=[])
    parser.add_argument("--text-root", action="append", type=Path, default=[])
    parser.add_argument("--golden", action="append", type=Path, default=[])
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lexscale"))
    parser.add_argument("--per-set", type=int, default=15)
    parser.add_argument(
        "--reuse", action="store_true", help="measure the indexes already in --work, build none"
    )
    args = parser.parse_args()
    real = real_passages(args.source_db, args.text_root)
    sys.stderr.write(f"{len(real)} real passages\n")
    rng = random.Random(SEED)
    queries = query_mix(args.golden, args.per_set, rng)
    hostile = hostile_queries(real, rng)
    source = passages(real, SEED)
    built = 0
    previous: Path | None = None
    for size in (int(s) for s in args.sizes.split(",")):
        data = args.work / str(size)
        (data / "kb").mkdir(parents=True, exist_ok=True)
        db = data / "index.sqlite3"
        build_s = 0.0
        if not args.reuse:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            if previous is not None:  # grow a copy of the smaller index
                shutil.copyfile(previous, db)
            build_s = grow(db, source, size, built)
            checkpoint(db)
            built = size
        previous = db
        config = Config(knowledge_dir=data / "kb", data_dir=data, db_path=db, semantic=False)
        report = {"chunks": size, "real_passages": min(size, len(real)), "build_s": round(build_s)}
        report.update(measure(config, queries, hostile))
        print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
