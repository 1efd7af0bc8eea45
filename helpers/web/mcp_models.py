"""Typed MCP outputs: pydantic views of the shapes in rag_results, so clients get an outputSchema.

rag_results is the single source of the keys: every model here is checked against its Shape at
import (same field set; required = the keys the compact or only projection always carries), and
`extra="forbid"` rejects a key the shape does not know. A field the response left out (a compact
hit's abs_path, say) is left out of the structured content too, not sent as null."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from helpers import results as shapes


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_serializer(mode="wrap")
    def _only_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Serialise the keys the response carried, nothing the model would add."""
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}


class ChannelRankOut(_Out):
    rank: int = Field(description="1-based rank inside this retrieval channel")
    score: float


class HitOut(_Out):
    rank: int
    path: str = Field(description="path relative to the knowledge dir: pass it to rag_read")
    display_path: str | None = Field(default=None, description="full detail: equals path")
    abs_path: str | None = Field(default=None, description="full detail: absolute path")
    title: str
    format: str
    location: dict[str, Any] = Field(description="page / sheet+cell_range / slide / heading_path")
    location_label: str | None = Field(default=None, description="full detail: e.g. 'p. 3'")
    citation: str = Field(description="cite this, e.g. 'reports/q3.pdf, p. 12'")
    snippet: str | None = Field(
        default=None,
        description="excerpt, matched terms in **bold**; compact detail leaves it out when the "
        "section window in `sections` holds it",
    )
    score: float
    channels: dict[str, ChannelRankOut] | None = Field(
        default=None, description="full detail: which channels found it, at what rank"
    )
    section_id: int = Field(description="key into `sections`; rag_read(path, section_id)")
    chunk_id: int | None = Field(default=None, description="full detail: the matched child")
    ocr: bool = Field(description="text came from OCR of a scan")
    stale: bool = Field(description="file changed since indexing: re-sync before trusting")
    other_paths: list[str] | None = Field(
        default=None, description="copies of this document (same text) under other paths"
    )


class SourceOut(_Out):
    display_path: str
    title: str
    hits: int
    locations: list[str]


class OmittedOut(_Out):
    hits: int = Field(description="hits dropped to fit max_chars")
    cut_sections: list[int] = Field(description="sections shown as a window, cut marked with …")
    left_out_sections: list[int] = Field(description="sections not shown (their hit stays)")


class SearchOut(_Out):
    query: str
    mode: str
    confidence: str = Field(
        description="high | medium | low; low: nothing really matched, rephrase or say so"
    )
    content_trust: str
    truncated: bool = Field(description="the response was cut to fit max_chars")
    omitted: OmittedOut
    more: str | None = Field(description="how to get what was left out, when truncated")
    hits: list[HitOut]
    sections: dict[str, str] = Field(
        description="parent section text (or a window around the hit) by section_id"
    )
    sources: list[SourceOut] | None = Field(default=None, description="full detail only")
    channels_used: list[str] | None = Field(default=None, description="full detail only")
    warnings: list[str]
    elapsed_ms: float | None = Field(default=None, description="full detail only")


class JobErrorOut(_Out):
    path: str
    message: str


class JobOut(_Out):
    job_id: str
    state: str = Field(description="queued|running|cancelling|cancelled|succeeded|failed")
    phase: str = Field(description="prepare|files|cleanup|semantic|done")
    scope: str
    percent: float
    current_file: str | None
    completed_files: int
    total_files: int
    done_bytes: int
    total_bytes: int
    eta_seconds: float | None
    counts: dict[str, int]
    semantic: dict[str, int]
    errors: list[JobErrorOut]
    error_count: int
    message: str | None
    pid: int | None
    created_at: float
    started_at: float | None
    updated_at: float
    finished_at: float | None
    heartbeat: float | None
    already_running: bool
    file_progress: dict[str, Any] | None = Field(
        description='inside current_file: {"done": 120, "total": 2000, "unit": "page" or '
        '"chunks written"}; null between files',
    )
    skipped: dict[str, Any] = Field(
        description='files seen and not indexed: {"total": n, "by_reason": {reason: {"count", '
        '"label", "examples"}}}; reasons: unsupported, hidden, sensitive, excluded, too_large, '
        "symlink, special, bad_name, unreadable, secret",
    )
    progress: dict[str, Any] = Field(
        description='what the job counts now: {"unit": "texts" (semantic phase) or "files", '
        '"done", "total", "text": "1200/9000 texts embedded, 45/s" (what every face shows), '
        '"per_second": the semantic phase rate or null}; eta_seconds is that phase ETA',
    )


