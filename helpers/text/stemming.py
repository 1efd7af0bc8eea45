"""Light stemming of query words with the Snowball stemmers, in the languages of the index.

Only queries are stemmed: the word channel searches the stem as a prefix (`отчет*` finds отчёт,
отчета, отчетов) and the trigram channel as a substring, so the index never depends on the
stemmer. Which stemmers apply is the index's business (helpers.lexical.index_terms); a query
parsed without an index gets the English stem for a Latin word and the Russian one for a
Cyrillic word. `snowballstemmer` is maintained by the Snowball project (pure Python, already a
Sphinx dependency) and hands out PyStemmer's stemmers, the project's C binding of the same
algorithms, when that is installed (same stems, ~80x faster: tests/test_stemmer_binding.py);
without snowballstemmer stemming is skipped (logged once) and search still works.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from helpers.text.normalize import fold

log = logging.getLogger(__name__)

# Stems shorter than this expand to too many words as a prefix ("им*" from "имён").
MIN_STEM_CHARS = 4
# Words this short are their own stem (plurals of 3-letter words add little and cost a lot).
MIN_WORD_CHARS = 4
# ISO 639-1 code (as a language identifier names it) -> Snowball stemmer: every language the
# snowballstemmer 3.1 package ships (Norwegian Nynorsk shares the Norwegian stemmer).
SNOWBALL_BY_ISO = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nn": "norwegian",
    "fa": "persian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
# The stemmers of a query parsed without an index (and of words no index language stems).
DEFAULT_LATIN = "english"
DEFAULT_CYRILLIC = "russian"
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_LATIN_WORD = re.compile("^[a-z]+$")
_CYRILLIC_WORD = re.compile("^[\u0400-\u04ff]+$")
_LETTERS = re.compile(r"^[^\W\d_]+$")


def snowball(language: str) -> Any | None:
    """The Snowball stemmer of `language` (a snowballstemmer name), None when unavailable."""
    return _stemmer(language)


def default_languages(word: str) -> tuple[str, ...]:
    """The stemmers of a word when the index names none: English for Latin, Russian for
    Cyrillic."""
    if _CYRILLIC_WORD.match(word):
        return (DEFAULT_CYRILLIC,)
    return (DEFAULT_LATIN,) if _LATIN_WORD.match(word) else ()


@lru_cache(maxsize=len(set(SNOWBALL_BY_ISO.values())))
def _stemmer(language: str) -> Any | None:
    try:
        import snowballstemmer
    except ImportError:
        log.warning("snowballstemmer is not installed: no stemming (pip install snowballstemmer)")
        return None
    try:
        return snowballstemmer.stemmer(language)
    except KeyError:  # an older package without this language
        return None


@lru_cache(maxsize=4096)
def stem(word: str) -> str | None:
    """The default stem of a folded word: English for Latin letters, Russian for Cyrillic."""
    if _LATIN_WORD.match(word):
        return stem_in(word, (DEFAULT_LATIN,))
    if _CYRILLIC_WORD.match(word):
        return stem_in(word, (DEFAULT_CYRILLIC,))
    return None


@lru_cache(maxsize=8192)
def stem_in(word: str, languages: tuple[str, ...], marked: str = "") -> str | None:
    """The shortest Snowball stem of folded `word` among `languages`, as a prefix of the word,
    or None when none shortens it usefully. `marked` is the word with its marks (the stemmers
    know their languages' letters: canciones → cancion, not cancione)."""
    if len(word) < MIN_WORD_CHARS or not _LETTERS.match(word):
        return None
    found: list[str] = []
    for language in languages:
        stemmer = _stemmer(language)
        if stemmer is None:
            continue
        result = fold(stemmer.stemWord(marked or word))
        if not word.startswith(result):  # "happy" → "happi": keep the shared prefix "happ"
            result = os.path.commonprefix([word, result])
        if result != word and len(result) >= MIN_STEM_CHARS:
            found.append(result)
    return min(found, key=len) if found else None


def snowball_languages(iso_codes: Iterable[str]) -> tuple[str, ...]:
    """The Snowball stemmers of these languages (codes without one are left out), in order."""
    names = (SNOWBALL_BY_ISO.get(code) for code in iso_codes)
    return tuple(dict.fromkeys(n for n in names if n))


def is_cyrillic(text: str) -> bool:
    return bool(_CYRILLIC.search(text))
