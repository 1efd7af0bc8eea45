"""Single-file gzip (bounded before and after decompression) and RTF (striprtf)."""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

import pytest
from format_fixtures import RUSSIAN, SOFFICE, THAI, make_docx, soffice_convert, write_text_pdf

from helpers.extract import gzip_file, rtf
from helpers.extract.archive_guard import MAX_COMPRESSION_RATIO, RATIO_CHECK_MIN_BYTES
from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, ExtractLimits
from helpers.extract.registry import extractor_for, unsupported_reason
from helpers.safety import rel_path_problem


def extract(path: Path, ctx: ExtractContext | None = None) -> list:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ctx or ExtractContext()))


def gz(path: Path, data: bytes) -> Path:
    with gzip.open(path, "wb") as out:
        out.write(data)
    return path


def test_gzipped_markdown_and_log_are_read_by_the_inner_extractor(tmp_path: Path):
    notes = gz(tmp_path / "notes.md.gz", b"# Setup\n\nInstall the pump.\n\n## Risks\n\nLeaks.\n")
    blocks = extract(notes)
    leaks = next(b for b in blocks if b.text == "Leaks.")
    assert leaks.location.heading_path == ("Setup", "Risks") and leaks.location.line_start == 7
    log = gz(tmp_path / "server.log.gz", b"".join(b"%05d GET /api ok\n" % i for i in range(5000)))
    text = "\n".join(b.text for b in extract(log))
    assert "04999 GET /api ok" in text
    assert not list(tmp_path.glob("document*")) and not list(Path("/tmp").glob("ragdoc-gz-*"))


def test_gzipped_text_without_a_known_inner_type_is_read_as_text(tmp_path: Path):
    changelog = b"pump (1.2-1) unstable; urgency=low\n\n  * Fix the gasket leak.\n"
    for name in ("changelog.Debian.gz", "NEWS.gz", "pump.1.gz"):
        blocks = extract(gz(tmp_path / name, changelog))
        leak = next(b for b in blocks if "gasket leak" in b.text)
        assert leak.location.line_start == 3, name


def test_a_gzipped_pdf_keeps_its_pages(tmp_path: Path):
    pdf = write_text_pdf(tmp_path / "m.pdf", [["first page text"], ["second page zebra text"]])
    path = gz(tmp_path / "manual.pdf.gz", pdf.read_bytes())
    page = next(b for b in extract(path) if "zebra" in b.text)
    assert page.location.page == 2


def test_a_gzip_bomb_stops_at_the_ratio_cap_without_inflating_it_all(tmp_path: Path):
    bomb = tmp_path / "bomb.txt.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        for _ in range(1024):  # 1 GB of zeros in ~1 MB
            out.write(bytes(1024 * 1024))
    assert bomb.stat().st_size < 2 * 1024 * 1024
    with pytest.raises(ExtractionError, match=f"over {MAX_COMPRESSION_RATIO}:1") as caught:
        extract(bomb)
    assert "zip bomb" in caught.value.hint


def test_the_size_cap_applies_after_decompression(tmp_path: Path):
    data = os.urandom(300_000).hex().encode()  # ~2:1, under the ratio limit
    path = gz(tmp_path / "big.txt.gz", data)
    limits = ExtractLimits(max_file_bytes=path.stat().st_size + 10)  # the .gz itself fits
    with pytest.raises(ExtractionError, match="expands to over"):
        extract(path, ExtractContext(limits=limits))


def test_truncated_and_fake_gzip_files_are_reported(tmp_path: Path):
    whole = gz(tmp_path / "whole.txt.gz", b"some text\n" * 50_000)
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(ExtractionError, match="truncated gzip"):
        extract(cut)
    fake = tmp_path / "fake.txt.gz"
    fake.write_bytes(b"plain text, not gzip")
    with pytest.raises(ExtractionError, match="not a gzip file"):
        extract(fake)


def test_tar_gz_and_unknown_inner_types_are_unsupported_with_the_reason(tmp_path: Path):
    member = tmp_path / "a.txt"
    member.write_text("inside a tar", "utf-8")
    bundle = tmp_path / "bundle.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(member, arcname="a.txt")
    assert "archive of many files" in (unsupported_reason(bundle) or "")
    with pytest.raises(ExtractionError, match="archive of many files"):
        extract(bundle)
    nested_gz = gz(tmp_path / "twice.txt.gz.gz", b"x")
    assert "inside a gzip file" in (unsupported_reason(nested_gz) or "")
    blob = gz(tmp_path / "blob.bin.gz", os.urandom(20_000))
    with pytest.raises(ExtractionError, match="binary data"):
        extract(blob)
    assert unsupported_reason(gz(tmp_path / "ok.md.gz", b"# x")) is None


def test_gzipped_sensitive_names_are_refused_by_name(tmp_path: Path):
    for name in ("passwords.txt.gz", "server.key.gz", "id_rsa.gz", "secrets.toml.gz"):
        assert rel_path_problem(name) is not None, name
    assert rel_path_problem("notes.md.gz") is None


def test_an_rtf_from_libreoffice_keeps_paragraphs_and_scripts(tmp_path: Path):
    if SOFFICE is None:
        if os.environ.get("CI"):
            pytest.fail("LibreOffice is needed to build the RTF fixture")
        pytest.skip("LibreOffice is not installed")
    source = soffice_convert(make_docx(tmp_path / "report.docx"), "rtf", tmp_path / "rtf")
    blocks = extract(source)
    text = [b.text for b in blocks]
    assert RUSSIAN in text and THAI in text
    lines = [b.location.line_start for b in blocks]
    assert lines == sorted(lines) and all(isinstance(n, int) for n in lines)
    assert blocks[text.index(THAI)].location.label().startswith("line ")
    assert any("Москва" in t for t in text)


def test_rtf_pictures_are_dropped_and_code_pages_decoded(tmp_path: Path):
    picture = "89504e47" * 200_000  # 1.6 MB of hex picture data
    doc = (
        r"{\rtf1\ansi\ansicpg1251\deff0{\fonttbl{\f0\fnil\fcharset204 Arial;}}"
        "\n"
        r"\pard\f0 Quarterly \b report\b0  on \'cf\'f0\'e8\'e2\'e5\'f2 pumps.\par"
        "\n{\\pict\\pngblip\\picw10\\pich10 " + picture + "}\n"
        r"Second paragraph \u3588?\u3617? end.\par}"
    )
    path = tmp_path / "memo.rtf"
    path.write_text(doc, "ascii")
    blocks = extract(path)
    assert [b.text for b in blocks] == [
        "Quarterly report on Привет pumps.",
        "Second paragraph คม end.",
    ]
    assert all(b.kind is BlockKind.PARAGRAPH for b in blocks)
    assert "89504e47" not in rtf.drop_blob_groups(doc)


def test_non_rtf_bytes_with_an_rtf_name_are_refused(tmp_path: Path):
    path = tmp_path / "garbage.rtf"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(ExtractionError, match="not an RTF file"):
        extract(path)


def test_a_bomb_is_stopped_after_about_a_megabyte_is_written(tmp_path: Path):
    bomb = gz(tmp_path / "z.txt.gz", bytes(50 * 1024 * 1024))
    target = tmp_path / "x.txt"
    with pytest.raises(ExtractionError, match="compresses over"):
        gzip_file.decompress(bomb, target, ExtractContext())
    assert target.stat().st_size <= RATIO_CHECK_MIN_BYTES + gzip_file.READ_BYTES
