"""PyTorch's stride-level functions on Nova's stride-less tensors: ``as_strided``,
``narrow_copy``, ``unsafe_split`` and ``unsafe_chunk``.

Nova's tensors have no strides or storage of their own (a value is a node of the lazy
graph), so ``as_strided`` reads the tensor's values in row-major order as if they were
a contiguous storage, through a gather of the flattened tensor with an index table
computed here, once, from the sizes and strides: the result is differentiable (gather's
rule scatters the gradient back, adding where elements overlap) but is a new value, not
a view. The "unsafe" split functions exist in PyTorch to skip the version-counter
sharing of views; Nova's values are immutable, so they are ``split``/``chunk``.
"""
from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.shapes import normalize_dim
from nova.tensor import movement, ops
from nova.tensor.tensor import Tensor


def _int_list(op: str, name: str, position: int, values: Any) -> list[int]:
    """``values`` (a sequence of ints, as PyTorch's ``int[]`` arguments) as a list,
    with PyTorch's ``TypeError`` for anything else."""
    if isinstance(values, (builtins.int, Tensor)) or not isinstance(values, Sequence):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be tuple of "
                        f"ints, not {type(values).__name__}")
    out = []
    for k, v in enumerate(values):
        if isinstance(v, builtins.bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{op}(): argument '{name}' (position {position}) must be tuple "
                            f"of ints, but found element of type {type(v).__name__} at pos {k}")
        out.append(operator.index(v))
    return out


def _check_storage(size: list[int], stride: list[int], offset: int, dtype: dt.DType,
                   numel: int) -> None:
    """PyTorch's bounds check (``setStorage``): the furthest element read must lie in
    the ``numel`` values (an empty result reads nothing)."""
    if any(s < 0 for s in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={size} and "
                           f"strides={stride}")
    if 0 in size:
        return
    needed = (offset + 1 + builtins.sum((n - 1) * s for n, s in zip(size, stride)))
    if needed > numel:
        item = dtype.itemsize
        raise RuntimeError(f"setStorage: sizes {size}, strides {stride}, storage offset "
                           f"{offset}, and itemsize {item} requiring a storage size of "
                           f"{needed * item} are out of bounds for storage of size "
                           f"{numel * item}")


def _index_table(size: list[int], stride: list[int], offset: int) -> np.ndarray:
    """The flat position each result element reads: ``offset + sum(i_k * stride_k)``."""
    table = np.full(tuple(size), offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        table = table + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return table


def as_strided(input: Tensor, size: Sequence[int], stride: Sequence[int],
               storage_offset: int | None = 0) -> Tensor:
    """``torch.as_strided``: element ``[i0, i1, ...]`` of the result is
    ``flat[storage_offset + i0 * stride[0] + i1 * stride[1] + ...]``, ``flat`` being
    ``input``'s values in row-major order (its "storage"). Reading past the end raises
    as PyTorch's bounds check does; negative strides raise as in PyTorch.

    Deviations: the result is a copy, not a view (Nova has no shared storage), so writes
    into it do not reach ``input``; and ``input`` counts as contiguous with offset 0,
    so for a view such as ``x[:, 1:]`` the "storage" is that view's own values (as
    ``x[:, 1:].contiguous().as_strided(...)`` in PyTorch), not the base's."""
    op = "as_strided"
    ops._check_tensor(op, input)
    size = _int_list(op, "size", 2, size)
    stride = _int_list(op, "stride", 3, stride)
    offset = 0 if storage_offset is None else storage_offset
    if isinstance(offset, builtins.bool) or not hasattr(offset, "__index__"):
        raise TypeError(f"{op}(): argument 'storage_offset' (position 4) must be int, not "
                        f"{type(offset).__name__}")
    offset = operator.index(offset)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, "
                           f"got strides: {stride}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    numel = math.prod(input.shape)
    _check_storage(size, stride, offset, input.dtype, numel)
    flat = movement.reshape(input, -1)
    if 0 in size:   # nothing read: an empty slice keeps the graph (and requires_grad)
        return movement.reshape(movement.narrow(flat, 0, 0, 0), tuple(size))
    from nova.tensor.creation import tensor
    index = tensor(_index_table(size, stride, offset).reshape(-1), dtype=dt.int64)
    return movement.reshape(ops.gather(flat, 0, index), tuple(size))


def narrow_copy(input: Tensor, dim: int, start: Any, length: int) -> Tensor:
    """``torch.narrow_copy``: ``input.narrow(dim, start, length)`` as a new tensor that
    shares no updates with ``input`` (``narrow`` is a view); PyTorch's errors."""
    op = "narrow_copy"
    ops._check_tensor(op, input)
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(op, dim, input.ndim, input.shape)
    if isinstance(start, Tensor):
        if start.ndim != 0 or start.dtype.category != dt.INT:
            raise TypeError(f"{op}: start must be an int or a 0-dim integer tensor, got "
                            f"{start.dtype.name} of shape {start.shape}")
        start = builtins.int(start.item())
    start, length = operator.index(start), operator.index(length)
    n = input.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but "
                         f"got {start})")
    if start < 0:
        start += n
    if length < 0 or start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({n}).")
    return movement.narrow(input, d, start, length).clone()


def unsafe_split(input: Tensor, split_size: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``torch.unsafe_split``: ``split`` with an int ``split_size``. PyTorch's "unsafe"
    skips the views' shared version counter; Nova's results are those of ``split``,
    so there is nothing unsafe about them (use ``split`` with a list of sizes)."""
    ops._check_tensor("unsafe_split", input)
    if isinstance(split_size, builtins.bool) or not isinstance(split_size, builtins.int):
        raise TypeError(f"unsafe_split(): argument 'split_size' (position 2) must be int, "
                        f"not {type(split_size).__name__}")
    return movement.split(input, split_size, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``torch.unsafe_chunk``: ``chunk``. PyTorch's "unsafe" skips the views' shared
    version counter; Nova's results are those of ``chunk``, with nothing unsafe."""
    ops._check_tensor("unsafe_chunk", input)
    return movement.chunk(input, chunks, dim)


TENSOR_METHODS = ("as_strided", "narrow_copy", "unsafe_split", "unsafe_chunk")

__all__ = list(TENSOR_METHODS)
