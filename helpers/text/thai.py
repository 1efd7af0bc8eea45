"""Thai word segmentation through pythainlp's bundled dictionary only (never a download)."""

from __future__ import annotations

import contextlib
import io
import re
from functools import lru_cache

# Thai letters and marks (U+0E00-U+0E7F); digits are folded to Arabic before segmentation.
THAI_RUN = re.compile("[\u0e00-\u0e7f]+")
# newmm-safe bounds the worst-case time of newmm on long runs without spaces.
ENGINE = "newmm-safe"


@lru_cache(maxsize=1)
def _tokenizer():  # type: ignore[no-untyped-def]
    # Guard stdout: a pythainlp warning or failed lookup must never reach the MCP channel.
    with contextlib.redirect_stdout(io.StringIO()):
        from pythainlp.tokenize import word_tokenize
    return word_tokenize


def segment(text: str) -> list[str]:
    """Thai words of `text` (non-Thai text passes through as it is), whitespace dropped."""
    with contextlib.redirect_stdout(io.StringIO()):
        words = _tokenizer()(text, engine=ENGINE, keep_whitespace=False)
    return [w for w in words if w.strip()]


def segment_keep_spacing(text: str) -> list[str]:
    """Segments whose concatenation is exactly `text` (for cutting chunks at word boundaries)."""
    with contextlib.redirect_stdout(io.StringIO()):
        words = _tokenizer()(text, engine=ENGINE, keep_whitespace=True)
    return words if "".join(words) == text else [text]


# Common Thai spelling variants (canonical form first): loanword transliterations written several
# ways and the misspellings the Royal Society's "commonly misspelled words" lists warn about.
# A query word in any spelling also finds the others; documents are not rewritten.
SPELLING_VARIANTS: tuple[tuple[str, ...], ...] = (
    ("อีเมล", "อีเมล์", "อีเมลล์", "อี-เมล"),
    ("เว็บไซต์", "เว็บไซท์", "เวปไซต์", "เว็ปไซต์", "เว็บไซด์"),
    ("อินเทอร์เน็ต", "อินเตอร์เน็ต", "อินเตอร์เนต", "อินเทอร์เนต"),
    ("ซอฟต์แวร์", "ซอฟท์แวร์", "ซอฟแวร์"),
    ("เซิร์ฟเวอร์", "เซิฟเวอร์", "เซอร์เวอร์"),
    ("คอมพิวเตอร์", "คอมพิวเต้อร์"),
    ("แอปพลิเคชัน", "แอพพลิเคชั่น", "แอปพลิเคชั่น", "แอพพลิเคชัน"),
    ("ดาวน์โหลด", "ดาวโหลด"),
    ("อัปเดต", "อัพเดท", "อัพเดต", "อัปเดท"),
    ("เปอร์เซ็นต์", "เปอร์เซนต์", "เปอร์เซ็น"),
    ("โอกาส", "โอกาศ"),
    ("อนุญาต", "อนุญาติ"),
    ("สังเกต", "สังเกตุ"),
    ("ลายเซ็น", "ลายเซ็นต์", "ลายเซ็นท์"),
    ("คำนวณ", "คำนวน"),
    ("ปรากฏ", "ปรากฎ"),
    ("ปฏิบัติ", "ปฎิบัติ"),
    ("กฎหมาย", "กฏหมาย"),
    ("กรกฎาคม", "กรกฏาคม"),
    ("รสชาติ", "รสชาด"),
    ("ประเมิน", "ประเมิณ"),
    ("เกษียณ", "เกษียน"),
    ("อิสรภาพ", "อิสระภาพ"),
    ("โควตา", "โควต้า"),
)
_VARIANT_GROUP = {spelling: group for group in SPELLING_VARIANTS for spelling in group}
# Longest first, so a spelling is never cut short by one of its prefixes (ลายเซ็น inside ลายเซ็นต์).
_VARIANT_RE = re.compile("|".join(sorted(map(re.escape, _VARIANT_GROUP), key=len, reverse=True)))


def canonical_spelling(text: str) -> tuple[str, dict[str, tuple[str, ...]]]:
    """`text` with every known variant spelling replaced by its canonical form, and for each
    canonical form found, all its spellings (so the segmenter sees the dictionary word)."""
    found: dict[str, tuple[str, ...]] = {}

    def replace(match: re.Match[str]) -> str:
        group = _VARIANT_GROUP[match.group(0)]
        found[group[0]] = group
        return group[0]

    return _VARIANT_RE.sub(replace, text), found


# Longest dictionary word tried inside a compound (the bundled dictionary's words are shorter).
DECOMPOUND_MAX_PIECE = 20
DECOMPOUND_MIN_CHARS = 5  # shorter words are single morphemes or two-letter pairs


@lru_cache(maxsize=1)
def _dictionary() -> frozenset[str]:
    with contextlib.redirect_stdout(io.StringIO()):
        from pythainlp.corpus import thai_words  # the bundled word list: read, never downloaded

        return frozenset(thai_words())


@lru_cache(maxsize=4096)
def decompound(word: str) -> tuple[str, ...]:
    """A dictionary compound cut into the fewest dictionary words ("ความเป็นทาส" → ความ, เป็น,
    ทาส), or () when the word is not made of smaller dictionary words."""
    n = len(word)
    if n < DECOMPOUND_MIN_CHARS or not THAI_RUN.fullmatch(word):
        return ()
    words = _dictionary()
    best: list[tuple[str, ...] | None] = [None] * (n + 1)
    best[0] = ()
    for end in range(1, n + 1):
        for start in range(max(0, end - DECOMPOUND_MAX_PIECE), end):
            prefix = best[start]
            piece = word[start:end]
            if prefix is None or end - start == n or piece not in words:
                continue
            candidate = (*prefix, piece)
            current = best[end]
            if current is None or len(candidate) < len(current):
                best[end] = candidate
    return best[n] or ()


# Prefixes and function words that start countless compounds (nominalisers การ/ความ, the copula
# เป็น, the agent prefix ผู้, ...): as a compound's piece they would match half the corpus.
_FUNCTION_TEXT = "การ ความ เป็น ผู้ ที่ ของ ใน และ แห่ง ซึ่ง โดย ให้ ได้ มี ไม่ จะ ต่อ กับ แก่ อัน"
FUNCTION_PIECES = frozenset(_FUNCTION_TEXT.split())


def is_function_piece(piece: str) -> bool:
    """A compound piece made only of FUNCTION_PIECES ("ความ", "ความเป็น")."""
    rest = piece
    while rest:
        head = next((f for f in FUNCTION_PIECES if rest.startswith(f)), None)
        if head is None:
            return False
        rest = rest[len(head) :]
    return True
