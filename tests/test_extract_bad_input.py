"""Hostile and broken files: each one fails fast with an ExtractionError that says why."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.extract.archive_guard import MAX_MEMBERS, check_archive
from helpers.extract.blocks import ExtractContext, ExtractionError, ExtractLimits, TextBlock
from helpers.extract.registry import extractor_for
from tests.format_fixtures import (
    make_docx,
    make_epub,
    make_ipynb,
    make_odp,
    make_ods,
    make_odt,
    make_pptx,
    make_xlsx,
    write_many_member_zip,
    write_text_pdf,
    write_zip_bomb,
)

MAKERS: dict[str, Callable[[Path], Path]] = {
    ".docx": make_docx,
    ".xlsx": make_xlsx,
    ".pptx": make_pptx,
    ".odt": make_odt,
    ".ods": make_ods,
    ".odp": make_odp,
    ".epub": make_epub,
    ".ipynb": make_ipynb,
    ".pdf": lambda p: write_text_pdf(p, [["Hello page one"], ["Hello page two"]]),
}
ZIP_FORMATS = (".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".epub")


def extract(path: Path, ctx: ExtractContext | None = None) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ctx or ExtractContext()))


@pytest.mark.parametrize("suffix", ZIP_FORMATS)
def test_a_zip_bomb_is_refused_before_any_library_opens_it(tmp_path: Path, suffix: str) -> None:
    path = write_zip_bomb(tmp_path / f"bomb{suffix}", inflated_bytes=64 * 1024 * 1024)
    assert path.stat().st_size < 200_000
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "compresses" in err.value.message and "zip bomb" in err.value.hint


def test_total_expansion_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.docx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for index in range(3):
            archive.writestr(f"word/media/{index}.bin", bytes(400_000))
    with pytest.raises(ExtractionError) as err:
        check_archive(path, ExtractLimits(max_decompressed_bytes=1_000_000))
    assert "expands to over" in err.value.message


def test_an_archive_with_too_many_members_is_refused(tmp_path: Path) -> None:
    path = write_many_member_zip(tmp_path / "many.xlsx", MAX_MEMBERS + 1)
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "members" in err.value.message


def test_many_nested_archives_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "nested.pptx"
    with zipfile.ZipFile(path, "w") as archive:
        for index in range(101):
            archive.writestr(f"ppt/embeddings/{index}.zip", b"PK\x05\x06" + bytes(18))
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "nested archives" in err.value.message


@pytest.mark.parametrize("suffix", sorted(MAKERS))
@pytest.mark.parametrize("fraction", [0.3, 0.7])
def test_truncated_files_of_every_format_raise_extraction_error_or_read(
    tmp_path: Path, suffix: str, fraction: float
) -> None:
    whole = MAKERS[suffix](tmp_path / f"whole{suffix}")
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(whole.read_bytes()[: int(whole.stat().st_size * fraction)])
    if suffix in ZIP_FORMATS:  # a zip loses its central directory at the end
        with pytest.raises(ExtractionError) as err:
            extract(cut)
        assert "corrupt or truncated" in err.value.message
        return
    try:
        blocks = extract(cut)
    except ExtractionError as exc:
        assert exc.message
    else:
        assert all(isinstance(b, TextBlock) for b in blocks)


@pytest.mark.parametrize("suffix", ZIP_FORMATS)
def test_a_damaged_member_inside_a_valid_zip_raises_extraction_error(
    tmp_path: Path, suffix: str
) -> None:
    whole = MAKERS[suffix](tmp_path / f"whole{suffix}")
    broken = tmp_path / f"broken{suffix}"
    with zipfile.ZipFile(whole) as source, zipfile.ZipFile(broken, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith((".xml", ".xhtml", ".opf")) and len(data) > 200:
                data = data[: len(data) // 2]  # cut XML mid-element
            target.writestr(info, data)
    with pytest.raises(ExtractionError):
        extract(broken)


@pytest.mark.parametrize("suffix", [".docx", ".xlsx", ".pptx"])
def test_an_encrypted_office_file_says_password_protected(tmp_path: Path, suffix: str) -> None:
    # Password-protected OOXML is an OLE2 container, not a zip.
    path = tmp_path / f"secret{suffix}"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(4088))
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "password" in err.value.message and "password" in err.value.hint


def test_an_encrypted_opendocument_file_says_password_protected(tmp_path: Path) -> None:
    plain = make_odt(tmp_path / "plain.odt")
    locked = tmp_path / "locked.odt"
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(locked, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "META-INF/manifest.xml":
                entry = b'manifest:full-path="content.xml" manifest:media-type="text/xml"'
                assert entry + b"/>" in data
                data = data.replace(
                    entry + b"/>",
                    entry + b"><manifest:encryption-data/></manifest:file-entry>",
                )
            target.writestr(info, data)
    with pytest.raises(ExtractionError) as err:
        extract(locked)
    assert "password-protected" in err.value.message


@pytest.mark.parametrize("suffix", [".docx", ".xlsx", ".pptx", ".odt", ".epub", ".pdf"])
def test_random_bytes_with_a_document_extension_raise_extraction_error(
    tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"noise{suffix}"
    path.write_bytes(bytes((i * 7919) % 251 for i in range(50_000)))
    with pytest.raises(ExtractionError):
        extract(path)


def test_an_xlsx_that_is_really_a_docx_raises_extraction_error(tmp_path: Path) -> None:
    docx_path = make_docx(tmp_path / "real.docx")
    renamed = tmp_path / "renamed.xlsx"
    renamed.write_bytes(docx_path.read_bytes())
    with pytest.raises(ExtractionError):
        extract(renamed)


def test_an_odt_that_is_really_a_spreadsheet_names_its_real_type(tmp_path: Path) -> None:
    ods = make_ods(tmp_path / "real.ods")
    renamed = tmp_path / "renamed.odt"
    renamed.write_bytes(ods.read_bytes())
    with pytest.raises(ExtractionError) as err:
        extract(renamed)
    assert "spreadsheet" in err.value.message


def test_an_empty_file_of_each_format_is_handled(tmp_path: Path) -> None:
    for suffix in (*MAKERS, ".txt", ".md", ".csv", ".html", ".json"):
        path = tmp_path / f"empty{suffix}"
        path.write_bytes(b"")
        try:
            blocks = extract(path)
        except ExtractionError as exc:
            assert exc.message
        else:
            assert blocks == []
