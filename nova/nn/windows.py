"""Sliding windows over the trailing spatial dims: the one mechanism behind convolution
and pooling.

A window op (``conv2d``, ``max_pool2d``, ...) sees its input as ``(N, C, *spatial)``
and, for every kernel offset ``k`` (a tuple over the spatial dims), reads the strided,
dilated view ``x_padded[..., k*dilation : ... : stride]`` of shape ``(N, C, *out)``.
:func:`window_stack` stacks those ``prod(kernel)`` views on a new dim 2, giving
``(N, C, K, *out)``: convolution contracts ``C*K`` against the weight with one matmul
(im2col), pooling reduces over ``K``. Everything is recorded with basic slices, ``pad``
and ``cat``, so fusion sees the views (the stack usually fuses into the GEMM's operand
or the reduction), and the backward is the slices' own VJP (a padded sum of the window
gradients), with nothing written here to get wrong.

:class:`WindowSpec` normalizes PyTorch's arguments (ints or tuples, ``'same'`` and
``'valid'``, ``ceil_mode``) once and checks them, naming the op and the shapes.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nova.tensor.ops import prim
from nova.tensor.tensor import Tensor


def as_tuple(op: str, name: str, value: Any, nd: int, minimum: int) -> tuple[int, ...]:
    """``value`` (an int, or a tuple of ``nd`` ints) as ``nd`` ints, each >= ``minimum``."""
    vals = (value,) * nd if isinstance(value, (int, np.integer)) else tuple(value)
    if len(vals) != nd or not all(isinstance(v, (int, np.integer)) and
                                  not isinstance(v, bool) for v in vals):
        raise ValueError(f"{op}: {name} must be an int or a tuple of {nd} ints, got {value!r}")
    if any(v < minimum for v in vals):
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return tuple(int(v) for v in vals)


@dataclass(frozen=True)
class WindowSpec:
    """Where the windows of one window op lie, per spatial dim.

    ``low``/``high`` are the implicit padding before and after each dim (``high`` may
    exceed ``low`` for ``padding='same'`` with an even kernel, or by the extra cells
    ``ceil_mode`` adds to reach a last, partial window); ``out`` the output size."""

    op: str
    spatial: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    low: tuple[int, ...]
    high: tuple[int, ...]
    out: tuple[int, ...]

    @staticmethod
    def make(op: str, spatial: tuple[int, ...], kernel: Any, stride: Any, padding: Any,
             dilation: Any = 1, ceil_mode: bool = False) -> WindowSpec:
        nd = len(spatial)
        k = as_tuple(op, "kernel_size", kernel, nd, 1)
        s = as_tuple(op, "stride", stride, nd, 1)
        d = as_tuple(op, "dilation", dilation, nd, 1)
        if isinstance(padding, str):
            if padding == "valid":
                low = high = (0,) * nd
            elif padding == "same":
                if any(v != 1 for v in s):
                    raise ValueError(f"{op}: padding='same' is not supported for strided "
                                     f"convolutions (stride {s})")
                total = [di * (ki - 1) for di, ki in zip(d, k)]
                low = tuple(t // 2 for t in total)
                high = tuple(t - t // 2 for t in total)
            else:
                raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a tuple "
                                 f"of {nd} ints, got {padding!r}")
        else:
            low = high = as_tuple(op, "padding", padding, nd, 0)
        out, extra = [], []
        for n, ki, si, di, lo, hi in zip(spatial, k, s, d, low, high):
            span = n + lo + hi - di * (ki - 1) - 1
            if span < 0:
                raise ValueError(f"{op}: input spatial size {spatial} (padded by {low}/"
                                 f"{high}) is smaller than the dilated kernel {k} "
                                 f"(dilation {d})")
            o = (-(-span // si) if ceil_mode else span // si) + 1
            if ceil_mode and (o - 1) * si >= n + lo:   # the last window must start inside
                o -= 1
            out.append(o)
            extra.append(max((o - 1) * si + di * (ki - 1) + 1 - (n + lo + hi), 0))
        return WindowSpec(op, tuple(spatial), k, s, d, tuple(low),
                          tuple(h + e for h, e in zip(high, extra)), tuple(out))

    @property
    def count(self) -> int:
        return math.prod(self.kernel)

    def offsets(self) -> list[tuple[int, ...]]:
        """Kernel offsets in row-major order: the order of dim 2 of the window stack
        (and of a convolution weight's flattened kernel)."""
        return list(itertools.product(*(range(k) for k in self.kernel)))


def window_stack(x: Tensor, spec: WindowSpec, fill: Any = 0.0, dim: int = 2) -> Tensor:
    """``(A, B, *spatial)`` -> ``(A, B, prod(kernel), *out)``: the input padded with
    ``fill`` and read once per kernel offset (see the module docstring); ``dim=1``
    stacks the offsets between the two leading dims instead, ``(A, prod(kernel), B,
    *out)``.

    The views, their new axis and their concatenation are recorded as the ``slice``,
    ``reshape`` and ``concat`` primitives themselves -- what indexing, ``unsqueeze`` and
    ``stack`` would record, without their Python (index parsing, view bookkeeping): a
    7x7 kernel is 49 views, and recording them through ``x[...]`` took most of a small
    convolution's time when it runs uncompiled (``benchmarks/bench_conv``)."""
    if any(spec.low) or any(spec.high):
        from nova.nn.functional import _pad_constant   # (functional imports this module)
        x = _pad_constant(x, [(0, 0), (0, 0)] + list(zip(spec.low, spec.high)), fill)
    lead = tuple(x.shape[:2])
    window_shape = lead + tuple(spec.out)
    stacked = list(window_shape)
    stacked.insert(dim, 1)
    views = []
    for k in spec.offsets():
        starts = (0, 0) + tuple(ki * di for ki, di in zip(k, spec.dilation))
        limits = lead + tuple(ki * di + si * (o - 1) + 1 for ki, di, si, o
                              in zip(k, spec.dilation, spec.stride, spec.out))
        steps = (1, 1) + tuple(spec.stride)
        view = x
        if window_shape != tuple(x.shape) or any(s != 1 for s in steps):
            view = prim("slice", [x], {"start": starts, "limit": limits, "stride": steps},
                        window_shape, x.dtype)
        views.append(view)
    views = [prim("reshape", [v], {}, tuple(stacked), x.dtype) for v in views]
    if len(views) == 1:
        return views[0]
    stacked[dim] = len(views)
    return prim("concat", views, {"dim": dim}, tuple(stacked), x.dtype)


def batched(op: str, x: Tensor, nd: int) -> tuple[Tensor, bool]:
    """``x`` as ``(N, C, *spatial)`` with ``nd`` spatial dims; PyTorch's window ops also
    take an unbatched ``(C, *spatial)`` input, returned unbatched."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if x.ndim == nd + 1:
        return x.unsqueeze(0), True
    if x.ndim != nd + 2:
        raise ValueError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) "
                         f"input, got shape {x.shape}")
    return x, False
