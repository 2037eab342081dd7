"""``nv.cuda``: whether the GPU backend can run here, waiting for it, and the seeding
calls training scripts make unconditionally.

Nothing here imports CuPy at ``import nova``; the first question probes it once.

Seeding: Nova has one counter-based generator for every device (a draw's bits do not
depend on where it runs), so ``manual_seed`` / ``manual_seed_all`` here seed that
generator, as ``nv.manual_seed`` does, and work without a GPU, where PyTorch's would
silently do nothing. Calling both with the same seed, as scripts do, is the same as
calling either.
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


def manual_seed(seed: int) -> None:
    """Seed Nova's generator (shared by every device; see the module docstring)."""
    from nova.tensor.random import manual_seed as _seed
    _seed(seed)


manual_seed_all = manual_seed


def is_bf16_supported() -> bool:
    """Whether bfloat16 tensors work on the GPU: wherever CUDA is available (Nova
    stores bfloat16 and computes in float32)."""
    return is_available()


def get_device_name() -> str:
    """The GPU's name, as its ``CudaSpec`` reports it."""
    from nova.runtime.cuda_runtime import backend
    return backend().spec().name


def __getattr__(name: str):
    """``nv.cuda.amp``: PyTorch's older spelling (``torch.cuda.amp.GradScaler``,
    ``torch.cuda.amp.autocast``), which training scripts still call; the same objects as
    ``nova.amp`` with ``device_type='cuda'``. And the legacy CUDA tensor types
    (``nv.cuda.FloatTensor``, ``nova.tensor.legacy``)."""
    if name == "amp":
        from nova import amp
        from nova.core import dtypes as dt
        legacy = amp.legacy_amp("cuda", dt.float16)
        legacy.custom_fwd, legacy.custom_bwd = amp._cuda_custom_fwd, amp._cuda_custom_bwd
        return legacy
    from nova.tensor.legacy import CUDA_TYPES    # nv.cuda.FloatTensor and the others
    if name in CUDA_TYPES:
        return CUDA_TYPES[name]
    raise AttributeError(f"module 'nova.cuda' has no attribute {name!r}")


__all__ = ["device_count", "get_device_name", "is_available", "is_bf16_supported",
           "manual_seed", "manual_seed_all", "synchronize", "unavailable_reason"]
