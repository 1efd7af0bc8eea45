"""One shape per result, every face: the CLI `--json`, the console API and MCP structured output
(a real MCP stdio client) carry exactly the keys helpers.results defines, for search, read, list,
job and health."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any
from urllib.parse import quote

import pytest
from conftest import REPO, server_args
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from web_fixtures import Http, running_console

from helpers import results as shapes
from helpers.config import Config
from helpers.web import mcp_models

pytestmark = pytest.mark.anyio
QUERY = "payable invoices"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def signature(shape: shapes.Shape, value: dict[str, Any], detail: str = "full") -> dict[str, Any]:
    """The keys of `value` and of its nested shapes, checked against `shape` on the way."""
    keys = set(value)
    allowed = set(shape.keys(detail))
    required = allowed - shape.optional
    assert required <= keys <= allowed, (shape.name, detail, keys ^ allowed)
    nested = NESTED.get(shape.name, {})
    out: dict[str, Any] = {"": sorted(keys)}
    for key, child in nested.items():
        item = value.get(key)
        items = item if isinstance(item, list) else [item] if isinstance(item, dict) else []
        out[key] = [signature(child, i, detail) for i in items]
    if shape is shapes.SEARCH:
        ranks = [c for h in value["hits"] for c in h.get("channels", {}).values()]
        out["channels"] = [signature(shapes.CHANNEL_RANK, c) for c in ranks]
    return out


NESTED: dict[str, dict[str, shapes.Shape]] = {
    "search": {"hits": shapes.HIT, "omitted": shapes.OMITTED, "sources": shapes.SOURCE},
    "job": {"errors": shapes.JOB_ERROR},
    "list": {"items": shapes.DOCUMENT},
    "read": {"sections": shapes.SECTION},
    "health": {"disk": shapes.DISK, "last_job": shapes.LAST_JOB},
}


def _corpus(config: Config) -> None:
    kb = config.knowledge_dir
    (kb / "guide.md").write_text(
        "# Guide\n\n## Payments\nInvoices are payable within 30 days.\n", encoding="utf-8"
    )
    (kb / "copy").mkdir()
    (kb / "copy" / "guide.md").write_text((kb / "guide.md").read_text(), encoding="utf-8")
    (kb / "broken.pdf").write_bytes(b"%PDF-1.4 not really")  # a job error and a failed file
    sync_now_allowing_errors(config)


def sync_now_allowing_errors(config: Config) -> None:
    import rag_service

    view = rag_service.start_sync(config)
    final = rag_service.wait_for_job(config, view.job_id, timeout_s=120)
    assert final.state == "succeeded" and final.error_count == 1, final.to_dict()


def _cli(config: Config, *args: str) -> Any:
    done = subprocess.run(
        [
            sys.executable,
            *server_args(config),
            *args,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


async def _mcp(config: Config, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            *server_args(config),
        ],
        cwd=str(REPO),
    )
    out = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        schemas = {t.name: t.output_schema for t in (await session.list_tools()).tools}
        for tool, shape in (("rag_search", shapes.SEARCH), ("rag_health", shapes.HEALTH)):
            assert set(schemas[tool]["properties"]) == set(shape.full)
            assert schemas[tool]["additionalProperties"] is False
            assert set(schemas[tool]["required"]) == set(shape.keys("compact")) - shape.optional
        for name, args in calls:
            result = await session.call_tool(name, args)
            assert not result.is_error, result.content
            assert result.structured_content is not None
            assert json.loads(result.content[0].text) == result.structured_content  # same text
            out.append(result.structured_content)
    return out


async def test_every_face_carries_the_same_keys_per_shape(config: Config) -> None:
    _corpus(config)
    cli_search = _cli(config, "search", QUERY, "--mode", "lexical")
    cli_job = _cli(config, "status")
    cli_health = _cli(config, "health")
    hit = cli_search["hits"][0]
    read_args = {"path": hit["path"], "section_id": hit["section_id"]}
    with running_console(config) as server:
        http = Http(server.port)
        web = {
            "search": http.get(f"/api/search?q={quote(QUERY)}&mode=lexical").json(),
            "read": http.get(
                f"/api/read?path={quote(hit['path'])}&section_id={hit['section_id']}"
            ).json(),
            "list": http.get("/api/files").json(),
            "job": http.get("/api/sync/status").json(),
            "health": http.get("/api/health").json(),
        }
    compact, full, read, listing, job, health = await _mcp(
        config,
        [
            ("rag_search", {"query": QUERY, "mode": "lexical"}),
            ("rag_search", {"query": QUERY, "mode": "lexical", "detail": "full"}),
            ("rag_read", read_args),
            ("rag_list", {}),
            ("sync_status", {}),
            ("rag_health", {}),
        ],
    )
    search_sig = signature(shapes.SEARCH, cli_search)
    assert signature(shapes.SEARCH, web["search"]) == search_sig
    # MCP full carries what the CLI does, bar the copies collapsed by the default budget
    assert signature(shapes.SEARCH, full)[""] == search_sig[""]
    assert {k for h in full["hits"] for k in h} == {k for h in cli_search["hits"] for k in h}
    compact_sig = signature(shapes.SEARCH, compact, "compact")
    assert set(compact_sig[""]) < set(search_sig[""])
    assert {k for h in compact["hits"] for k in h} < set(shapes.HIT.full)
    assert compact["hits"][0]["other_paths"] == [
        p for p in ("copy/guide.md", "guide.md") if p != compact["hits"][0]["path"]
    ]
    assert signature(shapes.READ, read) == signature(shapes.READ, web["read"])
    assert signature(shapes.LIST, listing) == signature(shapes.LIST, web["list"])
    assert signature(shapes.JOB, job) == signature(shapes.JOB, web["job"])
    assert signature(shapes.JOB, job) == signature(shapes.JOB, cli_job)
    assert job["errors"] and listing["items"]
    assert signature(shapes.HEALTH, health) == signature(shapes.HEALTH, web["health"])
    assert signature(shapes.HEALTH, health) == signature(shapes.HEALTH, cli_health)


def test_mcp_models_are_built_from_the_shapes_and_forbid_unknown_keys() -> None:
    assert {shape.name for _, shape in mcp_models.MODELS} == set(shapes.SHAPES) - {"last_job"}
    for model, shape in mcp_models.MODELS:
        assert tuple(model.model_fields) == shape.full, shape.name  # same keys, same order
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        assert required == shape.always(), shape.name
        described = {k.name for k in shape.fields if k.about}
        assert {n for n, f in model.model_fields.items() if f.description} == described
        assert model.model_config.get("extra") == "forbid", model.__name__
    schema = mcp_models.output_schema(mcp_models.SearchOut)
    hit = schema["$defs"]["HitOut"]
    assert hit["additionalProperties"] is False and "snippet" not in hit["required"]
    assert schema["properties"]["hits"]["items"] == {"$ref": "#/$defs/HitOut"}
    with pytest.raises(ValueError, match="extra"):
        mcp_models.JobErrorOut.model_validate({"path": "a", "message": "b", "surprise": 1})


def test_a_shape_refuses_unknown_and_missing_keys() -> None:
    with pytest.raises(KeyError, match="unknown"):
        shapes.DISK.build({"data_dir_free_bytes": 1, "low_free_space_bytes": 2, "x": 3})
    with pytest.raises(KeyError, match="missing"):
        shapes.DISK.build({"data_dir_free_bytes": 1})


def test_every_shape_with_a_compact_projection_is_a_strict_subset() -> None:
    for shape in shapes.SHAPES.values():
        if shape.compact:
            assert set(shape.compact) < set(shape.full), shape.name
        assert shape.optional <= set(shape.full), shape.name