class DocumentOut(_Out):
    path: str
    display_path: str
    abs_path: str
    title: str
    format: str
    size: int
    modified_ns: int
    sections: int
    chunks: int
    status: str = Field(description="indexed | failed | needs_ocr | needs_reindex | skipped")
    error: str | None
    ocr: bool
    ocr_engine: str | None
    ocr_pages: list[int]
    needs_ocr_pages: list[int]
    indexed_at: float
    redactions: int = Field(
        description='secrets found in the text and replaced by "[redacted secret]"'
    )
    skip_reason: str | None = Field(
        default=None, description="status skipped: why (unsupported, hidden, excluded, ...)"
    )


class ListOut(_Out):
    total: int
    offset: int
    limit: int
    items: list[DocumentOut]
    next_offset: int | None


class SectionOut(_Out):
    section_id: int
    ordinal: int
    location: dict[str, Any]
    location_label: str
    text: str


class ReadOut(_Out):
    found: bool
    path: str
    display_path: str
    title: str
    content_trust: str
    total_sections: int
    sections: list[SectionOut]
    next_offset: int | None = Field(description="pass as offset to continue reading")


class DiskOut(_Out):
    data_dir_free_bytes: int | None = Field(
        description="free bytes on the data dir's disk, null when unknown"
    )
    low_free_space_bytes: int = Field(
        description="below this, health warns that a sync may fill the disk"
    )


class HealthOut(_Out):
    status: str = Field(description="ok | degraded | error")
    knowledge_dir: str
    data_dir: str
    db_path: str
    schema_version: int | None
    chunk_scheme: int
    documents: dict[str, int]
    sections: int
    chunks: int
    needs_reindex_documents: int
    secrets: dict[str, Any] = Field(
        description="secret detector version, documents with redactions, redaction count, "
        "documents read by an older detector (re-read on the next sync)",
    )
    last_job: dict[str, Any] | None
    semantic: dict[str, Any]
    ocr: dict[str, Any]
    supported_formats: list[str]
    problems: list[str]
    warnings: list[str]
    read_only: str | None = Field(
        description="why the index cannot be written (searches still work), or null"
    )
    disk: DiskOut
    platform: dict[str, Any] = Field(
        description="the operating system and the protections it lacks (memory cap, parent-death "
        "signal, /proc), each also a warning"
    )

    skipped: dict[str, Any] = Field(
        default_factory=dict,
        description='files seen and not indexed: {"total", "by_reason": {reason: n}, '
        '"top_unsupported_extensions": [{"extension", "count"}]}',
    )
    excludes: dict[str, Any] = Field(
        default_factory=dict,
        description='{"ragignore": true if <knowledge-dir>/.ragignore exists, "patterns": '
        "[the gitignore-style lines in force, .ragignore then --exclude]}",
    )


_CHECKED: tuple[tuple[type[BaseModel], shapes.Shape], ...] = (
    (ChannelRankOut, shapes.CHANNEL_RANK),
    (HitOut, shapes.HIT),
    (SourceOut, shapes.SOURCE),
    (OmittedOut, shapes.OMITTED),
    (SearchOut, shapes.SEARCH),
    (JobErrorOut, shapes.JOB_ERROR),
    (JobOut, shapes.JOB),
    (DocumentOut, shapes.DOCUMENT),
    (ListOut, shapes.LIST),
    (SectionOut, shapes.SECTION),
    (ReadOut, shapes.READ),
    (DiskOut, shapes.DISK),
    (HealthOut, shapes.HEALTH),
)


def check_against_shapes() -> None:
    """Each model has exactly its shape's keys, and requires the keys every response carries."""
    for model, shape in _CHECKED:
        fields = set(model.model_fields)
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        always = set(shape.keys("compact")) - shape.optional
        if fields != set(shape.full) or required != always:
            raise TypeError(
                f"{model.__name__} disagrees with rag_results.{shape.name.upper()}: fields "
                f"{sorted(fields ^ set(shape.full))}, required {sorted(required ^ always)}"
            )


check_against_shapes()


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's outputSchema: the validation schema (required keys, additionalProperties
    false). The serialization schema would be empty: _Out's serializer returns a plain dict."""
    return model.model_json_schema(mode="validation")
