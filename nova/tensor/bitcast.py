"""``Tensor.view(dtype)``: the stored bits read as another dtype (PyTorch's semantics).

Same element size: one ``nova.bitcast`` (a float and the integer of its width, or the
two half floats), or a cast between the 1-byte types (uint8 and int8 wrap into each
other; bool reads as 0/1 and reads back as ``!= 0``). Different sizes go through the
signed integers of each width: each element splits into its little-endian pieces along
a new last axis (shifts and masks in int64), or ``r`` neighbouring elements of the last
dimension join into one, as PyTorch's last dimension grows or shrinks by the size ratio.

The result is a view: writes into it reach the base through the inverse transform, and
writes into the base are seen by it. It never requires grad (the map is not
differentiable).
"""
from __future__ import annotations

from nova.core import dtypes as dt
from nova.tensor import grad_mode as _grad_mode
from nova.tensor import movement as _movement
from nova.tensor import ops as _ops
from nova.tensor.ops import prim
from nova.tensor.tensor import Tensor

# The signed integer of each element size, through which other dtypes split and join.
_SIGNED = {1: dt.int8, 2: dt.int16, 4: dt.int32, 8: dt.int64}
# Same-width pairs the dialect's bitcast reinterprets (``nd.BITCAST_PAIRS``).
_BITCAST = {(dt.float32, dt.int32), (dt.int32, dt.float32), (dt.float64, dt.int64),
            (dt.int64, dt.float64), (dt.float16, dt.int16), (dt.int16, dt.float16),
            (dt.bfloat16, dt.int16), (dt.int16, dt.bfloat16), (dt.float16, dt.bfloat16),
            (dt.bfloat16, dt.float16)}
_ONE_BYTE = (dt.uint8, dt.int8, dt.bool_)


def view_dtype(x: Tensor, target: dt.DType) -> Tensor:
    """``x.view(target)`` (module docstring)."""
    src = x.dtype
    if target == src:
        return _movement.make_view(x, lambda b: b, lambda b, v: v, "view")
    s, d = src.itemsize, target.itemsize
    if s != d:
        if x.ndim == 0:
            raise RuntimeError(f"view: self.dim() cannot be 0 to view {src.name} as "
                               f"{target.name} (different element sizes)")
        if s < d and x.shape[-1] % (d // s):
            raise RuntimeError(f"view: self.size(-1) must be divisible by {d // s} to view "
                               f"{src.name} as {target.name} (different element sizes), but "
                               f"got {x.shape[-1]}")
    return _movement.make_view(x, lambda b: _reinterpret(b, target),
                               lambda b, v: _reinterpret(v, b.dtype), "view")


def _reinterpret(x: Tensor, target: dt.DType) -> Tensor:
    with _grad_mode.no_grad():
        x = x.detach()
        if x.dtype == target:
            return x
        if x.dtype.itemsize == target.itemsize:
            return _same_size(x, target)
        ints = _same_size(x, _SIGNED[x.dtype.itemsize])
        if x.dtype.itemsize > target.itemsize:
            ints = _split(ints, _SIGNED[target.itemsize])
        else:
            ints = _join(ints, _SIGNED[target.itemsize])
        return _same_size(ints, target)


def _same_size(x: Tensor, target: dt.DType) -> Tensor:
    if x.dtype == target:
        return x
    if (x.dtype, target) in _BITCAST:
        return prim("bitcast", [x], {}, x.shape, target)
    if x.dtype in _ONE_BYTE and target in _ONE_BYTE:
        return _ops.cast(x, target)
    raise AssertionError(f"no same-size reinterpretation {x.dtype.name} -> {target.name}")


def _split(x: Tensor, piece: dt.DType) -> Tensor:
    """Each element's little-endian pieces of ``piece``'s width along the last axis."""
    bits = 8 * piece.itemsize
    wide = _ops.cast(x, dt.int64)
    mask = (1 << bits) - 1
    pieces = [_ops.cast((wide >> (bits * k)) & mask, piece)
              for k in range(x.dtype.itemsize // piece.itemsize)]
    out = _movement.stack(pieces, -1)
    return _movement.reshape(out, *x.shape[:-1], x.shape[-1] * len(pieces))


def _join(x: Tensor, whole: dt.DType) -> Tensor:
    """Each run of neighbouring elements of the last axis joined, the first lowest."""
    bits = 8 * x.dtype.itemsize
    r = whole.itemsize // x.dtype.itemsize
    groups = _movement.reshape(x, *x.shape[:-1], x.shape[-1] // r, r)
    mask = (1 << bits) - 1
    out = None
    for k in range(r):
        part = (_ops.cast(groups[..., k], dt.int64) & mask) << (bits * k)
        out = part if out is None else out | part
    return _ops.cast(out, whole)
