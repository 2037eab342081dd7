"""Running sums and products: ``cumsum`` and ``cumprod``, as PyTorch names them.

Each is one primitive (``nova.cumsum``, ``nova.cumprod``: an inclusive scan along the
last dim, a kernel kind of its own); another dim is transposed to the end and back.
Integer and bool inputs scan in int64, as in PyTorch; ``dtype=`` casts first. The
gradients are scans too (``nova.autograd.rules``): a cumsum's is the reverse cumsum of
the upstream gradient, a cumprod's is zero-safe (an input that is 0 still gets the
gradient through the products that skip it).
"""
from __future__ import annotations

import builtins
from typing import Any

from nova.core import dtypes as dt
from nova.core.shapes import normalize_dim
from nova.tensor import movement
from nova.tensor.ops import cast, prim
from nova.tensor.tensor import Tensor


def scan_last(op: str, x: Tensor, reverse: builtins.bool = False) -> Tensor:
    """The ``op`` primitive ("cumsum" or "cumprod") along ``x``'s last dim."""
    return prim(op, [x], {"reverse": int(builtins.bool(reverse))}, x.shape, x.dtype)


def _scan(op: str, input: Any, dim: Any, dtype: Any) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if dim is None or isinstance(dim, builtins.bool) or not isinstance(dim, builtins.int):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    x = input
    if dtype is not None:
        x = cast(x, dt.get_dtype(dtype))
    elif not x.dtype.is_floating_point:
        x = cast(x, dt.int64)
    if x.ndim == 0:
        normalize_dim(op, dim, 1)
        return movement.reshape(scan_last(op, movement.reshape(x, 1)), ())
    d = normalize_dim(op, dim, x.ndim, x.shape)
    last = x.ndim - 1
    if d == last:
        return scan_last(op, x)
    return movement.transpose(scan_last(op, movement.transpose(x, d, last)), d, last)


def cumsum(input: Tensor, dim: builtins.int, *, dtype: Any = None) -> Tensor:
    """``out[..., i, ...] = input[..., 0, ...] + ... + input[..., i, ...]`` along ``dim``
    (``torch.cumsum``); float prefixes accumulate in float64."""
    return _scan("cumsum", input, dim, dtype)


def cumprod(input: Tensor, dim: builtins.int, *, dtype: Any = None) -> Tensor:
    """Running products along ``dim`` (``torch.cumprod``)."""
    return _scan("cumprod", input, dim, dtype)


TENSOR_METHODS = ("cumsum", "cumprod")

__all__ = ["cumsum", "cumprod"]
