"""OCR engine output to index text: the spaces an engine puts between Thai characters removed,
then the index's own cleaning. Shared by the tesseract engine and the vision-model corrector."""

from __future__ import annotations

import re

from helpers.text.normalize import clean_text

# Thai characters that can never start a word: a space before them was inserted by the engine.
_THAI_COMBINING = "\u0e31\u0e34-\u0e3a\u0e47-\u0e4e"
_THAI_LEADING_VOWELS = "\u0e40-\u0e44"  # เ แ โ ใ ไ are always followed by their consonant
_SPACE_BEFORE_MARK = re.compile(f"(?<=[\u0e01-\u0e4f]) +(?=[{_THAI_COMBINING}])")
_SPACE_AFTER_LEADING_VOWEL = re.compile(f"(?<=[{_THAI_LEADING_VOWELS}]) +(?=[\u0e01-\u0e2e])")
# A run of Thai tokens joined by single spaces; real Thai puts spaces only between phrases.
_THAI_TOKEN_RUN = re.compile("[\u0e01-\u0e5b]+(?: [\u0e01-\u0e5b]+)+")
# Letter-spaced output ("ป ร ะ เท ศ") has tokens of one or two characters; phrases are longer.
SPACED_TOKEN_MAX_CHARS = 2
SPACED_RUN_SHARE = 0.5  # join a run when at least this share of its tokens are that short


def postprocess(raw: str) -> str:
    """Engine output to index text: Thai spacing repaired, then `clean_text` as the index does."""
    lines = [join_spaced_thai(line).rstrip() for line in clean_text(raw).split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)  # tesseract separates blocks by one blank line
    return clean_text(text).strip()


def join_spaced_thai(line: str) -> str:
    """Remove spaces the engine put between Thai characters; keep real phrase spaces."""
    line = _SPACE_BEFORE_MARK.sub("", line)
    line = _SPACE_AFTER_LEADING_VOWEL.sub("", line)
    return _THAI_TOKEN_RUN.sub(_join_if_letter_spaced, line)


def _join_if_letter_spaced(match: re.Match[str]) -> str:
    tokens = match.group(0).split(" ")
    short = sum(1 for token in tokens if len(token) <= SPACED_TOKEN_MAX_CHARS)
    return "".join(tokens) if short >= SPACED_RUN_SHARE * len(tokens) else match.group(0)
