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
