"""Real folders, real indexes and a real console (thread or `main.py` process) for web tests."""

from __future__ import annotations

import http.client
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from format_fixtures import write_text_pdf

import rag_service
import web_ui
from helpers.config import Config
from helpers.store.job_rows import JobView

REPO = Path(__file__).resolve().parents[1]
SYNC_TIMEOUT_S = 120.0  # a bound, not an expectation: small corpora sync in about a second
START_TIMEOUT_S = 20.0
PDF_PAGE2_WORDS = "Torque calibration of the hydraulic wrench"
UNTRUSTED_MARKUP = (
    "zebra payload <img src=x onerror=\"document.title='pwned'\"> "
    "<script>document.title='pwned'</script> <b>bold</b>"
)
SECRET_TEXT = "outside secret: never served"


def make_config(knowledge: Path, data: Path) -> Config:
    return Config(
        knowledge_dir=knowledge.resolve(),
        data_dir=data.resolve(),
        db_path=(data / "index.sqlite3").resolve(),
        semantic=False,
    )


def write_small_corpus(root: Path) -> Path:
    """A knowledge dir with Markdown/text/CSV/PDF/HTML documents plus every kind of trap.

    Traps: a file outside the dir, links to it (file and folder), a link inside the dir, a
    hidden file, a sensitive-looking name. Returns the folder that holds the outside file.
    """
    kb = root / "kb"
    for sub in ("contracts", "reports", "notes", "manuals"):
        (kb / sub).mkdir(parents=True, exist_ok=True)
    (kb / "contracts" / "service-agreement.md").write_text(
        "# Service Agreement\n\n## 1. Scope\n\nThe provider maintains the servers.\n\n"
        "## 2. Invoice payment terms\n\nInvoices are payable within 30 days of receipt. "
        "Late payments accrue interest.\n\n## 3. Termination\n\nEither party may end the "
        "agreement with 60 days notice.\n",
        encoding="utf-8",
    )
    (kb / "reports" / "sales-2026.txt").write_text(
        "Отчёт о продажах за третий квартал 2026 года.\nВыручка выросла на 12 %.\n",
        encoding="utf-8",
    )
    (kb / "reports" / "budget.csv").write_text(
        "department,quarter,budget_usd\nEngineering,Q1,120000\nSupport,Q1,45000\n",
        encoding="utf-8",
    )
    (kb / "notes" / "untrusted.md").write_text(
        f"# Pasted note\n\n{UNTRUSTED_MARKUP}\n", encoding="utf-8"
    )
    (kb / "notes" / "page.html").write_text(
        "<html><head><title>Notice</title></head><body><p>Quarterly notice about the upgrade."
        "</p><script>document.title='pwned'</script></body></html>",
        encoding="utf-8",
    )
    write_text_pdf(
        kb / "manuals" / "wrench.pdf",
        [["Hydraulic wrench manual", "Safety first."], [PDF_PAGE2_WORDS, "Set 40 Nm."]],
    )
    (kb / "notes" / ".hidden-note.md").write_text("hidden note\n", encoding="utf-8")
    (kb / "notes" / "credentials.txt").write_text("password=hunter2\n", encoding="utf-8")
    (kb / ".env").write_text("API_KEY=abc\n", encoding="utf-8")
    outside = root / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text(SECRET_TEXT + "\n", encoding="utf-8")
    (kb / "notes" / "escape.txt").symlink_to(outside / "secret.txt")
    (kb / "linked").symlink_to(outside, target_is_directory=True)
    (kb / "notes" / "inner-link.md").symlink_to(kb / "contracts" / "service-agreement.md")
    return outside


def write_bulk(folder: Path, count: int, lines: int = 40) -> None:
    """`count` generated text files (a folder that takes a few seconds to sync)."""
    for i in range(count):
        sub = folder / f"batch{i // 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        line = f"alpha beta gamma delta report number {i} for the archive\n"
        (sub / f"note{i:05d}.txt").write_text(f"Note {i}\n" + line * lines, encoding="utf-8")


def sync_now(config: Config, path: str | None = None) -> JobView:
    view = rag_service.start_sync(config, path)
    final = rag_service.wait_for_job(config, view.job_id, timeout_s=SYNC_TIMEOUT_S)
    assert final.state == "succeeded", final.to_dict()
    return final


@contextmanager
def running_console(config: Config) -> Iterator[web_ui.ConsoleServer]:
    """The console on 127.0.0.1, a free port, served from a thread of this process."""
    server = web_ui.make_server(config, port=0)
    thread = threading.Thread(target=server.serve_forever, name="console", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Http:
    """Raw HTTP/1.1 (http.client) so tests control Host, Origin and the path bytes exactly."""

    def __init__(self, port: int, token: str = "") -> None:
        self.port = port
        self.token = token
        self.host = f"127.0.0.1:{port}"
        self.origin = f"http://127.0.0.1:{port}"

    def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        host: str | None = "",
    ) -> Reply:
        """host "" = the right one, None = no Host header at all, anything else = sent as is."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            if host is not None:
                conn.putheader("Host", host or self.host)
            for name, value in (headers or {}).items():
                conn.putheader(name, value)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            response = conn.getresponse()
            merged: dict[str, str] = {}
            for name, value in response.getheaders():
                key = name.lower()
                merged[key] = f"{merged[key]}, {value}" if key in merged else value
            return Reply(response.status, merged, response.read())
        finally:
            conn.close()

    def get(self, path: str, **headers: str) -> Reply:
        return self.request("GET", path, headers=headers)

    def post(
        self,
        path: str,
        payload: dict[str, Any],
        token: str | None = None,
        origin: str | None = "",
        extra: dict[str, str] | None = None,
    ) -> Reply:
        """A console-like POST: same Origin and the CSRF token unless told otherwise."""
        headers = {"Content-Type": "application/json"}
        if origin is not None:
            headers["Origin"] = origin or self.origin
        if token is None:
            token = self.token
        if token:
            headers["X-CSRF-Token"] = token
        headers.update(extra or {})
        return self.request("POST", path, headers=headers, body=json.dumps(payload).encode())


@dataclass
class ConsoleProcess:
    proc: subprocess.Popen[str]
    url: str
    stderr_lines: list[str]

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=10)


def start_console_process(args: list[str], env: dict[str, str] | None = None) -> ConsoleProcess:
    """`python main.py ARGS` until it prints its URL on stderr (stderr is drained afterwards)."""
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "main.py"), *args],
        cwd=str(REPO),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    stream = proc.stderr
    lines: list[str] = []
    seen: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:  # keeps reading, so the child never blocks on a full pipe
        for line in stream:
            lines.append(line)
            seen.put(line)
        seen.put(None)

    threading.Thread(target=drain, name="console-stderr", daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    url = ""
    while not url and time.monotonic() < deadline:
        try:
            line = seen.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        if line.startswith("RagDoc console: "):
            url = line.split(": ", 1)[1].strip()
    if not url:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"console did not start: {''.join(lines)}")
    return ConsoleProcess(proc, url, lines)
