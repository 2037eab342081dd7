"""``F.interpolate`` (and ``F.upsample``): resizing the spatial dims of ``(N, C, *spatial)``
with PyTorch's index rules, one spatial dim at a time.

Every mode is separable. Per dim, the source coordinate of each output position is
computed on the host exactly as PyTorch computes it (``scale`` = 1 / ``scale_factor``
when one is given and not recomputed, else in / out): ``nearest`` reads
``floor(dst * scale)``, ``nearest-exact`` ``floor((dst + 0.5) * scale)``, the linear
modes blend the two neighbours of ``(dst + 0.5) * scale - 0.5`` (clamped at 0;
``align_corners=True``: ``dst * (in - 1) / (out - 1)``) with weights ``1 - t`` and
``t``; ``bicubic`` reads the four neighbours ``floor(src) - 1 .. + 2`` of the unclamped
source (clamped to the border) with PyTorch's cubic convolution weights (``A = -0.75``),
the last dim first as PyTorch sums them. The reads are gathers along the dim, so an inf or NaN stays in the pixels that
read it (a matrix product would spread it along the row through 0 * inf), and the
gradient is the gathers' own scatter-add. ``area`` is ``adaptive_avg_pool``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.nn.convolution import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from nova.nn.module import Module
from nova.tensor import ops
from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor

_MODES = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2,
          "bicubic": 2, "trilinear": 3, "area": None}
CUBIC_A = -0.75      # PyTorch's (and OpenCV's) cubic convolution coefficient


def _sizes(op: str, x: Tensor, nd: int, size: Any, scale_factor: Any,
           recompute: bool | None) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
    """Output sizes and, per dim, the scale PyTorch's kernels use (None: in / out)."""
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size and scale_factor must be given")
    spatial = x.shape[2:]
    if size is not None:
        out = (size,) * nd if isinstance(size, int) else tuple(size)
        if len(out) != nd or not all(isinstance(s, int) and s > 0 for s in out):
            raise ValueError(f"{op}: size must be a positive int or {nd} of them for input "
                             f"{x.shape}, got {size!r}")
        return out, (None,) * nd
    factors = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) \
        else tuple(scale_factor)
    if len(factors) != nd or not all(isinstance(f, (int, float)) and f > 0 for f in factors):
        raise ValueError(f"{op}: scale_factor must be a positive number or {nd} of them for "
                         f"input {x.shape}, got {scale_factor!r}")
    out = tuple(int(math.floor(n * f)) for n, f in zip(spatial, factors))
    if any(o < 1 for o in out):
        raise ValueError(f"{op}: scale_factor {scale_factor!r} gives an empty output for "
                         f"input {x.shape}")
    scales = (None,) * nd if recompute else tuple(1.0 / f for f in factors)
    return out, scales


def _gather_dim(x: Tensor, axis: int, index: np.ndarray) -> Tensor:
    shape = [1] * x.ndim
    shape[axis] = index.size
    idx = tensor(index.reshape(shape).astype(np.int64), device=x.device)
    full = list(x.shape)
    full[axis] = index.size
    return ops.gather(x, axis, idx.expand(*full))


def _scale(n_in: int, n_out: int, scale: float | None, ct: type = np.float32) -> Any:
    """PyTorch's scale in its compute type ``ct`` (float32, or float64 for float64
    input): 1 / scale_factor (rounded from double) or in / out (divided in ``ct``)."""
    return ct(scale) if scale is not None else ct(n_in) / ct(n_out)


def _source(n_in: int, n_out: int, scale: float | None, align_corners: bool,
            cubic: bool = False, ct: type = np.float32) -> np.ndarray:
    """The float source coordinate of each output position (linear and cubic modes),
    in ``ct`` as PyTorch's CPU kernels compute it (float32 for the float32 and half
    inputs, float64 for float64); only the linear modes clamp it at 0."""
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        ratio = ct(n_in - 1) / ct(n_out - 1) if n_out > 1 else ct(0)
        return (ratio * dst.astype(ct)).astype(np.float64)
    s = _scale(n_in, n_out, scale, ct)
    src = (ct(s) * (dst.astype(ct) + ct(0.5)) - ct(0.5))
    return (src if cubic else np.maximum(src, 0.0)).astype(np.float64)


