"""fold() gives, on any text, what its definition says: NFKC of the cleaned text (Thai SARA AM
and the kana voiced marks kept), lower case, ё → е, Thai digits → 0-9, then the marks of Latin
and Greek letters dropped. The reference below is that definition written out step by step with
str.translate; fold itself takes shortcuts (guards and runs) that must not change a character."""

from __future__ import annotations

import random

from helpers.text import normalize
from helpers.text.normalize import clean_text, compatible, fold


def _reference_fold(text: str) -> str:
    marked = compatible(clean_text(text)).lower()
    marked = marked.translate({ord("ё"): "е", ord("Ё"): "е"}).translate(normalize._THAI_DIGITS)
    text = marked.translate(normalize._MARK_FREE)
    if normalize._COMBINING.search(text):
        text = normalize._LOOSE_MARKS.sub("", text)
    if normalize.cjk.has_cjk(text):
        text = normalize._GLUED.sub(" ", text)
    return text


# Characters people's documents mix: ASCII, Latin with marks, Greek, Cyrillic (ё, й), Thai and
# its digits, kana (voiced and halfwidth), CJK, ligatures, fullwidth letters, combining marks,
# invisible characters.
_ALPHABET = (
    "abcXYZ 019.,-\n"
    "áÁéÉíñÑöÖüÜßæÆœøŁłđħıŧčŘžąęśźżőűåÅ"
    "αάΑΆςσΣ"
    "ёЁйЙжЖ"
    "กขำ\u0e4d\u0e32๐๑๙"
    "かがパﾃｽﾄﾞ\u3099\u309a"
    "漢字社"
    "ﬁﬂＡＢＣ１"
    "\u0301\u0308\u0327"
    "\u200b\u00ad\ufeff"
)


def test_fold_matches_its_definition_on_random_mixed_text() -> None:
    rng = random.Random(29)
    for _ in range(20_000):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40)))
        assert fold(text) == _reference_fold(text), repr(text)


def test_fold_of_real_phrases() -> None:
    assert fold("Canción del NIÑO") == "cancion del nino"
    assert fold("Ёлка и ЁЖ") == "елка и еж"
    assert fold("Straße ﬁle ＡＢＣ社") == "strasse file abc 社"
    assert fold("ปี ๒๕๖๗") == "ปี 2567"


# sha256 of fold() over 5,000 random strings of _ALPHABET (seed 12). Rows an index marks
# FOLDED_MARK (migration 12) were given to FTS5 as fold(text) of the program that wrote them and
# are deleted with fold(text) of the program that deletes them: a change of fold's output needs
# a migration that rewrites those rows first (or rebuilds chunks_fts, chunks_words and
# chunks_ocr_fts), not a chunk-scheme bump alone. Then update this fingerprint.
FOLD_FINGERPRINT = "807baddd50a94afe59da39d8f211759b17cd613889d762e6b9cf8563611dd8fd"


def test_folds_output_is_pinned_because_marked_rows_are_deleted_by_it() -> None:
    import hashlib

    rng = random.Random(12)
    texts = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(5000)]
    digest = hashlib.sha256("\x00".join(map(fold, texts)).encode()).hexdigest()
    assert digest == FOLD_FINGERPRINT, "fold() changed: see the comment on FOLD_FINGERPRINT"
