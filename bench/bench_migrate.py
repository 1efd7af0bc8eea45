"""How long an existing index's migration holds the write lock (run by hand).

    python bench/bench_migrate.py INDEX.sqlite3

Copies the index (never touches the original), opens the copy with index_db.open_index and
reports every write transaction of the migration and of its batched backfills (migration 8's
trigram rows, migration 9's compaction, migration 14's units): the longest is the longest a
cancel_sync or heartbeat waits. Then checks the trigram index against the chunks, counts rows
left in the old encodings and reports the file size before and after a VACUUM.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helpers.store import backfill, index_db  # noqa: E402
from helpers.store.codec import pack_section_text  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("index", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as work:
        db = Path(work) / "index.sqlite3"
        with closing(sqlite3.connect(args.index)) as source, closing(sqlite3.connect(db)) as copy:
            source.backup(copy)
            before = index_db.schema_version(copy)
        size = db.stat().st_size
        real = index_db.write_transaction
        seconds: list[float] = []

        @contextmanager
        def timed(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
            start = time.perf_counter()
            with real(conn) as inner:
                yield inner
            seconds.append(time.perf_counter() - start)

        index_db.write_transaction = timed  # type: ignore[assignment]
        backfill.write_transaction = timed  # type: ignore[assignment]
        start = time.perf_counter()
        conn = index_db.open_index(db)
        wall = time.perf_counter() - start
        opened = len(seconds)
        while index_db.run_backfills(conn, bounded=True):  # what the sync worker runs
            pass
        finished = time.perf_counter() - start
        index_db.write_transaction = real
        backfill.write_transaction = real
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        print(f"{args.index}: schema {before} -> {index_db.schema_version(conn)}, {chunks} chunks")
        if seconds:
            print(
                f"  open_index {wall:.1f} s ({opened} write transactions), backfills done after "
                f"{finished:.1f} s: {len(seconds)} write transactions, longest "
                f"{max(seconds):.2f} s, first {seconds[0]:.2f} s"
            )
        conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        # every schema-8 chunk has a hex hash, which the compaction clears with its location
        old_chunks = conn.execute("SELECT COUNT(*) FROM chunks WHERE text_hash != ''").fetchone()[0]
        old_sections = sum(
            isinstance(text, str) and isinstance(pack_section_text(text), bytes)
            for (text,) in conn.execute("SELECT text FROM sections")
        )
        print(f"  rows left in the old encodings: {old_chunks} chunks, {old_sections} sections")
        conn.execute("VACUUM")
        conn.close()
        print(f"  trigram index matches chunks; file {size / 1e6:.1f} MB -> ", end="")
        print(f"{db.stat().st_size / 1e6:.1f} MB after VACUUM")


if __name__ == "__main__":
    main()
