"""Single-file gzip (`notes.md.gz`, `server.log.gz`, `manual.pdf.gz`): decompressed, bounded, into
a private temporary file that the inner type's extractor reads.

The inner type is the suffix before `.gz`; a name without a known one (`changelog.gz`,
`NEWS.gz`, `ls.1.gz`) is read as plain text when its content is text. A `.tar.gz` holds many
files, not one document, and is reported as unsupported. Decompression streams and stops at the
first of: the size cap (the smaller of `max_decompressed_bytes` and `max_file_bytes`, the cap
the inner file would meet on disk) and, past `RATIO_CHECK_MIN_BYTES`, a compression ratio over
the zip-bomb limit of `archive_guard` (compressed bytes read so far against bytes inflated), so
a gzip bomb is stopped after inflating about a megabyte. The inner file goes through the same
guarded extractor (size, text and error contract) as a file on disk; its locations are the inner
file's (lines, pages, ...).
"""

from __future__ import annotations

import gzip
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.archive_guard import BOMB_HINT, MAX_COMPRESSION_RATIO, RATIO_CHECK_MIN_BYTES
from helpers.extract.blocks import ExtractContext, ExtractionError, TextBlock
from helpers.extract.common import ExtractionCancelled
from helpers.extract.formats import SUPPORTED_SUFFIXES, gzip_inner_suffix, unsupported_reason
from helpers.extract.nesting import nested

READ_BYTES = 1024 * 1024
TAR_HINT = "unpack the archive into the knowledge folder to index the files it holds"
CORRUPT_HINT = "the .gz file is damaged or truncated; test it with `gzip -t FILE`"


def inner_document_name(path: Path) -> str:
    """Name of the temporary inner file: its own suffix when supported, else `.txt`.

    Documentation folders are full of `changelog.gz`, `NEWS.gz`, `changelog.Debian.gz` and
    gzipped man pages: text under a name that says nothing. They are read as plain text, which
    refuses binary content with a clear error (`blob.bin.gz` of random bytes)."""
    inner = gzip_inner_suffix(path)
    return f"document{inner if inner in SUPPORTED_SUFFIXES else '.txt'}"


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    from helpers.extract import registry  # the registry loads this module when a .gz is read
    from helpers.safety import rel_path_problem

    reason = unsupported_reason(path)
    if reason is not None:
        raise ExtractionError(reason, TAR_HINT if "tar" in reason else "")
    inner_name = path.stem
    problem = rel_path_problem(inner_name)
    if problem is not None:  # `passwords.txt.gz` is as sensitive as `passwords.txt`
        raise ExtractionError(f"the gzipped file {inner_name!r} has a {problem}")
    with nested("gzip file"), tempfile.TemporaryDirectory(prefix="ragdoc-gz-") as tmp:
        inner = Path(tmp) / inner_document_name(path)
        decompress(path, inner, ctx)
        extract_inner = registry.extractor_for(inner)
        assert extract_inner is not None  # a supported suffix or .txt
        yield from extract_inner(inner, ctx)


def decompress(source: Path, target: Path, ctx: ExtractContext) -> int:
    """Inflate `source` into `target` under the caps; the number of bytes written."""
    limits = ctx.limits
    cap = min(limits.max_decompressed_bytes, limits.max_file_bytes)
    written = 0
    try:
        with (
            source.open("rb") as raw,
            gzip.GzipFile(fileobj=raw, mode="rb") as stream,
            target.open("wb") as out,
        ):
            while chunk := stream.read(READ_BYTES):
                if ctx.should_cancel():
                    raise ExtractionCancelled("extraction cancelled")
                written += len(chunk)
                compressed = max(1, raw.tell())  # read so far: a bomb is caught early
                if written > cap:
                    raise ExtractionError(
                        f"gzip file expands to over {cap / 1e6:.0f} MB", BOMB_HINT
                    )
                if (
                    written >= RATIO_CHECK_MIN_BYTES
                    and written / compressed > MAX_COMPRESSION_RATIO
                ):
                    raise ExtractionError(
                        f"gzip file compresses over {MAX_COMPRESSION_RATIO}:1 "
                        f"({compressed} bytes to more than {written})",
                        BOMB_HINT,
                    )
                out.write(chunk)
    except gzip.BadGzipFile as exc:
        raise ExtractionError(f"not a gzip file: {exc}", CORRUPT_HINT) from exc
    except EOFError as exc:
        raise ExtractionError("truncated gzip file (it ends mid-stream)", CORRUPT_HINT) from exc
    except zlib.error as exc:
        raise ExtractionError(f"corrupt gzip data: {exc}", CORRUPT_HINT) from exc
    return written
