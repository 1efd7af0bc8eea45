"""Fingerprints of the chunker's output on real documents: the speed work on helpers.text.chunking
must give the same children, byte for byte (tests/test_chunking_pinned.py checks the stored ones).

    python tests/chunk_fingerprint.py --write   # after a deliberate CHUNK_SCHEME change
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helpers.extract.blocks import BlockKind, ExtractContext, Location, TextBlock  # noqa: E402
from helpers.extract.registry import extractor_for  # noqa: E402
from helpers.text.chunking import CHUNK_SCHEME, build_sections  # noqa: E402
from helpers.text.normalize import clean_text  # noqa: E402

EVAL_DIR = REPO.parent / "shared" / "eval"
# Markdown-only sets: their extractor is stable, so a change here is the chunker's.
PINNED_SETS = ("debfaq-en", "pyfaq-en", "manru", "udhr-th2th")
STORE = REPO / "tests" / "data" / "chunk_fingerprints.json"


def file_blocks(path: Path) -> list[TextBlock]:
    """The blocks rag_sync hands the chunker: cleaned, blank ones dropped."""
    extract = extractor_for(path)
    blocks = []
    for block in extract(path, ExtractContext()) if extract else ():
        text = clean_text(block.text)
        if text.strip():
            blocks.append(block if text == block.text else replace(block, text=text))
    return blocks


def generated_documents(seed: int = 11) -> Iterable[list[TextBlock]]:
    """Shapes the eval sets lack: tables with long headers, Thai runs, code, base64, OCR text."""
    rng = random.Random(seed)
    words = ["alpha", "Beta", "gamma_delta", "HTTPServer", "ключ", "данные", "ภาษาไทย", "合同"]
    for doc in range(40):
        blocks: list[TextBlock] = []
        heading = (f"Doc {doc}", "Part " + " ".join(rng.choices(words, k=rng.randint(1, 30))))
        header = "| " + " | ".join(rng.choices(words, k=rng.randint(2, 40))) + " |"
        for i in range(rng.randint(5, 60)):
            kind = rng.choice(["p", "p", "row", "code", "thai", "b64", "ocr"])
            loc = Location(page=1 + i // 20, heading_path=heading)
            if kind == "row":
                row = "| " + " | ".join(rng.choices(words, k=rng.randint(1, 60))) + " |"
                blocks.append(TextBlock(row, loc, BlockKind.TABLE_ROW, table_header=header))
            elif kind == "code":
                code = "\n".join(f"x_{j} = f({j})" for j in range(rng.randint(1, 400)))
                blocks.append(TextBlock(code, loc, BlockKind.CODE))
            elif kind == "thai":
                blocks.append(TextBlock("ภาษาไทยเป็นภาษาราชการ" * rng.randint(1, 50), loc))
            elif kind == "b64":
                raw = base64.b64encode(rng.randbytes(rng.randint(10, 3000))).decode()
                blocks.append(TextBlock(raw, loc))
            else:
                text = " ".join(rng.choices(words, k=rng.randint(1, 900)))
                blocks.append(TextBlock(text, loc, ocr=kind == "ocr"))
        yield blocks


def fingerprint(documents: Iterable[list[TextBlock]]) -> str:
    """sha256 over every section and child (text, location, ocr) of every document, in order."""
    digest = hashlib.sha256()
    for blocks in documents:
        for section in build_sections(blocks):
            record = [
                section.text,
                section.location.to_dict(),
                section.ocr,
                [(c.text, c.location.to_dict(), c.ocr) for c in section.children],
            ]
            digest.update(json.dumps(record, ensure_ascii=False).encode())
    return digest.hexdigest()


def folder_documents(docs: Path) -> Iterable[list[TextBlock]]:
    return (file_blocks(p) for p in sorted(docs.rglob("*")) if p.is_file())


def current() -> dict[str, object]:
    return {
        "chunk_scheme": CHUNK_SCHEME,
        "sets": {
            name: fingerprint(folder_documents(EVAL_DIR / name / "docs")) for name in PINNED_SETS
        },
        "generated": fingerprint(generated_documents()),
    }


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--folder":  # any local folder, by hand
        print(fingerprint(folder_documents(Path(sys.argv[2]))))
        sys.exit(0)
    data = current()
    if "--write" in sys.argv:
        STORE.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2))
