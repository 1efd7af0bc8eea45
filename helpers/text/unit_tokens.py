"""The tokens of a retrieval unit (a page of a paged file, else a whole document) for the
unit-level BM25 table (migration 11, helpers.store.units), and of a query searched there.

The pre-tokenisation of textbook BM25 (bench/textbook_bm25.py), so that the units channel ranks
as it does: the matching form of every lexical channel with its marks (fold_marked: NFKC, case,
ё/е), words of letters and digits; runs of Chinese, Japanese and Korean as overlapping character
bigrams (a one-character run as itself); Thai runs segmented into words (helpers.text.thai);
every other word Snowball-stemmed, then folded (marks of Latin and Greek letters dropped). A
word is stemmed in the language of its line (line_languages: a help page translated in part has
its headings and some paragraphs in Swedish, its syntax notes in English, and each is stemmed as
what it is, as textbook BM25 stems a page in the language it is searched in; bench/notes/
seg-stem.md) when it is written in that language's script, else in its script's default
language (English for Latin, Russian for Cyrillic): the English words of a Russian man page and
the Russian words of a line identified as English get the same stems as everywhere else, so no
unstemmed form is rare enough to outweigh the rest (bench/notes/u-lex.md, "Mixed languages"). A
query is tokenised once per language of the index's units.

The table is contentless: a unit's row is deleted with these same tokens recomputed from its
stored text and its stored line languages (never identified again: a new identifier release
must not change what a delete computes), so any change here must bump UNIT_TOKENS_VERSION (the
index rebuilds the table when its stored version differs).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from itertools import chain, groupby

from helpers.text import cjk, language_id, stemming, thai
from helpers.text.normalize import fold, fold_marked

# Bumped whenever unit_tokens(), line_languages() or the unit boundaries change: an index whose
# meta row 'unit_tokens_version' differs rebuilds its unit table (a contentless row can only be
# deleted with the exact tokens it was written with).
UNIT_TOKENS_VERSION = 3
# A line of at least this many characters is identified on its own; a shorter one (a heading, a
# label, a syntax line) among the languages of the unit's longer lines, where two or three
# candidates tell even one word apart.
LINE_MIN_CHARS = 40
# A language takes part in a unit when its long lines hold at least this share of the unit's
# identified characters: below it are the identifier's slips between close languages (a Spanish
# line read as Galician), which would stem those lines unlike the rest. This value and
# LINE_MIN_CHARS by leave-one-set-out over the keyword sets (bench/notes/seg-stem.md).
LINE_LANGUAGE_MIN_SHARE = 0.1
# Characters of a unit without a long line handed to the identifier at once (as
# language_id.SAMPLE_CHARS, its cost grows with the length).
LANGUAGE_SAMPLE_CHARS = 2000
# Identified lines kept per process (with the languages they were told apart among): a line
# is a few hundred bytes, an identifier call tens of microseconds.
LINE_CACHE_MAX = 100_000
# Distinct (language, token) forms kept per process: the vocabulary of a large folder; a Snowball
# stem costs microseconds (tens in pure Python), a dict lookup well under one.
STEM_CACHE_MAX = 500_000
_CJK_RUN = f"[{cjk.CJK_CHARS}]+"
_THAI_RUN = thai.THAI_RUN.pattern
_TOKEN = re.compile(f"{_CJK_RUN}|{_THAI_RUN}|[^\\W_\u0e00-\u0e7f{cjk.CJK_CHARS}]+")
_CJK = re.compile(_CJK_RUN)
_FORMS: dict[str, dict[str, tuple[str, ...]]] = {}  # language -> token -> tokens
_LINE_CODES: dict[tuple[str, tuple[str, ...]], str] = {}  # (line, among) -> ISO code
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


@dataclass(frozen=True)
class UnitLanguages:
    """The stemming language of a unit (the language of most of its text: the index's query
    languages are counted by it) and of each of its lines (text.split("\\n")); Snowball names,
    '' = none."""

    main: str
    lines: tuple[str, ...]


def line_languages(text: str) -> UnitLanguages:
    """The Snowball language of each line of `text`: its long lines identified on their own, the
    most common of their languages kept and those holding LINE_LANGUAGE_MIN_SHARE of their
    characters, then every line given the likeliest of those (one language kept: every line
    has it, no more identifier calls)."""
    lines = text.split("\n")
    found = [
        (i, code)
        for i, line in enumerate(lines)
        if len(line) >= LINE_MIN_CHARS and (code := _line_code(line, ()))
    ]
    if not found:
        code = language_id.identify(text[:LANGUAGE_SAMPLE_CHARS])
        language = stemming.SNOWBALL_BY_ISO.get(code, "")
        return UnitLanguages(language, (language,) * len(lines))
    weight: Counter[str] = Counter()
    for i, code in found:
        weight[code] += len(lines[i])
    total = sum(weight.values())
    ranked = sorted(weight, key=lambda code: (-weight[code], code))
    main = ranked[0]  # kept even under the share: lines of many languages, none of them most
    kept = [main] + [code for code in ranked[1:] if weight[code] >= LINE_LANGUAGE_MIN_SHARE * total]
    if len(kept) == 1:
        codes = [main] * len(lines)
    else:
        own = dict(found)
        among = tuple(kept)
        codes = [
            own[i] if own.get(i) in kept else _line_code(line, among) or main
            for i, line in enumerate(lines)
        ]
    snowball = stemming.SNOWBALL_BY_ISO
    return UnitLanguages(snowball.get(main, ""), tuple(snowball.get(c, "") for c in codes))


def _line_code(line: str, among: tuple[str, ...]) -> str:
    """language_id.identify of a line (`among` empty), else identify_among those codes; cached:
    a folder's pages repeat many lines (a help's "how to get here" lines, its code samples)."""
    key = (line, among)
    code = _LINE_CODES.get(key)
    if code is None:
        if len(_LINE_CODES) >= LINE_CACHE_MAX:
            _LINE_CODES.clear()
        identified = (
            language_id.identify_among(line, among) if among else language_id.identify(line)
        )
        code = _LINE_CODES[key] = identified
    return code


def encode_runs(languages: UnitLanguages) -> str:
    """The line languages as stored with the unit: '' when every line has the unit's language,
    else runs 'language*lines' apart by spaces ('-' = none)."""
    if all(language == languages.main for language in languages.lines):
        return ""
    return " ".join(
        f"{language or '-'}*{sum(1 for _ in run)}" for language, run in groupby(languages.lines)
    )


def decode_runs(main: str, runs: str, line_count: int) -> UnitLanguages:
    """The UnitLanguages a unit was stored with (encode_runs); lines past the runs, if any, in
    the unit's language."""
    if not runs:
        return UnitLanguages(main, (main,) * line_count)
    lines: list[str] = []
    for run in runs.split(" "):
        language, _, count = run.rpartition("*")
        lines.extend([("" if language == "-" else language)] * int(count))
    lines = (lines + [main] * line_count)[:line_count]
    return UnitLanguages(main, tuple(lines))


def text_tokens(text: str, languages: UnitLanguages) -> list[str]:
    """unit_tokens of each line of `text` in its language (consecutive lines of one language
    tokenised together)."""
    if all(language == languages.main for language in languages.lines):
        return unit_tokens(text, languages.main)
    lines = text.split("\n")
    tokens: list[str] = []
    start = 0
    for language, run in groupby(languages.lines):
        count = sum(1 for _ in run)
        tokens.extend(unit_tokens("\n".join(lines[start : start + count]), language))
        start += count
    return tokens


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
