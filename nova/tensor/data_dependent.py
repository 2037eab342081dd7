"""Ops whose result's shape depends on the values: ``nonzero``, ``argwhere``,
``masked_select``, ``unique``, ``unique_consecutive``, ``bincount``, ``where(cond)``
(and ``x[mask]``, through ``indexing.expand_masks``).

Nova's shapes are static, so these read the values that decide the shape on the host
-- a sync, as ``.item()`` is and as PyTorch's CUDA kernels for them are -- and carry on
with static shapes: index results are host constants, and the elements selected from
a tensor are a ``gather`` from it, which stays lazy and differentiable (only the mask
is read, never the tensor it selects from). Each distinct count is a distinct shape,
so a loop whose counts vary compiles the kernels downstream of the selection once per
count; under ``nv.compile`` the host read makes the call run recorded every time (its
``RecompileWarning`` names the line). Where the shape can stay fixed, ``where`` and
``masked_fill`` cost nothing of the kind.
"""
from __future__ import annotations

import builtins

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.tensor import ops
from nova.tensor.tensor import Tensor


def host_values(op: str, t: Tensor) -> np.ndarray:
    """``t``'s values on the host (realizing it): what decides the result's shape."""
    ops._check_tensor(op, t)
    return t._host_values()


def _index_tensor(values: np.ndarray, like: Tensor) -> Tensor:
    """An int64 tensor of host-computed indices on ``like``'s device."""
    from nova.tensor.creation import tensor
    return tensor(np.ascontiguousarray(values, dtype=np.int64), dtype=dt.int64,
                  device=like.device)


def nonzero(input: Tensor, *, as_tuple: builtins.bool = False) -> Tensor | tuple[Tensor, ...]:
    """The indices of the non-zero elements (``torch.nonzero``): an int64 tensor of shape
    (count, ndim), row-major order; ``as_tuple=True``: one 1-D tensor per dim (a 0-d
    input counts as 1-D). Reads ``input`` on the host."""
    values = host_values("nonzero", input)
    if values.ndim == 0:
        if as_tuple:
            return (_index_tensor(np.zeros(int(values != 0)), input),)
        return _index_tensor(np.zeros((int(values != 0), 0)), input)
    where = np.nonzero(values)
    if as_tuple:
        return tuple(_index_tensor(w, input) for w in where)
    return _index_tensor(np.stack(where, axis=1), input)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The first ``size`` rows of ``nonzero(input)``, padded with ``fill_value`` rows when
    there are fewer (``torch.nonzero_static``): a fixed shape (size, ndim), so nothing
    is read on the host and a step using it replays under ``nv.compile``. Each non-zero
    element's row is its running count among the non-zeros; it is scattered there (rows
    past ``size`` into a spare row that is dropped)."""
    ops._check_tensor("nonzero_static", input)
    if isinstance(size, builtins.bool) or not isinstance(size, (builtins.int, np.integer)) \
            or size < 0:
        raise ValueError(f"nonzero_static: size must be a non-negative int, got {size!r}")
    from nova.tensor.creation import arange, full
    from nova.tensor.movement import stack
    from nova.tensor.numeric import floor_divide, remainder
    from nova.tensor.scan import cumsum
    size, ndim, n = int(size), input.ndim, input.numel()
    flat = ops.ne(input.reshape(-1), 0)
    row = ops.sub(cumsum(flat, 0, dtype=dt.int64), 1)
    row = ops.where(ops.logical_and(flat, ops.lt(row, size)), row, size)
    position = arange(n, dtype=dt.int64, device=input.device)
    coords = []
    stride = 1
    for extent in reversed(input.shape):
        coords.append(remainder(floor_divide(position, stride), extent))
        stride *= extent
    table = full((size + 1, ndim), fill_value, dtype=dt.int64, device=input.device)
    if ndim == 0:
        return table[:size]
    src = stack(coords[::-1], 1)
    index = ops.broadcast_to(row.reshape(n, 1), (n, ndim), "nonzero_static")
    return ops.scatter(table, 0, index, src)[:size]


def argwhere(input: Tensor) -> Tensor:
    """``nonzero(input)`` (``torch.argwhere``)."""
    ops._check_tensor("argwhere", input)
    return nonzero(input)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where ``mask`` (a bool tensor broadcast with it) is
    true, as a 1-D tensor (``torch.masked_select``): a gather from ``input``, which is
    not read on the host and receives the gradient."""
    ops._check_tensor("masked_select", input)
    ops._check_tensor("masked_select", mask)
    if mask.dtype != dt.bool_:
        raise DTypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype.name} "
                         f"of shape {mask.shape}")
    from nova.core.shapes import broadcast_shapes
    shape = broadcast_shapes("masked_select", input.shape, mask.shape)
    x = ops.broadcast_to(input, shape, "masked_select")
    m = ops.broadcast_to(mask, shape, "masked_select")
    flat = x.reshape(-1)
    rows = np.flatnonzero(host_values("masked_select", m))
    return flat[_index_tensor(rows, input)]


