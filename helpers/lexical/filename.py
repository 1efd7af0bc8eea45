"""Filename channel: a query that names a file (name, stem or a distinctive part of its path, any
case, with or without extension, `_ - . /` and spaces interchangeable) puts that file first.

Looks up `doc_names` (migration 2): exact name/stem keys through a B-tree index and substrings
through a trigram FTS over path keys, so the cost does not grow with the number of documents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from helpers.lexical.common import CHANNEL_DEPTH, ChannelResult, SearchContext, fts_phrase
from helpers.lexical.query_terms import TRIGRAM_MIN_CHARS
from helpers.safety import like_escape
from helpers.text.cjk import has_cjk
from helpers.text.normalize import fold

_SEPARATORS = re.compile(r"[\s_\-./\\]+")
# A token that looks like a file or path inside a longer query: "budget.csv", "docs/spec".
_FILE_TOKEN = re.compile(r"\S*[\w\u0e00-\u0e7f](?:\.[A-Za-z0-9]{1,5}|/\S+)\b")
SUBSTRING_MIN_CHARS = 4  # "doc" or "md" inside a path names nothing in particular
# ...but two CJK characters are a word (報告 "report", 合同 "contract"). Keys shorter than a
# trigram are matched with LIKE over doc_names (one row per document, only for such keys).
CJK_SUBSTRING_MIN_CHARS = 2
SUBSTRING_MAX_CHARS = 80  # a longer "key" is a sentence, not a file name (and costs ~50 ms)
SCORE_NAME, SCORE_STEM, SCORE_IN_NAME, SCORE_IN_PATH = 4.0, 3.0, 2.0, 1.0


@dataclass(frozen=True)
class NameKeys:
    name_key: str
    stem_key: str
    path_key: str


def path_key(text: str) -> str:
    """Folded, with runs of separators as one space (same rule as migration 2's backfill)."""
    return _SEPARATORS.sub(" ", fold(text)).strip()


def name_keys(rel_path: str) -> NameKeys:
    folded = fold(rel_path)
    name = folded.rsplit("/", 1)[-1]
    stem = name[: name.rfind(".")] if name.find(".") > 0 else name
    return NameKeys(path_key(name), path_key(stem), path_key(folded))


def query_keys(raw: str) -> list[str]:
    """The whole query, then each file-like token in it, as path keys."""
    keys = [path_key(raw)]
    keys += [path_key(token) for token in _FILE_TOKEN.findall(raw)]
    return [k for k in dict.fromkeys(keys) if k]


def _substring_rows(
    ctx: SearchContext, key: str, where: str, params: list[object]
) -> list[tuple[int, str]]:
    """(doc id, name key) of documents whose path key contains `key`, best first."""
    if len(key) < TRIGRAM_MIN_CHARS:  # trigram MATCH cannot see it
        pattern = "%" + like_escape(key) + "%"
        sql = (
            "SELECT n.doc_id, n.name_key FROM doc_names n JOIN documents d ON d.id = n.doc_id "
            f"WHERE n.path_key LIKE ? ESCAPE '\\' AND d.chunk_count > 0 AND {where} "
            "ORDER BY length(n.path_key), n.doc_id LIMIT ?"
        )
        return ctx.conn.execute(sql, (pattern, *params, CHANNEL_DEPTH)).fetchall()
    sql = (
        "SELECT n.doc_id, n.name_key FROM doc_names_fts f "
        "JOIN doc_names n ON n.doc_id = f.rowid JOIN documents d ON d.id = n.doc_id "
        f"WHERE doc_names_fts MATCH ? AND d.chunk_count > 0 AND {where} ORDER BY f.rank LIMIT ?"
    )
    return ctx.conn.execute(sql, (fts_phrase(key), *params, CHANNEL_DEPTH)).fetchall()


def channel_filename(ctx: SearchContext) -> ChannelResult:
    where, params = ctx.filters.sql()
    scores: dict[int, float] = {}
    for key in query_keys(ctx.query.raw):
        for column, score in (("name_key", SCORE_NAME), ("stem_key", SCORE_STEM)):
            for row in ctx.conn.execute(
                f"SELECT n.doc_id FROM doc_names n JOIN documents d ON d.id = n.doc_id "
                f"WHERE n.{column} = ? AND d.chunk_count > 0 AND {where} LIMIT ?",
                (key, *params, CHANNEL_DEPTH),
            ):
                scores[row[0]] = max(scores.get(row[0], 0.0), score)
        shortest = CJK_SUBSTRING_MIN_CHARS if has_cjk(key) else SUBSTRING_MIN_CHARS
        if not shortest <= len(key) <= SUBSTRING_MAX_CHARS:
            continue
        for row in _substring_rows(ctx, key, where, params):
            score = SCORE_IN_NAME if key in row[1] else SCORE_IN_PATH
            scores[row[0]] = max(scores.get(row[0], 0.0), score)
    if not scores:
        return ChannelResult("filename", [])
    ids = list(scores)
    marks = ",".join("?" * len(ids))
    docs = {
        row[0]: (row[1], row[2])
        for row in ctx.conn.execute(
            f"SELECT d.id, d.path, (SELECT MIN(c.id) FROM chunks c WHERE c.document_id = d.id) "
            f"FROM documents d WHERE d.id IN ({marks})",
            ids,
        )
    }
    ranked = sorted(
        (doc_id for doc_id in ids if docs.get(doc_id, (None, None))[1] is not None),
        key=lambda d: (-scores[d], len(docs[d][0]), docs[d][0]),
    )
    return ChannelResult("filename", [(docs[d][1], scores[d]) for d in ranked[:CHANNEL_DEPTH]])
