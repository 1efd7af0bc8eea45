"""Shared pieces of the lexical channels: filters, channel results, the per-query context."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from helpers.lexical import index_terms
from helpers.lexical.query_terms import Query
from helpers.ranking.constants import CHANNEL_DEPTH
from helpers.safety import scope_like_pattern
from helpers.store.batched import rows_in
from helpers.text.normalize import fold, fold_marked

PREFIX_SCAN_TERMS = 200  # vocabulary entries summed to estimate a prefix's frequency
# Documents rows of a big document being written in batches, or of an old version waiting to be
# discarded (helpers.index.document_write names them): their chunks are in the indexes but are
# no document anyone may see. A hidden path, so walk_files never yields a real one like it.
STAGING_PATH_PREFIX = ".ragdoc-staging/"
# Every staging path sorts inside this range: a probe of the path index, not a LIKE scan.
STAGING_RANGE = (STAGING_PATH_PREFIX, STAGING_PATH_PREFIX[:-1] + chr(ord("/") + 1))


def not_staging_sql(table_alias: str = "") -> str:
    """WHERE fragment (documents table) leaving staging rows out; parameters: STAGING_RANGE."""
    column = f"{table_alias}.path" if table_alias else "path"
    return f"NOT ({column} >= ? AND {column} < ?)"


NOT_STAGING = not_staging_sql()


def section_ids(conn: sqlite3.Connection, chunk_ids: list[int]) -> dict[int, int]:
    """Chunk id -> parent section id, in batches under SQLite's parameter limit."""
    unique = list(dict.fromkeys(chunk_ids))
    sql = "SELECT id, section_id FROM chunks WHERE id IN ({marks})"
    return {row[0]: row[1] for row in rows_in(conn, sql, unique)}


def hidden_document_ids(conn: sqlite3.Connection) -> tuple[int, ...]:
    """Staging documents (usually none: a range probe of the path index)."""
    rows = conn.execute("SELECT id FROM documents WHERE path >= ? AND path < ?", STAGING_RANGE)
    return tuple(row[0] for row in rows)


@dataclass(frozen=True)
class Filters:
    path_prefix: str = ""
    file_types: tuple[str, ...] = ()  # suffixes without dot, lower-case
    modified_after_ns: int | None = None
    hidden_doc_ids: tuple[int, ...] = ()  # staging documents (set by SearchContext)

    @property
    def active(self) -> bool:
        return bool(
            self.path_prefix
            or self.file_types
            or self.modified_after_ns is not None
            or self.hidden_doc_ids
        )

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
        if self.hidden_doc_ids:
            clauses.append(f"{doc_alias}.id NOT IN ({','.join('?' * len(self.hidden_doc_ids))})")
            params += list(self.hidden_doc_ids)
        return (" AND ".join(clauses) or "1"), params


@dataclass(frozen=True)
class ChannelResult:
    name: str
    ranked: list[tuple[int, float]]  # (chunk id, channel score; higher = better)
    # Share of the query's content terms the channel searched for: a channel that saw one word
    # of five gets a fifth of its weight in fusion, so a partial view cannot outvote a full one.
    coverage: float = 1.0
    # Each entry's rank in fusion when it is not its position (the units channel gives every
    # chunk of a unit that unit's rank); empty = positions 1, 2, ...
    ranks: tuple[int, ...] = ()


