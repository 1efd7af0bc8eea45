"""Index checks, process inspection and fault tools shared by tests/ and bench/faults/.

Everything here drives the real system: real worker processes, real SQLite files, real mounts.
Nothing is mocked; the helpers only observe (dump the index, read /proc) or inject the fault
(SIGKILL, a foreign lock, a full or read-only file system).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
for _p in (REPO, TESTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import rag_service  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.store.fold_sql import register_fold  # noqa: E402
from helpers.store.job_rows import ACTIVE_STATES, FINAL_STATES, JobView  # noqa: E402

T = TypeVar("T")
WORKER_SCRIPT_NAME = "sync_job_worker.py"
SANDBOX_MODULE = "helpers.extract.sandbox"


# -- the index -----------------------------------------------------------------------------------
def _ro_connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=30)
    register_fold(conn)  # integrity_check compiles chunks.norm (migration 12)
    conn.row_factory = sqlite3.Row
    return conn


def index_problems(db_path: Path) -> list[str]:
    """Empty when integrity_check is ok and no document is half-written (chunk/FTS counts)."""
    conn = _ro_connect(db_path)
    problems: list[str] = []
    try:
        verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if verdict != "ok":
            problems.append(f"integrity_check: {verdict}")
        rows = conn.execute(
            "SELECT d.path, d.chunk_count, d.section_count, "
            "(SELECT COUNT(*) FROM chunks c WHERE c.document_id = d.id) AS chunks, "
            "(SELECT COUNT(*) FROM sections s WHERE s.document_id = d.id) AS sections, "
            "(SELECT COUNT(*) FROM chunks_fts_docsize f JOIN chunks c ON c.id = f.id "
            " WHERE c.document_id = d.id) AS fts FROM documents d"
        ).fetchall()
        for r in rows:
            if not r["chunks"] == r["chunk_count"] == r["fts"]:
                problems.append(f"{r['path']}: chunks {dict(r)}")
            if r["sections"] != r["section_count"]:
                problems.append(f"{r['path']}: sections {dict(r)}")
        orphans = conn.execute(
            "SELECT COUNT(*) FROM chunks_fts_docsize WHERE id NOT IN (SELECT id FROM chunks)"
        ).fetchone()[0]
        if orphans:
            problems.append(f"{orphans} FTS rows without a chunk")
        stray = conn.execute(
            "SELECT COUNT(*) FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)"
        ).fetchone()[0]
        if stray:
            problems.append(f"{stray} chunks without a document")
    finally:
        conn.close()
    return problems


DumpRow = tuple[str, str, str, tuple[str, ...]]


def canonical_dump(db_path: Path) -> list[DumpRow]:
    """(path, sha256, status, chunk texts in order) per document, sorted by path.

    Two syncs of the same folder must give the same dump whatever happened in between; the
    failure text is left out (a stall message may differ), the status is kept.
    """
    conn = _ro_connect(db_path)
    try:
        docs = conn.execute("SELECT id, path, sha256, status FROM documents ORDER BY path")
        out: list[DumpRow] = []
        for d in docs.fetchall():
            texts = tuple(
                r[0]
                for r in conn.execute(
                    "SELECT c.text FROM chunks c JOIN sections s ON s.id = c.section_id "
                    "WHERE c.document_id = ? ORDER BY s.ordinal, c.ordinal",
                    (d["id"],),
                )
            )
            out.append((d["path"], d["sha256"], d["status"], texts))
        return out
    finally:
        conn.close()


def dump_difference(left: list[DumpRow], right: list[DumpRow]) -> list[str]:
    """Human-readable differences between two dumps (empty when equal)."""
    a = {row[0]: row for row in left}
    b = {row[0]: row for row in right}
    diff = [f"only in first: {p}" for p in sorted(a.keys() - b.keys())]
    diff += [f"only in second: {p}" for p in sorted(b.keys() - a.keys())]
    for path in sorted(a.keys() & b.keys()):
        if a[path] != b[path]:
            diff.append(f"differs: {path} ({a[path][2]} vs {b[path][2]})")
    return diff


def jobs_in_states(db_path: Path, states: Sequence[str] = ACTIVE_STATES) -> list[dict[str, Any]]:
    conn = _ro_connect(db_path)
    try:
        marks = ",".join("?" * len(states))
        rows = conn.execute(
            f"SELECT id, state, pid, message FROM jobs WHERE state IN ({marks})", tuple(states)
        )
        return [dict(r) for r in rows]
    finally:
        conn.close()


# -- syncing -------------------------------------------------------------------------------------
def run_sync(config: Config, timeout_s: float = 300) -> JobView:
    """Start a sync through the service boundary and wait for a final state."""
    view = rag_service.wait_for_job(
        config, rag_service.start_sync(config).job_id, timeout_s=timeout_s
    )
    if view.state not in FINAL_STATES:
        raise TimeoutError(f"job {view.job_id} still {view.state} after {timeout_s} s")
    return view


def reference_dump(knowledge: Path, data_dir: Path, **overrides: object) -> list[DumpRow]:
    """The clean result: one undisturbed sync of `knowledge` into a fresh data dir."""
    from conftest import make_config

    shutil.rmtree(data_dir, ignore_errors=True)
    config = make_config(knowledge, data_dir, **overrides)
    run_sync(config)
    return canonical_dump(config.db_path)


def wait_until(predicate: Callable[[], T], timeout: float = 60.0, interval: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(interval)


# -- processes (/proc) ---------------------------------------------------------------------------
def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode("utf-8", "replace") for p in raw.split(b"\0") if p]


def _stat_fields(pid: int) -> list[str]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    return text.rsplit(")", 1)[-1].split()


def is_alive(pid: int) -> bool:
    """Running (a zombie is not alive: it has released its locks and files)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != "Z"


