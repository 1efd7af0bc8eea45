"""What the sync's SQLite writes cost, alone and in whole syncs (run by hand; issue 16).

    python bench/bench_sync_writes.py DIR [--modes per-doc group one] [--tree CHECKOUT]
    python bench/bench_sync_writes.py DIR --resync [--tree CHECKOUT]

The first form extracts every file of DIR once, then writes the same documents into fresh
indexes: `per-doc` (a transaction per document, document_write.write_document), `group`
(group_write.WriteGroup, in the loop's thread) and `one` (every document in one
transaction, the floor). `--resync` runs whole in-process syncs of a copy of DIR: a first sync,
then one after every text file changed. Both print CPU seconds, wall seconds and the bytes the
process wrote to disk (/proc/self/io: WAL frames and checkpoints), the figures that hold on a
loaded box; `--tree` imports another checkout (the base commit) for a before/after in one run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _disk_bytes() -> int:
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["write_bytes"])


class _Quiet:
    def check_cancel(self) -> None:
        return None


def writes_alone(folder: Path, modes: list[str]) -> None:
    import rag_sync
    from helpers.extract.blocks import ExtractContext
    from helpers.extract.registry import SUPPORTED_SUFFIXES
    from helpers.index import document_write
    from helpers.safety import FileEntry, walk_files
    from helpers.store.index_db import open_index, write_transaction

    docs = []
    for entry in walk_files(folder, SUPPORTED_SUFFIXES):
        if isinstance(entry, FileEntry):
            try:
                docs.append((entry, rag_sync.extract_document(entry, ExtractContext(), _Quiet())))
            except Exception:  # noqa: BLE001 - a bench skips what fails
                continue
    chunks = sum(len(s.children) for _e, c in docs for s in c.sections)
    print(f"{len(docs)} documents, {chunks:,} chunks")
    for mode in modes:
        work = Path(tempfile.mkdtemp(prefix="bench-writes-"))
        conn = open_index(work / "index.sqlite3")
        disk, cpu, wall = _disk_bytes(), time.process_time(), time.perf_counter()
        if mode == "per-doc":
            for entry, content in docs:
                document_write.write_document(conn, entry, "0" * 64, content)
        elif mode == "one":
            with write_transaction(conn):
                for entry, content in docs:
                    document_write.insert_document(conn, None, entry, "0" * 64, content)
        else:
            from helpers.index import group_write

            group = group_write.WriteGroup(conn)
            for entry, content in docs:
                group.before_file(entry)
                group.write_document(entry, "0" * 64, content)
            group.flush()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        disk = _disk_bytes() - disk
        conn.close()
        print(f"  {mode:8} CPU {cpu:6.2f} s  wall {wall:6.2f} s  disk {disk / 1e6:7.1f} MB")
        shutil.rmtree(work, ignore_errors=True)


def resync(folder: Path) -> None:
    import rag_service
    from helpers.config import Config

    work = Path(tempfile.mkdtemp(prefix="bench-resync-"))
    try:
        source = work / "docs"
        shutil.copytree(folder, source)
        data = work / "data"
        config = Config(source, data, data / "index.sqlite3", semantic=False)

        def timed(label: str) -> None:
            disk, cpu, wall = _disk_bytes(), time.process_time(), time.perf_counter()
            view = rag_service.sync_kb_blocking(config)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            disk = _disk_bytes() - disk
            counts = {k: v for k, v in view.counts.items() if v}
            print(f"  {label:24} CPU {cpu:6.2f} s  wall {wall:6.2f} s  disk {disk / 1e6:7.1f} MB")
            print(f"    {view.state} {counts}")

        timed("first sync")
        for path in source.rglob("*"):
            if path.is_file():
                with path.open("a", encoding="utf-8") as f:
                    f.write("\nchanged line\n")
        timed("every file changed")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--modes", nargs="+", default=["per-doc", "group", "one"])
    parser.add_argument("--resync", action="store_true")
    parser.add_argument("--tree", type=Path, help="import this checkout instead of this one")
    args = parser.parse_args()
    tree = (args.tree or Path(__file__).resolve().parents[1]).resolve()
    sys.path.insert(0, str(tree))
    print(f"tree {tree}")
    if args.resync:
        resync(args.folder.resolve())
    else:
        writes_alone(args.folder.resolve(), args.modes)


if __name__ == "__main__":
    main()
