"""OpenAPI 3.x / Swagger 2.0 documents as their readers use them: one section per operation.

A spec is recognised by its content (a top-level `openapi` or `swagger` key), whatever the file
is called. Each operation becomes a section titled `METHOD /path` under the heading path
`paths > /path > METHOD`, holding its summary, description, parameters (path-level ones merged
in), request body and responses with local `$ref`s resolved inline; the document's `info` and
each schema (`components/schemas`, `definitions`) are sections too. Lines are the file's own
where it has them. A file over MAX_PARSE_BYTES, or one that is not a spec, is read as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock
from helpers.extract.openapi_load import LoadedSpec, Spans
from helpers.extract.openapi_schema import (
    MAX_ITEMS,
    Budget,
    Refs,
    mapping,
    schema_lines,
    short,
    summary,
)
from helpers.extract.textio import iter_text_chunks

# The parse-size cap of structured text (JSON, YAML): parsing builds Python objects ~10x the
# file size; a larger file is read as lines.
MAX_PARSE_BYTES = 10 * 1024 * 1024
METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})
# Levels of schema properties shown inside an operation (responses one fewer; the schema's own
# section has the rest), tried in turn until its text fits one section an agent reads whole
# (helpers.text.chunking.PARENT_MAX_CHARS, less the heading). Deeper levels find endpoints no
# better and add text to embed (bench/notes/h4-openapi.md).
OPERATION_DEPTHS = (2, 1, 0)
OPERATION_TARGET_CHARS = 3800
SCHEMA_DEPTH = 3  # a schema's own section shows its properties three levels down
# Schema lines one section may write, and the whole document (a base plus one per 16 bytes of the
# file; the busiest real spec measured wrote one per 22): hostile fan-out references cost text
# and time linear in the file's size (bench/notes/h4-openapi.md).
SECTION_LINES = 400
DOCUMENT_LINES_BASE = 20_000
DOCUMENT_BYTES_PER_LINE = 16


def read_parsable(path: Path, ctx: ExtractContext) -> str | None:
    """The file's text when it is small enough to parse (None when empty or over the cap)."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size > MAX_PARSE_BYTES or size == 0:
        return None
    return "".join(iter_text_chunks(path, ctx))


