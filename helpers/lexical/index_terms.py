"""A parsed query fitted to one index: stems in the index's languages, and the ae/oe/ue spellings
of ä/ö/ü that the index holds.

The languages come from the stored text itself: a language identifier reads an even sample of
the chunks (helpers.text.language_id), once per index state and process. A query is never
identified: two words are too few.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from helpers.lexical.query_terms import Query, TermGroup
from helpers.text import language_id, stemming
from helpers.text.normalize import fold, fold_marked

# Chunks read to tell the index's languages: evenly spread over the ids, each cut to
# language_id.SAMPLE_CHARS (~0.1 ms each once the model is loaded).
LANGUAGE_SAMPLE = 64
# A language stems queries when at least this share of the sampled chunks is in it: below, it
# is the identifier's noise on short or technical chunks, or a quotation.
LANGUAGE_MIN_SHARE = 0.1
# ä/ö/ü are typed as ae/oe/ue where the keyboard has no such keys: a query word with these that
# the index does not hold is also looked for with the single letter fold() leaves of ä/ö/ü,
# when the index holds that spelling (an English "does" never becomes "dos").
_DIGRAPHS = re.compile("ae|oe|ue")
MAX_DIGRAPHS = 3  # 2**3 spellings at most per word
_MARKED_WORD = re.compile(r"[^\W\d_]+")
_CACHE_LOCK = threading.Lock()


@dataclass(frozen=True)
class IndexProfile:
    """What the stored text tells about how to read a query (from an even sample of chunks)."""

    stemmers: tuple[str, ...] = ()  # Snowball stemmers of the index's languages, most first


_PROFILES: dict[tuple[str, int], IndexProfile] = {}


def index_profile(conn: sqlite3.Connection) -> IndexProfile:
    """The profile of the index (cached per database file and newest chunk id, a B-tree probe:
    every sync that writes a chunk changes the key)."""
    high = conn.execute("SELECT MAX(id) FROM chunks").fetchone()[0]
    if high is None:
        return IndexProfile()
    path = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    key = (path or f"memory:{id(conn)}", int(high))
    with _CACHE_LOCK:
        if key in _PROFILES:
            return _PROFILES[key]
    low, count = conn.execute("SELECT MIN(id), COUNT(*) FROM chunks").fetchone()
    step = max((high - low) / LANGUAGE_SAMPLE, 1.0)
    texts = []
    for i in range(min(LANGUAGE_SAMPLE, count)):
        row = conn.execute(
            "SELECT text FROM chunks WHERE id >= ? ORDER BY id LIMIT 1", (int(low + i * step),)
        ).fetchone()
        if row is not None:
            texts.append(row[0])
    counts = language_id.languages_of(texts)
    total = sum(counts.values())
    common = [code for code, n in counts.most_common() if total and n / total >= LANGUAGE_MIN_SHARE]
    profile = IndexProfile(stemming.snowball_languages(common))
    with _CACHE_LOCK:
        _PROFILES[key] = profile
    return profile


def fitted_query(query: Query, languages: tuple[str, ...], known: Callable[[str], bool]) -> Query:
    """`query` with each word stemmed in `languages` (the parse-time stem where none of them
    stems it) and with the ae/oe/ue → a/o/u spellings that `known` (the word index) holds."""
    marked = _marked_forms(query.raw)
    groups = tuple(_fitted(g, languages, known, marked.get(g.text, "")) for g in query.groups)
    return query if groups == query.groups else replace(query, groups=groups)


def marked_words(query: Query) -> tuple[str, ...]:
    """The query's words whose marks fold() drops (réunion, straße), in their marked form."""
    return tuple(m for w, m in _marked_forms(query.raw).items() if m != w)


def _marked_forms(raw: str) -> dict[str, str]:
    """Folded word -> the same word with its marks (lower case)."""
    out: dict[str, str] = {}
    for word in _MARKED_WORD.findall(fold_marked(raw)):
        out.setdefault(fold(word), word)
    return out


def _fitted(
    group: TermGroup, languages: tuple[str, ...], known: Callable[[str], bool], marked: str
) -> TermGroup:
    if group.kind != "word" or group.parts:
        return group
    stem = (stemming.stem_in(group.text, languages, marked) if languages else None) or group.stem
    spellings: tuple[str, ...] = ()
    if _DIGRAPHS.search(group.text) and not known(group.text):
        spellings = tuple(s for s in _digraph_spellings(group.text) if known(s))
    if stem == group.stem and not spellings:
        return group
    return replace(group, stem=stem, spellings=(*group.spellings, *spellings))


def _digraph_spellings(word: str) -> list[str]:
    """`word` with some or all of its ae/oe/ue written as a/o/u (buecherei → bucherei)."""
    spots = [m.start() for m in _DIGRAPHS.finditer(word)][:MAX_DIGRAPHS]
    out: list[str] = []
    for choice in itertools.product((False, True), repeat=len(spots)):
        if not any(choice):
            continue
        chars = list(word)
        for spot, drop in zip(spots, choice, strict=True):
            if drop:
                chars[spot + 1] = ""  # the e after a/o/u
        out.append("".join(chars))
    return out
