"""How the semantic worker groups texts into batches: deterministic, bounded in memory.

Pure Python (no ML import), so the plan is the same in every process and testable alone.
"""

from __future__ import annotations

# Deterministic batching: texts sorted by token count, at most this many per batch, each batch
# on one core: small batches give the most texts per CPU second, and two such batches in flight
# beat one 2-thread batch (bench/RESULTS.md "Embedding throughput").
MAX_BATCH_TEXTS = 8
# Cap on padded tokens per batch (texts x longest). Two batches run at once, so 2 x 1,024 keeps
# the memory peak of one 2,048-token batch.
MAX_BATCH_TOKENS = 1024


def plan_batches(lengths: list[int]) -> list[list[int]]:
    """Indices grouped shortest first, at most MAX_BATCH_TEXTS and MAX_BATCH_TOKENS padded."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = lengths[index]  # sorted ascending: the newcomer is the longest
        if current and (
            len(current) >= MAX_BATCH_TEXTS or (len(current) + 1) * width > MAX_BATCH_TOKENS
        ):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
