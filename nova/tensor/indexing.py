"""``x[index]`` and ``x[index] = value``.

An index is split into a *basic* part (ints, slices with positive steps, None, Ellipsis)
that becomes one ``nova.slice`` plus a reshape, and an *advanced* part (integer tensors,
lists, numpy arrays) that becomes one ``nova.gather`` over the indexed dims linearized into
one. Basic results are views; advanced results are copies, as in PyTorch. Assignment is
functional: the new value of the whole tensor is built with ``nova.pad`` + ``nova.where``
(basic) and ``nova.scatter_add`` (advanced), then the handle is rebound.
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

import numpy as np

from nova.tensor import dtypes as dt
from nova.tensor import ops
from nova.tensor.movement import make_view, permute
from nova.tensor.ops import broadcast_to, full_const, prim
from nova.tensor.shapes import broadcast_shapes, numel
from nova.tensor.tensor import Tensor


@dataclass(frozen=True)
class ParsedIndex:
    starts: tuple[int, ...]        # per input dim
    limits: tuple[int, ...]
    steps: tuple[int, ...]
    out_shape: tuple[int, ...]     # shape after ints are dropped and None dims inserted
    advanced: tuple[tuple[int, Tensor], ...]  # (dim in out_shape, index tensor)

    @property
    def window(self) -> tuple[int, ...]:
        return tuple(-(-(b - a) // s) for a, b, s in zip(self.starts, self.limits, self.steps))


def _as_index_tensor(op: str, entry: Any, shape: tuple[int, ...]) -> Tensor:
    if isinstance(entry, Tensor):
        t = entry
    else:
        arr = np.asarray(entry)
        if arr.dtype == object or arr.dtype.kind not in "biu":
            raise TypeError(f"{op}: index lists and arrays must hold integers, got {entry!r}")
        from nova.tensor.creation import from_numpy
        t = from_numpy(arr.astype(np.int64) if arr.dtype.kind != "b" else arr)
    if t.dtype == dt.bool_:
        raise IndexError(f"{op}: boolean mask indexing of shape {t.shape} into {shape} has a "
                         "data-dependent result shape, which Nova's static shapes cannot "
                         "express; use masked_fill or where instead")
    if t.dtype not in (dt.int32, dt.int64):
        raise IndexError(f"{op}: tensors used as indices must be int32 or int64, got "
                         f"{t.dtype.name} of shape {t.shape}")
    return t


def parse_index(op: str, shape: tuple[int, ...], index: Any) -> ParsedIndex:
    entries = list(index) if isinstance(index, tuple) else [index]
    consuming = [e for e in entries if e is not None and e is not Ellipsis]
    if builtins.sum(e is Ellipsis for e in entries) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis (...)")
    if len(consuming) > len(shape):
        raise IndexError(f"{op}: too many indices for tensor of shape {shape}: "
                         f"{len(consuming)} given, {len(shape)} dims")
    fill = [slice(None)] * (len(shape) - len(consuming))
    ellipsis = [k for k, e in enumerate(entries) if e is Ellipsis]
    if ellipsis:
        entries[ellipsis[0]:ellipsis[0] + 1] = fill
    else:
        entries += fill
    starts, limits, steps, out_shape, advanced = [], [], [], [], []
    d = 0
    for e in entries:
        if e is None:
            out_shape.append(1)
            continue
        n = shape[d]
        if isinstance(e, (builtins.bool, np.bool_)):
            raise IndexError(f"{op}: bool scalars are not valid indices")
        if isinstance(e, (builtins.int, np.integer)):
            i = builtins.int(e)
            if not -n <= i < n:
                raise IndexError(f"{op}: index {i} is out of bounds for dim {d} with size {n} "
                                 f"(shape {shape})")
            i %= n
            starts.append(i), limits.append(i + 1), steps.append(1)
        elif isinstance(e, slice):
            step = 1 if e.step is None else builtins.int(e.step)
            if step <= 0:
                raise ValueError(f"{op}: slice step must be positive, got {step} (reverse "
                                 "with flip-free indexing is not supported)")
            a, b, _ = slice(e.start, e.stop, step).indices(n)
            b = builtins.max(a, b)
            starts.append(a), limits.append(b), steps.append(step)
            out_shape.append(-(-(b - a) // step))
        else:
            t = _as_index_tensor(op, e, shape)
            starts.append(0), limits.append(n), steps.append(1)
            advanced.append((len(out_shape), t))
            out_shape.append(n)
        d += 1
    return ParsedIndex(tuple(starts), tuple(limits), tuple(steps), tuple(out_shape),
                       tuple(advanced))


def _basic(x: Tensor, p: ParsedIndex) -> Tensor:
    y = x
    if p.window != x.shape or any(s != 1 for s in p.steps):
        y = prim("slice", [x], {"start": p.starts, "limit": p.limits, "stride": p.steps},
                 p.window, x.dtype)
    return y if y.shape == p.out_shape else prim("reshape", [y], {}, p.out_shape, y.dtype)


def _basic_put(x: Tensor, p: ParsedIndex, value: Tensor) -> Tensor:
    """``x`` with the basic window replaced by ``value`` (of shape ``p.out_shape``)."""
    if numel(p.window) == 0:
        return x
    v = value if value.shape == p.window else prim("reshape", [value], {}, p.window, value.dtype)
    if p.window == x.shape:
        return v
    low = p.starts
    interior = tuple(s - 1 for s in p.steps)
    high = tuple(n - (a + (w - 1) * s + 1) for n, a, w, s in zip(x.shape, p.starts, p.window,
                                                                 p.steps))
    attrs = {"low": low, "high": high, "interior": interior}
    padded = prim("pad", [v, full_const(0, (), x.dtype)], attrs, x.shape, x.dtype)
    mask = prim("pad", [full_const(True, p.window, dt.bool_), full_const(False, (), dt.bool_)],
                attrs, x.shape, dt.bool_)
    return ops.where(mask, padded, x)


@dataclass(frozen=True)
class _Advanced:
    """Indexed dims moved to the front and merged into one of size ``rows``."""

    dims: tuple[int, ...]
    perm: tuple[int, ...]
    rows: int
    rest: tuple[int, ...]
    flat: Tensor          # linear row index per element of the broadcast index shape
    bshape: tuple[int, ...]


def _linearize(op: str, y: Tensor, advanced: tuple[tuple[int, Tensor], ...]) -> _Advanced:
    dims = tuple(d for d, _ in advanced)
    bshape = broadcast_shapes(op, *[t.shape for _, t in advanced])
    flat = None
    for d, t in advanced:
        n = y.shape[d]
        i = ops.cast(broadcast_to(t, bshape, op), dt.int64)
        i = ops.where(ops.lt(i, 0), ops.add(i, n), i)
        flat = i if flat is None else ops.add(ops.mul(flat, n), i)
    perm = dims + tuple(k for k in range(y.ndim) if k not in dims)
    rest = tuple(y.shape[k] for k in perm[len(dims):])
    return _Advanced(dims, perm, numel(tuple(y.shape[d] for d in dims)), rest, flat, bshape)


def _front(y: Tensor, a: _Advanced) -> Tensor:
    moved = permute(y, *a.perm) if a.perm != tuple(range(y.ndim)) else y
    return prim("reshape", [moved], {}, (a.rows,) + a.rest, y.dtype)


def _row_index(a: _Advanced) -> Tensor:
    m = numel(a.bshape)
    col = prim("reshape", [a.flat], {}, (m,) + (1,) * len(a.rest), dt.int64)
    return broadcast_to(col, (m,) + a.rest, "index")


def _adjacent(dims: tuple[int, ...]) -> bool:
    return dims == tuple(range(dims[0], dims[0] + len(dims)))


def _advanced_get(op: str, y: Tensor, advanced) -> Tensor:
    a = _linearize(op, y, advanced)
    out = prim("gather", [_front(y, a), _row_index(a)], {"dim": 0},
               (numel(a.bshape),) + a.rest, y.dtype)
    out = prim("reshape", [out], {}, a.bshape + a.rest, y.dtype)
    if _adjacent(a.dims) and a.dims[0] > 0:  # numpy rule: adjacent index dims stay in place
        nb, p = len(a.bshape), a.dims[0]
        order = tuple(range(nb, nb + p)) + tuple(range(nb)) + tuple(range(nb + p, out.ndim))
        out = permute(out, *order)
    return out


def _result_shape(y: Tensor, a: _Advanced) -> tuple[int, ...]:
    if _adjacent(a.dims) and a.dims[0] > 0:
        p = a.dims[0]
        return a.rest[:p] + a.bshape + a.rest[p:]
    return a.bshape + a.rest


def _advanced_put(op: str, y: Tensor, advanced, value: Any) -> Tensor:
    """``y`` with the indexed elements set to ``value``. Rows named twice receive the sum
    of their values (PyTorch leaves that case undefined)."""
    a = _linearize(op, y, advanced)
    target = _result_shape(y, a)
    v = _value_as(op, value, target, y.dtype)
    if _adjacent(a.dims) and a.dims[0] > 0:  # bring the index dims to the front
        nb, p = len(a.bshape), a.dims[0]
        order = tuple(range(p, p + nb)) + tuple(range(p)) + tuple(range(p + nb, v.ndim))
        v = permute(v, *order)
    m = numel(a.bshape)
    v = prim("reshape", [v], {}, (m,) + a.rest, y.dtype)
    rows = _row_index(a)
    zeros = full_const(0, (a.rows,) + a.rest, y.dtype)
    summed = ops.scatter_add(zeros, 0, rows, v)
    hits = ops.scatter_add(full_const(0, (a.rows,) + a.rest, dt.int32), 0, rows,
                           full_const(1, (m,) + a.rest, dt.int32))
    front = ops.where(ops.gt(hits, 0), summed, _front(y, a))
    moved_shape = tuple(y.shape[k] for k in a.perm)
    back = prim("reshape", [front], {}, moved_shape, y.dtype)
    inverse = tuple(a.perm.index(k) for k in range(y.ndim))
    return permute(back, *inverse) if inverse != tuple(range(y.ndim)) else back


def _value_as(op: str, value: Any, shape: tuple[int, ...], dtype: dt.DType) -> Tensor:
    if isinstance(value, Tensor):
        if broadcast_shapes(op, value.shape, shape) != shape:
            raise ValueError(f"{op}: value of shape {value.shape} cannot be broadcast to the "
                             f"indexed shape {shape}")
        return broadcast_to(ops.cast(value, dtype), shape, op)
    if isinstance(value, (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)):
        return full_const(value, shape, dtype)
    from nova.tensor.creation import tensor
    return _value_as(op, tensor(value, dtype=dtype), shape, dtype)


def getitem(x: Tensor, index: Any) -> Tensor:
    p = parse_index("__getitem__", x.shape, index)
    if p.advanced:
        return _advanced_get("__getitem__", _basic(x, p), p.advanced)
    return make_view(x, lambda b: _basic(b, p), lambda b, v: _basic_put(b, p, v), "__getitem__")


def setitem(x: Tensor, index: Any, value: Any) -> None:
    p = parse_index("__setitem__", x.shape, index)
    if p.advanced:
        new_window = _advanced_put("__setitem__", _basic(x, p), p.advanced, value)
    else:
        new_window = _value_as("__setitem__", value, p.out_shape, x.dtype)
    x._assign(_basic_put(x, p, new_window), "__setitem__")
