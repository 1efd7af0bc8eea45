"""CPU seconds of the worker's stages inside one real lexical sync (run by hand).

    python bench/sync_stages.py DIR [--work DIR]

Runs the worker's code path (rag_service.sync_kb_blocking, as bench_sync.py --cpu) once into a
fresh data dir with timing wrappers around its stages, so the shares are those of the real
pipeline (caches as cold or warm as they are there, unlike --split's stage-by-stage replay).
The stages nest: "in the worker" reading is part of extract_document, language identification
and tokens are computed before the write, _insert_sections is part of the group commit. The
extraction child's CPU (files read in the sandbox) is printed apart: the ratio to the bare
insert counts the worker only.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import py3langid.langid  # noqa: E402

import rag_service  # noqa: E402
import rag_sync  # noqa: E402
from helpers.config import Config  # noqa: E402
from helpers.index import document_write, group_write  # noqa: E402
from helpers.store import units  # noqa: E402
from helpers.text import language_id  # noqa: E402

SPENT: dict[str, float] = defaultdict(float)


def _timed(owner: Any, name: str, label: str) -> None:
    """Replace owner.name by a wrapper adding its CPU seconds to SPENT[label]."""
    original: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[label] += time.process_time() - start

    setattr(owner, name, timed)


STAGES = (
    (rag_sync, "extract_document", "extract_document (read in the worker or the child's answer)"),
    (rag_sync, "build_document_text", "  reading, cleaning, chunking in the worker"),
    (language_id, "_identifier", "units: language model load (once)"),
    (py3langid.langid.LanguageIdentifier, "classify", "units: language identification"),
    (py3langid.langid.LanguageIdentifier, "rank", "units: short lines among their unit's"),
    (units, "text_tokens", "units: tokens (fold, stems)"),
    (group_write.WriteGroup, "flush", "group transactions (the SQLite writes and commit)"),
    (document_write, "_insert_sections", "  sections and chunks rows, their full-text rows"),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="sync-stages-"))
    for owner, name, label in STAGES:
        _timed(owner, name, label)
    data = work / "state-stages"
    shutil.rmtree(data, ignore_errors=True)
    config = Config(args.folder.resolve(), data, data / "index.sqlite3", semantic=False)
    start = time.process_time()
    view = rag_service.sync_kb_blocking(config)
    total = time.process_time() - start
    assert view.state == "succeeded", view.to_dict()
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"worker CPU {total:.2f} s; extraction child CPU {child.ru_utime + child.ru_stime:.2f} s")
    for _, _, label in STAGES:
        print(f"  {label:62} {SPENT[label]:6.2f} s")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
