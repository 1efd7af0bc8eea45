"""Documents as MCP resources and sync_status(wait_seconds), through a real stdio client."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from conftest import REPO, write_corpus
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

import rag_service
from helpers.config import Config
from helpers.store import index_db
from helpers.store.job_rows import FINAL_STATES

pytestmark = pytest.mark.anyio
GUIDE = (
    "# Guide\n\n## Payments\nInvoices are payable within 30 days.\n\n"
    "## Refunds\nRefunds take a week.\n"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def session_for(config: Config) -> AsyncIterator[ClientSession]:
    args = [str(REPO / "rag_server.py"), "--knowledge-dir", str(config.knowledge_dir)]
    args += ["--data-dir", str(config.data_dir), "--semantic", "off"]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture
def indexed(config: Config, knowledge: Path, tmp_path: Path) -> Config:
    (knowledge / "guide.md").write_text(GUIDE, encoding="utf-8")
    (knowledge / "data").mkdir()
    (knowledge / "data" / "q1 budget.csv").write_text("team,amount\nops,100\n", encoding="utf-8")
    (knowledge / "big.txt").write_text(
        "\n\n".join(f"Paragraph {i} " + "lorem ipsum dolor " * 40 for i in range(400)), "utf-8"
    )
    (knowledge / ".env").write_text("API_KEY=never-served\n", encoding="utf-8")
    (tmp_path / "outside.md").write_text("# Outside\n\nnot in the knowledge dir\n", "utf-8")
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id)
    assert view.state == "succeeded"
    return config


def _text(result) -> str:  # type: ignore[no-untyped-def]
    (content,) = result.contents
    assert content.mime_type == "text/markdown"
    return content.text


async def test_documents_are_listed_with_their_types_and_read_by_sections(indexed: Config):
    async with session_for(indexed) as session:
        listed = {str(r.uri): r for r in (await session.list_resources()).resources}
        assert set(listed) == {
            "ragdoc://doc/big.txt",
            "ragdoc://doc/data/q1%20budget.csv",
            "ragdoc://doc/guide.md",
        }  # .env is never indexed, so never listed
        assert listed["ragdoc://doc/guide.md"].mime_type == "text/markdown"
        assert listed["ragdoc://doc/data/q1%20budget.csv"].mime_type == "text/csv"
        assert listed["ragdoc://doc/big.txt"].mime_type == "text/plain"
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["ragdoc://doc/{path*}{?section,offset}"]

        whole = _text(await session.read_resource("ragdoc://doc/guide.md"))
        assert "## Guide > Payments" in whole and "payable within 30 days" in whole
        assert "Refunds take a week" in whole
        hit = (await session.call_tool("rag_search", {"query": "refunds week"})).structured_content[
            "hits"
        ][0]
        one = _text(
            await session.read_resource(f"ragdoc://doc/guide.md#section={hit['section_id']}")
        )
        assert "Refunds take a week" in one and "payable" not in one
        also = _text(
            await session.read_resource(f"ragdoc://doc/guide.md?section={hit['section_id']}")
        )
        assert also == one
        csv = _text(await session.read_resource("ragdoc://doc/data/q1%20budget.csv"))
        assert "ops" in csv


async def test_a_long_document_is_capped_like_rag_read_and_continues_by_offset(indexed: Config):
    async with session_for(indexed) as session:
        first = await session.read_resource("ragdoc://doc/big.txt")
        (content,) = first.contents
        direct = (await session.call_tool("rag_read", {"path": "big.txt"})).structured_content
        next_offset = direct["next_offset"]
        assert next_offset and content.meta["next_offset"] == next_offset
        assert f"ragdoc://doc/big.txt?offset={next_offset}" in content.text
        assert "Paragraph 0 " in content.text and "Paragraph 399 " not in content.text
        rest = _text(await session.read_resource(f"ragdoc://doc/big.txt?offset={next_offset}"))
        assert "Paragraph 0 " not in rest and direct["sections"][-1]["text"] not in rest


REFUSED = (
    "ragdoc://doc/../outside.md",
    "ragdoc://doc/%2E%2E/outside.md",
    "ragdoc://doc/data/../../outside.md",
    "ragdoc://doc//etc/passwd",
    "ragdoc://doc/.env",
    "ragdoc://doc/guide.md#section=abc",
    "ragdoc://doc/guide.md#section=999999",
)


async def test_reads_outside_the_index_are_refused_with_a_reason(indexed: Config):
    async with session_for(indexed) as session:
        for uri in REFUSED:
            with pytest.raises(MCPError) as refused:
                await session.read_resource(uri)
            message = str(refused.value)
            assert "not in the knowledge dir" not in message, uri  # outside.md's text
            assert "never-served" not in message, uri
            assert len(message) > 20, (uri, message)  # a reason, not a bare code
        still = _text(await session.read_resource("ragdoc://doc/guide.md"))
        assert "Payments" in still


async def test_sync_status_waits_for_the_next_change_instead_of_polling(
    config: Config, knowledge: Path
):
    write_corpus(knowledge, 250)
    async with session_for(config) as session:
        job = (await session.call_tool("sync_kb", {})).structured_content
        before = (
            await session.call_tool("sync_status", {"job_id": job["job_id"]})
        ).structured_content
        calls = 0
        state = before
        while state["state"] not in FINAL_STATES:
            after = (
                await session.call_tool(
                    "sync_status", {"job_id": job["job_id"], "wait_seconds": 30}
                )
            ).structured_content
            calls += 1
            assert after["state"] in FINAL_STATES or (after["state"], after["percent"]) != (
                state["state"],
                state["percent"],
            )
            state = after
        assert state["state"] == "succeeded"
        done = await session.call_tool("sync_status", {"job_id": job["job_id"], "wait_seconds": 30})
        assert done.structured_content["state"] == "succeeded"  # a final job answers at once
        too_long = await session.call_tool("sync_status", {"wait_seconds": 31})
        assert too_long.is_error


async def test_a_document_indexed_with_an_older_chunk_scheme_is_still_listed(indexed: Config):
    """needs_reindex documents read as they are until the next sync (a scheme bump must not
    empty resources/list, least of all on a read-only index)."""
    conn = index_db.open_index(indexed.db_path)
    with index_db.write_transaction(conn):
        conn.execute("UPDATE documents SET chunk_scheme = chunk_scheme - 1 WHERE path = 'guide.md'")
    conn.close()
    statuses = {d["path"]: d["status"] for d in rag_service.list_documents(indexed)["items"]}
    assert statuses["guide.md"] == "needs_reindex"
    async with session_for(indexed) as session:
        listed = {str(r.uri) for r in (await session.list_resources()).resources}
    assert "ragdoc://doc/guide.md" in listed
