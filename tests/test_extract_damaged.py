"""Damaged files of several formats read as plain words with a fix, in and out of the sandbox
and through a real sync: "the file is damaged …", never `AttributeError: 'lxml.etree._Element'`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PYTHON_INTERNALS, assert_plain_words, make_config
from format_fixtures import write_damaged_documents
from stress.harness import run_sync

import rag_service
from helpers.extract.blocks import ExtractContext, ExtractionError, ExtractLimits
from helpers.extract.registry import extractor_for
from helpers.extract.sandbox import SandboxedExtractor

KINDS = (
    "docx-not-xml",
    "docx-wrong-xml",
    "xlsx-not-xml",
    "pptx-not-xml",
    "odt-not-xml",
    "epub-not-xml",
    "xlsx-cut",
    "pdf-cut",
    "ipynb-not-json",
)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made = write_damaged_documents(tmp_path_factory.mktemp("damaged") / "docs")
    assert sorted(made) == sorted(KINDS)
    return made


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxedExtractor]:
    box = SandboxedExtractor(ExtractLimits(), None, stall_timeout_s=60)
    yield box
    box.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_file_fails_in_plain_words_in_process(damaged: dict[str, Path], kind: str):
    path = damaged[kind]
    extract = extractor_for(path)
    assert extract is not None
    with pytest.raises(ExtractionError) as err:
        list(extract(path, ExtractContext()))
    assert_plain_words(err.value)


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_file_fails_in_plain_words_in_the_sandbox(
    damaged: dict[str, Path], sandbox: SandboxedExtractor, kind: str
):
    with pytest.raises(ExtractionError) as err:
        list(sandbox.extract(damaged[kind], lambda: None))
    assert_plain_words(err.value)


@pytest.mark.parametrize("kind", ["docx-not-xml", "docx-wrong-xml"])
def test_a_docx_whose_body_is_not_word_xml_is_reported_damaged(damaged: dict[str, Path], kind):
    with pytest.raises(ExtractionError) as err:
        list(extractor_for(damaged[kind])(damaged[kind], ExtractContext()))  # type: ignore[misc]
    assert err.value.message.startswith("the file is damaged"), err.value.message
    assert "save it again" in err.value.hint


def test_a_sync_reports_every_damaged_file_in_plain_words_and_goes_on(
    damaged: dict[str, Path], tmp_path: Path
):
    docs = next(iter(damaged.values())).parent
    (docs / "fine.md").write_text("# Fine\n\nthe one readable document\n", encoding="utf-8")
    config = make_config(docs, tmp_path / "state")
    view = run_sync(config)
    assert view.state == "succeeded"
    listing = rag_service.list_documents(config, status="failed")
    failed = {item["path"]: item for item in listing["items"]}
    assert sorted(failed) == sorted(p.name for p in damaged.values())
    for item in failed.values():
        reason = item.get("error") or item.get("reason") or ""
        assert reason, item
        found = PYTHON_INTERNALS.search(reason)
        assert found is None, f"{item['path']}: {reason}"
    hits = rag_service.search(config, "readable document", mode="lexical").hits
    assert [h.path for h in hits] == ["fine.md"]
