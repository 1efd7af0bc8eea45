"""Tool bounds are defined once (helpers.bounds): the input schema an MCP client reads and the
error the service raises change together, so a value the schema allows is never refused."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import Client

import rag_server
import rag_service
from helpers import bounds
from helpers.config import Config
from helpers.errors import InvalidArgument

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _inputs(config: Config) -> dict[str, dict[str, Any]]:
    async with Client(rag_server.build_server(config)) as client:
        return {t.name: t.input_schema["properties"] for t in await client.list_tools()}


async def test_the_input_schemas_carry_the_bounds_module_s_numbers(config: Config) -> None:
    tools = await _inputs(config)
    search, read, listing = tools["rag_search"], tools["rag_read"], tools["rag_list"]
    assert search["query"]["maxLength"] == bounds.QUERY_MAX_CHARS
    assert (search["top_k"]["minimum"], search["top_k"]["maximum"]) == (
        bounds.TOP_K_MIN,
        bounds.TOP_K_MAX,
    )
    assert search["top_k"]["default"] == bounds.TOP_K_DEFAULT
    max_chars = next(o for o in search["max_chars"]["anyOf"] if o.get("type") == "integer")
    assert (max_chars["minimum"], max_chars["maximum"]) == (
        bounds.ANSWER_MAX_CHARS_MIN,
        bounds.ANSWER_MAX_CHARS_CAP,
    )
    for side in ("before", "after"):
        assert read[side]["maximum"] == bounds.NEIGHBOURS_MAX
        assert read[side]["default"] == bounds.NEIGHBOURS_DEFAULT
    assert read["offset"]["maximum"] == listing["offset"]["maximum"] == bounds.OFFSET_MAX
    assert listing["limit"]["maximum"] == bounds.LIST_LIMIT_MAX
    assert listing["limit"]["default"] == bounds.LIST_LIMIT_DEFAULT
    assert tools["sync_status"]["wait_seconds"]["maximum"] == bounds.WAIT_SECONDS_MAX


def test_the_service_accepts_each_bound_and_refuses_one_past_it(config: Config) -> None:
    longest = "x" * bounds.QUERY_MAX_CHARS
    assert rag_service.validate_search_args(longest, bounds.TOP_K_MAX, "lexical", None)[0]
    with pytest.raises(InvalidArgument, match="characters"):
        rag_service.validate_search_args(longest + "x", bounds.TOP_K_DEFAULT, "lexical", None)
    for top_k in (bounds.TOP_K_MIN - 1, bounds.TOP_K_MAX + 1):
        with pytest.raises(InvalidArgument, match="top_k"):
            rag_service.validate_search_args("q", top_k, "lexical", None)
    for max_chars in (bounds.ANSWER_MAX_CHARS_MIN - 1, bounds.ANSWER_MAX_CHARS_CAP + 1):
        with pytest.raises(InvalidArgument, match="max_chars"):
            rag_service.search(config, "q", max_chars=max_chars)
    with pytest.raises(InvalidArgument, match="before and after"):
        rag_service.read_document(config, "a.md", before=bounds.NEIGHBOURS_MAX + 1)
    with pytest.raises(InvalidArgument, match="limit"):
        rag_service.list_documents(config, limit=bounds.LIST_LIMIT_MAX + 1)
    with pytest.raises(InvalidArgument, match="offset"):
        rag_service.list_documents(config, offset=bounds.OFFSET_MAX + 1)
    with pytest.raises(InvalidArgument, match="wait_seconds"):
        rag_service.sync_status(config, None, bounds.WAIT_SECONDS_MAX + 1)
