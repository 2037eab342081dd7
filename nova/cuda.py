"""``nv.cuda``: whether the GPU backend can run here, and waiting for it.

Nothing here imports CuPy at ``import nova``; the first question probes it once.
"""
from __future__ import annotations

from nova.runtime.cuda_runtime import is_available, unavailable_reason


def device_count() -> int:
    """GPUs Nova can use: 1 where CUDA is available (Nova addresses cuda:0), else 0."""
    return 1 if is_available() else 0


def synchronize() -> None:
    """Wait for every launched kernel (steps already wait for their own at their end)."""
    from nova.runtime.cuda_runtime import backend
    backend().synchronize()


def get_device_name() -> str:
    """The GPU's name, as its ``CudaSpec`` reports it."""
    from nova.runtime.cuda_runtime import backend
    return backend().spec().name


__all__ = ["device_count", "get_device_name", "is_available", "synchronize",
           "unavailable_reason"]
