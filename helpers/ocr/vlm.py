"""Optional, conservative OCR correction by a local vision model (off unless configured).

A vision model can repair what tesseract misreads, but it can also invent: a changed amount in an
indexed invoice is worse than a typo. So its answer is used only when it is a small edit of the OCR
text that keeps every number; otherwise the OCR text stays and `OcrText.note` says why. Only
loopback servers are accepted: page images never leave the machine.
"""

from __future__ import annotations

import base64
import difflib
import io
import json
import logging
import os
import re
import time
from collections import Counter
from dataclasses import dataclass

import httpx
from PIL import Image

from helpers.extract.blocks import OcrText
from helpers.ocr.postprocess import postprocess
from helpers.ocr.settings import VlmConfigError, require_loopback

__all__ = ["VlmConfigError", "VlmCorrector", "require_loopback", "validate_correction"]

log = logging.getLogger(__name__)

CONTROL_URL_ENV = "RAGDOC_LLM_CONTROL_URL"  # optional loopback endpoint: POST server/start|stop
# The control calls are opt-in: a host that keeps its model server running must not have it
# started or stopped under it just because it published the control URL.
AUTO_START_ENV = "RAGDOC_OCR_AUTO_START"  # 1: POST server/start before a batch's first page
AUTO_STOP_ENV = "RAGDOC_OCR_AUTO_STOP"  # 1: POST server/stop when a batch that used it ends
# A correction is a small edit: the OCR text is already ~0.98 right on clean scans.
MIN_SIMILARITY = 0.85  # difflib ratio of correction vs OCR text (characters)
MIN_LENGTH_RATIO = 0.85  # correction length / OCR length
MAX_LENGTH_RATIO = 1.15
LENGTH_SLACK_CHARS = 12  # short texts: a fixed word or two may exceed the ratio
MAX_INSERTED_RUN_WORDS = 3  # "Here is the corrected text:" is five inserted words
MAX_ADDED_WORD_SHARE = 0.05  # of the OCR text's words
MAX_ADDED_WORDS_FLOOR = 3  # so a short page may still gain a split word back
VLM_MAX_IMAGE_SIDE = 2048  # vision encoders tile at or below this; keeps a request a few MB
MAX_RESPONSE_BYTES = 2 * 1024 * 1024  # a page of text is ~10 KB; more is a runaway answer
CONNECT_TIMEOUT_S = 3.0  # loopback connects in microseconds; longer means nothing listens
CONTROL_TIMEOUT_S = 180.0  # server/start may load a multi-GB model before answering
READY_POLL_S = 0.5  # after server/start, poll GET /v1/models this often until it answers
MAX_CONSECUTIVE_FAILURES = 3  # then skip the model for the rest of the batch (a dead server
# would otherwise cost `timeout` on every page)
MAX_TOKENS_PER_CHAR = 2  # completion budget relative to the OCR text; Thai is ~1 token per char
# Tokens with their inner separators: amounts, dates, times, phone numbers, codes.
_TOKEN = re.compile(r"[^\W_]+(?:[.,:/\-][^\W_]+)*")
# A token is a protected number when it is all digits, or has at least this many digits (codes
# like INV2024); one stray digit inside a word ("c0ntract") is an OCR error the model may fix.
PROTECTED_MIN_DIGITS = 2
_THAI_DIGITS = str.maketrans("๐๑๒๓๔๕๖๗๘๙", "0123456789")
_PREAMBLE = re.compile(
    r"^\s*(here(?:'s| is)|sure|certainly|corrected|correction|the corrected|below is|note:|"
    r"вот|исправленный|ต่อไปนี้|นี่คือ|ข้อความที่แก้ไข)",
    re.IGNORECASE,
)
_FENCE = re.compile(r"^```[\w-]*\n(.*)\n```$", re.DOTALL)

SYSTEM_PROMPT = (
    "You proofread OCR output against the page image. Fix only characters the OCR clearly "
    "misread (wrong letters, broken Thai vowels and tone marks, Latin/Cyrillic look-alikes, "
    "split or merged words). Never add, remove, reorder, translate, summarise or explain. Keep "
    "every number, amount and date exactly as in the OCR text. Keep the line breaks. If unsure, "
    "keep the OCR text. Reply with the corrected text only."
)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str  # why rejected, or a short summary when accepted
    similarity: float = 0.0


def models_url(chat_url: str) -> str:
    return chat_url.removesuffix("/chat/completions") + "/models"


