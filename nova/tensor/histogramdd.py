"""``torch.histogramdd``: the histogram of points in D dimensions.

Each coordinate is binned as ``nv.histogram`` bins its elements (``nova.tensor.arrays``:
the same edges, computed as PyTorch's ``linspace`` does, and the same interpolated bin
search, so bins agree with the edges returned); the D bin numbers of a point combine
into one row-major index of the D-dimensional histogram, which a ``scatter_add`` counts.
A point is counted only when every coordinate lies within its edges.
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.tensor import movement, ops
from nova.tensor.arrays import bin_of
from nova.tensor.tensor import Tensor

_Histogramdd = namedtuple("histogramdd", ["hist", "bin_edges"])

_OP = "torch.histogramdd"


def _bin_specs(bins: Any, d: int) -> list[Any]:
    """``bins`` as D entries, each an int count or a 1-D tensor of edges."""
    if isinstance(bins, Tensor):
        raise TypeError(f"{_OP}: bins must be an int, a sequence of ints or a sequence of "
                        f"1-D tensors, got a Tensor of shape {bins.shape}")
    if isinstance(bins, builtins.int) and not isinstance(bins, builtins.bool):
        return [bins] * d
    if not isinstance(bins, Sequence):
        raise TypeError(f"{_OP}: bins must be an int, a sequence of ints or a sequence of "
                        f"1-D tensors, got {type(bins).__name__}")
    specs = list(bins)
    if any(isinstance(b, Tensor) for b in specs):
        if len(specs) != d:
            raise RuntimeError(f"{_OP}: expected {d} sequences of bin edges for a "
                               f"{d}-dimensional histogram but got {len(specs)}")
        if not all(isinstance(b, Tensor) for b in specs):
            raise TypeError(f"{_OP}: bins mixes tensors and other values: {bins!r}")
        return specs
    if len(specs) != d:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    for k, b in enumerate(specs):
        if isinstance(b, builtins.bool) or not isinstance(b, builtins.int):
            raise TypeError(f"{_OP}: bins must be ints or 1-D tensors, got {b!r} for "
                            f"dimension {k}")
        if b <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b} for "
                               f"dimension {k}")
    return specs


def _check_edges(edges: Tensor, k: int, dtype: dt.DType) -> None:
    if edges.dtype != dtype:
        raise RuntimeError(f"{_OP}: input tensor and bins tensors should have the same "
                           f"dtype, but got input with dtype {dtype.name} and bins for "
                           f"dimension {k} with dtype {edges.dtype.name}")
    if edges.ndim != 1:
        raise RuntimeError(f"{_OP}: bins tensor should have one dimension, but got "
                           f"{edges.ndim} dimensions in the bins tensor for dimension {k}")
    if edges.shape[0] < 1:
        raise RuntimeError(f"{_OP}: bins tensor should have at least 1 element, but got 0 "
                           f"elements in the bins tensor for dimension {k}")


def _ranges(range: Any, d: int) -> list[Any]:
    """``range`` (2 D floats, or None) as D ``(lo, hi)`` pairs or Nones, checked."""
    if range is None:
        return [None] * d
    values = [builtins.float(v) for v in range]
    if len(values) != 2 * d:
        raise RuntimeError(f"{_OP}: for a {d}-dimensional histogram range should have "
                           f"{2 * d} elements, but got {len(values)}")
    pairs = [(values[2 * k], values[2 * k + 1]) for k in builtins.range(d)]
    for k, (lo, hi) in enumerate(pairs):
        if lo > hi:
            raise RuntimeError(f"{_OP}: min should not exceed max, but got min {lo:g} max "
                               f"{hi:g} for dimension {k}")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"{_OP}: dimension {k}'s range [{lo:g}, {hi:g}] is not finite")
    return pairs


def _check_input(input: Tensor, weight: Tensor | None) -> None:
    ops._check_tensor(_OP, input)
    if input.ndim < 2:
        raise RuntimeError(f"{_OP}: input tensor should have at least 2 dimensions")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{_OP}: input must be floating point, got {input.dtype.name}")
    if weight is None:
        return
    ops._check_tensor(_OP, weight)
    if weight.shape != input.shape[:-1]:
        raise RuntimeError(f"{_OP}: if weight tensor is provided it should have the same "
                           f"shape as the input tensor excluding its innermost dimension, "
                           f"but got input with shape {list(input.shape)} and weight with "
                           f"shape {list(weight.shape)}")
    if weight.dtype != input.dtype:
        raise RuntimeError(f"{_OP}: if weight tensor is provided, input tensor and weight "
                           f"tensor should have the same dtype, but got "
                           f"input({input.dtype.name}), and weight({weight.dtype.name})")


def histogramdd(input: Tensor, bins: Any = 10, range: Sequence[float] | None = None,
                weight: Tensor | None = None, density: builtins.bool = False) -> Any:
    """``(hist, bin_edges)`` of the points in ``input``'s rows (``torch.histogramdd``):
    ``input`` of shape (..., D) holds points of D coordinates (leading dims
    flattened); ``bins`` is an int (for every dimension), D ints, or D 1-D tensors of
    edges; ``range`` is ``[lo_0, hi_0, lo_1, hi_1, ...]`` (default: each dimension's
    data min and max). ``hist`` has one dim per coordinate; ``bin_edges`` is a tuple of
    D edge tensors. Each coordinate is binned as ``nv.histogram`` bins (last bin closed);
    ``weight`` (of shape ``input.shape[:-1]``) counts each point by its weight;
    ``density`` divides by the total and the bin volumes. ``bins`` defaults to 10 (as
    numpy's; PyTorch requires it).

    Deviation (as ``nv.histogram``): without ``range``, a dimension's range is its
    finite coordinates' min and max, where PyTorch raises on a non-finite one."""
    _check_input(input, weight)
    d = input.shape[-1]
    specs = _bin_specs(bins, d)
    pairs = _ranges(range, d)
    points = movement.reshape(input, (math.prod(input.shape[:-1]), d))
    edges, flat, inside = [], None, None
    for k in builtins.range(d):
        spec = specs[k]
        if isinstance(spec, Tensor):
            _check_edges(spec, k, input.dtype)
        e, index, within = bin_of(_OP, points[:, k], spec, pairs[k])
        edges.append(e)
        flat = index if flat is None else ops.add(ops.mul(flat, e.shape[0] - 1), index)
        inside = within if inside is None else ops.logical_and(inside, within)
    shape = tuple(e.shape[0] - 1 for e in edges)
    from nova.tensor.creation import zeros
    hist = zeros(math.prod(shape), dtype=input.dtype, device=input.device)
    if d and math.prod(shape) and points.shape[0]:
        w = None if weight is None else movement.reshape(weight, -1)
        amount = ops.cast(inside, input.dtype) if w is None else ops.where(inside, w, 0.0)
        hist = ops.scatter_add(hist, 0, ops.where(inside, flat, 0), amount)
    hist = movement.reshape(hist, shape)
    if density and d:
        hist = ops.div(hist, ops.sum(hist))
        for k, e in enumerate(edges):
            width = ops.sub(e[1:], e[:-1])
            hist = ops.div(hist, movement.reshape(width, (1,) * k + (-1,) + (1,) * (d - k - 1)))
    return _Histogramdd(hist, tuple(edges))


__all__ = ["histogramdd"]
