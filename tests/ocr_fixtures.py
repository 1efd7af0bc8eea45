"""Real scanned-looking pages for OCR tests: text drawn with Debian's fonts, then degraded.

Reusable by other tests (scanned PDFs via `save_scanned_pdf`) and by bench/bench_ocr.py.
Fonts: `fonts-dejavu-core` (Latin, Cyrillic) and `fonts-thai-tlwg` (Thai).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from pythainlp.tokenize import word_tokenize

from helpers.text.normalize import fold, has_thai

FONT_ROOT = Path("/usr/share/fonts")
LATIN_FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "LiberationSans-Regular.ttf")
THAI_FONTS = ("Garuda.ttf", "Loma.ttf", "Waree.ttf", "Norasi.ttf", "Kinnari.ttf")
FONT_INSTALL_HINT = "apt-get install -y fonts-dejavu-core fonts-thai-tlwg"

ENGLISH_LINES = (
    "Invoice 2024-03-15 for the quarterly maintenance contract",
    "Total amount due: 1,250.00 THB within thirty days",
    "Please contact the accounting department with questions",
)
RUSSIAN_LINES = (
    "Договор поставки оборудования от 15.03.2024",
    "Общая сумма составляет 48 500 рублей без налога",
    "Оплата производится в течение десяти рабочих дней",
)
THAI_LINES = (
    "ใบแจ้งหนี้ สำหรับสัญญาบำรุงรักษา รายไตรมาส",
    "กรุณาชำระเงิน ภายในสามสิบวัน นับจากวันที่ออกเอกสาร",
    "ติดต่อฝ่ายบัญชี หากมีคำถามเพิ่มเติม",
)
MIXED_LINES = (ENGLISH_LINES[0], THAI_LINES[0], RUSSIAN_LINES[0], THAI_LINES[1])

_WORD_EDGE = re.compile(r"^[^\w\u0e00-\u0e7f]+|[^\w\u0e00-\u0e7f]+$")  # Thai marks are not \w


@cache
def find_font(names: Sequence[str]) -> Path:
    """The first installed font file among `names` (searched under /usr/share/fonts)."""
    installed = {p.name: p for p in FONT_ROOT.rglob("*.ttf")}
    for name in names:
        if name in installed:
            return installed[name]
    raise FileNotFoundError(f"none of {list(names)} under {FONT_ROOT}: {FONT_INSTALL_HINT}")


def font_for(line: str) -> Path:
    return find_font(THAI_FONTS if has_thai(line) else LATIN_FONTS)


def render_page(
    lines: Sequence[str],
    dpi: int = 200,
    font_pt: float = 12.0,
    margin_in: float = 0.4,
    width_in: float | None = None,
) -> Image.Image:
    """White 8-bit page with `lines` in black at a real point size for `dpi`; dpi is in info."""
    size_px = round(font_pt * dpi / 72)
    fonts = {line: ImageFont.truetype(str(font_for(line)), size_px) for line in lines}
    line_height = round(size_px * 1.7)  # Thai marks above and below need the room
    margin = round(margin_in * dpi)
    text_width = max((fonts[line].getbbox(line)[2] for line in lines), default=0)
    width = round(width_in * dpi) if width_in else text_width + 2 * margin
    height = line_height * len(lines) + 2 * margin
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    for row, line in enumerate(lines):
        draw.text((margin, margin + row * line_height), line, font=fonts[line], fill=0)
    page.info["dpi"] = (dpi, dpi)
    return page


def wrap_text(text: str, width_in: float, dpi: int = 200, font_pt: float = 12.0) -> list[str]:
    """Greedy wrap to a printed width, for filling whole pages; Thai breaks between words."""
    font = ImageFont.truetype(str(font_for(text)), round(font_pt * dpi / 72))
    max_px = width_in * dpi
    pieces = word_tokenize(text, engine="newmm") if has_thai(text) else re.split(r"( +)", text)
    lines: list[str] = []
    current = ""
    for piece in pieces:
        candidate = current + piece
        if current.strip() and font.getlength(candidate.rstrip()) > max_px:
            lines.append(current.strip())
            current = piece.lstrip()
        else:
            current = candidate
    if current.strip():
        lines.append(current.strip())
    return lines


def degrade(
    page: Image.Image,
    rotate_deg: float = 0.7,
    blur_radius: float = 0.6,
    noise_sigma: float = 14.0,
    jpeg_quality: int = 45,
    seed: int = 0,
) -> Image.Image:
    """A scanner's damage: skew, soft focus, sensor noise, lossy compression."""
    dpi = page.info.get("dpi", (200, 200))
    image = page.convert("L").rotate(
        rotate_deg, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255
    )
    if blur_radius:
        image = image.filter(ImageFilter.GaussianBlur(blur_radius))
    if noise_sigma:
        rng = np.random.default_rng(seed)
        pixels = np.asarray(image, dtype=np.float64)
        pixels = pixels + rng.normal(0.0, noise_sigma, pixels.shape)
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    if jpeg_quality:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=jpeg_quality)
        buffer.seek(0)
        image = Image.open(buffer)
        image.load()
    image.info["dpi"] = dpi
    return image


def save_scanned_pdf(pages: Sequence[Image.Image], path: Path, dpi: int = 200) -> Path:
    """An image-only PDF (no text layer), one page per image, as a scanner would write it."""
    first, *rest = [page.convert("L") for page in pages]
    first.save(path, format="PDF", resolution=float(dpi), save_all=True, append_images=rest)
    return path


def expected_words(text: str) -> list[str]:
    """Folded words of `text` without edge punctuation; Thai phrases split into words (newmm)."""
    words: list[str] = []
    for token in fold(text).split():
        token = _WORD_EDGE.sub("", token)
        if has_thai(token):
            words.extend(w for w in word_tokenize(token, engine="newmm") if w.strip())
        elif token:
            words.append(token)
    return words


def word_recall(expected: str, got: str) -> float:
    """Share of the expected words found in the OCR text.

    Latin and Cyrillic words must appear as whole words; Thai has no spaces between words, so a
    Thai word counts when it appears anywhere in the OCR text with spaces removed.
    """
    wanted = expected_words(expected)
    if not wanted:
        return 1.0
    got_words = set(expected_words(got))
    got_joined = "".join(fold(got).split())
    found = sum(
        1 for word in wanted if (word in got_joined if has_thai(word) else word in got_words)
    )
    return found / len(wanted)