def parent_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if len(fields) > 1 else None


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def worker_pids(data_dir: Path) -> list[int]:
    """Live sync workers whose configuration names this data dir."""
    needle = json.dumps(str(data_dir.resolve()))[1:-1]
    out = []
    for pid in all_pids():
        args = cmdline(pid)
        if (
            any(a.endswith(WORKER_SCRIPT_NAME) for a in args)
            and any(needle in a for a in args)
            and is_alive(pid)
        ):
            out.append(pid)
    return out


def sandbox_children(pid: int) -> list[int]:
    return [
        p
        for p in all_pids()
        if parent_of(p) == pid and SANDBOX_MODULE in " ".join(cmdline(p)) and is_alive(p)
    ]


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def kill_hard(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def lock_holders(lock_path: Path) -> list[int]:
    """Pids holding a flock on `lock_path` (from /proc/locks, matched by inode)."""
    try:
        inode = lock_path.stat().st_ino
    except OSError:
        return []
    holders = []
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].endswith(f":{inode}"):
            holders.append(int(parts[4]))
    return holders


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# -- a foreign process holding the database ------------------------------------------------------
_HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
conn.execute("BEGIN EXCLUSIVE")
conn.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
print("released", flush=True)
"""


@contextlib.contextmanager
def foreign_exclusive_lock(db_path: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holds `BEGIN EXCLUSIVE` (with a pending write) for `seconds`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(db_path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "locked":
        proc.kill()
        raise RuntimeError(f"lock holder did not start: {line!r}")
    try:
        yield proc
    finally:
        proc.wait(timeout=seconds + 60)


# -- small or read-only file systems -------------------------------------------------------------
class MountUnavailable(RuntimeError):
    """tmpfs mounts need root and CAP_SYS_ADMIN; callers skip with this reason."""


def can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = Path(f"/tmp/ragdoc-mount-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        ok = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                capture_output=True,
            ).returncode
            == 0
        )
        if ok:
            subprocess.run(["umount", str(probe)], capture_output=True)
        return ok
    finally:
        probe.rmdir()


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. '2m') mounted at `path` for the block."""
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if result.returncode != 0:
        raise MountUnavailable(result.stderr.decode(errors="replace").strip())
    try:
        yield path
    finally:
        for _ in range(50):
            if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)  # a worker may still be closing its files


