"""``nv.cuda``: whether the GPU backend can run here, waiting for it, and the seeding
calls training scripts make unconditionally.

Nothing here imports CuPy at ``import nova``; the first question probes it once.

Seeding: Nova has one counter-based generator for every device (a draw's bits do not
depend on where it runs), so ``manual_seed`` / ``manual_seed_all`` here seed that
generator, as ``nv.manual_seed`` does, and work without a GPU, where PyTorch's would
silently do nothing. Calling both with the same seed, as scripts do, is the same as
calling either. ``seed``/``seed_all`` reseed it from the OS's entropy where CUDA is
available -- so, unlike PyTorch's, they reseed the CPU's draws too -- and do nothing
without CUDA, as PyTorch's do there (a random reseed of the shared generator on a CPU
machine would undo the script's ``manual_seed``). ``get_rng_state_all()`` is
``[nv.get_rng_state()]`` where CUDA is available (one device, whose generator is the
shared one) and ``[]`` without, as PyTorch's; ``set_rng_state_all`` restores each
state it is given there and does nothing without CUDA, as PyTorch's queues the call
for a CUDA initialization that never comes.

Memory (``nv.cuda.memory``: ``memory_allocated``, ``max_memory_allocated``,
``memory_reserved``, ``max_memory_reserved``, ``reset_peak_memory_stats``,
``empty_cache``): CuPy's memory pool where CUDA has been used, 0 and no-ops otherwise;
see that module. ``OutOfMemoryError`` is ``nv.NovaOutOfMemoryError`` (a ``MemoryError``
and a ``RuntimeError``), which a step that does not fit in device memory raises.

Submodules, as PyTorch's: ``nova.cuda.amp`` (``from nova.cuda.amp import autocast,
GradScaler``) and ``nova.cuda.memory``.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.cuda.memory import (
    empty_cache, is_initialized, max_memory_allocated, max_memory_reserved,
    memory_allocated, memory_reserved, reset_peak_memory_stats,
)
from nova.runtime.cuda_runtime import is_available, unavailable_reason
from nova.runtime.memory_plan import NovaOutOfMemoryError as OutOfMemoryError


def device_count() -> int:
    """GPUs Nova can use: 1 where CUDA is available (Nova addresses cuda:0), else 0."""
    return 1 if is_available() else 0


def synchronize() -> None:
    """Wait for every launched kernel (steps already wait for their own at their end)."""
    from nova.runtime.cuda_runtime import backend
    backend().synchronize()


def manual_seed(seed: int) -> None:
    """Seed Nova's generator (shared by every device; see the module docstring)."""
    from nova.tensor.random import manual_seed as _seed
    _seed(seed)


manual_seed_all = manual_seed


def seed() -> None:
    """Reseed Nova's generator from the OS's entropy where CUDA is available (it is
    shared with the CPU: see the module docstring); nothing without CUDA, as PyTorch's."""
    if is_available():
        from nova.tensor.random import seed as _seed
        _seed()


seed_all = seed


def get_rng_state_all() -> list[Any]:
    """One state per GPU: ``[nv.get_rng_state()]`` where CUDA is available (Nova's one
    generator), ``[]`` without, as PyTorch's."""
    if not is_available():
        return []
    from nova.tensor.random import get_rng_state
    return [get_rng_state()]


def set_rng_state_all(new_states: Iterable[Any]) -> None:
    """Restore ``get_rng_state_all()``'s states where CUDA is available (each through
    ``nv.set_rng_state``, which checks it); nothing without CUDA, as PyTorch's."""
    if not is_available():
        return
    from nova.tensor.random import set_rng_state
    for state in new_states:
        set_rng_state(state)


def is_bf16_supported() -> bool:
    """Whether bfloat16 tensors work on the GPU: wherever CUDA is available (Nova
    stores bfloat16 and computes in float32)."""
    return is_available()


def get_device_name() -> str:
    """The GPU's name, as its ``CudaSpec`` reports it."""
    from nova.runtime.cuda_runtime import backend
    return backend().spec().name


def __getattr__(name: str):
    """``nv.cuda.amp``, imported on first use: the submodule ``nova.cuda.amp``
    (PyTorch's older spelling ``torch.cuda.amp.GradScaler``/``autocast``). And the
    legacy CUDA tensor types (``nv.cuda.FloatTensor``, ``nova.tensor.legacy``)."""
    if name == "amp":
        import importlib
        return importlib.import_module("nova.cuda.amp")
    from nova.tensor.legacy import CUDA_TYPES    # nv.cuda.FloatTensor and the others
    if name in CUDA_TYPES:
        return CUDA_TYPES[name]
    raise AttributeError(f"module 'nova.cuda' has no attribute {name!r}")


__all__ = ["OutOfMemoryError", "device_count", "empty_cache", "get_device_name",
           "get_rng_state_all", "is_available", "is_bf16_supported", "is_initialized",
           "manual_seed", "manual_seed_all", "max_memory_allocated", "max_memory_reserved",
           "memory_allocated", "memory_reserved", "reset_peak_memory_stats", "seed",
           "seed_all", "set_rng_state_all", "synchronize", "unavailable_reason"]
