"""Legacy .doc/.xls/.ppt: converted by headless LibreOffice to OOXML, then read by that extractor.

Each conversion runs on a private copy with a fixed name (a file called `--help.doc` must not
become an option; LibreOffice must not leave lock files in the read-only source folder), in a
throw-away profile (parallel conversions do not fight over one), under a timeout that kills the
whole process group.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import ExtractContext, ExtractionError, TextBlock
from helpers.extract.common import ExtractionCancelled

# (target format for --convert-to, module that reads it)
TARGETS = {
    ".doc": ("docx", "docx"),
    ".xls": ("xlsx", "xlsx"),
    ".ppt": ("pptx", "pptx"),
}
# Import filters by file signature, tried in order. Naming the filter matters: left to detect it
# alone, LibreOffice imports a damaged file as plain text and "succeeds" with binary garbage.
OLE_FILTERS = {
    ".doc": ("MS Word 97", "MS WinWord 6.0"),
    ".xls": ("MS Excel 97", "MS Excel 95"),
    ".ppt": ("MS PowerPoint 97",),
}
RTF_FILTERS = ("Rich Text Format",)  # Word saves RTF under a .doc name on request
# A 300-page .doc converts in ~10 s. Kept under the sync sandbox stall timeout (180 s) so a slow
# conversion reports this clear error rather than a killed child.
CONVERT_TIMEOUT_S = 120
POLL_S = 0.25  # how often a running conversion checks for cancellation
STDERR_TAIL_CHARS = 400  # enough of soffice's log to say why a filter failed
INSTALL_HINT = (
    "install LibreOffice: apt-get install --no-install-recommends "
    "libreoffice-writer libreoffice-calc libreoffice-impress"
)
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
log = logging.getLogger(__name__)


def soffice_path() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    suffix = path.suffix.lower()
    target, module = TARGETS[suffix]
    soffice = soffice_path()
    if soffice is None:
        raise ExtractionError(f"LibreOffice is needed to read {suffix} files", INSTALL_HINT)
    with path.open("rb") as handle:
        magic = handle.read(8)
    if magic == _OLE_MAGIC:
        filters = OLE_FILTERS[suffix]
    elif magic.startswith(b"{\\rtf") and suffix == ".doc":
        filters = RTF_FILTERS
    else:
        raise ExtractionError(
            f"not a legacy Office {suffix} file (no OLE2 header)",
            "the file is damaged or another format renamed to " + suffix,
        )
    with tempfile.TemporaryDirectory(prefix="ragdoc-soffice-") as tmp:
        work = Path(tmp)
        source = work / f"document{suffix}"
        shutil.copyfile(path, source)
        converted = None
        for infilter in filters:
            converted = _convert(soffice, source, target, infilter, work, ctx)
            if converted is not None:
                break
        if converted is None:
            raise ExtractionError(
                f"LibreOffice could not read the {suffix} file (tried {', '.join(filters)})",
                "the file may be damaged or password-protected; open it in Office and save again",
            )
        reader = importlib.import_module(f"helpers.extract.{module}").extract
        yield from reader(converted, ctx)


def _convert(
    soffice: str, source: Path, target: str, infilter: str, work: Path, ctx: ExtractContext
) -> Path | None:
    """The converted file, or None when this import filter could not load the source."""
    out_dir = work / "out"
    profile = work / "profile"
    argv = [
        soffice,
        f"-env:UserInstallation={profile.as_uri()}",
        "--headless",
        "--norestore",
        "--nolockcheck",
        f"--infilter={infilter}",
        "--convert-to",
        target,
        "--outdir",
        str(out_dir),
        str(source),
    ]
    env = {**os.environ, "HOME": str(work)}
    log_path = work / "soffice.log"  # a file, not a pipe: a chatty soffice cannot block on it
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # never our stdout: it is the MCP channel
            stderr=log,
            start_new_session=True,  # its own process group, killed whole on timeout
            env=env,
        )
    deadline = time.monotonic() + CONVERT_TIMEOUT_S
    try:
        while True:
            try:
                process.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                if ctx.should_cancel():
                    raise ExtractionCancelled("extraction cancelled") from None
                if time.monotonic() > deadline:
                    raise ExtractionError(
                        f"LibreOffice conversion took over {CONVERT_TIMEOUT_S} s",
                        "the file may be huge or damaged; convert it by hand and index the result",
                    ) from None
    finally:
        _kill_group(process)  # also reaps helpers left behind by a finished soffice
    result = out_dir / f"{source.stem}.{target}"
    if not result.exists():
        tail = log_path.read_bytes()[-STDERR_TAIL_CHARS:].decode("utf-8", "replace").strip()
        log.info("soffice filter %r failed (exit %s): %s", infilter, process.returncode, tail)
        return None
    return result


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