@dataclass
class SearchContext:
    """One query's connection, parsed query and filters, plus lookups channels share."""

    conn: sqlite3.Connection
    query: Query
    filters: Filters
    _df: dict[str, int] = field(default_factory=dict)
    _cache: dict[str, ChannelResult] = field(default_factory=dict)
    # The query's words with the marks fold() drops: chunks with only unmarked forms rank last.
    marked: tuple[str, ...] = ()
    # Channel -> what its bound cut short for this query (the response names the channels).
    truncated: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every channel filters through self.filters: staged rows are left out of all of them.
        hidden = hidden_document_ids(self.conn)
        if hidden:
            self.filters = replace(self.filters, hidden_doc_ids=hidden)
        if any(g.kind == "word" and not g.parts for g in self.query.groups):
            profile = index_terms.index_profile(self.conn)
            self.query = index_terms.fitted_query(self.query, profile.stemmers, self._known)
        self.marked = index_terms.marked_words(self.query)

    def _known(self, word: str) -> bool:
        return self.doc_freq(word) > 0

    def doc_freq(self, word: str) -> int:
        """Chunks whose word index holds `word` as a whole token (0 = not in the corpus)."""
        if word not in self._df:
            row = self.conn.execute(
                "SELECT doc FROM chunks_words_vocab WHERE term = ?", (word,)
            ).fetchone()
            self._df[word] = int(row[0]) if row else 0
        return self._df[word]

    def has_prefix(self, prefix: str) -> bool:
        """Whether any word of the word index starts with `prefix` (a B-tree range probe)."""
        key = "^" + prefix
        if key not in self._df:
            row = self.conn.execute(
                "SELECT 1 FROM chunks_words_vocab WHERE term >= ? AND term < ? LIMIT 1",
                (prefix, prefix + "\U0010ffff"),
            ).fetchone()
            self._df[key] = 1 if row else 0
        return bool(self._df[key])

    def prefix_freq(self, prefix: str) -> int:
        """Upper bound of the chunks holding a word that starts with `prefix` (sum over the
        first PREFIX_SCAN_TERMS such words; saturates there)."""
        key = "*" + prefix
        if key not in self._df:
            row = self.conn.execute(
                "SELECT SUM(doc) FROM (SELECT doc FROM chunks_words_vocab "
                "WHERE term >= ? AND term < ? LIMIT ?)",
                (prefix, prefix + "\U0010ffff", PREFIX_SCAN_TERMS),
            ).fetchone()
            self._df[key] = int(row[0] or 0)
        return self._df[key]

    def chunk_count(self) -> int:
        """Chunks in the index, counted: MAX(id) overestimated N after every resync (deleted
        ids are never reused), so a resynced index ranked unlike a fresh one. COUNT(*) walks
        the smallest index: 0.07 ms at 100,000 chunks (bench note in bench/RESULTS.md)."""
        if "#chunks" not in self._df:
            row = self.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()
            self._df["#chunks"] = int(row[0] or 0)
        return self._df["#chunks"]

    def ranked_match(
        self,
        table: str,
        match: str,
        depth: int | None = None,
        rank: str | None = None,
        newest_first: bool = False,
    ) -> list[tuple[int, float]]:
        """(chunk id, -rank) of an FTS5 MATCH over `table` (rowid = chunks.id), best first,
        with the filters applied; ties broken by chunk id. `newest_first` skips ranking (a
        query of words in most chunks has no useful BM25 order, and ranking costs ~2.5 µs per
        matching chunk): the newest matches come first, with score 0. For a query with marks
        (réunion), chunks holding its words only without them come last (marks_first)."""
        depth = CHANNEL_DEPTH if depth is None else depth  # read per call: a bench may patch it
        found = self._ranked_match(table, match, depth, rank, newest_first)
        return self.marks_first(found) if self.marked else found

    def marks_first(self, ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """`ranked` with the chunks that hold a marked query word only without its marks
        (resume for résumé) moved after the others, fewest such words first (a stable sort:
        the channel's order stays inside each group). Before the index folded marks away, a
        query typed with marks matched only the marked forms; now the others follow them."""
        if not ranked:
            return ranked
        ids = [cid for cid, _ in ranked]
        plain = [(word, fold(word)) for word in self.marked]
        misses: dict[int, int] = {}
        sql = "SELECT id, text FROM chunks WHERE id IN ({marks})"
        for cid, text in rows_in(self.conn, sql, ids):
            marked = fold_marked(text)
            folded = fold(marked)
            misses[cid] = sum(w not in marked and f in folded for w, f in plain)
        return sorted(ranked, key=lambda hit: misses.get(hit[0], 0))

    def _ranked_match(
        self, table: str, match: str, depth: int, rank: str | None, newest_first: bool
    ) -> list[tuple[int, float]]:
        rank_clause = f" AND {table}.rank MATCH ?" if rank else ""
        rank_params: list[object] = [rank] if rank else []
        if newest_first:
            where, params = self.filters.sql()
            join = (
                f"JOIN chunks c ON c.id = {table}.rowid JOIN documents d ON d.id = c.document_id "
                if self.filters.active
                else ""
            )
            sql = (
                f"SELECT {table}.rowid, 0 FROM {table} {join}WHERE {table} MATCH ? AND {where} "
                f"ORDER BY {table}.rowid DESC LIMIT ?"
            )
            return [(row[0], 0.0) for row in self.conn.execute(sql, [match, *params, depth])]
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

    def cut_short(self, channel: str, why: str) -> None:
        """Record that `channel` searched less than the query asked for, and why."""
        self.truncated.setdefault(channel, why)

    def limits(self) -> dict[str, list[str]]:
        """The SearchResult fields that say which channels were cut short, and why."""
        return {
            "truncated_channels": sorted(self.truncated),
            "warnings": [f"{name}: {why}" for name, why in sorted(self.truncated.items())],
        }

    def cached(self, key: str, compute: Callable[[], ChannelResult]) -> ChannelResult:
        """One computation per query of a result several channels build on."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]


def fts_phrase(term: str) -> str:
    """A user term as an FTS5 string literal: no operator or syntax of it survives."""
    return '"' + term.replace('"', '""') + '"'


def fts_any(forms: Iterable[str], prefix: bool = False) -> str:
    """`"a" OR "b" ...` (each quoted; `*` after the closing quote makes it a prefix query)."""
    star = "*" if prefix else ""
    return " OR ".join(fts_phrase(f) + star for f in dict.fromkeys(forms))
