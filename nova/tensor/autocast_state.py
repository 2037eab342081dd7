"""The autocast state the op front end reads (``nv.autocast``, ``nova.amp``).

It lives in ``nova.tensor`` because recording reads it (``matmul`` lowers its operands,
the float32 ops raise theirs) and ``nova.tensor`` must not import the public ``nova.amp``.
A ``ContextVar``: per thread (and per asyncio task), as autocast is in PyTorch.

Which ops run in float32 follows PyTorch's lists, which differ by device: losses
(cross_entropy, nll_loss, mse_loss, ...) everywhere; softmax, log_softmax and the norms
on CUDA only (PyTorch's CPU autocast keeps them in the half type).
"""
from __future__ import annotations

from contextvars import ContextVar

from nova.core import dtypes as dt

# (the dtype matmul-like ops compute in, the device_type) inside an enabled ``autocast``
# block, else None.
LOWER: ContextVar[tuple[dt.DType, str] | None] = ContextVar("nova_autocast", default=None)

_HALF = (dt.float16, dt.bfloat16)


def lowered(t):
    """``t`` for a matmul-like op under autocast: float32 cast to the autocast dtype
    (float64 and integers stay as they are, as in PyTorch)."""
    state = LOWER.get()
    if state is None or t.dtype != dt.float32:
        return t
    from nova.tensor.ops import cast
    return cast(t, state[0])


def full_precision(t, cuda_only: bool = False):
    """``t`` for an op PyTorch's autocast runs in float32: a half input raised to
    float32 inside an autocast block (for ``cuda_only`` ops, a ``cuda`` block only)."""
    state = LOWER.get()
    if state is None or t.dtype not in _HALF or (cuda_only and state[1] != "cuda"):
        return t
    from nova.tensor.ops import cast
    return cast(t, dt.float32)
