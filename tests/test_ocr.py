"""Real tesseract on real rendered, degraded pages: recall thresholds, not exact text."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers.extract.blocks import ExtractContext, ExtractionError, OcrText
from helpers.extract.common import MAX_BLOCK_CHARS, ExtractionCancelled
from helpers.extract.image import MAX_PAGE_PIXELS, SUFFIXES, extract
from helpers.ocr.engine import (
    OcrConfig,
    OcrTimeoutError,
    TesseractOcr,
    make_ocr_function,
    ocr_status,
)
from helpers.ocr.postprocess import join_spaced_thai, postprocess
from tests.ocr_fixtures import (
    ENGLISH_LINES,
    MIXED_LINES,
    RUSSIAN_LINES,
    THAI_LINES,
    degrade,
    render_page,
    word_recall,
)

MISSING_ENGINE = OcrConfig(tesseract_cmd="/nonexistent/bin/tesseract")
# Thai loses stacked tone marks on degraded scans (ที่ -> ที); Latin and Cyrillic are near-perfect.
RECALL_FLOOR = {"eng": 0.9, "rus": 0.9, "tha": 0.75, "mixed": 0.8}
PAGES = {"eng": ENGLISH_LINES, "rus": RUSSIAN_LINES, "tha": THAI_LINES, "mixed": MIXED_LINES}
THAI_PT = 16.0  # Thai documents are set at 14-16 pt: Thai fonts run small


@pytest.fixture(scope="module")
def ocr() -> TesseractOcr:
    status = ocr_status(OcrConfig())
    assert status.available and not status.langs_missing, f"install OCR: {status.hint}"
    function = make_ocr_function(OcrConfig())
    assert isinstance(function, TesseractOcr)
    return function


def _ctx(ocr: object = None, **kwargs: object) -> ExtractContext:
    return ExtractContext(ocr=ocr, ocr_unavailable_hint=ocr_status(MISSING_ENGINE).hint, **kwargs)


def _page(key: str, seed: int = 0) -> Image.Image:
    lines = PAGES[key]
    return degrade(render_page(lines, font_pt=THAI_PT if key == "tha" else 12.0), seed=seed)


def test_status_finds_tesseract_with_english_thai_and_russian() -> None:
    status = ocr_status(OcrConfig())
    assert status.available, status.hint
    assert status.version.split(".")[0].isdigit()
    assert status.langs_available == ("eng", "tha", "rus")
    assert status.langs_missing == () and status.hint == ""


def test_missing_engine_is_reported_unavailable_with_the_apt_command() -> None:
    status = ocr_status(MISSING_ENGINE)
    assert not status.available
    assert status.version == ""
    assert status.hint == (
        "apt-get install -y tesseract-ocr tesseract-ocr-eng tesseract-ocr-tha tesseract-ocr-rus"
    )


def test_missing_engine_gives_no_ocr_function() -> None:
    assert make_ocr_function(MISSING_ENGINE) is None


def test_a_missing_language_pack_is_named_and_the_others_still_work(ocr: TesseractOcr) -> None:
    cfg = OcrConfig(langs="eng+zzz")
    status = ocr_status(cfg)
    assert status.available
    assert status.langs_available == ("eng",) and status.langs_missing == ("zzz",)
    assert status.hint == "apt-get install -y tesseract-ocr-zzz"
    function = make_ocr_function(cfg)
    assert function is not None
    result = function(render_page(ENGLISH_LINES[:1]))
    assert result.engine.endswith(" eng")
    assert word_recall(ENGLISH_LINES[0], result.text) >= RECALL_FLOOR["eng"]


def test_a_malformed_language_list_is_refused() -> None:
    with pytest.raises(ValueError, match="langs"):
        OcrConfig(langs="eng; rm -rf /")


@pytest.mark.parametrize("key", ["eng", "rus", "tha", "mixed"])
def test_degraded_pages_are_read_with_high_word_recall(ocr: TesseractOcr, key: str) -> None:
    result = ocr(_page(key))
    assert isinstance(result, OcrText)
    assert result.engine.startswith("tesseract ") and result.engine.endswith("eng+tha+rus")
    recall = word_recall("\n".join(PAGES[key]), result.text)
    assert recall >= RECALL_FLOOR[key], result.text


def test_thai_text_comes_out_unspaced_and_normalised_like_the_index(ocr: TesseractOcr) -> None:
    text = ocr(_page("tha", seed=3)).text
    assert "\u0e4d\u0e32" not in text  # NIKHAHIT + SARA AA folded to SARA AM by clean_text
    assert "สำหรับ" in text and "ชำระเงิน" in text
    # Tesseract alone spaces Thai letter by letter; we keep only phrase spaces.
    thai_tokens = [t for t in text.split() if any("\u0e01" <= c <= "\u0e2e" for c in t)]
    assert sum(len(t) <= 2 for t in thai_tokens) <= len(thai_tokens) // 4, text


def test_letter_spaced_thai_is_joined_but_phrase_spaces_and_latin_stay() -> None:
    spaced = "ป ร ะ เท ศ ไ ท ย ม ี ก ร ุ ง เท พ ม ห า น ค ร"  # real tesseract output
    assert join_spaced_thai(spaced) == "ประเทศไทยมีกรุงเทพมหานคร"
    phrases = "ประเทศไทย มีกรุงเทพมหานคร เป็นเมืองหลวง"
    assert join_spaced_thai(phrases) == phrases
    assert join_spaced_thai("Invoice 2024 a b c") == "Invoice 2024 a b c"


def test_postprocess_applies_the_index_normalisation() -> None:
    raw = "ส้มต ํ า  ทุกวัน\r\n\n\n\nZero\u200bwidth\x0c"
    assert postprocess(raw) == "ส้มตำ  ทุกวัน\n\nZerowidth"


def test_a_page_over_the_timeout_kills_the_engine_and_raises_a_typed_error() -> None:
    slow = make_ocr_function(OcrConfig(page_timeout_s=0.05))
    assert slow is not None
    with pytest.raises(OcrTimeoutError) as caught:
        slow(render_page(ENGLISH_LINES * 6, dpi=300))
    assert "0.05" in caught.value.message and caught.value.hint
    assert not _child_processes_named("tesseract")


def _child_processes_named(name: str) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            comm = fields[0].split("(", 1)[1]
            ppid = int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and comm == name:
            children.append(int(stat.parent.name))
    return children


@pytest.mark.parametrize(
    "mode", ["transparent RGBA", "16-bit grayscale", "palette", "1-bit", "CMYK"]
)
def test_unusual_pixel_formats_are_read(ocr: TesseractOcr, mode: str) -> None:
    page = render_page(ENGLISH_LINES[:2])
    ink = np.asarray(page) < 128
    if mode == "transparent RGBA":  # black text on fully transparent black: naive L is all black
        rgba = np.zeros((*ink.shape, 4), dtype=np.uint8)
        rgba[..., 3] = np.where(ink, 255, 0)
        image = Image.fromarray(rgba)
    elif mode == "16-bit grayscale":  # naive 8-bit conversion clips every value to white
        image = Image.fromarray(np.where(ink, 0, 65535).astype(np.uint16))
    elif mode == "palette":
        image = page.convert("RGB").convert("P")
    elif mode == "1-bit":
        image = page.convert("1")
    else:
        image = page.convert("CMYK")
    text = ocr(image).text
    assert word_recall("\n".join(ENGLISH_LINES[:2]), text) >= RECALL_FLOOR["eng"], text


# --- image extractor ---------------------------------------------------------------------------


def test_an_image_without_an_ocr_engine_raises_with_the_install_hint(tmp_path: Path) -> None:
    path = tmp_path / "scan.png"
    render_page(ENGLISH_LINES[:1]).save(path)
    with pytest.raises(ExtractionError) as caught:
        list(extract(path, _ctx(ocr=make_ocr_function(MISSING_ENGINE))))
    assert caught.value.message == "image needs OCR"
    assert "apt-get install -y tesseract-ocr" in caught.value.hint


@pytest.mark.parametrize("suffix", sorted(SUFFIXES))
def test_every_image_format_is_read_as_ocr_blocks(
    ocr: TesseractOcr, tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"scan{suffix}"
    degrade(render_page(RUSSIAN_LINES[:2]), seed=7).save(path)
    blocks = list(extract(path, _ctx(ocr)))
    assert blocks and all(block.ocr for block in blocks)
    assert all(block.location.page is None for block in blocks)  # single page: no page label
    text = "\n".join(block.text for block in blocks)
    assert word_recall("\n".join(RUSSIAN_LINES[:2]), text) >= RECALL_FLOOR["rus"], text


def test_a_multipage_tiff_gives_every_page_with_its_page_number(
    ocr: TesseractOcr, tmp_path: Path
) -> None:
    path = tmp_path / "fax.tiff"
    first, *rest = [_page(key, seed=i) for i, key in enumerate(["eng", "rus", "tha"])]
    first.save(path, save_all=True, append_images=rest, compression="tiff_lzw")
    blocks = list(extract(path, _ctx(ocr)))
    assert {block.location.page for block in blocks} == {1, 2, 3}
    assert all(block.ocr for block in blocks)
    for page_number, key in enumerate(["eng", "rus", "tha"], start=1):
        text = "\n".join(b.text for b in blocks if b.location.page == page_number)
        assert word_recall("\n".join(PAGES[key]), text) >= RECALL_FLOOR[key], text
        assert word_recall("\n".join(ENGLISH_LINES), text) < 0.5 or key == "eng"


def test_cancel_stops_a_multipage_tiff_between_pages(ocr: TesseractOcr, tmp_path: Path) -> None:
    path = tmp_path / "long.tif"
    pages = [render_page([f"Page number {n} of the long scan"]) for n in range(1, 4)]
    pages[0].save(path, save_all=True, append_images=pages[1:])
    read: list[OcrText] = []

    def counting_ocr(image: Image.Image) -> OcrText:
        read.append(ocr(image))
        return read[-1]

    blocks = []
    with pytest.raises(ExtractionCancelled):
        for block in extract(path, _ctx(counting_ocr, should_cancel=lambda: len(read) >= 1)):
            blocks.append(block)
    assert len(read) == 1
    assert {block.location.page for block in blocks} == {1}


def test_a_photo_stored_sideways_with_an_exif_tag_is_read_upright(
    ocr: TesseractOcr, tmp_path: Path
) -> None:
    path = tmp_path / "photo.jpg"
    sideways = render_page(ENGLISH_LINES).rotate(90, expand=True)
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 CW to display
    sideways.save(path, exif=exif, quality=90)
    text = "\n".join(block.text for block in extract(path, _ctx(ocr)))
    assert word_recall("\n".join(ENGLISH_LINES), text) >= RECALL_FLOOR["eng"], text


def test_a_decompression_bomb_is_refused_before_decoding(tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(_png_header_claiming(40_000, 40_000))  # 1.6 G pixels in 70 bytes
    with pytest.raises(ExtractionError) as caught:
        list(extract(path, _ctx(lambda image: pytest.fail("decoded a bomb"))))
    assert "too large" in caught.value.message and caught.value.hint
    assert MAX_PAGE_PIXELS < 40_000 * 40_000


def _png_header_claiming(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.mark.parametrize("damage", ["not an image", "truncated"])
def test_a_damaged_image_raises_an_extraction_error(
    ocr: TesseractOcr, tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "broken.png"
    if damage == "not an image":
        path.write_bytes(b"%PDF-1.7 this is not a PNG at all" * 10)
    else:
        render_page(ENGLISH_LINES).save(path)
        path.write_bytes(path.read_bytes()[:600])
    with pytest.raises(ExtractionError) as caught:
        list(extract(path, _ctx(ocr)))
    assert caught.value.hint


def test_a_blank_scan_gives_one_empty_ocr_block(ocr: TesseractOcr, tmp_path: Path) -> None:
    path = tmp_path / "blank.png"
    Image.new("L", (600, 400), 255).save(path)
    blocks = list(extract(path, _ctx(ocr)))
    assert [(b.text, b.ocr, b.location.page) for b in blocks] == [("", True, None)]


def test_a_long_ocr_paragraph_is_cut_into_blocks_the_chunker_accepts(tmp_path: Path) -> None:
    path = tmp_path / "dense.png"
    render_page(["dense page"]).save(path)
    words = [f"word{n}" for n in range(1500)]

    def dense_ocr(image: Image.Image) -> OcrText:  # stands in for a page of 10,000 characters
        return OcrText(" ".join(words) + "\n\nlast paragraph", "stand-in engine")

    blocks = list(extract(path, _ctx(dense_ocr)))
    assert all(0 < len(block.text) <= MAX_BLOCK_CHARS for block in blocks)
    assert " ".join(b.text for b in blocks).split() == [*words, "last", "paragraph"]
