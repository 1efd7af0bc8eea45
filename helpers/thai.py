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
