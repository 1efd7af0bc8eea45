"""Tesseract OCR as a subprocess, one page at a time, with the index's own text normalisation.

Tesseract is the only engine here that reads Thai and Russian offline. It runs out of process so a
crash, a hang or a runaway page cannot take the sync worker down: every page has a timeout and the
child is killed when it expires.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PIL import Image

from helpers.extract.blocks import ExtractionError, OcrText
from helpers.ocr.postprocess import postprocess
from helpers.ocr.settings import langs_problem

if TYPE_CHECKING:
    from helpers.ocr.vlm import VlmCorrector

log = logging.getLogger(__name__)

# eng first: other orders read a mixed page much worse (stack-facts.md, OCR).
DEFAULT_LANGS = "eng+tha+rus"
DEFAULT_PAGE_TIMEOUT_S = 120.0  # a 300-dpi page takes ~4-5 s; 120 s only stops a stuck engine
DEFAULT_VLM_TIMEOUT_S = 60.0  # one page through a local vision model; slower means it is stuck
PROBE_TIMEOUT_S = 15.0  # `tesseract --version` / `--list-langs` answer in well under a second
# OpenMP threads make tesseract ~5x slower per page on 2 cores (stack-facts.md); we parallelise
# by page, never inside one.
OMP_THREADS = "1"
DEFAULT_DPI = 300  # PDF pages are rendered at 300 DPI; scans without metadata are assumed to match
DPI_RANGE = (
    70,
    1200,
)  # metadata outside this is junk (0, 1, 72000) and would mislead layout analysis
STDERR_TAIL_CHARS = 400  # enough of tesseract's stderr to say why it failed


class OcrError(ExtractionError):
    """OCR of one page failed; the hint says what to change."""


class OcrTimeoutError(OcrError):
    """The engine did not finish a page within `page_timeout_s` and was killed."""


@dataclass(frozen=True)
class OcrConfig:
    langs: str = DEFAULT_LANGS  # tesseract `-l` value; order matters (first = preferred)
    tesseract_cmd: str = "tesseract"  # name on PATH or absolute path
    page_timeout_s: float = DEFAULT_PAGE_TIMEOUT_S
    vlm_url: str | None = None  # loopback OpenAI-compatible base URL; None = no correction
    vlm_model: str | None = None
    vlm_timeout_s: float = DEFAULT_VLM_TIMEOUT_S

    def __post_init__(self) -> None:
        problem = langs_problem(self.langs)
        if problem:
            raise ValueError(problem)
        if self.page_timeout_s <= 0 or self.vlm_timeout_s <= 0:
            raise ValueError("timeouts must be positive")

    def lang_list(self) -> tuple[str, ...]:
        return tuple(self.langs.split("+"))


@dataclass(frozen=True)
class OcrStatus:
    available: bool  # the engine runs and at least one requested language is installed
    engine: str  # "tesseract"
    version: str  # "5.3.0", "" when not found
    langs_available: tuple[str, ...]  # requested languages that are installed, in config order
    langs_missing: tuple[str, ...]  # requested languages that are not installed
    hint: str  # the exact install command when something is missing, else ""


def apt_install_hint(langs: tuple[str, ...], with_engine: bool) -> str:
    """The exact Debian command that installs the engine and/or the language packs."""
    packages = ["tesseract-ocr"] if with_engine else []
    packages += [f"tesseract-ocr-{lang.lower().replace('_', '-')}" for lang in langs]
    return "apt-get install -y " + " ".join(packages)


def ocr_status(cfg: OcrConfig) -> OcrStatus:
    """Probe the engine once per process (per command and language list)."""
    return _probe(cfg.tesseract_cmd, cfg.lang_list())


@functools.lru_cache(maxsize=16)
def _probe(tesseract_cmd: str, langs: tuple[str, ...]) -> OcrStatus:
    resolved = shutil.which(tesseract_cmd)
    missing_engine = OcrStatus(False, "tesseract", "", (), langs, apt_install_hint(langs, True))
    if resolved is None:
        return missing_engine
    try:
        version_out = _run_probe([resolved, "--version"])
        langs_out = _run_probe([resolved, "--list-langs"])
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("tesseract probe failed for %s: %s", resolved, exc)
        return missing_engine
    version = _parse_version(version_out)
    installed = _parse_langs(langs_out)
    have = tuple(lang for lang in langs if lang in installed)
    missing = tuple(lang for lang in langs if lang not in installed)
    hint = apt_install_hint(missing, False) if missing else ""
    return OcrStatus(bool(version) and bool(have), "tesseract", version, have, missing, hint)


def _run_probe(argv: list[str]) -> str:
    done = subprocess.run(
        argv, capture_output=True, timeout=PROBE_TIMEOUT_S, env=_engine_env(), check=True
    )
    # Old releases print --version to stderr; read both.
    return (done.stdout + b"\n" + done.stderr).decode("utf-8", errors="replace")


def _parse_version(text: str) -> str:
    match = re.search(r"tesseract\s+v?(\d+\.\d+(?:\.\d+)?)", text, re.IGNORECASE)
    return match.group(1) if match else ""


def _parse_langs(text: str) -> frozenset[str]:
    lines = [line.strip() for line in text.splitlines()]
    return frozenset(line for line in lines if line and " " not in line and ":" not in line)


def _engine_env() -> dict[str, str]:
    return {**os.environ, "OMP_THREAD_LIMIT": OMP_THREADS}


def make_ocr_function(cfg: OcrConfig) -> TesseractOcr | None:
    """A per-page `image -> OcrText` callable (an `OcrFunction`), or None when tesseract cannot run.

    With `vlm_url` and `vlm_model` set, each page's text also goes through the conservative
    vision-model correction; call `.close()` on the result after a batch to stop a managed server.
    """
    status = ocr_status(cfg)
    if not status.available:
        return None
    if status.langs_missing:
        log.warning("OCR without %s: %s", "+".join(status.langs_missing), status.hint)
    corrector = None
    if bool(cfg.vlm_url) != bool(cfg.vlm_model):
        log.warning("vision-model correction needs both vlm_url and vlm_model; it stays off")
    if cfg.vlm_url and cfg.vlm_model:
        from helpers.ocr.vlm import VlmCorrector  # httpx only when a vision model is configured

        corrector = VlmCorrector(cfg.vlm_url, cfg.vlm_model, cfg.vlm_timeout_s)
    return TesseractOcr(cfg, status, corrector)


class TesseractOcr:
    """Callable OCR function; a context manager so a managed vision-model server is stopped."""

    def __init__(
        self, cfg: OcrConfig, status: OcrStatus, corrector: VlmCorrector | None = None
    ) -> None:
        self.cfg = cfg
        self.langs = "+".join(status.langs_available)
        self.engine = f"tesseract {status.version} {self.langs}"
        self.corrector = corrector
        self._cmd = shutil.which(cfg.tesseract_cmd) or cfg.tesseract_cmd

    def __call__(self, image: Image.Image) -> OcrText:
        prepared = prepare_image(image)
        text = postprocess(self._run(prepared, _dpi_of(image)))
        result = OcrText(text=text, engine=self.engine)
        if self.corrector is not None and text.strip():
            result = self.corrector.correct(prepared, result)
        return result

    def close(self) -> None:
        if self.corrector is not None:
            self.corrector.close()

    def __enter__(self) -> TesseractOcr:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, image: Image.Image, dpi: int) -> str:
        png = io.BytesIO()
        image.save(png, format="PNG", compress_level=1)  # speed over size: it lives for one page
        argv = [self._cmd, "stdin", "stdout", "-l", self.langs, "--dpi", str(dpi)]
        argv += ["-c", "preserve_interword_spaces=1"]
        try:
            # On timeout subprocess.run kills the child and reaps it before raising.
            done = subprocess.run(
                argv,
                input=png.getvalue(),
                capture_output=True,
                timeout=self.cfg.page_timeout_s,
                env=_engine_env(),
            )
        except subprocess.TimeoutExpired as exc:
            raise OcrTimeoutError(
                f"OCR of a {image.width}x{image.height} page took over "
                f"{self.cfg.page_timeout_s:g} s",
                hint="raise the OCR page timeout, or scan at a lower resolution",
            ) from exc
        except OSError as exc:
            raise OcrError(
                f"cannot run {self._cmd}: {exc}", hint=apt_install_hint(self.cfg.lang_list(), True)
            ) from exc
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", errors="replace")[-STDERR_TAIL_CHARS:].strip()
            raise OcrError(
                f"tesseract exited with {done.returncode}: {tail}",
                hint="check the image opens in an image viewer; re-scan it if it does not",
            )
        return done.stdout.decode("utf-8", errors="replace")


def prepare_image(image: Image.Image) -> Image.Image:
    """8-bit grayscale on white: alpha, palette, 16-bit and CMYK scans all read the same way."""
    if image.mode == "L":
        return image
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        return _scale_to_8bit(image)
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("L")
    return image.convert("L")


def _scale_to_8bit(image: Image.Image) -> Image.Image:
    import numpy as np

    values = np.asarray(image, dtype=np.float64)
    low, high = float(values.min()), float(values.max())
    scale = 255.0 / (high - low) if high > low else 0.0
    return Image.fromarray(((values - low) * scale).astype(np.uint8))


def _dpi_of(image: Image.Image) -> int:
    dpi = image.info.get("dpi")
    try:
        value = round(float(dpi[0])) if dpi else 0
    except (TypeError, ValueError, IndexError):
        value = 0
    return value if DPI_RANGE[0] <= value <= DPI_RANGE[1] else DEFAULT_DPI
