"""The Streamable HTTP transport through real MCP HTTP clients on 127.0.0.1: tools and resources
work with the bearer token, and a missing or wrong token, a foreign Origin or Host are refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import REPO
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp.shared.exceptions import MCPError

from helpers.config import Config
from helpers.store.job_rows import FINAL_STATES

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class HttpServer:
    url: str
    token: str
    token_path: Path
    port: int


def start_server(config: Config, *extra: str) -> tuple[subprocess.Popen[str], HttpServer | str]:
    args = [
        sys.executable,
        str(REPO / "rag_server.py"),
        "--knowledge-dir",
        str(config.knowledge_dir),
    ]
    args += ["--data-dir", str(config.data_dir), "--semantic", "off", "--transport", "http"]
    proc = subprocess.Popen(
        [*args, *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(REPO),
    )
    assert proc.stderr is not None
    url = token_path = None
    lines = []
    while url is None or token_path is None:
        line = proc.stderr.readline()
        if not line:  # exited before serving
            proc.wait(timeout=30)
            return proc, "".join(lines)
        lines.append(line)
        if line.startswith("RagDoc MCP over HTTP: "):
            url = line.split(": ", 1)[1].strip()
        elif line.startswith("bearer token: "):
            token_path = Path(line.split(": ", 1)[1].strip())
    token = token_path.read_text(encoding="ascii").strip()
    return proc, HttpServer(url, token, token_path, int(url.rsplit(":", 1)[1].split("/")[0]))


@pytest.fixture
def server(config: Config, knowledge: Path) -> Iterator[HttpServer]:
    (knowledge / "runbook.md").write_text(
        "# Runbook\n\n## Failover\nPromote the standby database first.\n", encoding="utf-8"
    )
    proc, info = start_server(config, "--port", "0")
    assert isinstance(info, HttpServer), info
    try:
        yield info
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def client(server: HttpServer, token: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    return Client(StreamableHttpTransport(server.url, headers=headers))


def raw_post(server: HttpServer, headers: dict[str, str]) -> httpx.Response:
    with httpx.Client(trust_env=False, timeout=20) as http:
        return http.post(server.url, json=INIT, headers={**MCP_HEADERS, **headers})


@pytest.mark.anyio
async def test_two_http_clients_share_one_index_with_the_token(server: HttpServer):
    mode = stat.S_IMODE(os.stat(server.token_path).st_mode)
    assert mode == 0o600 and server.url.startswith("http://127.0.0.1:")
    async with client(server) as first, client(server) as second:
        tools = {t.name for t in await first.list_tools()}
        assert {"rag_search", "sync_kb", "sync_status", "rag_read"} <= tools
        job = (await first.call_tool("sync_kb", {})).structured_content
        state = job
        while state["state"] not in FINAL_STATES:
            state = (
                await second.call_tool("sync_status", {"job_id": job["job_id"], "wait_seconds": 30})
            ).structured_content
        assert state["state"] == "succeeded"
        first_hits, second_hits = await _both(first, second, "standby database")
        assert first_hits == second_hits and first_hits[0]["path"] == "runbook.md"
        resources = await second.list_resources()
        assert [str(r.uri) for r in resources] == ["ragdoc://doc/runbook.md"]
        read = await first.read_resource("ragdoc://doc/runbook.md")
        assert "Promote the standby database" in read[0].text


async def _both(first: Client, second: Client, query: str) -> tuple[list, list]:
    results: dict[str, list] = {}

    async def ask(name: str, c: Client) -> None:
        results[name] = (await c.call_tool("rag_search", {"query": query})).structured_content[
            "hits"
        ]

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "a", first)
        group.start_soon(ask, "b", second)
    return results["a"], results["b"]


def test_requests_without_the_right_token_or_from_a_foreign_origin_are_refused(
    server: HttpServer,
):
    good = {"Authorization": f"Bearer {server.token}"}
    assert raw_post(server, good).status_code == 200
    same_origin = {**good, "Origin": f"http://127.0.0.1:{server.port}"}
    assert raw_post(server, same_origin).status_code == 200
    missing = raw_post(server, {})
    assert missing.status_code == 401 and "bearer" in missing.json()["error"]
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "http-token" in missing.json()["hint"]
    for wrong in (server.token[:-1], server.token + "x", "", server.token.upper()):
        assert raw_post(server, {"Authorization": f"Bearer {wrong}".strip()}).status_code == 401
    assert raw_post(server, {"Authorization": f"Basic {server.token}"}).status_code == 401
    foreign = raw_post(server, {**good, "Origin": "http://evil.example"})
    assert foreign.status_code == 403 and "origin" in foreign.json()["error"]
    other_port = raw_post(server, {**good, "Origin": "http://127.0.0.1:1"})
    assert other_port.status_code == 403
    cross_site = raw_post(server, {**good, "Sec-Fetch-Site": "cross-site"})
    assert cross_site.status_code == 403
    rebound = raw_post(server, {**good, "Host": f"evil.example:{server.port}"})
    assert rebound.status_code == 403 and "Host" in rebound.json()["error"]

    async def connect_with_a_wrong_token() -> None:
        async with client(server, token="not-the-token") as c:
            await c.list_tools()

    with pytest.raises((MCPError, httpx.HTTPError)):  # a real client is refused as well
        anyio.run(connect_with_a_wrong_token)


def test_the_token_survives_a_restart_and_a_wildcard_remote_address_is_refused(
    config: Config, server: HttpServer
):
    proc, again = start_server(config, "--port", "0")
    try:
        assert isinstance(again, HttpServer), again
        assert again.token == server.token and again.port != server.port
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    proc, refused = start_server(config, "--allow-remote", "0.0.0.0", "--port", "0")
    assert proc.returncode == 2 and isinstance(refused, str) and "wildcard" in refused
    assert json.dumps(refused)  # plain text on stderr, nothing on stdout


def test_a_watching_http_server_that_cannot_start_leaves_no_sync_behind(
    config: Config, knowledge: Path
):
    (knowledge / "guide.md").write_text("# Guide\n\nrotate the keys yearly\n", encoding="utf-8")
    proc, refused = start_server(config, "--watch", "--allow-remote", "0.0.0.0", "--port", "0")
    assert proc.returncode == 2 and isinstance(refused, str) and "wildcard" in refused
    assert "sync" not in refused.lower()
    assert not config.db_path.exists()  # the watcher never started a sync: no job, no index
