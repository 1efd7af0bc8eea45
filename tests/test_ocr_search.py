"""Scans end to end: a scanned PDF and a photo are synced, OCRed and found by rag_search with the
page; without an engine they are reported loudly, never indexed as empty."""

from __future__ import annotations

from pathlib import Path

from conftest import make_config
from format_fixtures import write_text_pdf
from ocr_fixtures import (
    ENGLISH_LINES,
    RUSSIAN_LINES,
    THAI_LINES,
    degrade,
    render_page,
    save_scanned_pdf,
)

import rag_service
from helpers.config import Config


def _sync(config: Config):  # type: ignore[no-untyped-def]
    return rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)


def test_scanned_pages_and_images_are_found_by_search_with_their_page(
    config: Config, knowledge: Path
):
    cover = render_page(["Cover sheet typed page"], dpi=200)
    english = degrade(render_page(list(ENGLISH_LINES), dpi=200), seed=1)
    russian = degrade(render_page(list(RUSSIAN_LINES), dpi=200), seed=2)
    save_scanned_pdf([cover, english, russian], knowledge / "scan.pdf", dpi=200)
    render_page(list(THAI_LINES), dpi=200).save(knowledge / "photo.png", dpi=(200, 200))
    view = _sync(config)
    assert view.state == "succeeded", view.to_dict()
    assert view.counts["added"] == 2 and view.counts["failed"] == 0, view.errors
    hits = rag_service.search(config, "quarterly maintenance contract", mode="lexical").hits
    assert hits[0].path == "scan.pdf" and hits[0].location["page"] == 2
    assert hits[0].ocr is True
    hits = rag_service.search(config, "Договор поставки оборудования", mode="lexical").hits
    assert hits[0].path == "scan.pdf" and hits[0].location["page"] == 3
    hits = rag_service.search(config, "ติดต่อฝ่ายบัญชี", mode="lexical").hits
    assert hits and hits[0].path == "photo.png"
    listed = {i["path"]: i for i in rag_service.list_documents(config)["items"]}
    assert listed["scan.pdf"]["ocr_pages"] == [1, 2, 3]
    assert listed["scan.pdf"]["ocr_engine"].startswith("tesseract 5")
    assert listed["photo.png"]["status"] == "indexed"


def test_without_an_ocr_engine_scans_are_reported_with_the_install_command(
    tmp_path: Path, knowledge: Path
):
    config = make_config(knowledge, tmp_path / "state", ocr_cmd=str(tmp_path / "no-tesseract"))
    save_scanned_pdf([render_page(list(ENGLISH_LINES), dpi=150)], knowledge / "scan.pdf", 150)
    render_page(["Whiteboard photo"], dpi=150).save(knowledge / "board.png")
    write_text_pdf(knowledge / "typed.pdf", [["typed text layer page"]])
    view = _sync(config)
    assert view.state == "succeeded"
    errors = {e["path"]: e["message"] for e in view.errors}
    assert "apt-get install" in errors["scan.pdf"] and "tesseract" in errors["scan.pdf"]
    assert "apt-get install" in errors["board.png"]
    listed = {i["path"]: i for i in rag_service.list_documents(config)["items"]}
    assert listed["scan.pdf"]["status"] == "needs_ocr"
    assert listed["scan.pdf"]["needs_ocr_pages"] == [1]
    assert listed["board.png"]["status"] == "failed"
    assert listed["typed.pdf"]["status"] == "indexed"
    health = rag_service.health(config)
    assert health["ocr"]["state"] == "unavailable" and "apt-get" in health["ocr"]["hint"]