def _unique_values(op: str, values: np.ndarray, dim: int | None, consecutive: builtins.bool
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique values, inverse, counts) of ``values`` (along ``dim``): sorted, NaNs
    distinct (as PyTorch's), or runs of equal neighbours when ``consecutive``."""
    if dim is None:
        flat = values.reshape(-1)
        if consecutive:
            starts = np.ones(flat.shape[0], bool)
            starts[1:] = ~((flat[1:] == flat[:-1]))
            first = np.flatnonzero(starts)
            inverse = np.cumsum(starts) - 1
            counts = np.diff(np.append(first, flat.shape[0]))
            return flat[first], inverse.reshape(values.shape), counts
        out, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True,
                                         equal_nan=False)
        return out, inverse.reshape(values.shape), counts
    ndim = builtins.max(values.ndim, 1)
    if not -ndim <= dim < ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of shape "
                         f"{values.shape}")
    dim %= ndim
    moved = np.moveaxis(values, dim, 0).reshape(values.shape[dim], -1)
    if consecutive:
        n = moved.shape[0]
        starts = np.ones(n, bool)
        if n > 1:
            starts[1:] = np.any(moved[1:] != moved[:-1], axis=1)
        first = np.flatnonzero(starts)
        inverse = np.cumsum(starts) - 1
        counts = np.diff(np.append(first, n))
        return np.take(values, first, axis=dim), inverse, counts
    if moved.shape[0] == 0:
        return values, np.zeros(0, np.int64), np.zeros(0, np.int64)
    # rows in lexicographic order (PyTorch's ``unique(dim=)`` order), equal rows merged
    order = np.lexsort(moved.T[::-1]) if moved.shape[1] else np.arange(moved.shape[0])
    ordered = moved[order]
    starts = np.ones(len(order), bool)
    starts[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    group = np.cumsum(starts) - 1
    inverse = np.empty(len(order), np.int64)
    inverse[order] = group
    first = order[np.flatnonzero(starts)]
    counts = np.bincount(group)
    return np.take(values, first, axis=dim), inverse, counts


def _unique_result(op: str, input: Tensor, found: tuple, return_inverse: builtins.bool,
                   return_counts: builtins.bool) -> Tensor | tuple[Tensor, ...]:
    from nova.tensor.creation import tensor
    out, inverse, counts = found
    values = tensor(np.ascontiguousarray(out), dtype=input.dtype, device=input.device)
    result = (values,)
    if return_inverse:
        result += (_index_tensor(inverse, input),)
    if return_counts:
        result += (_index_tensor(counts, input),)
    return result[0] if len(result) == 1 else result


def unique(input: Tensor, sorted: builtins.bool = True, return_inverse: builtins.bool = False,
           return_counts: builtins.bool = False, dim: int | None = None
           ) -> Tensor | tuple[Tensor, ...]:
    """The distinct values (``torch.unique``), always in ascending order (``sorted=False``
    leaves the order unspecified in PyTorch); with ``dim``, the distinct slices along it
    in lexicographic order. NaNs are each distinct, as in PyTorch. ``return_inverse``:
    where each element (slice) went; ``return_counts``: how many each. Reads ``input``
    on the host; not differentiable (as PyTorch's)."""
    values = host_values("unique", input)
    found = _unique_values("unique", values, dim, consecutive=False)
    return _unique_result("unique", input, found, return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: builtins.bool = False,
                       return_counts: builtins.bool = False, dim: int | None = None
                       ) -> Tensor | tuple[Tensor, ...]:
    """The first element (slice) of each run of equal neighbours
    (``torch.unique_consecutive``), with the optional inverse and run lengths. Reads
    ``input`` on the host."""
    values = host_values("unique_consecutive", input)
    found = _unique_values("unique_consecutive", values, dim, consecutive=True)
    return _unique_result("unique_consecutive", input, found, return_inverse, return_counts)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..n-1 occurs in a 1-D non-negative integer tensor, n =
    max(max(input) + 1, minlength) (``torch.bincount``); with ``weights`` (a tensor of
    ``input``'s shape) their sums instead, in the weights' dtype (int64 for integer or
    bool weights, as PyTorch). ``input`` is read on the host; the weighted sum is a
    ``scatter_add`` of ``weights``, which stays lazy."""
    ops._check_tensor("bincount", input)
    if input.ndim != 1 or input.dtype.category != dt.INT:
        raise DTypeError(f"bincount: input must be a 1-D tensor of integers, got "
                         f"{input.dtype.name} of shape {input.shape}")
    if isinstance(minlength, builtins.bool) or not isinstance(minlength, (builtins.int,
                                                                         np.integer)):
        raise TypeError(f"bincount: minlength must be an int, got {minlength!r}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    values = host_values("bincount", input)
    if values.size and values.min() < 0:
        raise ValueError(f"bincount: input must be non-negative, got a value "
                         f"{int(values.min())}")
    n = builtins.max(int(values.max()) + 1 if values.size else 0, int(minlength))
    from nova.tensor.creation import zeros
    if weights is None:
        return _index_tensor(np.bincount(values, minlength=n), input)
    ops._check_tensor("bincount", weights)
    if weights.shape != input.shape:
        raise ValueError(f"bincount: weights must have the input's shape {input.shape}, "
                         f"got {weights.shape}")
    dtype = dt.float32 if weights.dtype == dt.float32 else dt.float64
    w = ops.cast(weights, dtype)
    return ops.scatter_add(zeros(n, dtype=dtype, device=input.device), 0,
                           _index_tensor(values, input), w)
