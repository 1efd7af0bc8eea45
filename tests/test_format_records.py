"""One record per document format (helpers.extract.formats): every table is derived from it."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

from helpers.extract import formats, registry


def test_no_suffix_belongs_to_two_formats_and_every_suffix_is_lower_case_with_a_dot() -> None:
    counts = Counter(s for f in formats.FORMATS for s in f.suffixes)
    assert [s for s, n in counts.items() if n > 1] == []
    assert all(s.startswith(".") and s == s.lower() for s in counts)
    assert len({f.name for f in formats.FORMATS}) == len(formats.FORMATS)


def test_every_format_names_an_extractor_module_that_exists() -> None:
    for fmt in formats.FORMATS:
        assert importlib.util.find_spec(f"helpers.extract.{fmt.module}") is not None, fmt.name
        assert registry.extractor_for(Path("x" + fmt.suffixes[0])) is not None


def test_a_library_named_by_a_format_comes_with_what_to_install() -> None:
    for fmt in formats.FORMATS:
        assert bool(fmt.library) == bool(fmt.install), fmt.name
    assert formats.INSTALL_HINTS["PIL"] == "pip install pillow"


def test_a_tar_gz_and_a_gz_in_a_gz_are_refused_by_name_and_a_gzipped_document_is_not() -> None:
    assert "archive" in (formats.unsupported_reason(Path("bundle.tar.gz")) or "")
    assert "inside a gzip" in (formats.unsupported_reason(Path("x.txt.gz.gz")) or "")
    assert formats.unsupported_reason(Path("notes.md.gz")) is None
    assert formats.unsupported_reason(Path("notes.md")) is None
