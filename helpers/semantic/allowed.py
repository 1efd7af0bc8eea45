"""Exact search filters on the vector side: the chunk ids a filter allows, as id ranges.

The server knows which chunks a filter (`path_prefix`, `file_types`, `modified_after`) allows;
the worker knows the vectors. Taking the global top-k and filtering afterwards loses every hit
of a small folder whose chunks rank below the rest of the index, so the server sends the
allowed ids and the worker scores only those rows: the best hits within the filter, at any
folder size. The ids travel as [start, end) ranges because a document's chunks are written with
consecutive ids: a folder of any size is a few ranges per document, not one number per chunk.
numpy only (the worker and the server both use it).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from helpers.errors import RagError

RANGE_DTYPE = np.dtype("<i8")


class AllowedError(RagError):
    """A search request whose allowed-ids payload cannot be read."""

    code = "bad_request"


@dataclass(frozen=True)
class AllowedRanges:
    """Sorted, disjoint [start, end) chunk-id ranges."""

    starts: np.ndarray  # int64, ascending
    ends: np.ndarray  # int64, ends[i] > starts[i], ends[i] <= starts[i + 1]

    @classmethod
    def from_ids(cls, ids: Iterable[int]) -> AllowedRanges:
        values = np.unique(np.fromiter(ids, dtype=np.int64))
        if len(values) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty)
        breaks = np.nonzero(np.diff(values) != 1)[0]
        starts = np.concatenate(([values[0]], values[breaks + 1]))
        ends = np.concatenate((values[breaks] + 1, [values[-1] + 1]))
        return cls(starts.astype(np.int64), ends.astype(np.int64))

    @classmethod
    def from_spans(cls, spans: Iterable[tuple[int, int]]) -> AllowedRanges:
        """Ranges from [start, end) spans in any order, overlapping or touching ones merged."""
        pairs = sorted((int(a), int(b)) for a, b in spans if b > a)
        starts: list[int] = []
        ends: list[int] = []
        for start, end in pairs:
            if ends and start <= ends[-1]:
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)
        return cls(np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))

    @property
    def count(self) -> int:
        return int((self.ends - self.starts).sum())

    def encode(self) -> str:
        """Base64 of the interleaved little-endian int64 [start, end, start, end, ...]."""
        pairs = np.empty(2 * len(self.starts), dtype=RANGE_DTYPE)
        pairs[0::2], pairs[1::2] = self.starts, self.ends
        return base64.b64encode(pairs.tobytes()).decode("ascii")

    @classmethod
    def decode(cls, payload: object) -> AllowedRanges:
        hint = "send allowed as base64 of int64 [start, end) pairs (AllowedRanges.encode)"
        if not isinstance(payload, str):
            raise AllowedError("allowed must be a base64 string", hint)
        try:
            raw = base64.b64decode(payload, validate=True)
        except ValueError as exc:
            raise AllowedError(f"allowed is not base64: {exc}", hint) from exc
        if len(raw) % (2 * RANGE_DTYPE.itemsize):
            raise AllowedError("allowed does not hold whole [start, end) pairs", hint)
        pairs = np.frombuffer(raw, dtype=RANGE_DTYPE)
        starts, ends = pairs[0::2].copy(), pairs[1::2].copy()
        if np.any(ends <= starts) or np.any(starts[1:] < ends[:-1]):
            raise AllowedError("allowed ranges must be non-empty, sorted and disjoint", hint)
        return cls(starts, ends)

    def mask(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Which of `chunk_ids` the ranges hold (bool, same length)."""
        if len(self.starts) == 0:
            return np.zeros(len(chunk_ids), dtype=bool)
        at = np.searchsorted(self.starts, chunk_ids, side="right") - 1
        inside = at >= 0
        inside[inside] = chunk_ids[inside] < self.ends[at[inside]]
        return inside

    def _touches(self, low: int, high: int) -> bool:
        """Whether any range meets [low, high]: a block far from the filter costs two
        binary searches, not a lookup per row."""
        first = np.searchsorted(self.ends, low, side="right")  # first range ending past low
        return bool(first < len(self.starts) and self.starts[first] <= high)

    def restrict(
        self, chunk_ids: np.ndarray, vectors: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The allowed rows of one block (the arrays themselves when all are), None when none
        is: a block the filter does not touch is never scored."""
        if len(chunk_ids) == 0 or not self._touches(int(chunk_ids.min()), int(chunk_ids.max())):
            return None
        keep = self.mask(chunk_ids)
        if not keep.any():
            return None
        if keep.all():
            return chunk_ids, vectors
        return chunk_ids[keep], vectors[keep]


def from_request(request: Mapping[str, object]) -> AllowedRanges | None:
    """The request's allowed ranges; None when it has none (the whole generation is searched)."""
    payload = request.get("allowed")
    return None if payload is None else AllowedRanges.decode(payload)


Visit = Callable[[np.ndarray, np.ndarray], None]


def restricted(request: Mapping[str, object], visit: Visit) -> Visit:
    """`visit(chunk_ids, vectors)` per block, shown only the rows the request allows (all rows
    of every block when it sends no allowed ranges; a block with none is skipped)."""
    within = from_request(request)
    if within is None:
        return visit

    def visit_allowed(chunk_ids: np.ndarray, vectors: np.ndarray) -> None:
        rows = within.restrict(chunk_ids, vectors)
        if rows is not None:
            visit(*rows)

    return visit_allowed
