"""The semantic worker's command line, both ends: the options the client starts it with and the
parser the worker reads them with, so the two cannot drift apart."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_THREADS = 2  # the target machines have 2 cores; the server keeps working meanwhile


@dataclass(frozen=True)
class WorkerArgs:
    """How one worker process runs."""

    model_dir: Path
    threads: int = DEFAULT_THREADS
    cache_dir: Path | None = None  # model hashes, query tokenizer index
    idle_seconds: float | None = None  # warm mode: exit when idle this long
    preload_passages: bool = False  # a build worker: the passage tokenizer before any request
    first_pass_min_vectors: int | None = None  # None: helpers.semantic.first_pass.MIN_VECTORS

    def command(self, script: Path) -> list[str]:
        """The argv that starts `script` (semantic_worker.py) with these options."""
        command = [sys.executable, str(script), "--model-dir", str(self.model_dir)]
        command += ["--threads", str(self.threads)]
        if self.cache_dir is not None:
            command += ["--cache-dir", str(self.cache_dir)]
        if self.idle_seconds:
            command += ["--idle-seconds", str(self.idle_seconds)]
        if self.preload_passages:
            command.append("--preload-passages")
        if self.first_pass_min_vectors is not None:
            command += ["--first-pass-min-vectors", str(self.first_pass_min_vectors)]
        return command


def parse_worker_args(argv: list[str] | None, description: str) -> WorkerArgs:
    """The worker's options from its command line (`argv`, default sys.argv)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="warm mode: exit when idle"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="cache folder: model hashes, query tokenizer index",
    )
    parser.add_argument(
        "--preload-passages",
        action="store_true",
        help="a build worker: load the passage tokenizer before the first request arrives",
    )
    parser.add_argument(
        "--first-pass-min-vectors",
        type=int,
        default=None,
        help="warm mode: generations of at least this many vectors get a first pass",
    )
    args = parser.parse_args(argv)
    idle = args.idle_seconds if args.idle_seconds and args.idle_seconds > 0 else None
    return WorkerArgs(
        model_dir=args.model_dir,
        threads=max(1, args.threads),
        cache_dir=args.cache_dir,
        idle_seconds=idle,
        preload_passages=args.preload_passages,
        first_pass_min_vectors=args.first_pass_min_vectors,
    )
