"""Typed MCP outputs: pydantic views of the shared result dicts (rag_results / rag_jobs /
rag_documents), so clients get an outputSchema. The dicts stay the single source of the shape;
these models only validate and describe it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChannelRankOut(_Out):
    rank: int = Field(description="1-based rank inside this retrieval channel")
    score: float


class HitOut(_Out):
    rank: int
    path: str = Field(description="path relative to the knowledge dir")
    display_path: str = Field(description="cite this path")
    abs_path: str
    title: str
    format: str
    location: dict[str, Any] = Field(description="page / sheet+cell_range / slide / heading_path")
    location_label: str = Field(description="cite this location, e.g. 'p. 3'")
    snippet: str = Field(description="excerpt; matched terms in **bold**")
    score: float
    channels: dict[str, ChannelRankOut] = Field(description="which channels found it, at what rank")
    section_id: int = Field(description="key into `sections` for the full parent text")
    chunk_id: int
    ocr: bool = Field(description="text came from OCR of a scan")
    stale: bool = Field(description="file changed since indexing: re-sync before trusting")


class SourceOut(_Out):
    display_path: str
    title: str
    hits: int
    locations: list[str]


class SearchOut(_Out):
    query: str
    mode: str
    content_trust: str
    hits: list[HitOut]
    sections: dict[str, str] = Field(description="parent section text by section_id")
    sources: list[SourceOut]
    channels_used: list[str]
    warnings: list[str]
    elapsed_ms: float


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
        default=None,
        description='inside current_file: {"done": 120, "total": 2000, "unit": "page" or '
        '"chunks written"}; null between files',
    )
    skipped: dict[str, Any] = Field(
        default_factory=dict,
        description='files seen and not indexed: {"total": n, "by_reason": {reason: {"count", '
        '"label", "examples"}}}; reasons: unsupported, hidden, sensitive, excluded, too_large, '
        "symlink, special, bad_name, unreadable, secret",
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
    status: str = Field(description="indexed | failed | needs_ocr | stale | skipped")
    error: str | None
    ocr: bool
    ocr_engine: str | None
    ocr_pages: list[int]
    needs_ocr_pages: list[int]
    indexed_at: float
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
    stale_documents: int
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
