"""Indexed documents as MCP resources: `ragdoc://doc/{path}` (the whole text, section by section)
and `ragdoc://doc/{path}#section={id}` (one section; `?section=` works too, `?offset=` continues
a long document).

Every read goes through rag_service.read_document, the function behind `rag_read`: the same path
rules (no `..`, no absolute paths, only indexed files), the same 40,000-character cap per read and
the same `next_offset`. Nothing here touches the file system or the index directly.
"""

from __future__ import annotations

import mimetypes
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import anyio
from fastmcp.exceptions import ResourceError
from fastmcp.resources import Resource, ResourceContent, ResourceResult, ResourceTemplate
from fastmcp.server.providers import Provider

import rag_service
from helpers import bounds
from helpers.config import Config
from helpers.errors import IndexMissing, RagError

SCHEME_PREFIX = "ragdoc://doc/"
TEMPLATE = SCHEME_PREFIX + "{path*}{?section,offset}"
SERVED_AS = "text/markdown"  # what a read returns: headings per section, then the text
# resources/list answers in one message, one rag_list page: past it an agent should use rag_list
# (paged) or rag_search; any indexed path still reads through the template.
LIST_MAX = bounds.LIST_LIMIT_MAX
# Documents with text to read (failed and skipped files have none); needs_reindex (an older
# chunk scheme) reads as it is until the next sync.
LISTED_STATUSES = ("indexed", "needs_ocr", "needs_reindex")
# Formats Python's mimetypes table does not know (or names oddly).
MIME_OVERRIDES = {
    "md": "text/markdown",
    "rst": "text/x-rst",
    "ipynb": "application/x-ipynb+json",
    "yaml": "application/yaml",
    "yml": "application/yaml",
    "tsv": "text/tab-separated-values",
    "txt": "text/plain",
}


def document_uri(path: str, section_id: int | None = None) -> str:
    uri = SCHEME_PREFIX + quote(path, safe="/")
    return uri if section_id is None else f"{uri}#section={section_id}"


def source_mime_type(path: str, fmt: str) -> str:
    return (
        MIME_OVERRIDES.get(fmt.lower())
        or mimetypes.guess_type(path, strict=False)[0]
        or "application/octet-stream"
    )


def parse_uri(uri: str) -> tuple[str, int | None, int]:
    """(relative path, section id, offset) of a `ragdoc://doc/...` URI; ResourceError if bad."""
    parts = urlsplit(uri)
    path = unquote(uri[len(SCHEME_PREFIX) :].split("?", 1)[0].split("#", 1)[0])
    params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    if parts.fragment.startswith("section="):
        params.setdefault("section", parts.fragment.removeprefix("section="))
    try:
        section = int(params["section"]) if params.get("section") else None
        offset = int(params.get("offset") or 0)
    except ValueError as exc:
        raise ResourceError(
            f"{uri}: section and offset must be whole numbers (e.g. #section=12, ?offset=40)"
        ) from exc
    if not path:
        raise ResourceError(f"{uri}: no document path; use ragdoc://doc/<path from rag_list>")
    return path, section, offset


def render(result: dict[str, Any]) -> str:
    """Markdown: the title, then each section under its location label."""
    lines = [f"# {result['title'] or result['display_path']}", ""]
    lines.append(f"{result['display_path']} ({result['total_sections']} sections)")
    for section in result["sections"]:
        label = section["location_label"] or f"section {section['ordinal']}"
        lines += ["", f"## {label} [section {section['section_id']}]", "", section["text"]]
    if result["next_offset"] is not None:
        more = f"{document_uri(result['path'])}?offset={result['next_offset']}"
        lines += ["", f"(continued at {more})"]
    return "\n".join(lines) + "\n"


def read(config: Config, path: str, section: int | None, offset: int) -> ResourceResult:
    try:
        if section is None:
            result = rag_service.read_document(config, path, offset=offset)
        else:
            result = rag_service.read_document(config, path, section_id=section, before=0, after=0)
    except RagError as exc:
        raise ResourceError(str(exc)) from exc
    meta = {
        "content_trust": result["content_trust"],
        "total_sections": result["total_sections"],
        "next_offset": result["next_offset"],
    }
    return ResourceResult([ResourceContent(render(result), mime_type=SERVED_AS, meta=meta)])


class DocumentResources(Provider):
    """Lists the indexed documents and reads any `ragdoc://doc/` URI (fragment included, which a
    fastmcp template would drop) through the service."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self._config = config

    async def _list_resources(self) -> list[Resource]:
        try:
            listing = await anyio.to_thread.run_sync(
                lambda: rag_service.list_documents(self._config, limit=LIST_MAX)
            )
        except (IndexMissing, RagError):
            return []  # nothing indexed yet, or a broken setup rag_health describes
        return [self._resource(doc) for doc in listing["items"] if doc["status"] in LISTED_STATUSES]

    def _resource(self, doc: dict[str, Any]) -> Resource:
        uri = document_uri(doc["path"])
        return Resource.from_function(
            self._reader(doc["path"], None, 0),
            uri,
            name=doc["display_path"],
            title=doc["title"] or doc["display_path"],
            description=f"{doc['format']} document, {doc['sections']} sections, read as Markdown",
            mime_type=source_mime_type(doc["path"], doc["format"]),
            meta={"served_as": SERVED_AS, "size": doc["size"], "status": doc["status"]},
        )

    def _reader(self, path: str, section: int | None, offset: int):  # type: ignore[no-untyped-def]
        async def read_document() -> ResourceResult:
            return await anyio.to_thread.run_sync(lambda: read(self._config, path, section, offset))

        return read_document

    async def _get_resource(self, uri: str, version: Any = None) -> Resource | None:
        if not uri.startswith(SCHEME_PREFIX):
            return None
        try:
            path, section, offset = parse_uri(uri)
        except ResourceError as exc:  # raised here it would be logged and the URI re-tried
            error = exc  # by the template, which drops the fragment: refuse at read instead

            async def refuse() -> ResourceResult:
                raise error

            return Resource.from_function(refuse, uri, name=uri, mime_type=SERVED_AS)
        return Resource.from_function(
            self._reader(path, section, offset), uri, name=path, mime_type=SERVED_AS
        )

    async def _list_resource_templates(self) -> list[ResourceTemplate]:
        config = self._config

        async def document(path: str, section: int | None = None, offset: int = 0) -> Any:
            return await anyio.to_thread.run_sync(lambda: read(config, path, section, offset))

        return [
            ResourceTemplate.from_function(
                document,
                TEMPLATE,
                name="document",
                description=(
                    "An indexed document as Markdown, section by section (path as in rag_list; "
                    "#section=ID or ?section=ID for one section, ?offset=N to continue)"
                ),
                mime_type=SERVED_AS,
            )
        ]
