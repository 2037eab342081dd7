"""Max unpooling and power-average pooling (``F.max_unpool1d/2d/3d``, ``F.lp_pool1d/2d/3d``
and their modules), PyTorch's semantics, over the pooling of :mod:`nova.nn.convolution`.

``max_unpool`` puts each value back at its flat index into the output plane, the
indices that ``max_pool(..., return_indices=True)`` gives: one scatter per plane into
zeros, every other position 0. Where several values share an index (overlapping pool
windows) the last in index order is kept (PyTorch leaves it undefined); only that one
gets the output's gradient, as finite differences agree (PyTorch's backward gives every
duplicate the gradient). ``lp_pool`` is PyTorch's formula:
``(sign(a) * relu(|a|) * prod(kernel)) ** (1 / p)`` with ``a`` the ``avg_pool`` of
``x ** p`` (so a window of zeros has a zero gradient, not NaN), and ``max_pool`` of
``|x|`` for ``p = inf``.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.convolution import (
    avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d, max_pool2d, max_pool3d,
)
from nova.nn.module import Module
from nova.nn.windows import as_tuple, batched
from nova.tensor import ops
from nova.tensor.autocast_state import autocast_op
from nova.tensor.numeric import sign
from nova.tensor.tensor import Tensor


def _unpool_size(op: str, spatial: tuple[int, ...], kernel: tuple[int, ...],
                 stride: tuple[int, ...], padding: tuple[int, ...], output_size: Any
                 ) -> tuple[int, ...]:
    """The output's spatial size: ``(in - 1) * stride - 2 * padding + kernel`` per dim,
    or ``output_size`` (its last ``nd`` entries when it also names N and C), which must
    lie strictly within ``stride`` of that, as PyTorch's ``_unpool_output_size``."""
    nd = len(kernel)
    default = tuple((n - 1) * s + k - 2 * p
                    for n, k, s, p in zip(spatial, kernel, stride, padding))
    if output_size is None:
        size = default
    else:
        size = tuple(output_size)
        if len(size) == nd + 2:
            size = size[2:]
        if len(size) != nd:
            raise ValueError(f"{op}: output_size should be a sequence of {nd} or {nd + 2} "
                             f"ints, got {output_size!r}")
        for d in range(nd):
            low, high = default[d] - stride[d], default[d] + stride[d]
            if not low < size[d] < high:
                raise ValueError(f"{op}: invalid output_size {tuple(output_size)} (dim {d} "
                                 f"must be between {low} and {high}, exclusive)")
    if any(s < 0 for s in size):
        raise ValueError(f"{op}: output_size must contain non-negative spatial dims, got "
                         f"{size}")
    return tuple(int(s) for s in size)


def _max_unpool(op: str, nd: int, input: Tensor, indices: Tensor, kernel_size: Any,
                stride: Any, padding: Any, output_size: Any) -> Tensor:
    x, unbatched = batched(op, input, nd)
    ops._check_tensor(f"{op} indices", indices)
    if indices.shape != input.shape:
        raise ValueError(f"{op}: expected indices of the input's shape {input.shape}, got "
                         f"{indices.shape}")
    if indices.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"{op}: indices must be int64 (or int32), got {indices.dtype.name}")
    kernel = as_tuple(op, "kernel_size", kernel_size, nd, 1)
    strides = kernel if stride is None else as_tuple(op, "stride", stride, nd, 1)
    pads = as_tuple(op, "padding", padding, nd, 0)
    size = _unpool_size(op, x.shape[2:], kernel, strides, pads, output_size)
    n, c = x.shape[:2]
    plane = math.prod(size)
    known = ops.known_index_values(indices)     # checked here when on the host already
    if known is not None and known.size and (known.min() < 0 or known.max() >= plane):
        bad = known[(known < 0) | (known >= plane)].flat[0]
        raise IndexError(f"{op}: index {bad} is out of bounds for output planes of "
                         f"{plane} elements (output size {size})")
    idx = indices.unsqueeze(0) if unbatched else indices
    count = math.prod(x.shape[2:])
    out = ops.scatter(ops.full_const(0, (n, c, plane), x.dtype), 2,
                      idx.reshape(n, c, count), x.reshape(n, c, count)).reshape((n, c) + size)
    return out.squeeze(0) if unbatched else out


@autocast_op("max_unpool1d")
def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """``torch.nn.functional.max_unpool1d``: ``(N, C, L)`` or ``(C, L)``."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


@autocast_op("max_unpool2d")
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """``torch.nn.functional.max_unpool2d``: the inverse placement of ``max_pool2d``'s
    ``return_indices`` (flat indices into each ``H*W`` output plane), zeros elsewhere."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


@autocast_op("max_unpool3d")
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """``torch.nn.functional.max_unpool3d``: ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)


_MAX_POOLS = (max_pool1d, max_pool2d, max_pool3d)
_AVG_POOLS = (avg_pool1d, avg_pool2d, avg_pool3d)


def _lp_pool(op: str, nd: int, input: Tensor, norm_type: float, kernel_size: Any,
             stride: Any, ceil_mode: bool) -> Tensor:
    ops._check_tensor(op, input)
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {input.dtype.name}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real) or \
            norm_type == 0 or math.isnan(norm_type):
        raise ValueError(f"{op}: norm_type must be a nonzero number, got {norm_type!r}")
    kernel = as_tuple(op, "kernel_size", kernel_size, nd, 1)
    if math.isinf(norm_type):
        pool = _MAX_POOLS[nd - 1]
        if norm_type > 0:
            return pool(ops.abs(input), kernel, stride, 0, 1, ceil_mode)
        return ops.neg(pool(ops.neg(ops.abs(input)), kernel, stride, 0, 1, ceil_mode))
    mean = _AVG_POOLS[nd - 1](ops.pow(input, norm_type), kernel, stride, 0, ceil_mode)
    total = ops.mul(ops.mul(sign(mean), ops.relu(ops.abs(mean))), float(math.prod(kernel)))
    return ops.pow(total, 1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``torch.nn.functional.lp_pool1d``: the ``norm_type``-norm of each window."""
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``torch.nn.functional.lp_pool2d``: ``(sum over the window of x ** p) ** (1 / p)``
    (PyTorch's formula, module docstring)."""
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``torch.nn.functional.lp_pool3d``: the ``norm_type``-norm of each window."""
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


class _MaxUnpoolNd(Module):
    _nd: int = 0
    _fn: Any = None

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = as_tuple(name, "kernel_size", kernel_size, self._nd, 1)
        self.stride = as_tuple(name, "stride", kernel_size if stride is None else stride,
                               self._nd, 1)
        self.padding = as_tuple(name, "padding", padding, self._nd, 0)

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    _nd, _fn = 1, max_unpool1d


class MaxUnpool2d(_MaxUnpoolNd):
    _nd, _fn = 2, max_unpool2d


class MaxUnpool3d(_MaxUnpoolNd):
    _nd, _fn = 3, max_unpool3d


class _LPPoolNd(Module):
    _fn: Any = None

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride,
                              self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    _fn = lp_pool1d


class LPPool2d(_LPPoolNd):
    _fn = lp_pool2d


class LPPool3d(_LPPoolNd):
    _fn = lp_pool3d


__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d", "lp_pool1d", "lp_pool2d",
           "lp_pool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d",
           "LPPool3d"]
