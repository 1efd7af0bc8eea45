"""Which languages a set of texts is written in (py3langid: the langid.py model, shipped in the
wheel, 142 languages; no download).

Used on a sample of an index's chunks to pick the query stemmers (helpers.lexical.
index_terms) and on the lines of a retrieval unit to stem each in its own language
(helpers.text.unit_tokens), never on a query: a two-word query is too short to identify.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

# Characters of each text handed to the identifier: a chunk's first lines tell its language,
# and the identifier's cost grows with the length.
SAMPLE_CHARS = 1000
# Restricted identifiers kept (identify_among): the sets of languages a folder's pages mix are
# few; each costs a copy of its columns of the model (tens of kB).
RESTRICTED_MAX = 64
_LOCK = threading.Lock()
_IDENTIFIER: list[Any] = []  # [] = not loaded yet, [None] = py3langid is missing
_RESTRICTED: dict[frozenset[str], Any] = {}


def _identifier() -> Any | None:
    """The model, loaded once per process (~1 s: bench/notes/h6-fold.md)."""
    with _LOCK:
        if not _IDENTIFIER:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier
            except ImportError:
                log.warning("py3langid is not installed: query stems in English and Russian only")
                _IDENTIFIER.append(None)
            else:
                _IDENTIFIER.append(LanguageIdentifier.from_model_file(MODEL_FILE))
        return _IDENTIFIER[0]


def languages_of(texts: Iterable[str]) -> Counter[str]:
    """ISO 639-1 code -> how many of `texts` are in that language (texts with no letters are
    not counted); empty when no identifier is installed."""
    counts: Counter[str] = Counter()
    if _identifier() is None:
        return counts
    for text in texts:
        code = identify(text[:SAMPLE_CHARS])
        if code:
            counts[code] += 1
    return counts


def identify(text: str) -> str:
    """The ISO 639-1 code of `text`'s language ('' when it has no letters or no identifier is
    installed)."""
    identifier = _identifier()
    if identifier is None or not any(ch.isalpha() for ch in text):
        return ""
    return str(identifier.classify(text)[0])


def identify_among(text: str, codes: Iterable[str]) -> str:
    """The most likely of `codes` (ISO 639-1, as identify names them) for `text`: a short line is
    told apart reliably among the two or three languages around it, not among all 142 (a
    one-word heading in Swedish reads as Danish). '' when no identifier is installed."""
    allowed = frozenset(codes)
    if len(allowed) == 1:
        return next(iter(allowed))
    identifier = _restricted(allowed)
    return "" if identifier is None else str(identifier.classify(text)[0])


def _restricted(codes: frozenset[str]) -> Any | None:
    """An identifier restricted to `codes` (py3langid's set_languages, on a copy sharing the
    model's tables), one per set of codes: classify on it is the best of those codes, at the
    cost of one classify over all languages (rank sorts all 142 for every line)."""
    full = _identifier()
    if full is None or not codes:
        return None
    with _LOCK:
        restricted = _RESTRICTED.get(codes)
        if restricted is None:
            if len(_RESTRICTED) >= RESTRICTED_MAX:
                _RESTRICTED.clear()
            restricted = copy.copy(full)
            restricted.set_languages(sorted(codes))
            _RESTRICTED[codes] = restricted
        return restricted
