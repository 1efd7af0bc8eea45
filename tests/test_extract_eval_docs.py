"""Every document of the mixed-format evaluation set extracts; only image-only PDFs need OCR."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from conftest import needs_tool

from helpers.extract.blocks import BlockKind, ExtractContext
from helpers.extract.registry import extractor_for

DOCS = Path(__file__).resolve().parents[2] / "shared/eval/debfaq-en-mixed/docs"


@needs_tool(
    DOCS.is_dir, "the debfaq-en-mixed evaluation set", f"put shared/eval beside the repo ({DOCS})"
)
def test_every_mixed_format_eval_document_extracts_without_errors() -> None:
    ctx = ExtractContext()
    formats: Counter[str] = Counter()
    needs_ocr: list[str] = []
    for path in sorted(DOCS.iterdir()):
        extractor = extractor_for(path)
        assert extractor is not None, f"unsupported: {path.name}"
        blocks = list(extractor(path, ctx))
        formats[path.suffix] += 1
        text = "".join(b.text for b in blocks if b.kind is not BlockKind.NEEDS_OCR)
        if any(b.kind is BlockKind.NEEDS_OCR for b in blocks):
            assert path.suffix == ".pdf", path.name
            needs_ocr.append(path.name)
        else:
            assert len(text.strip()) > 20, f"{path.name} gave only {len(text)} characters"
    assert sum(formats.values()) == 147
    assert set(formats) == {".docx", ".html", ".md", ".odt", ".pdf", ".pptx", ".txt", ".xlsx"}
    # About 10 % of the PDFs are image-only scans: flagged, never silently empty.
    assert 1 <= len(needs_ocr) <= formats[".pdf"] // 4
