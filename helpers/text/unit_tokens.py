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

from helpers.text import cjk, language_id, stemming, thai
from helpers.text.normalize import fold, fold_marked

# Bumped whenever unit_tokens(), unit_language() or the unit boundaries change: an index whose
# meta row 'unit_tokens_version' differs rebuilds its unit table (a contentless row can only be
# deleted with the exact tokens it was written with).
UNIT_TOKENS_VERSION = 2
# Characters of a unit read to identify its language (its first lines tell it; as
# language_id.SAMPLE_CHARS, the identifier's cost grows with the length).
LANGUAGE_SAMPLE_CHARS = 2000
# Distinct (language, word) stems kept per process: the vocabulary of a large folder; Snowball in
# pure Python costs ~27 µs a word, a dict lookup well under 1.
STEM_CACHE_MAX = 500_000
_CJK_RUN = f"[{cjk.CJK_CHARS}]+"
_THAI_RUN = thai.THAI_RUN.pattern
_TOKEN = re.compile(f"{_CJK_RUN}|{_THAI_RUN}|[^\\W_\u0e00-\u0e7f{cjk.CJK_CHARS}]+")
_CJK = re.compile(_CJK_RUN)
_STEMS: dict[tuple[str, str], str] = {}
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
    out: list[str] = []
    for match in _TOKEN.finditer(fold_marked(text)):
        token = match.group()
        first = token[0]
        if _CJK.match(first):
            out.extend(cjk.bigrams(token) if len(token) > 1 else [token])
        elif "\u0e00" <= first <= "\u0e7f":
            out.extend(fold(word) for word in thai.segment(token))
        elif not skip or fold(token) not in skip:
            out.append(_stemmed(language, token))
    return out


def _stemmed(language: str, word: str) -> str:
    key = (language, word)
    stem = _STEMS.get(key)
    if stem is None:
        stemmer = stemming.snowball(stemmer_language(word, language))
        stem = fold(stemmer.stemWord(word) if stemmer is not None else word)
        if len(_STEMS) >= STEM_CACHE_MAX:
            _STEMS.clear()
        _STEMS[key] = stem
    return stem