def fill_after_sync(mount: Path, config: Config) -> None:
    """Leave no free block on `mount`, which holds `config`'s synced data dir. A write reuses the
    room of a WAL that is still there, so the WAL is emptied first (the worker must be gone, or
    its connection keeps the WAL) and the next write needs new blocks."""
    wait_until(lambda: not worker_pids(config.data_dir), timeout=60)
    with contextlib.closing(sqlite3.connect(config.db_path)) as conn:
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    with open(mount / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
        except OSError:
            return  # ENOSPC: full


def remount(path: Path, *, read_only: bool) -> None:
    mode = "ro" if read_only else "rw"
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True, capture_output=True)


# -- a raw MCP stdio client (one JSON-RPC message per line), easy to kill mid-call ---------------
@dataclass
class McpProcess:
    """`python rag_server.py ...` spoken to line by line, so a test can SIGKILL it at any point."""

    proc: subprocess.Popen[bytes]
    next_id: int = 1

    @classmethod
    def start(
        cls, config: Config, stderr_path: Path | None = None, semantic_model: Path | None = None
    ) -> McpProcess:
        """The server with semantic search off, or on with `semantic_model`."""
        semantic = (
            ["--semantic", "on", "--semantic-model-dir", str(semantic_model)]
            if semantic_model
            else ["--semantic", "off"]
        )
        err = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(REPO / "rag_server.py"),
                    "--knowledge-dir",
                    str(config.knowledge_dir),
                    "--data-dir",
                    str(config.data_dir),
                    *semantic,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=str(REPO),
            )
        finally:
            if stderr_path:
                err.close()  # type: ignore[union-attr]
        client = cls(proc)
        client.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fault-harness", "version": "1"},
            },
            timeout=60,
        )
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return client

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def send_request(self, method: str, params: dict[str, Any]) -> int:
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def read_response(self, rid: int, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while time.monotonic() < deadline:
                if not selector.select(max(0.0, deadline - time.monotonic())):
                    break
                line = self.proc.stdout.readline()
                if not line:
                    raise ConnectionError("server closed its stdout")
                message = json.loads(line)
                if message.get("id") == rid:
                    return message
        finally:
            selector.close()
        raise TimeoutError(f"no response to request {rid} in {timeout} s")

    def request(self, method: str, params: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        return self.read_response(self.send_request(method, params), timeout)

    def call(self, name: str, arguments: dict[str, Any], timeout: float = 60) -> tuple[bool, Any]:
        """(is_error, structured content or error text)."""
        message = self.request("tools/call", {"name": name, "arguments": arguments}, timeout)
        if "error" in message:
            return True, message["error"].get("message", "")
        result = message["result"]
        if result.get("isError"):
            return True, " ".join(c.get("text", "") for c in result.get("content", []))
        return False, result.get("structuredContent")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


# -- a worker without root's file-permission override ---------------------------------------------
SETPRIV = shutil.which("setpriv")


def run_worker_without_dac_override(config: Config, scope: str = "") -> JobView:
    """Run one sync job in a worker that cannot bypass file permissions, as a normal user's
    would be (tests run as root, which reads mode-000 files): setpriv drops CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from the bounding set, so the exec'd worker has neither."""
    from helpers.store import job_rows
    from helpers.store.index_db import open_index

    if SETPRIV is None:
        raise MountUnavailable("setpriv (util-linux) is not installed")
    config.logs_dir.mkdir(parents=True, exist_ok=True)
    conn = open_index(config.db_path)
    try:
        job_id, _already = job_rows.create_or_get_active(conn, config.lock_path, scope)
    finally:
        conn.close()
    subprocess.run(
        [SETPRIV, "--bounding-set", "-dac_override,-dac_read_search", sys.executable,
         str(REPO / "sync_job_worker.py"), "--job-id", job_id, "--config-json", config.to_json()],
        cwd=str(REPO),
        timeout=300,
        check=False,
    )  # fmt: skip
    return rag_service.sync_status(config, job_id)


# A worker process whose sandbox child reads a stuck file forever: argv = repo dir, file path.
# Killing it (even with SIGKILL) must take the child with it.
STUCK_SANDBOX_WORKER = """
import sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from helpers.extract.blocks import ExtractLimits
from helpers.extract.sandbox import SandboxedExtractor
sandbox = SandboxedExtractor(ExtractLimits(), None)
threading.Thread(
    target=lambda: list(sandbox.extract(Path(sys.argv[2]), lambda: None)), daemon=True
).start()
time.sleep(600)
"""
