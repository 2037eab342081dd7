"""Ordering: ``sort``, ``argsort``, ``topk`` and ``msort``, as PyTorch names them.

All of them are one primitive, ``nova.argsort`` (a stable sort along the last dim,
returning int64 positions): another dim is transposed to the end and back, the values
are ``gather(x, dim, indices)``, so they are differentiable through gather's rule (the
gradient scatters back to where each value came from), and ``topk`` is the first ``k``
positions of the sort. The sort is always stable, so ``stable=False`` gives the same
order PyTorch's ``stable=True`` does (PyTorch leaves the order of ties unspecified
then). NaN sorts as larger than every number, as in PyTorch.
"""
from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any

from nova.core import dtypes as dt
from nova.core.shapes import normalize_dim
from nova.tensor import movement, ops
from nova.tensor.ops import cast, gather, prim
from nova.tensor.tensor import Tensor

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


def _check(op: str, x: Any) -> None:
    ops._check_tensor(op, x)


def _argsort_last(x: Tensor, descending: builtins.bool) -> Tensor:
    keys = cast(x, dt.int32) if x.dtype == dt.bool_ else x
    return prim("argsort", [keys], {"descending": int(builtins.bool(descending))},
                x.shape, dt.int64)


def argsort(input: Tensor, dim: builtins.int = -1, descending: builtins.bool = False,
            stable: builtins.bool = False) -> Tensor:
    """The int64 positions that sort ``input`` along ``dim`` (``torch.argsort``)."""
    _check("argsort", input)
    if not isinstance(stable, builtins.bool):
        raise TypeError(f"argsort: stable must be a bool, got {stable!r}")
    if input.ndim == 0:
        normalize_dim("argsort", dim, 1)
        return movement.reshape(_argsort_last(movement.reshape(input, 1), descending), ())
    d = normalize_dim("argsort", dim, input.ndim, input.shape)
    last = input.ndim - 1
    if d == last:
        return _argsort_last(input, descending)
    moved = movement.transpose(input, d, last)
    return movement.transpose(_argsort_last(moved, descending), d, last)


def sort(input: Tensor, dim: builtins.int = -1, descending: builtins.bool = False,
         stable: builtins.bool = False) -> SortResult:
    """``(values, indices)`` of ``input`` sorted along ``dim`` (``torch.sort``)."""
    indices = argsort(input, dim, descending, stable)
    if input.ndim == 0:
        return SortResult(input.clone(), indices)        # (a new tensor, as PyTorch's)
    return SortResult(gather(input, dim, indices), indices)


def msort(input: Tensor) -> Tensor:
    """``input`` sorted along dim 0 (``torch.msort``)."""
    return sort(input, 0).values


def topk(input: Tensor, k: builtins.int, dim: builtins.int = -1, largest: builtins.bool = True,
         sorted: builtins.bool = True) -> TopkResult:
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim`` and their
    positions (``torch.topk``), always in sorted order (which ``sorted=False`` allows);
    of equal elements the first ones come first."""
    _check("topk", input)
    d = normalize_dim("topk", dim, input.ndim, input.shape)
    size = input.shape[d] if input.ndim else 1
    if isinstance(k, builtins.bool) or not isinstance(k, builtins.int) or not 0 <= k <= size:
        raise ValueError(f"topk: k={k!r} must be an int in [0, {size}] for dim {dim} of "
                         f"shape {input.shape}")
    indices = argsort(input, dim, descending=largest)
    if input.ndim == 0:
        return TopkResult(input.clone(), indices) if k else \
            TopkResult(movement.reshape(input, 1)[:0], movement.reshape(indices, 1)[:0])
    indices = movement.narrow(indices, d, 0, k)
    return TopkResult(gather(input, d, indices), indices)


TENSOR_METHODS = ("sort", "argsort", "msort", "topk")
