"""One normalisation for documents and queries, so both sides of every match agree.

`clean_text` keeps text readable (it is what we store and show); `fold` is the matching form
written to the full-text index and applied to queries. It folds what people do not tell apart
when they type: compatibility forms (the ﬁ ligature, full- and halfwidth letters), case, and
the marks of Latin and Greek letters (café = cafe, Straße = strasse). Marks that make another
letter elsewhere stay: Cyrillic й, Japanese voiced kana, Thai vowels.
"""

from __future__ import annotations

import re
import unicodedata

from helpers.text import cjk

# Zero-width and bidi-control characters that split words invisibly (copy-paste from PDFs, RTL
# overrides in hostile names); they never carry meaning for search.
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad\u202a-\u202e\u2066-\u2069]")
# Thai SARA AM is often typed as NIKHAHIT + SARA AA; both render the same, so fold to U+0E33.
_SARA_AM_SPLIT = re.compile("\u0e4d\u0e32")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_THAI_DIGITS = str.maketrans("๐๑๒๓๔๕๖๗๘๙", "0123456789")
_THAI_DIGIT = re.compile("[\u0e50-\u0e59]")
# NFKC turns the spacing kana voiced marks into a space plus a combining mark; put them back.
_SPACED_VOICED = re.compile(" ([\u3099\u309a])")
_VOICED_SPACING = {"\u3099": "\u309b", "\u309a": "\u309c"}
# Letters whose marks people leave out when typing: Latin and Greek (Cyrillic й and ё → е,
# kana, Thai and Indic marks make other letters and are kept).
_MARKED_RANGES = ((0x00C0, 0x024F), (0x0370, 0x03FF), (0x1E00, 0x1EFF), (0x1F00, 0x1FFF))
# A combining mark left after a Latin or Greek letter (NFC has no precomposed form for it).
_LOOSE_MARKS = re.compile(
    "(?<=[a-z\u00c0-\u024f\u0370-\u03ff\u1e00-\u1eff\u1f00-\u1fff])[\u0300-\u036f]+"
)
# Letters with no decomposition that are typed as their base letters (ß as ss, æ as ae, the
# stroke letters as the plain letter, final sigma as sigma).
_UNMARKED_SPELLING = {
    "ß": "ss",
    "æ": "ae",
    "œ": "oe",
    "ø": "o",
    "ł": "l",
    "đ": "d",
    "ħ": "h",
    "ı": "i",
    "ŧ": "t",
    "ς": "σ",
}


def _mark_free_table() -> dict[int, str]:
    """Each precomposed Latin or Greek letter with marks → its base letter."""
    table: dict[int, str] = {}
    for low, high in _MARKED_RANGES:
        for code in range(low, high + 1):
            parts = unicodedata.normalize("NFD", chr(code))
            if len(parts) > 1 and all(unicodedata.combining(ch) for ch in parts[1:]):
                table[code] = parts[0]
    table.update((ord(k), v) for k, v in _UNMARKED_SPELLING.items())
    return table


_MARK_FREE = _mark_free_table()
# Runs of those letters: a scan in C and a map of the few letters found. str.translate looks
# every character up in Python, 3-4x the rest of fold on mostly-ASCII Latin text.
_MARKED_RUN = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_MARK_FREE)) + "]+")
_COMBINING = re.compile("[\u0300-\u036f]")
# A Latin word or a number written against CJK text (ＵＳＢ３．０に対応, USB를) is a word of its
# own: a space between them lets the word index see it (the trigram and bigram indexes do not
# care, and a CJK phrase is looked for with and without spaces).
_LATIN_OR_DIGIT = "0-9a-z\u00c0-\u024f"
_GLUED = re.compile(
    f"(?<=[{cjk.CJK_CHARS}])(?=[{_LATIN_OR_DIGIT}])|(?<=[{_LATIN_OR_DIGIT}])(?=[{cjk.CJK_CHARS}])"
)


def clean_text(text: str) -> str:
    """NFC, SARA AM, no invisible or control characters, `\\r\\n` → `\\n`."""
    if text.isascii():  # NFC, SARA AM and the invisible characters change no ASCII text
        return _CONTROL.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = unicodedata.normalize("NFC", text)
    text = _SARA_AM_SPLIT.sub("\u0e33", text)
    text = _INVISIBLE.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(" ", text)


def fold(text: str) -> str:
    """Matching form: the marked form (`fold_marked`) without Latin and Greek marks."""
    if text.isascii():  # NFKC, the marks and the maps change no ASCII text but its case
        return clean_text(text).lower()
    text = _MARKED_RUN.sub(_unmarked, fold_marked(text))
    if _COMBINING.search(text):
        text = _LOOSE_MARKS.sub("", text)
    if cjk.has_cjk(text):
        text = _GLUED.sub(" ", text)
    return text


def fold_marked(text: str) -> str:
    """Clean, NFKC (Thai SARA AM and kana voiced marks kept whole), case-folded, ё→е, Thai
    digits → Arabic digits; the marks of letters are kept (a query with marks prefers them)."""
    if text.isascii():
        return clean_text(text).lower()
    text = compatible(clean_text(text)).lower()
    if "ё" in text:  # Cyrillic ё is written as е in most Russian text (lower() left no Ё)
        text = text.replace("ё", "е")
    if _THAI_DIGIT.search(text):
        text = text.translate(_THAI_DIGITS)
    return text


def _unmarked(run: re.Match[str]) -> str:
    return run.group().translate(_MARK_FREE)


def compatible(text: str) -> str:
    """NFKC (ﬁ → fi, ＡＢＣ → ABC, ﾃｽﾄ → テスト) of cleaned text, keeping Thai SARA AM and the
    spacing kana voiced marks whole; case is kept."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", text)
    if "\u0e4d" in text:  # NFKC splits SARA AM, which clean_text joined on purpose
        text = _SARA_AM_SPLIT.sub("\u0e33", text)
    if " \u3099" in text or " \u309a" in text:
        text = _SPACED_VOICED.sub(lambda m: _VOICED_SPACING[m.group(1)], text)
    return text


def has_foldable_marks(text: str) -> bool:
    """Whether fold() drops marks (or respells letters) of this folded-with-marks text."""
    return not text.isascii() and fold(text) != text


def is_thai(ch: str) -> bool:
    return "\u0e00" <= ch <= "\u0e7f"


def has_thai(text: str) -> bool:
    return any(is_thai(ch) for ch in text)
