"""Which languages a set of texts is written in (py3langid: the langid.py model, shipped in the
wheel, 142 languages; no download).

Used on a sample of an index's chunks to pick the query stemmers (helpers.lexical.
index_terms), never on a query: a two-word query is too short to identify.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

# Characters of each text handed to the identifier: a chunk's first lines tell its language,
# and the identifier's cost grows with the length.
SAMPLE_CHARS = 1000
_LOCK = threading.Lock()
_IDENTIFIER: list[Any] = []  # [] = not loaded yet, [None] = py3langid is missing


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
    identifier = _identifier()
    counts: Counter[str] = Counter()
    if identifier is None:
        return counts
    for text in texts:
        piece = text[:SAMPLE_CHARS]
        if any(ch.isalpha() for ch in piece):
            counts[identifier.classify(piece)[0]] += 1
    return counts
