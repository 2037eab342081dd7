"""Running sums and products: ``cumsum`` and ``cumprod``, as PyTorch names them; and
running maxima, minima and log-sum-exps (``cummax``, ``cummin``, ``logcumsumexp``).

Each is one primitive (``nova.cumsum``, ``nova.cumprod``: an inclusive scan along the
last dim, a kernel kind of its own); another dim is transposed to the end and back.
Integer and bool inputs scan in int64, as in PyTorch; ``dtype=`` casts first. The
gradients are scans too (``nova.autograd.rules``): a cumsum's is the reverse cumsum of
the upstream gradient, a cumprod's is zero-safe (an input that is 0 still gets the
gradient through the products that skip it).
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.shapes import normalize_dim
from nova.tensor import movement, ops
from nova.tensor.ops import cast, prim
from nova.tensor.tensor import Tensor


def scan_last(op: str, x: Tensor, reverse: builtins.bool = False) -> Tensor:
    """The ``op`` primitive ("cumsum" or "cumprod") along ``x``'s last dim."""
    return prim(op, [x], {"reverse": int(builtins.bool(reverse))}, x.shape, x.dtype)


def _scan(op: str, input: Any, dim: Any, dtype: Any) -> Tensor:
    ops._check_tensor(op, input)
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


# ---------------------------------------------------------------- doubling scans

def _doubling(op: str, x: Tensor, dim: Any, combine, pad_values) -> tuple[Tensor, ...]:
    """An inclusive scan of an associative ``combine`` along ``dim`` by doubling
    (Hillis-Steele): ceil(log2(n)) elementwise passes, each combining every position
    with the one ``2^k`` before it (``pad_values``, the identity, before the start).

    ``combine(earlier, later)`` takes and returns tuples of tensors (a value and what
    rides along with it, such as an index). What the dialect's scan kernel does not do
    (it sums and multiplies), in ordinary elementwise ops: a few passes over the data,
    fused by the compiler, and a gradient from the primitives' rules."""
    d = normalize_dim(op, dim, builtins.max(x.ndim, 1), x.shape)
    state = (x,) if x.ndim else (movement.reshape(x, 1),)
    n = state[0].shape[d]
    state = combine.init(state[0], d)
    shift = 1
    while shift < n:
        earlier = tuple(_shifted(t, d, shift, v) for t, v in zip(state, pad_values(state)))
        state = combine(earlier, state)
        shift *= 2
    if shift == 1:      # no pass (a dim of size 0 or 1): new tensors, not views of x, as
        state = tuple(t.clone() for t in state)   # PyTorch's (a write into cummax's changed x)
    return state if x.ndim else tuple(movement.reshape(t, ()) for t in state)


def _shifted(t: Tensor, d: builtins.int, shift: builtins.int, fill: Any) -> Tensor:
    """``t`` moved ``shift`` places along ``d`` toward the end, ``fill`` before."""
    from nova.tensor.creation import full
    head = list(t.shape)
    head[d] = shift
    body = movement.narrow(t, d, 0, t.shape[d] - shift)
    return movement.cat([full(head, fill, dtype=t.dtype, device=t.device), body], d)


class _Extreme:
    """The running maximum (or minimum) with its index, as PyTorch's ``cummax``: a later
    element takes over when it is >= (<=) the best so far or NaN (so NaN propagates, and
    ties and NaNs name the latest index) -- an associative rule on (value, index)."""

    def __init__(self, largest: builtins.bool):
        self.largest = largest

    def init(self, x: Tensor, d: builtins.int) -> tuple[Tensor, Tensor]:
        from nova.tensor.creation import arange
        shape = [1] * x.ndim
        shape[d] = x.shape[d]
        index = movement.expand(movement.reshape(arange(x.shape[d]), shape), *x.shape)
        return x, index

    def __call__(self, earlier: tuple, later: tuple) -> tuple[Tensor, Tensor]:
        (a, ia), (b, ib) = earlier, later
        wins = ops.ge(b, a) if self.largest else ops.le(b, a)
        if b.dtype.is_floating_point:
            wins = ops.logical_or(wins, ops.isnan(b))
        return ops.where(wins, b, a), ops.where(wins, ib, ia)


def _lowest(t: Tensor, largest: builtins.bool) -> Any:
    """The value every element beats (>= or <=): the dtype's far end."""
    if t.dtype.is_floating_point:
        return -math.inf if largest else math.inf
    if t.dtype == dt.bool_:
        return not largest
    lo, hi = dt.int_bounds(t.dtype)
    return lo if largest else hi


_RESULTS = {"cummax": namedtuple("cummax", ["values", "indices"]),
            "cummin": namedtuple("cummin", ["values", "indices"])}


def _running_extreme(op: str, input: Tensor, dim: builtins.int, largest: builtins.bool):
    ops._check_tensor(op, input)
    if dim is None or isinstance(dim, builtins.bool) or not isinstance(dim, builtins.int):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    values, indices = _doubling(op, input, dim, _Extreme(largest),
                                lambda st: (_lowest(st[0], largest), -1))
    return _RESULTS[op](values, indices)


def cummax(input: Tensor, dim: builtins.int):
    """``(values, indices)``: the largest element so far along ``dim`` and its index
    (the latest among equals; once a NaN is met, NaN and the latest NaN's index), as
    ``torch.cummax``. The gradient goes to the element each value came from."""
    return _running_extreme("cummax", input, dim, True)


def cummin(input: Tensor, dim: builtins.int):
    """The running minimum and its index along ``dim`` (``torch.cummin``; ties and NaN
    as ``cummax``)."""
    return _running_extreme("cummin", input, dim, False)


class _LogAddExp:
    """``log(exp(a) + exp(b))`` as the scan's combine (``elementary.logaddexp``: in
    float64, exact where both are the same infinity)."""

    @staticmethod
    def init(x: Tensor, d: builtins.int) -> tuple[Tensor]:
        return (x,)

    def __call__(self, earlier: tuple, later: tuple) -> tuple[Tensor]:
        from nova.tensor.elementary import logaddexp
        return (logaddexp(earlier[0], later[0]),)


def logcumsumexp(input: Tensor, dim: builtins.int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` without overflow or underflow
    (``torch.logcumsumexp``): a doubling scan of ``logaddexp``, each pass in float64, so
    a small term after a huge one and a huge one after -inf keep their digits."""
    if not isinstance(input, Tensor):
        raise TypeError(f"logcumsumexp: expected a Tensor, got {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"logcumsumexp: expects a floating point input, got "
                         f"{input.dtype.name}")
    if dim is None or isinstance(dim, builtins.bool) or not isinstance(dim, builtins.int):
        raise TypeError(f"logcumsumexp: dim must be an int, got {dim!r}")
    x = input if input.dtype.itemsize >= 4 else cast(input, dt.float32)   # (half: once)
    out = _doubling("logcumsumexp", x, dim, _LogAddExp(), lambda st: (-math.inf,))[0]
    return out if out.dtype == input.dtype else cast(out, input.dtype)


TENSOR_METHODS = ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")

__all__ = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]
