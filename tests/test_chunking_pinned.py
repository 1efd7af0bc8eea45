"""The chunker's output on real documents is pinned: speed work must give the same children.

A deliberate change of the output bumps CHUNK_SCHEME and rewrites the fingerprints with
`python tests/chunk_fingerprint.py --write` (and re-measures retrieval, bench/RESULTS.md).
"""

from __future__ import annotations

import json

import pytest
from chunk_fingerprint import EVAL_DIR, STORE, current

from helpers.text import chunking


def test_the_children_of_the_eval_sets_and_generated_shapes_are_unchanged():
    if not EVAL_DIR.is_dir():
        pytest.fail(f"the eval sets are missing at {EVAL_DIR} (shared/ beside the repo)")
    stored = json.loads(STORE.read_text())
    assert stored["chunk_scheme"] == chunking.CHUNK_SCHEME, (
        "CHUNK_SCHEME changed: re-pin with `python tests/chunk_fingerprint.py --write`"
    )
    assert current() == stored


def test_the_memoised_atom_estimate_equals_the_estimate():
    atoms = ["the ", "The\n", "HTTPServer  ", "ключ ", "ภาษาไทย", "x_1 ", "合同", "fflush() "]
    for atom in atoms * 2:  # the second round reads the memo
        assert chunking._atom_tokens(atom) == chunking.estimate_tokens(atom)
