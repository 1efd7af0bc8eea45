"""Light stemming of query words (English, Russian) with the Snowball stemmers.

Only queries are stemmed: the word channel searches the stem as a prefix (`отчет*` finds отчёт,
отчета, отчетов) and the trigram channel as a substring, so the index never depends on the
stemmer. `snowballstemmer` is pure Python, maintained by the Snowball project and already a
Sphinx dependency; without it stemming is skipped (logged once) and search still works.
"""

from __future__ import annotations

import logging
import os
import re
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)

# Stems shorter than this expand to too many words as a prefix ("им*" from "имён").
MIN_STEM_CHARS = 4
# Words this short are their own stem (plurals of 3-letter words add little and cost a lot).
MIN_WORD_CHARS = 4
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_LATIN_WORD = re.compile("^[a-z]+$")
_CYRILLIC_WORD = re.compile("^[\u0400-\u04ff]+$")


@lru_cache(maxsize=2)
def _stemmer(language: str) -> Any | None:
    try:
        import snowballstemmer
    except ImportError:
        log.warning("snowballstemmer is not installed: no stemming (pip install snowballstemmer)")
        return None
    return snowballstemmer.stemmer(language)


@lru_cache(maxsize=4096)
def stem(word: str) -> str | None:
    """The Snowball stem of a folded English or Russian word, or None when it adds nothing."""
    if len(word) < MIN_WORD_CHARS:
        return None
    if _LATIN_WORD.match(word):
        language = "english"
    elif _CYRILLIC_WORD.match(word):
        language = "russian"
    else:
        return None
    stemmer = _stemmer(language)
    if stemmer is None:
        return None
    result = stemmer.stemWord(word)
    if not word.startswith(result):  # "happy" → "happi": keep the shared prefix "happ"
        result = os.path.commonprefix([word, result])
    if result == word or len(result) < MIN_STEM_CHARS:
        return None
    return result


def is_cyrillic(text: str) -> bool:
    return bool(_CYRILLIC.search(text))
