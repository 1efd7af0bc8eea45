"""Images (PNG, JPEG, TIFF, BMP, WebP) to OCR text blocks; every TIFF page is read.

An image has no text layer, so without an OCR engine there is nothing to index: that is reported
as an error with the install hint rather than as an empty document.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import MAX_BLOCK_CHARS, ExtractionCancelled, ParagraphBuffer

log = logging.getLogger(__name__)

SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"})
MULTI_PAGE_SUFFIXES = frozenset({".tif", ".tiff"})  # other formats' frames are animation
# A1 at 300 DPI is ~7000 x 9900 = 70 M pixels; larger is a poster, a map or a bomb, and an
# 8-bit copy of it alone would take > 100 MB. Checked per page from the header, before decoding.
MAX_PAGE_PIXELS = 80_000_000
MAX_PAGES = 2_000  # a TIFF with more pages is not a scanned document we can OCR in a sync
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    """OCR each page of an image file; paragraphs become blocks marked `ocr=True`.

    The registry's guard (helpers/extract/registry.py) enforces the size and text caps.
    """
    if ctx.ocr is None:
        raise ExtractionError("image needs OCR", hint=ctx.ocr_unavailable_hint)
    multi_page = Path(path).suffix.lower() in MULTI_PAGE_SUFFIXES
    with _open(path) as image:
        pages = getattr(image, "n_frames", 1) if multi_page else 1
        if pages > MAX_PAGES:
            raise ExtractionError(
                f"image has {pages} pages (limit {MAX_PAGES})",
                hint="split it into smaller files",
            )
        ctx.on_progress(0, pages)
        for index in range(pages):
            if index and ctx.should_cancel():
                raise ExtractionCancelled("extraction cancelled")
            page = _load_page(image, index, path)
            try:
                result = ctx.ocr(page)
            finally:
                if page is not image:
                    page.close()
            if result.note:
                log.info("%s page %d: %s", path, index + 1, result.note)
            location = Location(page=index + 1 if pages > 1 else None)
            texts = list(_paragraphs(result.text))
            # An empty OCR block still tells the caller the page was recognised (and is blank),
            # as the PDF extractor does for scanned pages.
            for text in texts or [""]:
                yield TextBlock(text=text, location=location, kind=BlockKind.PARAGRAPH, ocr=True)
            ctx.on_progress(index + 1, pages)


def _paragraphs(text: str) -> Iterator[str]:
    """Blank-line paragraphs of the OCR text, long ones cut to the chunker's block size."""
    for paragraph in _PARAGRAPH_BREAK.split(text):
        buffer = ParagraphBuffer(MAX_BLOCK_CHARS)
        yield from (span.text for span in buffer.add(paragraph.strip()))
        last = buffer.flush()
        if last is not None:
            yield last.text


def _open(path: Path) -> Image.Image:
    try:
        with warnings.catch_warnings():
            # Pillow only warns between MAX_IMAGE_PIXELS and twice that; refuse both.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise _too_large(str(exc)) from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ExtractionError(
            f"cannot read image: {exc}", hint="check the file opens in an image viewer"
        ) from exc
    try:
        _check_size(image)
    except ExtractionError:
        image.close()
        raise
    return image


def _load_page(image: Image.Image, index: int, path: Path) -> Image.Image:
    """Decode one page (bomb-checked from its header first) in reading orientation."""
    try:
        image.seek(index)
        _check_size(image)
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image.load()
            page = ImageOps.exif_transpose(image)  # phone photos are stored sideways + a tag
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise _too_large(str(exc)) from exc
    except (OSError, EOFError, SyntaxError, ValueError) as exc:
        raise ExtractionError(
            f"cannot decode page {index + 1} of {Path(path).name}: {exc}",
            hint="the file is truncated or damaged; re-scan or re-export it",
        ) from exc
    return page if page is not None else image


def _check_size(image: Image.Image) -> None:
    width, height = image.size
    if width * height > MAX_PAGE_PIXELS:
        raise _too_large(f"{width}x{height} pixels exceeds {MAX_PAGE_PIXELS:,}")


def _too_large(detail: str) -> ExtractionError:
    return ExtractionError(
        f"image too large to OCR safely ({detail})",
        hint="downscale it to 300 DPI (e.g. `convert in.tif -resample 300 out.tif`)",
    )