def chat_completions_url(base_url: str) -> str:
    """Accept `http://h:p`, `http://h:p/v1` or the full `.../chat/completions` URL."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if base.endswith("/v1"):
        return base + "/chat/completions"
    return base + "/v1/chat/completions"


def validate_correction(ocr_text: str, corrected: str) -> Verdict:
    """Accept a correction only when it is a small edit that keeps every number.

    Checked in order: no prose preamble, length within bounds, the same protected number tokens
    (none lost, none added), no inserted run of words, character similarity.
    """
    if not corrected.strip():
        return Verdict(False, "empty answer")
    if _PREAMBLE.match(corrected) and not _PREAMBLE.match(ocr_text):
        return Verdict(False, "answer starts with prose")
    low = MIN_LENGTH_RATIO * len(ocr_text) - LENGTH_SLACK_CHARS
    high = MAX_LENGTH_RATIO * len(ocr_text) + LENGTH_SLACK_CHARS
    if not low <= len(corrected) <= high:
        return Verdict(False, f"length {len(corrected)} outside {low:.0f}-{high:.0f}")
    before, after = _numbers(ocr_text), _numbers(corrected)
    if before != after:
        lost = sorted((before - after).elements())
        added = sorted((after - before).elements())
        return Verdict(False, f"numbers changed (lost {lost[:5]}, added {added[:5]})")
    added_words, longest_run = _inserted_words(ocr_text.split(), corrected.split())
    allowed = max(MAX_ADDED_WORDS_FLOOR, MAX_ADDED_WORD_SHARE * len(ocr_text.split()))
    if longest_run > MAX_INSERTED_RUN_WORDS or added_words > allowed:
        return Verdict(False, f"added text ({added_words} words, run of {longest_run})")
    similarity = difflib.SequenceMatcher(
        None, ocr_text.translate(_THAI_DIGITS), corrected.translate(_THAI_DIGITS), autojunk=False
    ).ratio()
    if similarity < MIN_SIMILARITY:
        return Verdict(False, f"similarity {similarity:.2f} < {MIN_SIMILARITY}", similarity)
    return Verdict(True, f"similarity {similarity:.2f}", similarity)


def _numbers(text: str) -> Counter[str]:
    """Protected number tokens (Thai digits read as Arabic, as the index folds them)."""
    found: Counter[str] = Counter()
    for token in _TOKEN.findall(text.translate(_THAI_DIGITS)):
        digits = sum(ch.isdigit() for ch in token)
        if digits >= PROTECTED_MIN_DIGITS or (digits and not any(ch.isalpha() for ch in token)):
            found[token] += 1
    return found


def _inserted_words(before: list[str], after: list[str]) -> tuple[int, int]:
    """Words the correction adds (total, longest contiguous run), by word-level diff."""
    total = longest = 0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("insert", "replace"):
            grown = (j2 - j1) - (i2 - i1)
            if grown > 0:
                total += grown
                longest = max(longest, grown)
    return total, longest


def _png_data_url(image: Image.Image) -> str:
    if max(image.size) > VLM_MAX_IMAGE_SIDE:
        image = image.copy()
        image.thumbnail((VLM_MAX_IMAGE_SIDE, VLM_MAX_IMAGE_SIDE), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _message_content(payload: object) -> str:
    """The assistant text of a chat-completions response; ValueError on any other shape."""
    try:
        content = payload["choices"][0]["message"]["content"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError("response is not a chat completion") from exc
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        raise ValueError("message content is not text")
    content = content.strip()
    fenced = _FENCE.match(content)
    return fenced.group(1) if fenced else content


class VlmCorrector:
    """Sends one page (image + OCR text) to a loopback vision model and keeps only safe edits."""

    def __init__(
        self,
        vlm_url: str,
        model: str,
        timeout_s: float,
        control_url: str | None = None,
        use_control_env: bool = True,
        auto_start: bool | None = None,
        auto_stop: bool | None = None,
    ) -> None:
        self.url = chat_completions_url(require_loopback(vlm_url))
        self.model = model
        self.timeout_s = timeout_s
        if control_url is None and use_control_env:
            control_url = os.environ.get(CONTROL_URL_ENV) or None
        self.control_url = (
            require_loopback(control_url, CONTROL_URL_ENV).rstrip("/") if control_url else None
        )
        self.auto_start = _env_flag(AUTO_START_ENV) if auto_start is None else auto_start
        self.auto_stop = _env_flag(AUTO_STOP_ENV) if auto_stop is None else auto_stop
        self._http: httpx.Client | None = None
        self._started = False
        self._used = False  # a page went to the model in this batch
        self._failures = 0
        self._disabled_reason = ""

    @property
    def _client(self) -> httpx.Client:
        """Opened on first use and again after `close()`, so one corrector serves many batches."""
        if self._http is None:
            # trust_env=False: a proxy variable must never route page images off the machine.
            self._http = httpx.Client(
                trust_env=False,
                follow_redirects=False,
                timeout=httpx.Timeout(self.timeout_s, connect=CONNECT_TIMEOUT_S),
            )
        return self._http

    def correct(self, image: Image.Image, ocr: OcrText) -> OcrText:
        """The corrected text when it passes validation; else the OCR text with a note."""
        if self._disabled_reason:
            return _keep(ocr, f"vlm skipped: {self._disabled_reason}")
        if not self._ensure_started():
            return _keep(ocr, f"vlm skipped: {self._disabled_reason}")
        self._used = True
        try:
            answer = postprocess(self._ask(image, ocr.text))  # same shape as the OCR text
        except (httpx.HTTPError, ValueError, TimeoutError) as exc:
            self._failures += 1
            reason = _describe(exc, self.timeout_s)
            if self._failures >= MAX_CONSECUTIVE_FAILURES:
                self._disabled_reason = f"{self._failures} failures in a row, last: {reason}"
            log.warning("vision-model correction failed: %s", reason)
            return _keep(ocr, f"vlm failed: {reason}")
        self._failures = 0
        verdict = validate_correction(ocr.text, answer)
        if not verdict.ok:
            log.info("vision-model correction rejected: %s", verdict.reason)
            return _keep(ocr, f"vlm rejected: {verdict.reason}")
        if answer == ocr.text:
            return _keep(ocr, "vlm: no change")
        return OcrText(
            answer, f"{ocr.engine} + vlm {self.model}", f"vlm corrected: {verdict.reason}"
        )

    def close(self) -> None:
        """End the batch: stop a managed server (if we started one), release the connections."""
        try:
            if self.control_url and self.auto_stop and (self._started or self._used):
                self._control("server/stop")
        except httpx.HTTPError as exc:
            log.warning("vision-model server/stop failed: %s", _describe(exc, CONTROL_TIMEOUT_S))
        finally:
            self._started = False
            self._used = False
            self._failures = 0
            self._disabled_reason = ""
            if self._http is not None:
                self._http.close()
                self._http = None

    def __enter__(self) -> VlmCorrector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_started(self) -> bool:
        if self._started or not self.control_url or not self.auto_start:
            return True
        try:
            self._control("server/start")
        except httpx.HTTPError as exc:
            self._disabled_reason = f"server/start failed: {_describe(exc, CONTROL_TIMEOUT_S)}"
            log.warning("vision-model %s", self._disabled_reason)
            return False
        self._started = True  # from here on close() sends server/stop
        if not self._wait_ready():
            self._disabled_reason = f"server not ready {CONTROL_TIMEOUT_S:g} s after server/start"
            log.warning("vision-model %s", self._disabled_reason)
            return False
        return True

    def _wait_ready(self) -> bool:
        """Poll the models endpoint: server/start may return before the model is loaded."""
        deadline = time.monotonic() + CONTROL_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if self._client.get(models_url(self.url)).status_code < 500:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(READY_POLL_S)
        return False

    def _control(self, action: str) -> None:
        response = self._client.post(f"{self.control_url}/{action}", timeout=CONTROL_TIMEOUT_S)
        response.raise_for_status()

    def _ask(self, image: Image.Image, ocr_text: str) -> str:
        body = {
            "model": self.model,
            "temperature": 0,
            "max_tokens": max(256, MAX_TOKENS_PER_CHAR * len(ocr_text)),
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "OCR text:\n" + ocr_text},
                        {"type": "image_url", "image_url": {"url": _png_data_url(image)}},
                    ],
                },
            ],
        }
        deadline = time.monotonic() + self.timeout_s  # whole answer, not just each read
        chunks: list[bytes] = []
        size = 0
        with self._client.stream("POST", self.url, json=body) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise ValueError(f"response over {MAX_RESPONSE_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise TimeoutError("answer still streaming at the deadline")
                chunks.append(chunk)
        return _message_content(json.loads(b"".join(chunks)))


def _env_flag(name: str) -> bool:
    return (os.environ.get(name) or "").strip().lower() in ("1", "true", "yes", "on")


def _keep(ocr: OcrText, note: str) -> OcrText:
    return OcrText(ocr.text, ocr.engine, note)


def _describe(exc: Exception, timeout_s: float) -> str:
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return f"timed out after {timeout_s:g} s"
    if isinstance(exc, httpx.ConnectError):
        return "server not reachable"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return f"{type(exc).__name__}: {exc}"
