"""A query word of the units channel scored as one BM25 term over every form it takes in the
index's languages.

A unit's tokens are stemmed in the language identified for it (helpers.text.unit_tokens), so in
a folder of Swedish pages and untranslated English ones one word is two terms: `isnull` in the
Swedish units, `isnul` in the English ones; `data` is `dat` in the first. Searching the form
most units hold misses the other language's units, and OR-ing the forms gives each form its
own IDF, so the units of the smaller language win on the rarity of their spelling
(bench/notes/u-lex.md). Here a word is one term: its document frequency counts the units that
hold any of its forms, its frequency in a unit sums its forms' (helpers.lexical.units passes
only the words whose forms several units hold). The score is FTS5's own bm25(): each form's
row score with the form's IDF divided out is that unit's saturated frequency of the form, so a
unit holding one form of a word scores as bm25() would with the word's IDF, and one holding two
has its frequencies summed (their counts from units_instances, migration 15) and saturated
again with the same length norm (bench/notes/word-forms.md).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from helpers.lexical.common import fts_any, fts_phrase
from helpers.store.batched import rows_in

# FTS5's bm25() k1: a summed frequency saturates as bm25() saturates each form's.
BM25_K1 = 1.2
# Units read per form of a word, best by that form's own score: bounds the work of a form most of
# a big index holds (Python reads each row). A unit further down keeps the other words' scores;
# every unit holding a form is read while fewer units than this hold it.
UNIT_FORM_DEPTH = 5000
# What FTS5's bm25() takes for an IDF at or under zero (a term in over half the rows).
FTS5_IDF_FLOOR = 1e-6


@dataclass(frozen=True)
class QueryWord:
    """A query word's distinct tokens in the index's languages that some unit holds, each with
    the number of units holding it (the word's first token, held by none, when no form is)."""

    forms: tuple[tuple[str, int], ...]


def query_words(
    per_language: Sequence[Sequence[str]], units_holding: Callable[[str], int]
) -> list[QueryWord]:
    """One QueryWord per position of the query's tokens, which `per_language` holds tokenised
    in each of the index's languages (the same positions in each), repeats left out."""
    words: list[QueryWord] = []
    for variants in zip(*per_language, strict=True):
        counted = [(form, units_holding(form)) for form in dict.fromkeys(variants)]
        held = tuple((form, n) for form, n in counted if n > 0) or (counted[0],)
        word = QueryWord(held)
        if word not in words:
            words.append(word)
    return words


def fts5_idf(rows: int, holding: int) -> float:
    """The IDF FTS5's bm25() gives a term that `holding` of `rows` rows hold."""
    idf = math.log((rows - holding + 0.5) / (holding + 0.5))
    return idf if idf > 0 else FTS5_IDF_FLOOR


def ranked_by_words(
    conn: sqlite3.Connection,
    words: Sequence[QueryWord],
    filters: tuple[str, list[object]],
    depth: int,
) -> list[tuple[int, int, float]]:
    """(unit id, document id, score) best first, ties by unit id, within `filters` (a WHERE
    fragment on documents `d` and its parameters): the sum over `words` of the word's IDF times
    its saturated frequency in the unit. The words of one form are one FTS5 query together
    (bm25() of their OR is that sum already); each form of the others one query of its own."""
    where, params = filters
    rows = conn.execute("SELECT COUNT(*) FROM units").fetchone()[0]
    sql = (
        "SELECT f.rowid, u.document_id, f.rank FROM units_fts f JOIN units u ON u.id = f.rowid "
        f"JOIN documents d ON d.id = u.document_id WHERE units_fts MATCH ? AND {where} "
        "ORDER BY f.rank, f.rowid LIMIT ?"
    )
    scores: dict[int, float] = {}
    document_of: dict[int, int] = {}
    single = [word.forms[0][0] for word in words if len(word.forms) == 1]
    if single:
        for unit_id, doc_id, rank in conn.execute(sql, [fts_any(single), *params, UNIT_FORM_DEPTH]):
            document_of[unit_id] = doc_id
            scores[unit_id] = -rank
    for word in (word for word in words if len(word.forms) > 1):
        saturated: dict[int, dict[str, float]] = {}  # unit -> form -> its saturated frequency
        for form, holding in word.forms:
            form_idf = fts5_idf(rows, holding)
            for unit_id, doc_id, rank in conn.execute(
                sql, [fts_phrase(form), *params, UNIT_FORM_DEPTH]
            ):
                document_of[unit_id] = doc_id
                saturated.setdefault(unit_id, {})[form] = -rank / form_idf
        word_idf = fts5_idf(rows, _holding_any(conn, word))
        merged = _summed(conn, {u: f for u, f in saturated.items() if len(f) > 1})
        for unit_id, forms in saturated.items():
            part = merged.get(unit_id) or next(iter(forms.values()))
            scores[unit_id] = scores.get(unit_id, 0.0) + word_idf * part
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:depth]
    return [(unit_id, document_of[unit_id], score) for unit_id, score in ranked]


def _holding_any(conn: sqlite3.Connection, word: QueryWord) -> int:
    """The units holding any form of `word`, filters aside (an IDF is the whole index's)."""
    if len(word.forms) == 1:
        return word.forms[0][1]
    sql = "SELECT COUNT(*) FROM units_fts WHERE units_fts MATCH ?"
    return int(conn.execute(sql, (fts_any(form for form, _ in word.forms),)).fetchone()[0])


def _summed(conn: sqlite3.Connection, saturated: dict[int, dict[str, float]]) -> dict[int, float]:
    """Unit -> the saturated sum of its forms' frequencies, for units holding several forms of
    one word. A form's saturated frequency s = t (k1 + 1) / (t + L) with t its count in the unit
    and L the unit's length norm, so L = t (k1 + 1) / s - t for any of its forms. Without
    units_instances (an index not yet at migration 15, opened read-only) the best form's."""
    if not saturated:
        return {}
    counts: dict[tuple[int, str], int] = {}
    units = list(saturated)
    try:
        for form in {form for forms in saturated.values() for form in forms}:
            sql = (
                "SELECT doc, COUNT(*) FROM units_instances WHERE term = ? AND doc IN ({marks}) "
                "GROUP BY doc"
            )
            for unit_id, count in rows_in(conn, sql, units, before=(form,)):
                counts[(unit_id, form)] = count
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return {unit_id: max(forms.values()) for unit_id, forms in saturated.items()}
    merged: dict[int, float] = {}
    for unit_id, forms in saturated.items():
        frequencies = [(counts.get((unit_id, form), 0), s) for form, s in forms.items()]
        t, s = max(frequencies)
        if t <= 0 or s <= 0:
            merged[unit_id] = max(forms.values())
            continue
        norm = t * (BM25_K1 + 1) / s - t
        total = sum(count for count, _ in frequencies)
        merged[unit_id] = total * (BM25_K1 + 1) / (total + norm)
    return merged
