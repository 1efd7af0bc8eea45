"""Real MCP round trips over stdio: `python rag_server.py ...` as a subprocess, two real clients."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import REPO, files_for_seconds, server_args, write_corpus
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from helpers.config import Config

pytestmark = pytest.mark.anyio
EXPECTED_TOOLS = {"rag_search", "sync_kb", "sync_status", "cancel_sync", "rag_health"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


CallTool = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, dict[str, Any] | str]]]


@asynccontextmanager
async def fastmcp_client(config: Config) -> AsyncIterator[tuple[CallTool, set[str], str]]:
    transport = StdioTransport(command=sys.executable, args=server_args(config), cwd=str(REPO))
    async with Client(transport) as client:

        async def call(name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any] | str]:
            result = await client.call_tool(name, args, raise_on_error=False)
            if result.is_error:
                return True, result.content[0].text
            return False, result.structured_content

        tools = {t.name for t in await client.list_tools()}
        yield call, tools, client.instructions or ""


@asynccontextmanager
async def sdk_client(config: Config) -> AsyncIterator[tuple[CallTool, set[str], str]]:
    params = StdioServerParameters(command=sys.executable, args=server_args(config), cwd=str(REPO))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()

        async def call(name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any] | str]:
            result = await session.call_tool(name, args)
            if result.is_error:
                return True, result.content[0].text
            return False, result.structured_content

        tools = {t.name for t in (await session.list_tools()).tools}
        yield call, tools, init.instructions or ""


CLIENTS = {"fastmcp": fastmcp_client, "sdk": sdk_client}


async def wait_job(call: CallTool, job_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        err, status = await call("sync_status", {"job_id": job_id})
        assert not err, status
        assert isinstance(status, dict)
        if status["state"] in ("succeeded", "failed", "cancelled"):
            return status
        await anyio.sleep(0.2)
    raise AssertionError("job did not finish")


@pytest.mark.parametrize("client_name", sorted(CLIENTS))
async def test_every_tool_answers_over_stdio(client_name: str, config: Config, knowledge: Path):
    (knowledge / "guide.md").write_text(
        "# Guide\n\n## Payments\nInvoices are payable within 30 days.\n", encoding="utf-8"
    )
    (knowledge / "отчёт.txt").write_text("Отчёт о продажах за квартал\n", encoding="utf-8")
    async with CLIENTS[client_name](config) as (call, tools, instructions):
        assert tools >= EXPECTED_TOOLS
        assert "rag_search" in instructions and "untrusted" in instructions
        err, health = await call("rag_health", {})
        assert not err and isinstance(health, dict)
        assert health["knowledge_dir"] == str(config.knowledge_dir)
        err, job = await call("sync_kb", {})
        assert not err and isinstance(job, dict) and job["state"] in ("queued", "running")
        final = await wait_job(call, job["job_id"])
        assert final["state"] == "succeeded" and final["counts"]["added"] == 2
        err, result = await call("rag_search", {"query": "payable invoices", "top_k": 3})
        assert not err and isinstance(result, dict)
        top = result["hits"][0]
        assert top["path"] == "guide.md"
        assert top["location"]["heading_path"] == ["Guide", "Payments"]
        # compact: the section window holds the match, so the snippet is left out
        assert "snippet" not in top and "payable" in result["sections"][str(top["section_id"])]
        assert top["citation"] == "guide.md, Guide > Payments, line 4"
        assert result["confidence"] in ("high", "medium")
        assert "untrusted" in result["content_trust"]
        err, result = await call("rag_search", {"query": "отчет продажах"})
        assert not err and isinstance(result, dict)
        assert result["hits"][0]["path"] == "отчёт.txt"
        err, cancelled = await call("cancel_sync", {"job_id": job["job_id"]})
        assert not err and isinstance(cancelled, dict) and cancelled["state"] == "succeeded"


@pytest.mark.parametrize("client_name", sorted(CLIENTS))
async def test_bad_arguments_come_back_as_clear_tool_errors(
    client_name: str, config: Config, knowledge: Path
):
    (knowledge / "a.md").write_text("# A\n\nC++ and foo-bar\n", encoding="utf-8")
    async with CLIENTS[client_name](config) as (call, _tools, _instructions):
        err, message = await call("rag_search", {"query": "anything"})
        assert err and "sync_kb" in str(message)  # nothing indexed yet: says what to do
        err, job = await call("sync_kb", {})
        assert isinstance(job, dict)
        await wait_job(call, job["job_id"])
        err, message = await call("rag_search", {"query": "   "})
        assert err and "empty" in str(message)
        err, message = await call("rag_search", {"query": "x", "top_k": 500})
        assert err and "top_k" in str(message)
        err, message = await call("rag_search", {"query": "x", "unknown_arg": 1})
        assert err
        err, message = await call("sync_kb", {"path": "../../etc"})
        assert err and ".." in str(message)
        err, message = await call("rag_search", {"query": "x", "path_prefix": "/etc"})
        assert err and "absolute" in str(message)
        for query in ["C++", "foo-bar", '"unbalanced', "a*", "NEAR(x y)", "AND OR NOT", "к", "กร"]:
            err, result = await call("rag_search", {"query": query})
            assert not err, (query, result)
        err, result = await call("rag_search", {"query": "C++"})
        assert isinstance(result, dict) and result["hits"][0]["path"] == "a.md"


async def test_a_job_started_by_one_server_is_polled_and_cancelled_from_another(
    config: Config, knowledge: Path, tmp_path: Path
):
    # still running after one server exits and another starts: ~15 s of this machine's syncing
    write_corpus(knowledge, max(1500, files_for_seconds(tmp_path, 15)))
    async with fastmcp_client(config) as (call, _tools, _instructions):
        err, job = await call("sync_kb", {})
        assert not err and isinstance(job, dict)
    # The first server has exited (its client closed it); the detached worker goes on.
    async with sdk_client(config) as (call, _tools, _instructions):
        err, status = await call("sync_status", {"job_id": job["job_id"]})
        assert not err and isinstance(status, dict)
        assert status["state"] in ("queued", "running"), status
        deadline = time.monotonic() + 60
        while status["completed_files"] < 20 and time.monotonic() < deadline:
            await anyio.sleep(0.1)
            _err, status = await call("sync_status", {"job_id": job["job_id"]})
            assert isinstance(status, dict)
        err, cancelled = await call("cancel_sync", {"job_id": job["job_id"]})
        assert not err and isinstance(cancelled, dict)
        final = await wait_job(call, job["job_id"])
        assert final["state"] == "cancelled"
        assert 0 < final["counts"]["added"] < 1500
        err, again = await call("sync_kb", {})
        assert not err and isinstance(again, dict) and again["job_id"] != job["job_id"]
        final = await wait_job(call, again["job_id"], timeout=120)
        assert final["state"] == "succeeded"


TOOL_ERROR = re.compile(r"^\[(?P<code>[a-z_]+)\] (?P<message>.+?)(?: — hint: (?P<hint>.+))?$", re.S)


@pytest.mark.parametrize("client_name", sorted(CLIENTS))
async def test_a_tool_error_carries_the_service_error_code_message_and_hint(
    client_name: str, config: Config, knowledge: Path
):
    """The MCP face keeps the code the console sends as JSON: `[code] message — hint: …`."""
    (knowledge / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    async with CLIENTS[client_name](config) as (call, _tools, _instructions):
        seen: dict[str, tuple[str, str]] = {}

        async def error_of(tool: str, args: dict[str, Any]) -> None:
            err, text = await call(tool, args)
            assert err and isinstance(text, str), (tool, text)
            parsed = TOOL_ERROR.match(text)
            assert parsed, text
            seen[parsed["code"]] = (parsed["message"], parsed["hint"] or "")

        await error_of("rag_search", {"query": "alpha"})  # nothing indexed yet
        err, job = await call("sync_kb", {})
        assert not err and isinstance(job, dict)
        await wait_job(call, job["job_id"])
        await error_of("rag_read", {"path": "missing.md"})
        await error_of("sync_kb", {"path": "../../etc"})
        await error_of("rag_search", {"query": "alpha", "mode": "semantic"})  # --semantic off
    assert set(seen) == {"index_missing", "not_found", "invalid_argument", "semantic_unavailable"}
    assert "sync" in seen["index_missing"][1]
    assert "missing.md" in seen["not_found"][0] and seen["not_found"][1]
    assert "lexical" in seen["semantic_unavailable"][1]
