"""Host memory for a CPU step's arena: fresh anonymous pages, without numpy's
transparent-huge-page request.

numpy asks the kernel for transparent huge pages on every large array it allocates
(``madvise(MADV_HUGEPAGE)``). Where the kernel's THP ``defrag`` setting is ``madvise``
(the default of common distributions), the first write to each 2 MiB of such memory may
stall while the kernel compacts memory to find a free huge page -- on a machine whose
RAM is full of page cache, for long: a 256 MiB numpy array took 47-599 ms to fill the
first time on the 2-core EPYC VM (2026-12-07), 153-162 ms with 4 KiB pages. A step
touches its whole arena for the first time in its first run, so that run paid for
every huge page: the medium GPT's first training step ran its kernels in 1.23-1.30 s
with numpy's arena against 0.86-0.92 s with this one (steady state 0.79-0.85 s either
way; four interleaved rounds of later steps' kernel time: medians 768-820 ms here,
791-819 ms with huge pages), so a warm-cache first step went from 1.63-1.94 s to
1.35-1.46 s. The arena is allocated once and kept, so only that first run is
concerned; where the system gives huge pages without being asked (THP ``always``), it
still does here, without the compaction stall of ``madvise``.
"""
from __future__ import annotations

import errno
import mmap

import numpy as np


def fresh_pages(nbytes: int) -> np.ndarray:
    """A writable, zero-filled, page-aligned ``uint8`` array of ``nbytes`` bytes in an
    anonymous private mapping of its own (unmapped when the array and its views are
    gone). ``MemoryError`` when the system refuses the mapping, as ``np.empty`` raises."""
    if nbytes < 1:
        raise ValueError(f"fresh_pages: nbytes must be positive, got {nbytes}")
    try:
        pages = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE) \
            if hasattr(mmap, "MAP_ANONYMOUS") else mmap.mmap(-1, nbytes)
    except OverflowError:
        raise MemoryError(f"cannot map {nbytes} bytes: larger than the address space") \
            from None
    except OSError as e:
        if e.errno == errno.ENOMEM:
            raise MemoryError(f"cannot map {nbytes} bytes: {e.strerror}") from None
        raise
    return np.frombuffer(pages, dtype=np.uint8)
