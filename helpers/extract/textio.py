"""Reading text files safely: encoding detection, binary refusal, bounded line pieces.

Every text-like extractor reads through `iter_line_pieces(path, ctx)` so a 200 MB file made of one
line streams in bounded pieces instead of being held whole in memory.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from helpers.extract.blocks import ExtractContext, ExtractionError

# NUL bytes this early mean binary data (text editors never write NUL into text).
BINARY_SNIFF_BYTES = 8 * 1024
# Enough text to tell cp1251 from cp874 from cp1252 reliably, small enough to read on every file.
ENCODING_SAMPLE_BYTES = 64 * 1024
# Decoded characters per read: big enough for speed, small enough for bounded memory.
READ_CHUNK_CHARS = 256 * 1024
# A single-byte guess must be this plausible (share of expected characters) or the file is binary.
MIN_PLAUSIBILITY = 0.9
# An undecodable UTF-16 guess (no BOM) must be nearly all plausible characters.
MIN_UTF16_PLAUSIBILITY = 0.97

BINARY_HINT = "the file has a text extension but holds binary data; rename it or exclude it"

# Legacy single-byte encodings we meet in English/Russian/Thai folders, with the script each one
# exists to write (the letters that make a decode plausible).
_LEGACY_CANDIDATES: tuple[tuple[str, tuple[int, int]], ...] = (
    ("cp1251", (0x0400, 0x04FF)),  # Russian Windows
    ("cp874", (0x0E00, 0x0E7F)),  # Thai Windows, a superset of TIS-620
    ("cp1252", (0x00C0, 0x024F)),  # Western European Windows
)
_COMMON_PUNCT = frozenset("«»–—‘’“”„…•№°§©®\u00a0€™±×")
_WORD = re.compile(r"[^\W\d_]{2,}")
_THAI_CONSONANT = re.compile("[\u0e01-\u0e2e]")
# Above/below marks and tone marks sit on a consonant; leading vowels precede one.
_THAI_MARKS = frozenset(
    "\u0e31\u0e34\u0e35\u0e36\u0e37\u0e38\u0e39\u0e3a"
    + "".join(chr(c) for c in range(0x0E47, 0x0E4F))
)
_THAI_LEADING = frozenset("\u0e40\u0e41\u0e42\u0e43\u0e44")


def _script_penalty(text: str, script: tuple[int, int]) -> int:
    """Characters in words that real text in this script would not contain."""
    bad = 0
    lo = script[0]
    for match in _WORD.finditer(text):
        word = match.group()
        ascii_letters = sum(1 for ch in word if ord(ch) < 128)
        if lo < 0x0300:
            # Accents sit inside mostly-ASCII words; a word with no ASCII letter is mojibake.
            if ascii_letters == 0 and len(word) >= 3:
                bad += len(word)
        elif 0 < ascii_letters < len(word):
            bad += len(word)  # Cyrillic or Thai mixed with Latin inside one word
        elif lo == 0x0400 and not (word.islower() or word.isupper() or word.istitle()):
            bad += len(word)  # `АТЙТд`: Thai bytes read as cp1251 mix cases at random
    if lo == 0x0E00:
        previous = ""
        for ch in text:
            if ch in _THAI_MARKS and not (
                _THAI_CONSONANT.match(previous) or previous in _THAI_MARKS
            ):
                bad += 1
            if previous in _THAI_LEADING and not _THAI_CONSONANT.match(ch):
                bad += 1
            previous = ch
    return bad


def _plausibility(text: str, script: tuple[int, int]) -> float:
    """Share of characters that belong in a text written in `script` (plus ASCII)."""
    if not text:
        return 1.0
    lo, hi = script
    good = bad = 0
    for ch in text:
        code = ord(ch)
        if code < 128:
            if ch.isprintable() or ch in "\t\n\r\f":
                good += 1
            else:
                bad += 1
        elif lo <= code <= hi or ch in _COMMON_PUNCT:
            good += 1
        else:
            bad += 1
    bad += _script_penalty(text, script)
    return good / max(1, good + bad)


def detect_encoding(head: bytes, *, whole_file: bool = False) -> str:
    """Codec name for a file starting with `head`; raises ExtractionError for binary data."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if b"\x00" in head[:BINARY_SNIFF_BYTES]:
        for codec in ("utf-16-le", "utf-16-be"):
            text = _try_decode(head, codec, whole_file)
            if text is not None and _plausibility(text, (0x0080, 0xFFFF)) >= MIN_UTF16_PLAUSIBILITY:
                return codec
        raise ExtractionError("binary data: NUL bytes in the first 8 KB", BINARY_HINT)
    if _try_decode(head, "utf-8", whole_file) is not None:
        return "utf-8"
    best, best_score = "", 0.0
    for codec, script in _LEGACY_CANDIDATES:
        text = _try_decode(head, codec, whole_file)
        if text is None:
            continue
        score = _plausibility(text, script)
        if score > best_score:
            best, best_score = codec, score
    if best_score < MIN_PLAUSIBILITY:
        raise ExtractionError(
            "binary data: not decodable as UTF-8, UTF-16, cp1251, cp874 or cp1252", BINARY_HINT
        )
    return best


