"""Zip-bomb and corrupt-zip check for OOXML, ODF and EPUB before any library opens them.

Every library we use reads members through `zipfile`, which never inflates a member past its
declared size, so checking the declared sizes in the central directory bounds the real work.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from helpers.extract.blocks import ExtractionError, ExtractLimits

# Office documents hold tens to a few hundred parts; 10,000 leaves room for image-heavy decks.
MAX_MEMBERS = 10_000
# Deflated XML of real documents shrinks 5-50x (a sheet of repeated styles ~100x); zip bombs reach
# ~1,000x. Only members big enough to matter are checked: a tiny member can have any ratio.
MAX_COMPRESSION_RATIO = 200
RATIO_CHECK_MIN_BYTES = 1024 * 1024
# Embedded archives (an .xlsx inside a .docx) are never opened by an extractor, so they only
# count against the size budget; a document made of many of them is refused as suspicious.
MAX_NESTED_ARCHIVES = 100
_NESTED_SUFFIXES = (".zip", ".jar", ".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".epub")
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

BOMB_HINT = "the archive expands far beyond its size (a zip bomb?); it is skipped for safety"


def check_archive(path: Path, limits: ExtractLimits) -> None:
    """Raise ExtractionError unless `path` is a readable zip safe to open in memory."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise _not_a_zip(path, exc) from exc
    except OSError as exc:
        raise ExtractionError(f"cannot read file: {exc.strerror or exc}") from exc
    if len(members) > MAX_MEMBERS:
        raise ExtractionError(
            f"archive has {len(members)} members, over the {MAX_MEMBERS} limit", BOMB_HINT
        )
    total = 0
    nested = 0
    for info in members:
        total += info.file_size
        if total > limits.max_decompressed_bytes:
            raise ExtractionError(
                f"archive expands to over {limits.max_decompressed_bytes // (1024 * 1024)} MB",
                BOMB_HINT + " (or raise ExtractLimits.max_decompressed_bytes)",
            )
        if info.file_size >= RATIO_CHECK_MIN_BYTES:
            ratio = info.file_size / max(1, info.compress_size)
            if ratio > MAX_COMPRESSION_RATIO:
                raise ExtractionError(
                    f"archive member {info.filename!r} compresses {ratio:.0f}:1, "
                    f"over the {MAX_COMPRESSION_RATIO}:1 limit",
                    BOMB_HINT,
                )
        if info.filename.lower().endswith(_NESTED_SUFFIXES):
            nested += 1
            if nested > MAX_NESTED_ARCHIVES:
                raise ExtractionError(
                    f"archive holds over {MAX_NESTED_ARCHIVES} nested archives", BOMB_HINT
                )


def _not_a_zip(path: Path, exc: Exception) -> ExtractionError:
    try:
        with path.open("rb") as handle:
            magic = handle.read(8)
    except OSError:
        magic = b""
    if magic == _OLE_MAGIC:
        return ExtractionError(
            "not a zip-based document: an OLE2 container (password-protected Office file, "
            "or a legacy .doc/.xls/.ppt with the wrong extension)",
            "remove the password and save again, or give the file its legacy extension",
        )
    return ExtractionError(
        f"corrupt or truncated archive: {exc}",
        "the file is damaged or not really this format; open it in its application and save again",
    )
