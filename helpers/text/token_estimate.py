"""Upper estimate of XLM-R SentencePiece tokens, without the tokenizer.

The chunker runs in the sync process, where sentencepiece may not be imported (only
semantic_worker.py loads it), yet every retrieval child must fit the encoder's 128-token window.
SentencePiece never lets a piece cross whitespace, and rarely a change of character class
(letters to digits or punctuation, lower case to a capital, one script to another; such a merge
only lowers the count). So the estimate adds up runs of one class, each at least one piece.
Letter runs that read as a word of a language (the whole word, with vowels) split into long
pieces; the runs of code identifiers, paths, hex and abbreviations are not in the vocabulary and
split into short ones.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

WORD_CACHE_SIZE = 1 << 16  # words repeat (Zipf): the cache halves chunking time
CACHED_WORD_MAX_CHARS = 64  # longer words (base64, URLs) rarely repeat and would pin memory

# Case-split runs for the alphabets with case: "HTTPServer" -> HTTP, Server; "ioList" -> io, List.
_LATIN_UPPER = "A-Z\u00c0-\u00d6\u00d8-\u00de"
_LATIN_LOWER = "a-z\u00df-\u00f6\u00f8-\u00ff\u0100-\u024f\u1e00-\u1eff"
_CYRILLIC_UPPER = "\u0400-\u042f"
_CYRILLIC_LOWER = "\u0430-\u045f\u0460-\u052f"


def _cased(upper: str, lower: str) -> str:
    return rf"[{upper}]+(?=[{upper}][{lower}])|[{upper}]?[{lower}]+|[{upper}]+"


_RUN = re.compile(
    r"(?P<digit>[0-9]+)"
    r"|(?P<other_digit>\d+)"
    rf"|(?P<latin>{_cased(_LATIN_UPPER, _LATIN_LOWER)})"
    rf"|(?P<cyrillic>{_cased(_CYRILLIC_UPPER, _CYRILLIC_LOWER)})"
    r"|(?P<thai>[\u0e00-\u0e7f]+)"
    r"|(?P<cjk>[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff])"
    r"|(?P<letters>[^\W\d_]+)"
    r"|(?P<rule>(?P<rule_char>[-=_.*~])(?P=rule_char){2,})"  # "---", "====", "....."
    r"|(?P<symbol>\S)"
)
# A word of prose: one run of letters, with at most quotes and brackets before it and sentence
# punctuation after it. "fflush()", "GNU/Linux", "apt-get" and "ioList" are not.
_PLAIN_WORD = re.compile(r"[(\[{\"'«„“‘¿¡*]*[^\W\d_]+[)\]}\"'»“”’.,;:!?…*%]*")
# Symbols with a word-start piece of their own ("▁(", "▁%", "▁/"): leading a word they cost
# nothing beyond the word start. Others ("," "." "…", emoji) follow a lone "▁" piece.
JOINS_WORD_START = frozenset("!\"#$%&'()*+-/:;<=>?@[]^_`{}~«»“”„‘—–•§")
_VOWELS = frozenset("aeiouyàáâãäåæèéêëìíîïòóôõöøùúûüýÿаеёиоуыэюяєіїў")
# Characters per piece of a Latin or Cyrillic run (a run costs at least one piece, see
# _word_tokens). Measured on the calibration corpus (English, Russian, German, French UI strings,
# Python sources, man pages): a whole word with vowels, 3.5-4.5 letters per piece; a word without
# vowels ("dpkg", "lrwxrwxrwx"), 1.7; a part of an identifier or path ("rwlock" in
# "pthread_rwlock_init"), 2.6-3.4 with vowels and 1.8 without (base64, hex, "dxb6").
WORD_CHARS = {"latin": 4, "cyrillic": 3}
VOWELLESS_WORD_CHARS = 1
PART_CHARS = 2
VOWELLESS_PART_CHARS = 1
CHARS_PER_TOKEN = {
    "caps": 2,  # all-capital runs (acronyms, constants) split into short pieces
    "digit": 2,  # numbers split into pieces of 1-3 digits
    "other_digit": 1,  # Thai, Arabic-Indic digits: mostly one piece each
    "thai": 2,  # a rare Thai word alone: 2 characters per piece, the word start included
    "letters": 2,  # other alphabets: not calibrated, kept dense
    "cjk": 1,
    "rule": 2,  # repeated - = _ . * ~ have pieces of 2-10 characters
    "symbol": 1,  # punctuation, symbols, emoji: one piece each ("|||" and '"""' too)
}


def estimate_tokens(text: str) -> int:
    """Upper estimate of the model pieces of `text` (prompt and special tokens excluded)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)  # the tokenizer's normalisation: "ﬃ" is 3
    return sum(
        _cached_word_tokens(word) if len(word) <= CACHED_WORD_MAX_CHARS else _word_tokens(word)
        for word in text.split()
    )


def _word_tokens(word: str) -> int:
    """One piece for the word start, then each run adds its share: the first run's share
    includes that piece (rounded down), a later run starts pieces of its own (rounded up)."""
    runs = [(m.lastgroup or "symbol", m.group()) for m in _RUN.finditer(word)]
    letter_runs = 0
    for kind, _ in runs:
        if kind not in _NOT_LETTERS:
            letter_runs += 1
    plain = letter_runs == 1 and _PLAIN_WORD.fullmatch(word) is not None
    # A combining mark cannot join the word-start piece: OCR'd Thai ("ห ั ว") has such words.
    total = 1 if word.isascii() or not unicodedata.category(word[0]).startswith("M") else 2
    kind, run = runs[0]
    if kind == "symbol":
        total += 0 if run in JOINS_WORD_START else 1
    else:
        total += len(run) // _chars_per_token(kind, run, plain=plain)
    for kind, run in runs[1:]:
        if kind == "symbol":
            total += len(run)  # one piece each (a symbol run is one character)
        else:
            total += -(-len(run) // _chars_per_token(kind, run, plain=plain))
    return total


_NOT_LETTERS = frozenset({"symbol", "rule"})


_cached_word_tokens = lru_cache(maxsize=WORD_CACHE_SIZE)(_word_tokens)


def _chars_per_token(kind: str, run: str, *, plain: bool) -> int:
    if kind not in WORD_CHARS:
        return CHARS_PER_TOKEN[kind]
    if len(run) > 1 and run.isupper():
        return CHARS_PER_TOKEN["caps"]
    if len(run) > 1 and _VOWELS.isdisjoint(run.lower()):
        return VOWELLESS_WORD_CHARS if plain else VOWELLESS_PART_CHARS
    return WORD_CHARS[kind] if plain else PART_CHARS
