"""``nv.cuda.memory``: the memory questions training scripts ask unconditionally
(``torch.cuda.memory_allocated()``, ``max_memory_allocated()``, ``empty_cache()`` ...).

Where CUDA has been used in this process, they answer for the memory Nova's device
arrays come from, CuPy's default memory pool (``cupy.get_default_memory_pool()``):

- *allocated* is the pool's ``used_bytes()``: the bytes held by live device arrays
  (tensors, a step's arena, cached CUDA-graph buffers);
- *reserved* is its ``total_bytes()``: those plus the freed blocks the pool keeps
  cached for reuse, which ``empty_cache()`` hands back to the driver
  (``free_all_blocks()``).

CuPy keeps no peaks, so when Nova creates its CUDA backend it routes CuPy's allocator
through a wrapper that notes both numbers after every allocation (the peaks can only
be reached there): ``max_memory_allocated()`` / ``max_memory_reserved()`` are exact
from the backend's creation on, and ``reset_peak_memory_stats()`` restarts them from
the current values, as PyTorch's do. Deviations: the pool is CuPy's, so arrays a script
makes with CuPy directly count too; if a script installed its own CuPy allocator before
Nova's first CUDA use, Nova's wrapper calls it but the numbers are still the default
pool's.

Without CUDA (or before its first use, like PyTorch's lazy initialization), every
query returns 0 and ``empty_cache()``/``reset_peak_memory_stats()`` do nothing, as on
PyTorch's CPU-only build (where ``reset_peak_memory_stats`` happens to raise an
AttributeError from its missing binding). A test backend without a memory pool (the CPU
emulator of ``tests/runtime``) reports 0 too. ``device`` may be None, 0, ``"cuda"``,
``"cuda:0"`` or an ``nv.device`` of those: Nova addresses ``cuda:0`` only.
"""
from __future__ import annotations

import weakref
from typing import Any

from nova.runtime import cuda_runtime as _rt

__all__ = ["empty_cache", "max_memory_allocated", "max_memory_reserved",
           "memory_allocated", "memory_reserved", "reset_peak_memory_stats"]


class PoolPeaks:
    """CuPy's default pool and the peaks of its used and total bytes, noted after every
    allocation through CuPy's (global) allocator, which this wraps."""

    def __init__(self, cupy: Any):
        self.pool = cupy.get_default_memory_pool()
        self._inner = cupy.cuda.get_allocator()
        self.peak_allocated = self.pool.used_bytes()
        self.peak_reserved = self.pool.total_bytes()
        try:
            cupy.cuda.set_allocator(self.malloc)
        except ValueError:
            # inside ``cupy.cuda.using_allocator``: the peaks are then the values these
            # functions see (CuPy refuses to change the global allocator there)
            pass

    def malloc(self, size: int) -> Any:
        memory = self._inner(size)
        self.observe()
        return memory

    def observe(self) -> None:
        used, total = self.pool.used_bytes(), self.pool.total_bytes()
        if used > self.peak_allocated:
            self.peak_allocated = used
        if total > self.peak_reserved:
            self.peak_reserved = total

    def reset(self) -> None:
        self.peak_allocated = self.pool.used_bytes()
        self.peak_reserved = self.pool.total_bytes()


_peaks: weakref.WeakKeyDictionary[Any, PoolPeaks] = weakref.WeakKeyDictionary()


def _track(backend: Any) -> None:
    """``cuda_runtime.on_create``: start the peaks of a CuPy backend's pool."""
    cupy = getattr(backend, "cupy", None)
    if cupy is not None:
        _peaks[backend] = PoolPeaks(cupy)


_rt.on_create.append(_track)


def is_initialized() -> bool:
    """Whether Nova's CUDA backend has been created in this process (its first CUDA
    tensor, step or query that needs the device), or a test backend is installed;
    ``torch.cuda.is_initialized``'s answer. False wherever CUDA is unavailable."""
    return bool(_rt._installed) or "backend" in _rt._default


def _pool(device: Any) -> PoolPeaks | None:
    """The initialized backend's pool and peaks, or None (nothing to report)."""
    if not is_initialized():
        return None
    _check_device(device)
    backend = _rt.backend()
    if getattr(backend, "cupy", None) is None:
        return None                        # a test backend: no pool
    if backend not in _peaks:              # (created before this module was imported)
        _track(backend)
    peaks = _peaks[backend]
    peaks.observe()
    return peaks


def _check_device(device: Any) -> None:
    """``device`` names ``cuda:0`` (PyTorch's ``_get_device_index``, with Nova's one
    GPU)."""
    if device is None:
        return
    if isinstance(device, int) and not isinstance(device, bool):
        index, kind = device, "cuda"
    else:
        from nova.tensor.device import device as Device
        try:
            d = device if isinstance(device, Device) else Device(device)
        except (TypeError, ValueError) as e:
            raise ValueError(f"nv.cuda: invalid device {device!r} ({e})") from None
        index, kind = d.index, d.type
    if kind != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
    if index not in (None, 0):
        raise ValueError(f"nv.cuda: invalid device {device!r}: Nova addresses cuda:0 only")


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live device arrays (the pool's used bytes; module docstring)."""
    peaks = _pool(device)
    return 0 if peaks is None else int(peaks.pool.used_bytes())


def max_memory_allocated(device: Any = None) -> int:
    """The peak of ``memory_allocated()`` since CUDA was first used or since
    ``reset_peak_memory_stats()``."""
    peaks = _pool(device)
    return 0 if peaks is None else int(peaks.peak_allocated)


def memory_reserved(device: Any = None) -> int:
    """Bytes the pool holds from the driver: allocated plus cached free blocks."""
    peaks = _pool(device)
    return 0 if peaks is None else int(peaks.pool.total_bytes())


def max_memory_reserved(device: Any = None) -> int:
    """The peak of ``memory_reserved()`` since CUDA was first used or since
    ``reset_peak_memory_stats()``."""
    peaks = _pool(device)
    return 0 if peaks is None else int(peaks.peak_reserved)


def reset_peak_memory_stats(device: Any = None) -> None:
    """Restart both peaks from the current values."""
    peaks = _pool(device)
    if peaks is not None:
        peaks.reset()


def empty_cache() -> None:
    """Give the pool's cached free blocks back to the driver (``free_all_blocks()``):
    ``memory_reserved()`` drops to ``memory_allocated()``. Live tensors are untouched;
    a no-op before CUDA's first use and without CUDA, as PyTorch's."""
    peaks = _pool(None)
    if peaks is not None:
        peaks.pool.free_all_blocks()