def _cubic_taps(n_in: int, n_out: int, scale: float | None, align_corners: bool,
                ct: type = np.float32) -> tuple[np.ndarray, np.ndarray]:
    """The four source positions ``(n_out, 4)`` (clamped to the input, as PyTorch reads
    the border) and their cubic convolution weights (in ``ct``, PyTorch's formulas) of
    each output position."""
    real = _source(n_in, n_out, scale, align_corners, cubic=True, ct=ct).astype(ct)
    index = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    t = np.clip(real - index.astype(ct), ct(0), ct(1))
    a = ct(CUBIC_A)

    def near(x):      # |x| <= 1
        return ((a + ct(2)) * x - (a + ct(3))) * x * x + ct(1)

    def far(x):       # 1 < |x| < 2
        return ((a * x - ct(5) * a) * x + ct(8) * a) * x - ct(4) * a
    one = ct(1)
    weights = np.stack([far(t + one), near(t), near(one - t), far(ct(2) - t)], 1)
    taps = np.clip(index[:, None] + np.arange(-1, 3), 0, n_in - 1)
    return taps, weights.astype(ct)


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """``torch.nn.functional.interpolate`` for ``nearest``, ``nearest-exact``,
    ``linear``/``bilinear``/``trilinear``, ``bicubic`` and ``area`` (module docstring)."""
    op = "interpolate"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if mode not in _MODES:
        raise ValueError(f"{op}: mode {mode!r} is not one of {sorted(_MODES)}")
    nd = input.ndim - 2
    if not 1 <= nd <= 3:
        raise ValueError(f"{op}: expected a 3-D, 4-D or 5-D (N, C, *spatial) input, got "
                         f"{input.shape}")
    want = _MODES[mode]
    if want is not None and want != nd:
        raise ValueError(f"{op}: mode {mode!r} needs a {want + 2}-D input, got {input.shape}")
    if align_corners is not None and want is None:
        raise ValueError(f"{op}: align_corners only applies to the linear and cubic modes, "
                         f"not {mode!r}")
    if antialias:
        raise ValueError(f"{op}: antialias=True is not implemented")
    if not input.dtype.is_floating_point and mode not in ("nearest", "nearest-exact"):
        raise TypeError(f"{op}: mode {mode!r} needs a floating point input, got "
                        f"{input.dtype.name}")
    out_size, scales = _sizes(op, input, nd, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[nd - 1](
            input, out_size)
    x = input
    ct = np.float64 if input.dtype == dt.float64 else np.float32   # PyTorch's opmath type
    if mode == "bicubic":
        # The last dim first: PyTorch sums each row's four taps, then the rows' results.
        for d in reversed(range(nd)):
            n_in, n_out, axis = input.shape[2 + d], out_size[d], 2 + d
            taps, weights = _cubic_taps(n_in, n_out, scales[d], bool(align_corners), ct)
            shape = [1] * x.ndim
            shape[axis] = n_out
            terms = [ops.mul(_gather_dim(x, axis, taps[:, j]),
                             tensor(weights[:, j].reshape(shape), dtype=x.dtype,
                                    device=x.device)) for j in range(4)]
            x = ops.add(ops.add(ops.add(terms[0], terms[1]), terms[2]), terms[3])
        return x
    for d, (n_in, n_out, scale) in enumerate(zip(input.shape[2:], out_size, scales)):
        axis = 2 + d
        if mode in ("nearest", "nearest-exact"):
            s = _scale(n_in, n_out, scale)
            dst = np.arange(n_out, dtype=np.float32)
            pos = dst * s if mode == "nearest" else (dst + np.float32(0.5)) * s
            x = _gather_dim(x, axis, np.minimum(np.floor(pos).astype(np.int64), n_in - 1))
            continue
        src = _source(n_in, n_out, scale, bool(align_corners), ct=ct)
        lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        t = (src - lo).astype(ct)
        shape = [1] * x.ndim
        shape[axis] = n_out
        w1 = tensor(t.reshape(shape), dtype=x.dtype, device=x.device)
        w0 = tensor((ct(1.0) - t).reshape(shape), dtype=x.dtype, device=x.device)
        x = ops.add(ops.mul(_gather_dim(x, axis, lo), w0), ops.mul(_gather_dim(x, axis, hi), w1))
    return x


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None,
             mode: str = "nearest", align_corners: bool | None = None) -> Tensor:
    """``F.upsample``, PyTorch's older name for ``interpolate``."""
    return interpolate(input, size, scale_factor, mode, align_corners)


class Upsample(Module):
    """``nn.Upsample``: ``interpolate`` with the arguments fixed at construction."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else \
            f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


__all__ = ["interpolate", "upsample", "Upsample"]
