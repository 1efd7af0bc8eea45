"""One normalisation for documents and queries, so both sides of every match agree.

`clean_text` keeps text readable (it is what we store and show); `fold` is the matching form
written to the full-text index and applied to queries.
"""

from __future__ import annotations

import re
import unicodedata

# Zero-width and bidi-control characters that split words invisibly (copy-paste from PDFs, RTL
# overrides in hostile names); they never carry meaning for search.
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad\u202a-\u202e\u2066-\u2069]")
# Thai SARA AM is often typed as NIKHAHIT + SARA AA; both render the same, so fold to U+0E33.
_SARA_AM_SPLIT = re.compile("\u0e4d\u0e32")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_THAI_DIGITS = str.maketrans("๐๑๒๓๔๕๖๗๘๙", "0123456789")
# Cyrillic ё is written as е in most Russian text; fold both to е for matching.
_FOLD_MAP = str.maketrans({"ё": "е", "Ё": "е"})


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
    """Matching form: clean, case-folded, ё→е, Thai digits → Arabic digits."""
    if text.isascii():  # neither map has an ASCII key
        return clean_text(text).lower()
    return clean_text(text).lower().translate(_FOLD_MAP).translate(_THAI_DIGITS)


def is_thai(ch: str) -> bool:
    return "\u0e00" <= ch <= "\u0e7f"


def has_thai(text: str) -> bool:
    return any(is_thai(ch) for ch in text)
