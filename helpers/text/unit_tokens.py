"""The tokens of a retrieval unit (a page of a paged file, else a whole document) for the
unit-level BM25 table (migration 11, helpers.store.units), and of a query searched there.

The pre-tokenisation of textbook BM25 (bench/textbook_bm25.py), so that the units channel ranks
as it does: the matching form of every lexical channel with its marks (fold_marked: NFKC, case,
ё/е), words of letters and digits; runs of Chinese, Japanese and Korean as overlapping character
bigrams (a one-character run as itself); Thai runs segmented into words (helpers.text.thai);
every other word Snowball-stemmed, then folded (marks of Latin and Greek letters dropped). A
word is stemmed in the unit's language (identified once from its text, helpers.text.language_id,
and stored with the unit) when it is written in that language's script, else in its script's
default language (English for Latin, Russian for Cyrillic): the English words of a Russian man
page and the Russian words of a page identified as English get the same stems as everywhere
else, so no unstemmed form is rare enough to outweigh the rest (bench/notes/u-lex.md, "Mixed
languages"). A
query is tokenised once per language of the index's units.

The table is contentless: a unit's row is deleted with these same tokens recomputed from its
stored text and stored language, so any change here must bump UNIT_TOKENS_VERSION (the index
rebuilds the table when its stored version differs).
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain

from helpers.text import cjk, language_id, stemming, thai
from helpers.text.normalize import fold, fold_marked

# Bumped whenever unit_tokens(), unit_language() or the unit boundaries change: an index whose
# meta row 'unit_tokens_version' differs rebuilds its unit table (a contentless row can only be
# deleted with the exact tokens it was written with).
UNIT_TOKENS_VERSION = 2
# Characters of a unit read to identify its language (its first lines tell it; as
# language_id.SAMPLE_CHARS, the identifier's cost grows with the length).
LANGUAGE_SAMPLE_CHARS = 2000
# Distinct (language, token) forms kept per process: the vocabulary of a large folder; a Snowball
# stem costs microseconds (tens in pure Python), a dict lookup well under one.
STEM_CACHE_MAX = 500_000
_CJK_RUN = f"[{cjk.CJK_CHARS}]+"
_THAI_RUN = thai.THAI_RUN.pattern
_TOKEN = re.compile(f"{_CJK_RUN}|{_THAI_RUN}|[^\\W_\u0e00-\u0e7f{cjk.CJK_CHARS}]+")
_CJK = re.compile(_CJK_RUN)
_FORMS: dict[str, dict[str, tuple[str, ...]]] = {}  # language -> token -> tokens
# The script of the Snowball languages not written in Latin letters (Unicode name prefixes);
# Serbian is written in both and counts as Cyrillic's second.
_SCRIPT_OF = {
    "russian": "CYRILLIC",
    "greek": "GREEK",
    "arabic": "ARABIC",
    "persian": "ARABIC",
    "hindi": "DEVANAGARI",
    "nepali": "DEVANAGARI",
    "tamil": "TAMIL",
    "armenian": "ARMENIAN",
    "yiddish": "HEBREW",
}
# A word outside its unit's script is stemmed in this language of its own script (none: kept).
_DEFAULT_OF_SCRIPT = {
    "LATIN": stemming.DEFAULT_LATIN,
    "CYRILLIC": stemming.DEFAULT_CYRILLIC,
    "GREEK": "greek",
}
_SCRIPTS: dict[str, str] = {}


def _script(ch: str) -> str:
    """The Unicode script name prefix of a letter ('LATIN', 'CYRILLIC', ...; '' for a digit)."""
    script = _SCRIPTS.get(ch)
    if script is None:
        script = "" if ch.isdigit() else unicodedata.name(ch, " ").split(" ")[0]
        _SCRIPTS[ch] = script
    return script


def stemmer_language(word: str, language: str) -> str:
    """The Snowball language a word of a unit in `language` is stemmed in ('' = none)."""
    script = _script(word[0])
    if language and _SCRIPT_OF.get(language, "LATIN") == script:
        return language
    return _DEFAULT_OF_SCRIPT.get(script, "")


def unit_language(text: str) -> str:
    """The Snowball stemmer of the text's language ('' = none: no stemming)."""
    counts = language_id.languages_of([text[:LANGUAGE_SAMPLE_CHARS]])
    if not counts:
        return ""
    return stemming.SNOWBALL_BY_ISO.get(counts.most_common(1)[0][0], "")


def unit_tokens(text: str, language: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """The tokens of `text` for the unit table, stemmed in `language` (a Snowball name, '' for
    none), leaving out the words whose folded form is in `skip` (a query's stop words)."""
    tokens = _TOKEN.findall(fold_marked(text))
    if skip:
        tokens = [t for t in tokens if _kind(t) != _WORD or fold(t) not in skip]
    forms = _forms_in(language)
    missing = [t for t in dict.fromkeys(tokens) if t not in forms]
    if missing:
        _add_forms(forms, language, missing)
    return list(chain.from_iterable(map(forms.__getitem__, tokens)))


_WORD, _CJK_RUN_KIND, _THAI_RUN_KIND = range(3)


def _kind(token: str) -> int:
    first = token[0]
    if _CJK.match(first):
        return _CJK_RUN_KIND
    return _THAI_RUN_KIND if "\u0e00" <= first <= "\u0e7f" else _WORD


def _forms_in(language: str) -> dict[str, tuple[str, ...]]:
    """The cache of token -> its output tokens for units in `language` (bounded in all)."""
    if sum(map(len, _FORMS.values())) >= STEM_CACHE_MAX:
        _FORMS.clear()
    return _FORMS.setdefault(language, {})


def _add_forms(forms: dict[str, tuple[str, ...]], language: str, tokens: list[str]) -> None:
    """Fill `forms` for new tokens: the words of each stemmer in one stemWords call (the C
    binding, PyStemmer, when installed, takes the list in one go)."""
    by_stemmer: dict[str, list[str]] = {}
    for token in tokens:
        kind = _kind(token)
        if kind == _CJK_RUN_KIND:
            forms[token] = tuple(cjk.bigrams(token)) if len(token) > 1 else (token,)
        elif kind == _THAI_RUN_KIND:
            forms[token] = tuple(fold(word) for word in thai.segment(token))
        else:
            by_stemmer.setdefault(stemmer_language(token, language), []).append(token)
    for name, words in by_stemmer.items():
        stemmer = stemming.snowball(name)
        stems = stemmer.stemWords(words) if stemmer is not None else words
        for word, stem in zip(words, stems, strict=True):
            forms[word] = (fold(stem),)
