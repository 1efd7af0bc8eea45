"""Shared pieces of the lexical channels: filters, channel results, the per-query context."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field

from helpers.query_terms import Query
from helpers.safety import scope_like_pattern

CHANNEL_DEPTH = 200  # candidates each channel contributes to fusion


@dataclass(frozen=True)
class Filters:
    path_prefix: str = ""
    file_types: tuple[str, ...] = ()  # suffixes without dot, lower-case
    modified_after_ns: int | None = None

    @property
    def active(self) -> bool:
        return bool(self.path_prefix or self.file_types or self.modified_after_ns is not None)

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
class ChannelResult:
    name: str
    ranked: list[tuple[int, float]]  # (chunk id, channel score; higher = better)


@dataclass
class SearchContext:
    """One query's connection, parsed query and filters, plus lookups channels share."""

    conn: sqlite3.Connection
    query: Query
    filters: Filters
    _df: dict[str, int] = field(default_factory=dict)
    _cache: dict[str, ChannelResult] = field(default_factory=dict)

    def doc_freq(self, word: str) -> int:
        """Chunks whose word index holds `word` as a whole token (0 = not in the corpus)."""
        if word not in self._df:
            row = self.conn.execute(
                "SELECT doc FROM chunks_words_vocab WHERE term = ?", (word,)
            ).fetchone()
            self._df[word] = int(row[0]) if row else 0
        return self._df[word]

    def ranked_match(
        self, table: str, match: str, depth: int = CHANNEL_DEPTH, rank: str | None = None
    ) -> list[tuple[int, float]]:
        """(chunk id, -rank) of an FTS5 MATCH over `table` (rowid = chunks.id), best first,
        with the filters applied; ties broken by chunk id."""
        rank_clause = f" AND {table}.rank MATCH ?" if rank else ""
        rank_params: list[object] = [rank] if rank else []
        if self.filters.active:
            where, params = self.filters.sql()
            sql = (
                f"SELECT {table}.rowid, {table}.rank FROM {table} "
                f"JOIN chunks c ON c.id = {table}.rowid JOIN documents d ON d.id = c.document_id "
                f"WHERE {table} MATCH ?{rank_clause} AND {where} "
                f"ORDER BY {table}.rank, {table}.rowid LIMIT ?"
            )
            args: list[object] = [match, *rank_params, *params, depth]
        else:
            sql = (
                f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ?{rank_clause} "
                "ORDER BY rank, rowid LIMIT ?"
            )
            args = [match, *rank_params, depth]
        return [(row[0], -row[1]) for row in self.conn.execute(sql, args)]

    def cached(self, key: str, compute: object) -> ChannelResult:
        if key not in self._cache:
            self._cache[key] = compute()  # type: ignore[operator]
        return self._cache[key]


def fts_phrase(term: str) -> str:
    """A user term as an FTS5 string literal: no operator or syntax of it survives."""
    return '"' + term.replace('"', '""') + '"'


def fts_any(forms: Iterable[str], prefix: bool = False) -> str:
    """`"a" OR "b" ...` (each quoted; `*` after the closing quote makes it a prefix query)."""
    star = "*" if prefix else ""
    return " OR ".join(fts_phrase(f) + star for f in dict.fromkeys(forms))
