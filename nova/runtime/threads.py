"""Running kernels on all cores.

Mechanism: each kernel takes a ``[start, end)`` range of its parallel dimension, and the
runtime calls it through ctypes from a small pool of Python threads. ctypes releases the
GIL for the duration of a foreign call, so the chunks run truly in parallel, with no
native threading runtime to ship or find (OpenMP would need libgomp on the user's
machine; a hand-written pthread pool in generated IR would be a second runtime to
maintain). The price is a Python-level dispatch per kernel (measured by
``benchmarks/bench_ops.py``); small kernels run on the calling thread only.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from nova.compiler.configurator import thread_chunks
from nova.compiler.device import detect_cpu

_state = {"threads": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
          else (os.cpu_count() or 1), "pool": None}



def get_num_threads() -> int:
    return _state["threads"]


def set_num_threads(n: int) -> None:
    """Threads used by compiled kernels (default: the cores this process may use)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    _state["threads"] = n
    pool = _state["pool"]
    if pool is not None:
        pool.shutdown(wait=True)
    _state["pool"] = None


def pool() -> ThreadPoolExecutor | None:
    n = _state["threads"]
    if n <= 1:
        return None
    if _state["pool"] is None:
        _state["pool"] = ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="nova")
    return _state["pool"]


def chunks(extent: int, work: int) -> list[tuple[int, int]]:
    """Split ``[0, extent)`` across the threads as the configurator decides."""
    if pool() is None:
        return [(0, extent)]
    return thread_chunks(extent, work, _state["threads"], detect_cpu())
