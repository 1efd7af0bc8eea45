"""Fuzz the extractors and the query path with hypothesis, randomly, for a bounded time.

    python bench/faults/fuzz.py [--minutes 5]

The same properties as tests/test_fuzz_fast.py (which runs a fixed, derandomized sample), run in
random batches until the time is up. A failing input is shrunk by hypothesis and saved: files to
tests/fuzz_corpus/files/ (they become regression tests), query-path arguments printed as JSON
lines to add to tests/fuzz_corpus/queries.json.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

from _common import line, work_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_fast import (
    BINARY_SUFFIXES,
    CORPUS_DIR,
    EDITS,
    TEXT_SUFFIXES,
    check_binary_bytes,
    check_text_bytes,
    make_query_folder,
    make_seeds,
    mutate,
)

import rag_service
from helpers.extract.blocks import ExtractLimits
from helpers.extract.sandbox import SandboxedExtractor

RANDOM = settings(
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=False,
)
ANY_TEXT = st.text(
    st.characters(codec=None, exclude_categories=()), max_size=80
)  # surrogates included


def save_file(data: bytes, suffix: str) -> str:
    name = hashlib.sha256(data).hexdigest()[:16] + suffix
    (CORPUS_DIR / "files" / name).write_bytes(data)
    return name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--work", help="scratch folder (default: system temp)")
    args = parser.parse_args()
    root = work_dir("fuzz", args.work)
    seeds = make_seeds(root / "seeds")
    config = make_query_folder(root / "query")
    sandbox = SandboxedExtractor(ExtractLimits(), None, stall_timeout_s=60)
    examples: Counter[str] = Counter()
    failures: dict[str, str] = {}
    last: dict[str, Any] = {}

    @given(data=st.binary(max_size=20_000), suffix=st.sampled_from(TEXT_SUFFIXES))
    def text_bytes(data: bytes, suffix: str) -> None:
        examples["text extractors"] += 1
        last["text"] = (data, suffix)
        check_text_bytes(data, suffix)

    @given(
        suffix=st.sampled_from(BINARY_SUFFIXES),
        edits=EDITS,
        keep=st.one_of(st.just(1.0), st.floats(0.01, 1.0)),
    )
    def binary_bytes(suffix: str, edits: list[tuple[float, int]], keep: float) -> None:
        examples["binary extractors (sandbox)"] += 1
        data = mutate(seeds[suffix], edits, keep)
        last["binary"] = (data, suffix)
        check_binary_bytes(sandbox, data, suffix)

    @given(
        query=ANY_TEXT,
        path_prefix=st.one_of(st.none(), ANY_TEXT),
        modified_after=st.one_of(st.none(), ANY_TEXT, st.datetimes().map(lambda d: d.isoformat())),
        top_k=st.integers(-3, 60),
    )
    def search(query: str, path_prefix: str | None, modified_after: str | None, top_k: int) -> None:
        examples["search"] += 1
        kwargs = {"query": query, "path_prefix": path_prefix, "modified_after": modified_after,
                  "top_k": top_k, "mode": "lexical"}  # fmt: skip
        last["search"] = kwargs
        with contextlib.suppress(rag_service.RagError):
            rag_service.search(config, **kwargs)

    @given(
        path=st.one_of(st.sampled_from(["guide.md", "notes.txt"]), ANY_TEXT),
        location=st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(["page", "sheet", "slide", "heading", "line", "cell_range"]),
                st.one_of(st.integers(), ANY_TEXT, st.none(), st.lists(st.integers(), max_size=2)),
                max_size=3,
            ),
        ),
        offset=st.integers(-1, 2**70),
    )
    def read(path: str, location: dict[str, Any] | None, offset: int) -> None:
        examples["read"] += 1
        kwargs = {"path": path, "location": location, "offset": offset}
        last["read_document"] = kwargs
        with contextlib.suppress(rag_service.RagError):
            rag_service.read_document(config, **kwargs)

    @given(path_prefix=st.one_of(st.none(), ANY_TEXT), offset=st.integers(-1, 2**70))
    def listing(path_prefix: str | None, offset: int) -> None:
        examples["list"] += 1
        last["list_documents"] = {"path_prefix": path_prefix, "offset": offset}
        with contextlib.suppress(rag_service.RagError):
            rag_service.list_documents(config, path_prefix=path_prefix, offset=offset)

    batch = settings(RANDOM, max_examples=args.batch)
    properties: list[tuple[str, Callable[[], None]]] = [
        ("text", batch(text_bytes)),
        ("binary", batch(binary_bytes)),
        ("search", batch(search)),
        ("read_document", batch(read)),
        ("list_documents", batch(listing)),
    ]
    deadline = time.monotonic() + args.minutes * 60
    while time.monotonic() < deadline:
        for name, prop in properties:
            if name in failures and name in ("search", "read_document", "list_documents"):
                continue  # one minimal example per query property is enough
            try:
                prop()
            except Exception as exc:  # noqa: BLE001 - a finding: keep it
                found = last.get(name)
                if name in ("text", "binary") and found:
                    saved = save_file(*found)
                    failures[f"{name}:{saved}"] = "".join(
                        traceback.format_exception_only(type(exc), exc)
                    ).strip()[:300]
                else:
                    failures[name] = json.dumps({"call": name, "kwargs": found}, default=str)
                    failures[name] += "  # " + f"{type(exc).__name__}: {exc}"[:200]
            if time.monotonic() > deadline:
                break
    sandbox.close()
    print("\nfuzz summary")
    line("minutes", args.minutes)
    for name, count in examples.items():
        line(f"examples: {name}", count)
    line("distinct failures", len(failures))
    for name, detail in failures.items():
        print(f"    {name}: {detail}")
    shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
