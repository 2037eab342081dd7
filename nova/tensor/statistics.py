"""Order statistics, histograms and covariances with PyTorch's names: ``kthvalue``,
``nanmedian``, ``histc``, ``cov`` and ``corrcoef``; and ``isin`` and ``take``.

All have static result shapes, so they are ordinary graphs: order statistics read a
stable sort, a histogram scatter-adds ones into its bins, a covariance is a centred
matmul.
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.shapes import normalize_dim
from nova.tensor import movement, numeric, ops
from nova.tensor.arrays import diagonal
from nova.tensor.tensor import Tensor

KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])


def kthvalue(input: Tensor, k: builtins.int, dim: builtins.int = -1,
             keepdim: builtins.bool = False) -> KthvalueResult:
    """The ``k``-th smallest element along ``dim`` and its index (``torch.kthvalue``;
    NaN sorts above every number, as there)."""
    from nova.tensor.sorting import sort
    ops._check_tensor("kthvalue", input)
    x = input if input.ndim else movement.reshape(input, 1)
    d = normalize_dim("kthvalue", dim, x.ndim, x.shape)
    n = x.shape[d]
    if isinstance(k, builtins.bool) or not isinstance(k, builtins.int) or not 1 <= k <= n:
        raise IndexError(f"kthvalue: k ({k!r}) is out of range for dim {dim} of size {n} "
                         f"(shape {input.shape}); valid: 1 <= k <= {n}")
    ordered = sort(x, d, stable=True)
    values = movement.narrow(ordered.values, d, k - 1, 1)
    indices = movement.narrow(ordered.indices, d, k - 1, 1)
    if not keepdim or not input.ndim:
        values, indices = movement.squeeze(values, d), movement.squeeze(indices, d)
    return KthvalueResult(values, indices)


def nanmedian(input: Tensor, dim: builtins.int | None = None,
              keepdim: builtins.bool = False) -> Any:
    """The lower median of the non-NaN elements (``torch.nanmedian``); NaN where a
    slice holds nothing else. With ``dim``, ``(values, indices)``, the index taking the
    whole gradient; without, the elements equal to the median share it (the NaNs if it
    is NaN), as in PyTorch."""
    from nova.tensor.sorting import sort
    ops._check_tensor("nanmedian", input)
    if not input.dtype.is_floating_point:
        from nova.tensor.arrays import median
        out = median(input, dim, keepdim)
        return out if dim is None else NanmedianResult(*out)
    if dim is None:
        if input.numel() == 0:
            from nova.tensor.creation import full
            return full((), math.nan, dtype=input.dtype, device=input.device)
        return ops.shared_by_ties(input, nanmedian(movement.reshape(input, -1), 0).values)
    x = input if input.ndim else movement.reshape(input, 1)
    d = normalize_dim("nanmedian", dim, x.ndim, x.shape)
    if x.shape[d] == 0:
        raise IndexError(f"nanmedian: expected reduction dim {dim} to have non-zero size "
                         f"(shape {input.shape})")
    ordered = sort(x, d, stable=True)            # NaN last
    count = ops.sum(ops.cast(ops.logical_not(ops.isnan(x)), dt.int64), d, keepdim=True)
    at = ops.maximum(numeric.floor_divide(ops.sub(count, 1), 2), 0)
    values = ops.gather(ordered.values, d, at)
    indices = ops.gather(ordered.indices, d, at)
    if not keepdim or not input.ndim:
        values, indices = movement.squeeze(values, d), movement.squeeze(indices, d)
    return NanmedianResult(values, indices)


def _edges_in(dtype: dt.DType, lo: builtins.float, hi: builtins.float
              ) -> tuple[builtins.float, builtins.float, builtins.float]:
    """(min, max, max - min) as PyTorch's histc kernel holds them: the outer bin edges
    in ``dtype`` (its linspace's ends) and their difference rounded in ``dtype``, as
    Python floats (exact: each is a value of ``dtype``)."""
    if dtype == dt.float64:
        return lo, hi, hi - lo
    lo_t, hi_t = (np.asarray(ops._rounded_to(v, dtype)).astype(dtype.np) for v in (lo, hi))
    return builtins.float(lo_t), builtins.float(hi_t), builtins.float(hi_t - lo_t)


def histc(input: Tensor, bins: builtins.int = 100, min: Any = 0, max: Any = 0) -> Tensor:
    """Counts of ``input``'s elements in ``bins`` equal bins over ``[min, max]``
    (``torch.histc``): an element's bin is ``floor((x - min) * bins / (max - min))``
    with min and max rounded to ``input``'s dtype and every operation (the span too)
    rounded in it, as PyTorch's CPU kernel computes it (so elements on or near a bin
    edge land where PyTorch puts them); ``max`` itself falls in the last bin; elements
    outside, and NaN, are not counted. ``min == max`` uses the finite data's own range
    (widened by 1 each way if that is a point; PyTorch raises when the data hold an
    infinity, which Nova cannot see while recording). The counts have ``input``'s
    dtype."""
    from nova.tensor.creation import zeros
    ops._check_tensor("histc", input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"histc: expects a floating point input, got {input.dtype.name}")
    if isinstance(bins, builtins.bool) or not isinstance(bins, builtins.int) or bins <= 0:
        raise ValueError(f"histc: bins must be a positive int, got {bins!r}")
    if builtins.isinstance(min, Tensor) or builtins.isinstance(max, Tensor):
        raise TypeError("histc: min and max must be numbers")
    if min > max:
        raise ValueError(f"histc: max ({max}) must be larger than or equal to min ({min})")
    if not (math.isfinite(min) and math.isfinite(max)):
        raise ValueError(f"histc: range of [{min}, {max}] is not finite")
    x = movement.reshape(input, -1)
    if x.shape[0] == 0:
        return zeros(bins, dtype=input.dtype, device=input.device)
    if min == max:
        finite = ops.lt(ops.abs(x), math.inf)
        lo = ops.amin(ops.where(finite, x, math.inf))
        hi = ops.amax(ops.where(finite, x, -math.inf))
        none = ops.logical_not(ops.lt(lo, math.inf))          # no finite element
        lo, hi = ops.where(none, 0.0, lo), ops.where(none, 0.0, hi)
        point = ops.eq(lo, hi)
        lo, hi = ops.where(point, ops.sub(lo, 1.0), lo), ops.where(point, ops.add(hi, 1.0), hi)
        span = ops.sub(hi, lo)
    else:
        lo, hi, span = _edges_in(input.dtype, builtins.float(min), builtins.float(max))
    inside = ops.logical_and(ops.ge(x, lo), ops.le(x, hi))
    position = numeric.floor(ops.div(ops.mul(ops.sub(x, lo), float(bins)), span))
    # (a span that rounds to 0 in the dtype gives 0 / 0: those elements go to bin 0, as
    # PyTorch's kernel puts them)
    position = ops.where(ops.isnan(position), 0.0, position)
    index = ops.cast(ops.clamp(ops.where(inside, position, 0.0), 0, bins - 1), dt.int64)
    # counted in int64 and rounded once: a float16/bfloat16 running count stalls at
    # 2048/256 (PyTorch's per-thread half counts stall likewise, at a thread-dependent sum)
    counts = ops.scatter_add(zeros(bins, dtype=dt.int64, device=input.device), 0, index,
                             ops.cast(inside, dt.int64))
    return ops.cast(counts, input.dtype)


def cov(input: Tensor, *, correction: builtins.int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in ``input``'s rows, its columns being
    observations (``torch.cov``), with integer frequency weights and float
    observation weights, and ``correction`` (1: Bessel's) as there. One variable (a 1-D
    input, or one row) gives a 0-d result."""
    ops._check_tensor("cov", input)
    if input.ndim > 2:
        raise ValueError(f"cov: expected input to have two or fewer dimensions, got shape "
                         f"{input.shape}")
    x = input if input.ndim == 2 else movement.reshape(input, (1, -1))
    if not x.dtype.is_floating_point:
        x = ops.cast(x, dt.DEFAULT_FLOAT)
    n = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.ndim > 1 or fweights.shape[-1:] != (n,) or \
                fweights.dtype.category != dt.INT:
            raise ValueError(f"cov: fweights must be a 1-D integer tensor of {n} elements, got "
                             f"{fweights.dtype.name} {fweights.shape}")
        w = ops.cast(fweights, x.dtype)
    if aweights is not None:
        if aweights.ndim > 1 or aweights.shape[-1:] != (n,) or \
                not aweights.dtype.is_floating_point:
            raise ValueError(f"cov: aweights must be a 1-D float tensor of {n} elements, got "
                             f"{aweights.dtype.name} {aweights.shape}")
        aw = ops.cast(aweights, x.dtype)
        w = aw if w is None else ops.mul(w, aw)
    if w is None:
        total = builtins.float(n)
        mean = ops.mean(x, 1, keepdim=True)
        norm = total - correction
    else:
        total = ops.sum(w)
        mean = ops.div(ops.sum(ops.mul(x, w), 1, keepdim=True), total)
        if correction == 0:
            norm = total
        elif aweights is None:
            norm = ops.sub(total, correction)
        else:
            aw = ops.cast(aweights, x.dtype)
            norm = ops.sub(total, ops.div(ops.mul(ops.sum(ops.mul(w, aw)), correction), total))
    centred = ops.sub(x, mean)
    weighted = centred if w is None else ops.mul(centred, w)
    out = ops.div(ops.matmul(weighted, movement.transpose(centred, 0, 1)),
                  ops.maximum(norm, 0.0) if isinstance(norm, Tensor) else builtins.max(norm, 0))
    return movement.reshape(out, ()) if x.shape[0] == 1 else out   # one variable: 0-d


