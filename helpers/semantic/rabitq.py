"""RaBitQ codes of vectors, and the faiss fast-scan index made from them.

A code is faiss `IndexRaBitQFastScan.compute_codes`'s: one bit a dimension of x - centroid
(fast-scan bit order), then the vector's two RaBitQ factors (Gao & Long, SIGMOD 2024). It depends
only on the vector and the centroid, so codes can be stored, copied between generations and
computed block by block. `index_from_codes` lays them out as faiss's own `add` would (32-vector
blocks of packed 4-bit groups followed by their factors); `layout_matches` checks that against
faiss once per process, and a faiss whose layout differs gets its index from `add` instead.

faiss is imported on first use, never at import time.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

CODES_VERSION = 1  # the stored code layout above; another value means "encode again"
FACTORY = "RaBitQfs"  # faiss factory string: fast-scan RaBitQ, one bit a dimension
QUERY_BITS = 8  # the query's own quantisation in the estimator (faiss's qb)
TRAIN_SAMPLE = 16_384  # the centroid: the mean of an evenly spaced sample of rows
ENCODE_ROWS = 16_384  # rows encoded or packed at a time (25 MB of float32 at 384 dims)
FACTOR_BYTES = 8  # two float32 factors per vector (faiss's 1-bit SignBitFactors)
GROUP = 32  # faiss fast-scan packs codes 32 vectors at a time (bbs)
# Within a group of 32, byte j of a packed column holds vectors PACK_ORDER[j] and +16
# (faiss pq4_pack_codes' perm0, little-endian machines).
PACK_ORDER = np.array([0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15])

_layout_ok: dict[int, bool] = {}  # dimension -> whether pack writes faiss's own layout


def _faiss() -> Any:
    # faiss's loader logs every CPU-specific build it looks for and does not ship, at INFO.
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    import faiss

    return faiss


def available() -> bool:
    try:
        _faiss()
    except ImportError:
        return False
    return True


def code_size(dim: int) -> int:
    return math.ceil(dim / 8) + FACTOR_BYTES


def fit_centroid(vectors: np.ndarray) -> np.ndarray:
    """The mean of an evenly spaced sample, summed in float64: the same bytes on any machine."""
    step = max(1, len(vectors) // TRAIN_SAMPLE)
    sample = np.asarray(vectors[::step][:TRAIN_SAMPLE], dtype=np.float64)
    return sample.mean(axis=0).astype("<f4")


def _empty_index(centroid: np.ndarray) -> Any:
    faiss = _faiss()
    dim = centroid.shape[0]
    index = faiss.IndexRaBitQFastScan(dim, faiss.METRIC_INNER_PRODUCT)  # what FACTORY builds
    faiss.copy_array_to_vector(np.ascontiguousarray(centroid, dtype=np.float32), index.center)
    index.is_trained = True
    index.qb = QUERY_BITS
    return index


def encode(vectors: np.ndarray, centroid: np.ndarray, threads: int) -> np.ndarray:
    """uint8 [n, code_size] codes of float16 or float32 rows against `centroid`."""
    faiss = _faiss()
    index = _empty_index(centroid)
    n, dim = vectors.shape
    out = np.empty((n, code_size(dim)), dtype=np.uint8)
    faiss.omp_set_num_threads(threads)  # each row's code is computed on its own
    try:
        for at in range(0, n, ENCODE_ROWS):
            part = np.ascontiguousarray(vectors[at : at + ENCODE_ROWS], dtype=np.float32)
            block = out[at : at + len(part)]
            index.compute_codes(faiss.swig_ptr(block), len(part), faiss.swig_ptr(part))
    finally:
        faiss.omp_set_num_threads(1)
    return out


def pack(codes: np.ndarray, dim: int) -> np.ndarray:
    """The fast-scan table of `codes`: per group of 32 vectors, every 4-bit column packed
    (faiss pq4_pack_codes), then the group's factors."""
    bits = math.ceil(dim / 8)
    n = len(codes)
    padded = -(-n // GROUP) * GROUP
    groups = padded // GROUP
    sign = np.zeros((padded, bits), dtype=np.uint8)
    sign[:n] = codes[:, :bits]
    columns = sign.reshape(groups, GROUP, bits).transpose(0, 2, 1)  # [group, byte, vector]
    # Each packed byte holds a nibble of vector PACK_ORDER[j] (low) and of the one 16 later
    # (high): low nibbles first, then high ones. Gathering both halves once and combining them
    # in four passes packs 1M codes in half the time of splitting the nibbles first.
    first, second = columns[..., PACK_ORDER], columns[..., PACK_ORDER + GROUP // 2]
    packed = np.concatenate(
        [(first & 15) | (second << 4), (first >> 4) | (second & 0xF0)], axis=-1
    ).reshape(groups, -1)
    factors = np.zeros((padded, codes.shape[1] - bits), dtype=np.uint8)
    factors[:n] = codes[:, bits:]
    return np.concatenate([packed, factors.reshape(groups, -1)], axis=1).reshape(-1)


def index_from_codes(codes: np.ndarray, centroid: np.ndarray, vectors: np.ndarray | None) -> Any:
    """A searchable fast-scan index of `codes` (rows of `vectors`, which faiss's `add` encodes
    instead when its layout is not the one `pack` writes; None only once `layout_matches`)."""
    faiss = _faiss()
    index = _empty_index(centroid)
    if not layout_matches(centroid.shape[0]):
        if vectors is None:
            raise ValueError("this faiss packs codes its own way: the vectors are needed")
        faiss.omp_set_num_threads(1)
        for at in range(0, len(vectors), ENCODE_ROWS):
            part = vectors[at : at + ENCODE_ROWS]
            index.add(np.ascontiguousarray(part, dtype=np.float32))
        return index
    dim, n = centroid.shape[0], len(codes)
    groups = -(-n // GROUP)
    stride = len(pack(codes[:1], dim)) if n else 0  # bytes per group of 32
    index.codes.resize(groups * stride)
    table = faiss.rev_swig_ptr(index.codes.get(), groups * stride)
    for at in range(0, n, ENCODE_ROWS):  # a multiple of GROUP: chunks start on a group
        part = pack(codes[at : at + ENCODE_ROWS], dim)
        table[at // GROUP * stride : at // GROUP * stride + len(part)] = part
    index.ntotal = n
    index.ntotal2 = groups * GROUP
    return index


def layout_matches(dim: int) -> bool:
    """Whether `pack` writes what this faiss's own `add` writes (checked once per process and
    dimension on a few random vectors: a faiss with another layout must not get our table)."""
    if dim not in _layout_ok:
        faiss = _faiss()
        rng = np.random.default_rng(0)
        sample = rng.standard_normal((GROUP + 5, dim)).astype(np.float32)
        centroid = sample.mean(axis=0).astype(np.float32)
        reference = _empty_index(centroid)
        reference.add(sample)
        stored = faiss.rev_swig_ptr(reference.codes.get(), reference.codes.size())
        table = pack(encode(sample, centroid, 1), dim)
        _layout_ok[dim] = reference.codes.size() == table.size and bool(
            np.array_equal(stored[: table.size], table)
        )
        if not _layout_ok[dim]:
            log.warning("faiss %s packs codes differently: codes are re-added", faiss.__version__)
    return _layout_ok[dim]


def code_bytes(index: Any) -> int:
    return int(index.codes.size())
