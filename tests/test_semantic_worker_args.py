"""The worker's command line has one definition: what the client builds, the worker parses."""

from __future__ import annotations

from pathlib import Path

from helpers.semantic.worker_args import WorkerArgs, parse_worker_args


def test_the_command_the_client_builds_parses_back_to_the_same_options(tmp_path: Path) -> None:
    for args in (
        WorkerArgs(tmp_path / "model"),
        WorkerArgs(tmp_path / "m", 3, tmp_path / "cache", 30.0, preload_passages=True),
        WorkerArgs(tmp_path / "m", cache_dir=tmp_path, idle_seconds=5.0, first_pass_min_vectors=7),
    ):
        argv = args.command(Path("semantic_worker.py"))[2:]  # after the interpreter and script
        assert parse_worker_args(argv, "worker") == args


def test_a_zero_idle_time_means_cold_mode_and_threads_are_at_least_one(tmp_path: Path) -> None:
    argv = ["--model-dir", str(tmp_path), "--idle-seconds", "0", "--threads", "0"]
    assert parse_worker_args(argv, "worker") == WorkerArgs(tmp_path, threads=1)
