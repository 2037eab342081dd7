"""A best-fit pool of raw byte blocks, recycled between kernels and between steps.

Intermediates die by liveness (after their last reader) and their blocks return here;
the next buffer of any shape and dtype takes the smallest free block that fits (and is
at most twice its size, so small tensors do not pin large blocks). Reuse across steps
avoids the page faults of fresh large allocations; reuse across shapes keeps the pool
near the step's peak of live bytes. (An ahead-of-time arena plan is the memory-planning
issue's; this is its runtime baseline.)
"""
from __future__ import annotations

import bisect

import numpy as np


class BufferPool:
    def __init__(self) -> None:
        self._sizes: list[int] = []          # sorted sizes of the free blocks
        self._blocks: list[np.ndarray] = []  # the free blocks, in the same order
        self.allocated = 0                   # bytes of every block this pool created

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """An uninitialized array and the block that backs it."""
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        i = bisect.bisect_left(self._sizes, n)
        if i < len(self._sizes) and self._sizes[i] <= 2 * n + 4096:
            self._sizes.pop(i)
            block = self._blocks.pop(i)
        else:
            block = np.empty(max(n, 1), dtype=np.uint8)
            self.allocated += block.nbytes
        return block[:n].view(dtype).reshape(shape), block

    def give(self, block: np.ndarray) -> None:
        i = bisect.bisect_left(self._sizes, block.nbytes)
        self._sizes.insert(i, block.nbytes)
        self._blocks.insert(i, block)

    @property
    def free_bytes(self) -> int:
        return sum(self._sizes)
