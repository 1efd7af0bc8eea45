"""Escape attempts: every hostile path in every tool argument (service and real MCP stdio), XXE
probes, and link-swap races against the real worker. Counts attempts and leaks (must be 0).

    python bench/faults/escapes.py [--races 30]

A race round syncs a folder while a thread keeps swapping one file between a regular file and a
link to an outside file of the same size and mtime; a leak is the outside text in the index.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import threading
import time

from _common import line, work_dir
from stress.harness import McpProcess, run_sync
from test_path_security import (
    ATTACK_PATHS,
    OUTSIDE_TOKEN,
    _leaks,
    _service_calls,
    _write_tree,
)

import rag_service

VICTIMS = 40  # files flipped between a regular file and an outside link during each sync


def argument_attacks(root) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    setup = _write_tree(root / "args")
    run_sync(setup.config)
    attempts = leaks = accepted_scopes = 0
    for tool, call in _service_calls(setup.config).items():
        for attack in ATTACK_PATHS:
            attempts += 1
            try:
                result = call(attack)
            except rag_service.RagError:
                continue
            leaks += bool(_leaks(result, setup))
            if tool == "sync_kb.path":
                accepted_scopes += 1
                rag_service.wait_for_job(setup.config, result["job_id"], timeout_s=120)
    server = McpProcess.start(setup.config)
    try:
        for attack in ATTACK_PATHS:
            for name, args in (
                ("rag_search", {"query": "invoice", "path_prefix": attack}),
                ("rag_read", {"path": attack}),
                ("rag_list", {"path_prefix": attack}),
                ("sync_kb", {"path": attack}),
            ):
                attempts += 1
                is_error, payload = server.call(name, args)
                leaks += (not is_error) and bool(_leaks(payload, setup))
                accepted_scopes += name == "sync_kb" and not is_error
    finally:
        server.close()
    return attempts, leaks, accepted_scopes


def race_rounds(root, rounds: int) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    """(rounds, rounds whose index holds the outside text, swaps made)."""
    from conftest import make_config, write_corpus

    knowledge = root / "race"
    write_corpus(knowledge, 300)
    secret = root / "secret.md"
    secret.write_text(f"# Payroll\n\n{OUTSIDE_TOKEN} salaries\n", "utf-8")
    stat = secret.stat()
    victims = [knowledge / f"part{i % 10}" / f"victim{i:02d}.md" for i in range(VICTIMS)]
    leaked_rounds = swaps = 0

    def swapper(stop: threading.Event) -> None:
        nonlocal swaps
        while not stop.is_set():
            for victim in victims:
                tmp = victim.with_name("victim.tmp")
                tmp.write_bytes(b"x" * stat.st_size)
                os.utime(tmp, ns=(stat.st_atime_ns, stat.st_mtime_ns))
                os.replace(tmp, victim)
            time.sleep(0.001)
            for victim in victims:
                link = victim.with_name("victim.lnk")
                link.unlink(missing_ok=True)
                link.symlink_to(secret)
                os.replace(link, victim)
                swaps += 1
            time.sleep(0.001)

    for round_no in range(rounds):
        shutil.rmtree(root / "race-state", ignore_errors=True)
        config = make_config(knowledge, root / "race-state")
        stop = threading.Event()
        thread = threading.Thread(target=swapper, args=(stop,))
        thread.start()
        run_sync(config)
        stop.set()
        thread.join()
        conn = sqlite3.connect(config.db_path)
        hit = conn.execute(
            "SELECT COUNT(*) FROM chunks WHERE instr(text, ?) > 0", (OUTSIDE_TOKEN,)
        ).fetchone()[0]
        conn.close()
        leaked_rounds += bool(hit)
        print(f"race round {round_no}: {'LEAK' if hit else 'ok'}", flush=True)
    return rounds, leaked_rounds, swaps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--races", type=int, default=30)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    root = work_dir("escapes", args.work)
    attempts, leaks, scopes = argument_attacks(root)
    rounds, leaked_rounds, swaps = race_rounds(root, args.races)
    print("\nescapes summary")
    line("path arguments tried (4 tools x service+MCP)", attempts)
    line("leaks through arguments", leaks)
    line("escape scopes accepted by sync_kb", scopes)
    line("link-swap race rounds / swaps", f"{rounds} / {swaps}")
    line("rounds that indexed the outside file", leaked_rounds)
    shutil.rmtree(root, ignore_errors=True)
    return 1 if leaks or scopes or leaked_rounds else 0


if __name__ == "__main__":
    raise SystemExit(main())
