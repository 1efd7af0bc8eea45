"""Retrieval: independent ranked channels over the index, fused by Reciprocal Rank Fusion.

Each channel returns chunk ids in its own rank order; fusion is deterministic (fixed k, fixed
weights, ties broken by path then position), and every hit says which channels found it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from helpers.blocks import Location
from helpers.safety import scope_like_pattern
from helpers.snippet import make_snippet
from helpers.text_normalize import fold
from rag_results import ChannelRank, Hit, SearchResult

# RRF constant from Cormack et al. (2009); 60 keeps a rank-1 hit of one channel from
# outweighing consistent mid-rank agreement of the others.
RRF_K = 60
# Per-channel weights in the fused score (w / (RRF_K + rank)). A file named in the query is the
# strongest signal a user can give, so the filename channel counts double.
CHANNEL_WEIGHTS: dict[str, float] = {"filename": 2.0, "bm25": 1.0, "short": 1.0}
# bm25() column weights for (title, path, body): a term in the title or path says more about
# the whole document than one occurrence in the body.
BM25_COLUMN_WEIGHTS = (3.0, 2.0, 1.0)
CHANNEL_DEPTH = 200  # candidates each channel contributes to fusion
TRIGRAM_MIN_CHARS = 3  # FTS5 trigram cannot match shorter terms (they silently match nothing)
SHORT_SCAN_LIMIT = 200

_TERM_SPLIT = re.compile(r"[\s,;:!?()\[\]{}<>\"'`«»“”„]+")
_PATH_SEPARATORS = re.compile(r"[\s_\-./\\]+")


@dataclass(frozen=True)
class Filters:
    path_prefix: str = ""
    file_types: tuple[str, ...] = ()  # suffixes without dot, lower-case
    modified_after_ns: int | None = None

    def sql(self, doc_alias: str = "d") -> tuple[str, list[object]]:
        """WHERE fragment on the documents table (parameterised) and its parameters."""
        clauses: list[str] = []
        params: list[object] = []
        if self.path_prefix:
            clauses.append(f"({doc_alias}.path = ? OR {doc_alias}.path LIKE ? ESCAPE '\\')")
            params += [self.path_prefix.strip("/"), scope_like_pattern(self.path_prefix)]
        if self.file_types:
            clauses.append(f"{doc_alias}.format IN ({','.join('?' * len(self.file_types))})")
            params += list(self.file_types)
        if self.modified_after_ns is not None:
            clauses.append(f"{doc_alias}.mtime_ns > ?")
            params.append(self.modified_after_ns)
        return (" AND ".join(clauses) or "1"), params


@dataclass(frozen=True)
class Query:
    raw: str
    folded: str
    terms: tuple[str, ...]  # folded, deduplicated, in query order

    @classmethod
    def parse(cls, raw: str) -> Query:
        folded = fold(raw).strip()
        seen: dict[str, None] = {}
        for term in _TERM_SPLIT.split(folded):
            term = term.strip(".-_")
            if term:
                seen.setdefault(term, None)
        return cls(raw, folded, tuple(seen))


@dataclass(frozen=True)
class ChannelResult:
    name: str
    ranked: list[tuple[int, float]]  # (chunk id, channel score; higher = better)


@dataclass
class SearchOptions:
    top_k: int = 8
    filters: Filters = field(default_factory=Filters)
    mode: str = "lexical"
    channels: tuple[str, ...] | None = None  # None = all lexical channels (ablation switch)
    knowledge_dir: Path | None = None  # for the file-system truth check


def fts_phrase(term: str) -> str:
    """A user term as an FTS5 string literal: no operator or syntax of it survives."""
    return '"' + term.replace('"', '""') + '"'


def channel_bm25(conn: sqlite3.Connection, query: Query, filters: Filters) -> ChannelResult:
    terms = [t for t in query.terms if len(t) >= TRIGRAM_MIN_CHARS]
    if not terms:
        return ChannelResult("bm25", [])
    match = " OR ".join(fts_phrase(t) for t in terms)
    where, params = filters.sql()
    w_title, w_path, w_body = BM25_COLUMN_WEIGHTS
    rows = conn.execute(
        "SELECT f.rowid AS id, bm25(chunks_fts, ?, ?, ?) AS score FROM chunks_fts f "
        "JOIN chunks c ON c.id = f.rowid JOIN documents d ON d.id = c.document_id "
        f"WHERE chunks_fts MATCH ? AND {where} ORDER BY score, f.rowid LIMIT ?",
        (w_title, w_path, w_body, match, *params, CHANNEL_DEPTH),
    ).fetchall()
    return ChannelResult("bm25", [(r["id"], -r["score"]) for r in rows])


def channel_short(conn: sqlite3.Connection, query: Query, filters: Filters) -> ChannelResult:
    """Terms under 3 characters, which trigram MATCH and LIKE cannot find (SQLite 3.40)."""
    terms = [t for t in query.terms if len(t) < TRIGRAM_MIN_CHARS]
    if not terms or any(len(t) >= TRIGRAM_MIN_CHARS for t in query.terms):
        return ChannelResult("short", [])
    where, params = filters.sql()
    hit_count = " + ".join("(instr(c.norm, ?) > 0)" for _ in terms)
    rows = conn.execute(
        f"SELECT c.id AS id, ({hit_count}) AS n FROM chunks c "
        f"JOIN documents d ON d.id = c.document_id WHERE ({hit_count}) > 0 AND {where} "
        "ORDER BY n DESC, d.path, c.id LIMIT ?",
        (*terms, *terms, *params, SHORT_SCAN_LIMIT),
    ).fetchall()
    return ChannelResult("short", [(r["id"], float(r["n"])) for r in rows])


def _path_key(text: str) -> str:
    return " ".join(_PATH_SEPARATORS.split(fold(text))).strip()


def channel_filename(conn: sqlite3.Connection, query: Query, filters: Filters) -> ChannelResult:
    """A query that names a file (name, stem or distinctive path part) puts that file first."""
    key = _path_key(query.raw)
    if len(key) < 2:
        return ChannelResult("filename", [])
    where, params = filters.sql()
    scored: list[tuple[float, str, int]] = []
    for row in conn.execute(
        "SELECT d.id, d.path FROM documents d WHERE d.chunk_count > 0 AND " + where, params
    ):
        path_key = _path_key(row["path"])
        name_key = _path_key(row["path"].rsplit("/", 1)[-1])
        stem_key = _path_key(row["path"].rsplit("/", 1)[-1].rsplit(".", 1)[0])
        if key in (name_key, stem_key):
            score = 3.0
        elif len(key) >= 4 and key in name_key:
            score = 2.0
        elif len(key) >= 4 and key in path_key:
            score = 1.0
        else:
            continue
        scored.append((score, row["path"], row["id"]))
    scored.sort(key=lambda s: (-s[0], s[1]))
    ranked: list[tuple[int, float]] = []
    for score, _path, doc_id in scored[:CHANNEL_DEPTH]:
        first = conn.execute(
            "SELECT id FROM chunks WHERE document_id = ? ORDER BY section_id, ordinal LIMIT 1",
            (doc_id,),
        ).fetchone()
        if first:
            ranked.append((first["id"], score))
    return ChannelResult("filename", ranked)


LEXICAL_CHANNELS: dict[str, Callable[[sqlite3.Connection, Query, Filters], ChannelResult]] = {
    "filename": channel_filename,
    "bm25": channel_bm25,
    "short": channel_short,
}


def rrf_fuse(
    results: list[ChannelResult], weights: dict[str, float]
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """(chunk id, fused score, per-channel rank) sorted by score, ties by chunk id."""
    fused: dict[int, float] = {}
    ranks: dict[int, dict[str, ChannelRank]] = {}
    for result in results:
        weight = weights.get(result.name, 1.0)
        for rank, (chunk_id, score) in enumerate(result.ranked, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (RRF_K + rank)
            ranks.setdefault(chunk_id, {})[result.name] = ChannelRank(rank, score)
    return sorted(
        ((cid, score, ranks[cid]) for cid, score in fused.items()), key=lambda x: (-x[1], x[0])
    )


def search(conn: sqlite3.Connection, raw_query: str, options: SearchOptions) -> SearchResult:
    started = time.perf_counter()
    query = Query.parse(raw_query)
    names = options.channels or tuple(LEXICAL_CHANNELS)
    results = [LEXICAL_CHANNELS[name](conn, query, options.filters) for name in names]
    fused = rrf_fuse(results, CHANNEL_WEIGHTS)
    hits, sections = _materialise(conn, fused, query, options)
    return SearchResult(
        query=raw_query,
        mode=options.mode,
        hits=hits,
        sections=sections,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        channels_used=[r.name for r in results if r.ranked],
    )


def _materialise(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float, dict[str, ChannelRank]]],
    query: Query,
    options: SearchOptions,
) -> tuple[list[Hit], dict[int, str]]:
    """Best chunk per parent section → hits with snippet, location and parent text."""
    hits: list[Hit] = []
    sections: dict[int, str] = {}
    for chunk_id, score, channels in fused:
        if len(hits) >= options.top_k:
            break
        row = conn.execute(
            "SELECT c.id, c.section_id, c.text, c.location, c.ocr, d.path, d.title, d.format, "
            "d.size, d.mtime_ns, s.text AS section_text FROM chunks c "
            "JOIN documents d ON d.id = c.document_id JOIN sections s ON s.id = c.section_id "
            "WHERE c.id = ?",
            (chunk_id,),
        ).fetchone()
        if row is None or row["section_id"] in sections:
            continue
        stale = False
        abs_path = ""
        if options.knowledge_dir is not None:
            path = options.knowledge_dir / row["path"]
            abs_path = str(path)
            try:
                st = path.stat()
            except OSError:
                continue  # the file is gone: never return it as current
            stale = st.st_size != row["size"] or st.st_mtime_ns != row["mtime_ns"]
        location = Location.from_dict(json.loads(row["location"]))
        sections[row["section_id"]] = row["section_text"]
        hits.append(
            Hit(
                rank=len(hits) + 1,
                path=row["path"],
                abs_path=abs_path,
                title=row["title"],
                format=row["format"],
                location=location.to_dict(),
                location_label=location.label(),
                snippet=make_snippet(row["text"], list(query.terms)),
                score=score,
                channels=channels,
                section_id=row["section_id"],
                chunk_id=row["id"],
                ocr=bool(row["ocr"]),
                stale=stale,
            )
        )
    return hits, sections