def spec_blocks(spec: LoadedSpec, size: int) -> Iterator[TextBlock]:
    """The info section, one section per operation, one per schema."""
    data, spans = spec.data, spec.spans
    refs = Refs(data)
    document = Budget(DOCUMENT_LINES_BASE + size // DOCUMENT_BYTES_PER_LINE)
    yield from _info_blocks(data, refs, spans)
    for where, operation, path_item in _operations(data, refs):
        yield from _operation_blocks(where, operation, path_item, data, refs, spans, document)
    for where, schemas in (
        (("components", "schemas"), mapping(data.get("components")).get("schemas")),
        (("definitions",), data.get("definitions")),
    ):
        if isinstance(schemas, dict):
            for name, schema in schemas.items():
                yield from _schema_blocks((*where, str(name)), schema, refs, spans, document)


def _operations(
    data: dict[str, Any], refs: Refs
) -> Iterator[tuple[tuple[str, str, str], dict[str, Any], dict[str, Any]]]:
    """(group, route, method), the operation and its path item, in the file's order."""
    for group in ("paths", "webhooks"):
        items = data.get(group)
        if not isinstance(items, dict):
            continue
        for route, item in items.items():
            path_item = refs.follow(item).value
            if not isinstance(path_item, dict):
                continue
            for method in [m for m in path_item if m in METHODS]:
                operation = refs.follow(path_item[method]).value
                if isinstance(operation, dict):
                    yield (group, str(route), str(method)), operation, path_item


def _location(spans: Spans, key: tuple[str, ...], heading: tuple[str, ...]) -> Location:
    lines = spans.get(key)
    if lines is None:
        return Location(heading_path=heading)
    return Location(heading_path=heading, line_start=lines[0], line_end=lines[1])


def _info_blocks(data: dict[str, Any], refs: Refs, spans: Spans) -> Iterator[TextBlock]:
    info = mapping(data.get("info"))
    title = short(info.get("title") or "API", 200)
    version = f" (version {short(info['version'], 40)})" if info.get("version") else ""
    location = _location(spans, ("info",), ("info",))
    yield TextBlock(f"{title}{version}", location, BlockKind.HEADING)
    lines = [short(info["description"], 3000)] if info.get("description") else []
    servers = data.get("servers")
    if isinstance(servers, list):
        urls = [short(s["url"], 200) for s in servers[:MAX_ITEMS] if mapping(s).get("url")]
        lines += [f"Servers: {', '.join(urls)}"] if urls else []
    if data.get("host"):
        lines.append(f"Host: {short(data['host'], 200)}{short(data.get('basePath') or '', 200)}")
    schemes = mapping(data.get("components")).get("securitySchemes") or data.get(
        "securityDefinitions"
    )
    if isinstance(schemes, dict):
        for name, raw in list(schemes.items())[:MAX_ITEMS]:
            scheme = refs.follow(raw).value
            if isinstance(scheme, dict):
                kind = " ".join(
                    short(scheme[k], 60) for k in ("type", "scheme", "in") if k in scheme
                )
                lines.append(f"Security scheme {short(name, 100)}: {kind}{_colon(scheme)}")
    tags = data.get("tags")
    if isinstance(tags, list):
        for tag in tags[:MAX_ITEMS]:
            if isinstance(tag, dict) and tag.get("name"):
                about = f": {short(tag['description'])}" if tag.get("description") else ""
                lines.append(f"Tag {short(tag['name'], 100)}{about}")
    if lines:
        yield TextBlock("\n".join(lines), location, BlockKind.PARAGRAPH)


def _operation_blocks(
    where: tuple[str, str, str],
    operation: dict[str, Any],
    path_item: dict[str, Any],
    data: dict[str, Any],
    refs: Refs,
    spans: Spans,
    document: Budget,
) -> Iterator[TextBlock]:
    group, route, method = where
    title = f"{method.upper()} {route}" + (" (webhook)" if group == "webhooks" else "")
    heading = (group, route, method.upper())
    yield TextBlock(title, _location(spans, where, heading), BlockKind.HEADING)
    parts: list[tuple[str, list[str]]] = []
    for depth in OPERATION_DEPTHS:
        budget = document.share(SECTION_LINES if depth else 0)
        parts = _operation_parts(operation, path_item, data, refs, budget, depth)
        document.settle(budget)
        if sum(len(line) + 1 for _, lines in parts for line in lines) <= OPERATION_TARGET_CHARS:
            break
    for part, lines in parts:
        if lines:
            location = _location(spans, (*where, part) if part else where, heading)
            yield TextBlock("\n".join(lines), location, BlockKind.PARAGRAPH)


def _operation_parts(
    operation: dict[str, Any],
    path_item: dict[str, Any],
    data: dict[str, Any],
    refs: Refs,
    budget: Budget,
    depth: int,
) -> list[tuple[str, list[str]]]:
    """(key of the part in the operation, its lines): the spans cite each part's own lines."""
    about: list[str] = []
    for key in ("summary", "description"):
        if operation.get(key):
            about.append(short(operation[key], 3000))
    facts = []
    if operation.get("operationId"):
        facts.append(f"Operation ID: {short(operation['operationId'], 200)}")
    if isinstance(operation.get("tags"), list) and operation["tags"]:
        facts.append("Tags: " + ", ".join(short(t, 100) for t in operation["tags"][:MAX_ITEMS]))
    if operation.get("deprecated"):
        facts.append("Deprecated")
    security = operation.get("security", data.get("security"))
    if isinstance(security, list):
        names = sorted({str(k) for s in security if isinstance(s, dict) for k in s})
        facts.append("Security: " + (", ".join(names) if names else "none"))
    about += [". ".join(facts)] if facts else []
    parameters, body = _parameters(operation, path_item, refs, budget, depth)
    if not body:
        body = _request_body(operation.get("requestBody"), refs, budget, depth)
    return [
        ("", about),
        ("parameters", parameters),
        ("requestBody", body),
        ("responses", _responses(operation.get("responses"), refs, budget, max(depth - 1, 0))),
    ]


def _parameters(
    operation: dict[str, Any], path_item: dict[str, Any], refs: Refs, budget: Budget, depth: int
) -> tuple[list[str], list[str]]:
    """Parameter lines (the operation's override the path's of the same name and place) and,
    for Swagger 2.0, the request body its `in: body` parameter describes."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for source in (path_item.get("parameters"), operation.get("parameters")):
        for raw in source if isinstance(source, list) else ():
            param = refs.follow(raw).value
            if isinstance(param, dict):
                merged[(str(param.get("name")), str(param.get("in")))] = param
    lines: list[str] = []
    body: list[str] = []
    for (name, place), param in list(merged.items())[:MAX_ITEMS]:
        if place == "body":
            schema = param.get("schema")
            body.append(
                f"Request body{_body_flags(param)}{_colon(param)} Schema: {summary(schema, refs)}"
            )
            body += schema_lines(schema, refs, budget, depth, "  ")
            continue
        if not lines:
            lines.append("Parameters:")
        kind = summary(param.get("schema", param), refs)
        flags = ", required" if param.get("required") else ""
        flags += ", deprecated" if param.get("deprecated") else ""
        lines.append(f"- {name} (in {place}, {kind}{flags}){_colon(param)}")
    return lines, body


def _request_body(raw: Any, refs: Refs, budget: Budget, depth: int) -> list[str]:
    body = refs.follow(raw).value
    if not isinstance(body, dict):
        return []
    media, schema = _media_schema(body.get("content"))
    lines = ["Request body" + _body_flags(body, media) + _colon(body)]
    if schema is not None:
        lines[0] += f" Schema: {summary(schema, refs)}"
        lines += schema_lines(schema, refs, budget, depth, "  ")
    return lines


def _responses(raw: Any, refs: Refs, budget: Budget, depth: int) -> list[str]:
    if not isinstance(raw, dict) or not raw:
        return []
    lines = ["Responses:"]
    for code, item in list(raw.items())[:MAX_ITEMS]:
        response = refs.follow(item).value
        if not isinstance(response, dict):
            continue
        media, schema = _media_schema(response.get("content"))
        schema = response.get("schema", schema)  # Swagger 2.0 puts it on the response
        line = f"- {code}{_colon(response)}"
        line += f" [{', '.join(media)}]" if media else ""
        line += f" Returns {summary(schema, refs)}." if schema is not None else ""
        headers = response.get("headers")
        if isinstance(headers, dict) and headers:
            line += " Headers: " + ", ".join(str(h) for h in list(headers)[:MAX_ITEMS]) + "."
        lines.append(line)
        lines += schema_lines(schema, refs, budget, depth, "  ")
    return lines


def _schema_blocks(
    key: tuple[str, ...], schema: Any, refs: Refs, spans: Spans, document: Budget
) -> Iterator[TextBlock]:
    location = _location(spans, key, key)
    yield TextBlock(f"schema {key[-1]}", location, BlockKind.HEADING)
    value = refs.follow(schema).value
    lines = [f"{key[-1]}: {summary(schema, refs)}"]
    if isinstance(value, dict) and value.get("description"):
        lines.append(short(value["description"], 3000))
    budget = document.share(SECTION_LINES)
    # The schema's own pointer starts the chain: a property referring back to it is named only.
    pointer = "#/" + "/".join(k.replace("~", "~0").replace("/", "~1") for k in key)
    lines += schema_lines(schema, refs, budget, SCHEMA_DEPTH, chain=(pointer,))
    document.settle(budget)
    yield TextBlock("\n".join(lines), location, BlockKind.PARAGRAPH)


def _media_schema(content: Any) -> tuple[list[str], Any]:
    """The media types of a `content` map and the first schema among them."""
    if not isinstance(content, dict):
        return [], None
    media = [str(m) for m in list(content)[:MAX_ITEMS]]
    for item in content.values():
        if isinstance(item, dict) and item.get("schema") is not None:
            return media, item["schema"]
    return media, None


def _body_flags(body: dict[str, Any], media: list[str] | None = None) -> str:
    flags = ["required"] if body.get("required") else []
    flags += media or []
    return f" ({', '.join(flags)})" if flags else ""


def _colon(item: dict[str, Any]) -> str:
    """`: its description.` (ended as a sentence, so what follows reads apart), or ''."""
    text = item.get("description") or item.get("summary")
    if not text:
        return ""
    line = short(text)
    return f": {line}" if line.endswith((".", "!", "?", "…", ":")) else f": {line}."