def _try_decode(data: bytes, codec: str, final: bool) -> str | None:
    try:
        return codecs.getincrementaldecoder(codec)().decode(data, final=final)
    except UnicodeDecodeError:
        return None


def iter_text_chunks(path: Path, ctx: ExtractContext) -> Iterator[str]:
    """Decoded text of `path` in bounded chunks, newlines normalised to `\\n`."""
    try:
        with path.open("rb") as raw:
            head = raw.read(ENCODING_SAMPLE_BYTES)
            whole = len(head) < ENCODING_SAMPLE_BYTES
        encoding = detect_encoding(head, whole_file=whole)
        # Decoding errors past the sample become U+FFFD: the sample already proved it is text.
        with path.open("r", encoding=encoding, errors="replace", newline=None) as handle:
            while True:
                chunk = handle.read(READ_CHUNK_CHARS)
                if not chunk:
                    return
                yield chunk
    except OSError as exc:
        raise ExtractionError(f"cannot read file: {exc.strerror or exc}") from exc


def split_line_pieces(
    chunks: Iterable[str], max_piece_chars: int
) -> Iterator[tuple[int, str, bool]]:
    """(1-based line number, piece, line_complete); a line longer than the bound comes in pieces."""
    line_no = 1
    carry = ""
    for chunk in chunks:
        parts = (carry + chunk).split("\n")
        carry = parts.pop()
        for part in parts:
            yield line_no, part, True
            line_no += 1
        while len(carry) >= max_piece_chars:
            yield line_no, carry[:max_piece_chars], False
            carry = carry[max_piece_chars:]
    if carry:
        yield line_no, carry, True


def iter_line_pieces(
    path: Path, ctx: ExtractContext, *, strip_data_uris: bool = False
) -> Iterator[tuple[int, str, bool]]:
    """Line pieces of a text file (see `split_line_pieces`), optionally without base64 data URIs."""
    chunks: Iterable[str] = iter_text_chunks(path, ctx)
    if strip_data_uris:
        chunks = strip_data_uri_stream(chunks)
    yield from split_line_pieces(chunks, max(1, min(ctx.limits.max_line_chars, READ_CHUNK_CHARS)))


# `data:image/png;base64,` (any media type, optional parameters) starting an inline payload.
_DATA_URI = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+\"-]+)*;base64,", re.IGNORECASE)
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=\r\n]*")
# Longest data-URI header we expect; that much text is held back between chunks.
_DATA_URI_HOLDBACK = 160


def strip_data_uri_stream(chunks: Iterable[str]) -> Iterator[str]:
    """Drop base64 data-URI payloads (inline images) from a text stream, keeping the newlines.

    The payload can be megabytes on one line, so it is skipped as it streams; the surrounding
    markup (`![alt]()`, `<img alt=...>`) stays and the extractor keeps the alt text.
    """
    carry = ""
    in_payload = False
    for chunk in chunks:
        text = carry + chunk
        carry = ""
        out: list[str] = []
        pos = 0
        while pos < len(text):
            if in_payload:
                run = _BASE64_RUN.match(text, pos)
                end = run.end() if run else pos
                out.append("\n" * text.count("\n", pos, end))
                pos = end
                if pos < len(text):
                    in_payload = False
                continue
            match = _DATA_URI.search(text, pos)
            if match is None:
                keep_from = max(pos, len(text) - _DATA_URI_HOLDBACK)
                out.append(text[pos:keep_from])
                carry = text[keep_from:]
                break
            out.append(text[pos : match.start()])
            pos = match.end()
            in_payload = True
        if out:
            yield "".join(out)
    if carry and not in_payload:
        yield carry