def corrcoef(input: Tensor) -> Tensor:
    """Pearson's correlation coefficients of ``input``'s rows (``torch.corrcoef``):
    ``cov`` normalized by the standard deviations, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return ops.div(c, c)
    d = movement.reshape(ops.sqrt(diagonal(c)), (-1, 1))
    out = ops.div(ops.div(c, d), movement.transpose(d, 0, 1))
    return ops.clamp(out, -1.0, 1.0)


def isin(elements: Any, test_elements: Any, *, assume_unique: builtins.bool = False,
         invert: builtins.bool = False) -> Tensor:
    """Whether each of ``elements`` is among ``test_elements`` (``torch.isin``; either
    may be a number), by comparing every pair: memory grows with the product of the
    sizes."""
    from nova.tensor.creation import tensor
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: at least one of elements and test_elements must be a Tensor")
    e = elements if isinstance(elements, Tensor) else tensor(elements)
    t = test_elements if isinstance(test_elements, Tensor) else tensor(test_elements)
    t = movement.reshape(t, -1)
    if t.shape[0] == 0:
        from nova.tensor.creation import full
        return full(e.shape, builtins.bool(invert), dtype=dt.bool_)
    hit = numeric.any(ops.eq(movement.unsqueeze(e, -1), t), -1)
    return ops.logical_not(hit) if invert else hit


def take(input: Tensor, index: Tensor) -> Tensor:
    """``input`` read as 1-D at ``index`` (any shape; negative counts from the end), as
    ``torch.take``; an index out of range raises as indexing does."""
    ops._check_tensor("take", input)
    if not isinstance(index, Tensor) or index.dtype.category != dt.INT:
        # a tensor of another dtype is PyTorch's RuntimeError, a non-tensor its TypeError
        raise (DTypeError if isinstance(index, Tensor) else TypeError)(
            f"take: index must be an integer tensor, got "
            f"{getattr(index, 'dtype', type(index).__name__)}")
    flat = movement.reshape(input, -1)
    return movement.reshape(flat[movement.reshape(index, -1)], index.shape)


TENSOR_METHODS = ("kthvalue", "nanmedian", "histc", "cov", "corrcoef", "take")

__all__ = list(TENSOR_METHODS) + ["isin"]
