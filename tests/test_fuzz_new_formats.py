"""Fuzzing the new formats: any bytes under a LaTeX/AsciiDoc/Org/code/XML/RTF/mail/gzip name,
and mutated real mail, RTF and gzip files through the sandbox child, give blocks or one
ExtractionError, never another exception, a hang or a crash."""

from __future__ import annotations

import gzip
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from format_fixtures import make_docx, write_text_pdf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from mail_fixtures import DOCX_TYPE, make_message, write_mbox
from test_fuzz_fast import EDITS, KEEP, check_binary_bytes, mutate

from helpers.extract.blocks import ExtractContext, ExtractionError, ExtractLimits, TextBlock
from helpers.extract.registry import extractor_for
from helpers.extract.sandbox import SandboxedExtractor

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "ragdoc-hypothesis")
IN_PROCESS = (".tex", ".adoc", ".org", ".py", ".ini", ".toml", ".sql")
SANDBOXED = (".xml", ".rtf", ".eml", ".mbox", ".gz")
FAST = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# Markup-heavy alphabets find parser corners faster than uniform bytes.
MARKUP = st.text(alphabet="\\{}[]%$&#*=:-_.`'\"<>!/ \n\tabcdefgх", max_size=2000)


@settings(FAST, max_examples=200)
@given(
    text=st.one_of(MARKUP, st.binary(max_size=2000).map(lambda b: b.decode("latin-1"))),
    suffix=st.sampled_from(IN_PROCESS + SANDBOXED),
)
def test_any_text_under_a_new_suffix_gives_blocks_or_an_extraction_error(text: str, suffix: str):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"f{suffix}"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        extract = extractor_for(path)
        assert extract is not None
        try:
            blocks = list(extract(path, ExtractContext()))
        except ExtractionError as exc:
            assert exc.message
        else:
            assert all(isinstance(b, TextBlock) for b in blocks)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    work = tmp_path_factory.mktemp("seeds")
    pdf = write_text_pdf(work / "r.pdf", [["alpha page"], ["beta page"]]).read_bytes()
    docx = make_docx(work / "m.docx").read_bytes()
    message = make_message(
        "Seed",
        "seed body",
        html="<p>seed html</p>",
        attachments=[
            ("r.pdf", pdf, ("application", "pdf")),
            ("m.docx", docx, DOCX_TYPE),
        ],
    )
    mbox = write_mbox(work / "s.mbox", [make_message("a", "first"), message]).read_bytes()
    rtf = (
        rb"{\rtf1\ansi\ansicpg1251{\fonttbl{\f0\fcharset204 Arial;}}\f0 Hello \'cf\par"
        rb'{\pict\pngblip 89504e47}{\field{\*\fldinst{HYPERLINK "http://x"}}{\fldrslt{x}}}\par}'
    )
    return {
        ".eml": message.as_bytes(),
        ".mbox": mbox,
        ".rtf": rtf,
        ".gz": gzip.compress(b"# Title\n\nsome markdown text\n" * 50),
    }


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxedExtractor]:
    box = SandboxedExtractor(
        ExtractLimits(), None, stall_timeout_s=60, memory_bytes=1024 * 1024 * 1024
    )
    yield box
    box.close()


@settings(FAST, max_examples=60)
@given(
    suffix=st.sampled_from((".eml", ".mbox", ".rtf", ".gz")),
    edits=EDITS,
    keep=KEEP,
)
def test_mutated_mail_rtf_and_gzip_survive_the_sandbox(
    seeds: dict[str, bytes],
    sandbox: SandboxedExtractor,
    suffix: str,
    edits: list[tuple[float, int]],
    keep: float,
):
    name_suffix = ".md.gz" if suffix == ".gz" else suffix
    check_binary_bytes(sandbox, mutate(seeds[suffix], edits, keep), name_suffix)
