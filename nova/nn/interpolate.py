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

As PyTorch's CPU kernels do, the linear modes (and 2-D ``nearest``) copy a dim whose
output size equals its input size, whatever its scale factor (``scale_factor=1.1`` on
5 pixels gives 5 pixels, unchanged); bicubic, ``nearest-exact`` and 1-D/3-D
``nearest`` resample it with the factor's scale.

``antialias=True`` (bilinear, bicubic and ``lanczos``, 4-D input, as in PyTorch) is
PIL's resampling filter, per dim, last dim first, for dims whose size changes: output
``i`` is the normalized sum of its window's pixels ``j`` in
``[int(c - support + 0.5), int(c + support + 0.5))`` (clipped to the input) weighted
``filter((j - c + 0.5) / max(scale, 1))``, ``c = scale (i + 0.5)``, with ``support`` the
filter's half width (1 triangle, 2 cubic with ``A = -0.5``, 3 Lanczos) times
``max(scale, 1)``: downsampling averages every pixel it covers. Weights are computed in
float64 and rounded once (PyTorch computes a float32 input's in float32: results agree
to a few ulp). Each tap is a gather, masked where a window is shorter than the widest.

A uint8 image takes ``bilinear`` (with or without ``antialias``) and ``bicubic`` with
``antialias=True``, as on PyTorch's CPU, and gets PyTorch's bytes exactly: its
fixed-point scheme (``_uint8_resize``), not the float formula rounded. (PyTorch also
resizes uint8 bicubic without antialiasing; Nova refuses that rather than give bytes
that differ from PyTorch's: ``_UINT8_FILTERS``.)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.convolution import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from nova.nn.module import Module
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.tensor import Tensor

_MODES = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2,
          "bicubic": 2, "trilinear": 3, "area": None, "lanczos": 2}
_ANTIALIAS_MODES = ("bilinear", "bicubic", "lanczos")
CUBIC_A = -0.75      # PyTorch's (and OpenCV's) cubic convolution coefficient
AA_CUBIC_A = -0.5    # Keys' coefficient, which PyTorch's (and PIL's) antialias filter uses


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
    idx = constant(index.reshape(shape).astype(np.int64), device=x.device)
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


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - np.abs(x), 0.0)


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    a, x = AA_CUBIC_A, np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _lanczos3(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


# mode -> (the filter, its half width at scale 1)
_AA_FILTERS = {"bilinear": (_triangle, 1), "bicubic": (_keys_cubic, 2),
               "lanczos": (_lanczos3, 3)}


def _filter_window(n_in: int, n_out: int, scale: float | None, align_corners: bool,
                   filt: Any, half: float, widen: bool, shift: float = 0.0
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PIL's resampling window of one dim, as PyTorch computes it: output ``i`` reads
    the pixels ``j`` in ``[int(c - support + 0.5), int(c + support + 0.5))`` (clipped to
    the input), weighted ``filt((j - c + 0.5) / max(s, 1))`` and normalized, with
    ``c = s (i + 0.5 - shift) + shift`` and ``support = half``, times ``s`` when
    ``widen`` and downsampling (the division by ``s`` likewise). Returns the ``(n_out,
    K)`` pixel indices (K the widest window), which of them are inside their window,
    and the float64 weights (0 outside)."""
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = scale if scale is not None else n_in / n_out
    wide = widen and s >= 1.0
    support = half * s if wide else float(half)
    inverse = 1.0 / s if wide else 1.0
    center = s * (np.arange(n_out) + 0.5 - shift) + shift
    lo = np.maximum((center - support + 0.5).astype(np.int64), 0)
    hi = np.minimum((center + support + 0.5).astype(np.int64), n_in)
    j = lo[:, None] + np.arange(int((hi - lo).max()))
    inside = j < hi[:, None]
    w = np.where(inside, filt((j - center[:, None] + 0.5) * inverse), 0.0)
    total = w.sum(1, keepdims=True)
    w = np.divide(w, total, out=np.zeros_like(w), where=total != 0)
    return j, inside, w


def _antialias_taps(n_in: int, n_out: int, scale: float | None, align_corners: bool,
                    mode: str) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's antialiasing taps of one dim (module docstring, ``_filter_window``):
    ``(n_out, K)`` source indices and float64 weights; a window's unused taps read its
    first pixel with weight 0 and are masked out by the caller (weight 0 exactly)."""
    filt, half = _AA_FILTERS[mode]
    j, inside, w = _filter_window(n_in, n_out, scale, align_corners, filt, half, True)
    return np.where(inside, j, j[:, :1]), np.where(inside, w, np.nan)


def _antialias(x: Tensor, out_size: tuple[int, ...], scales: tuple[float | None, ...],
               mode: str, align_corners: bool) -> Tensor:
    """Resample each changed dim, the last first, with its antialiasing taps; a tap is
    summed only where it lies in its window (``where``, so an inf or NaN outside the
    window stays out, as in PyTorch)."""
    ct = np.float64 if x.dtype == dt.float64 else np.float32
    for d in reversed(range(len(out_size))):
        axis, n_out = 2 + d, out_size[d]
        n_in = x.shape[axis]
        if n_in == n_out:
            continue
        taps, weights = _antialias_taps(n_in, n_out, scales[d], align_corners, mode)
        shape = [1] * x.ndim
        shape[axis] = n_out
        total = None
        for t in range(taps.shape[1]):
            inside = ~np.isnan(weights[:, t])
            w = constant(np.where(inside, weights[:, t], 0.0).astype(ct).reshape(shape),
                       dtype=x.dtype, device=x.device)
            term = ops.mul(_gather_dim(x, axis, taps[:, t]), w)
            if not inside.all():
                keep = constant(inside.reshape(shape), device=x.device)
                term = ops.where(keep, term, ops.full_const(0.0, (), x.dtype))
            total = term if total is None else ops.add(total, term)
        x = total
    return x


# The filters of PyTorch's uint8 path (PIL's scheme) by (mode, antialias); bicubic
# antialiasing takes Keys' A = -0.5. (Bicubic without antialiasing reads clamped taps
# with A = -0.75 in a fixed point whose details were not matched: that form, tried,
# differed from PyTorch's bytes by 1 in 0.1% of pixels, so it is refused instead.)
_UINT8_FILTERS = {("bilinear", False): (_triangle, 1), ("bilinear", True): (_triangle, 1),
                  ("bicubic", True): (_keys_cubic, 2)}


def _uint8_taps(n_in: int, n_out: int, scale: float | None, align_corners: bool,
                antialias: bool, mode: str = "bilinear") -> tuple[np.ndarray, np.ndarray, int]:
    """PyTorch's fixed-point taps of one dim of a uint8 image: source indices
    ``(n_out, K)``, int16-range integer weights and their precision ``p`` (the weight
    ``w`` is ``round(w * 2^p)``, ``p`` the largest below 22 whose largest weight still
    fits in 15 bits). The float weights are the mode's filter window
    (``_filter_window``, ``_UINT8_FILTERS``: clipped to the input and normalized),
    widened only when antialiasing, centred at ``s i + 0.5`` for ``align_corners``
    without antialiasing."""
    filt, half = _UINT8_FILTERS[mode, antialias]
    j, inside, w = _filter_window(n_in, n_out, scale, align_corners, filt, half,
                                  antialias, 0.5 if align_corners and not antialias else 0.0)
    precision = 0
    while precision < 22 and int(0.5 + w.max() * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    fixed = np.trunc(w * (1 << precision) + np.where(w < 0, -0.5, 0.5)).astype(np.int32)
    return np.where(inside, j, j[:, :1]), fixed, precision


def _uint8_resize(x: Tensor, out_size: tuple[int, ...], scales: tuple[float | None, ...],
                  align_corners: bool, antialias: bool, mode: str) -> Tensor:
    """Bilinear or bicubic resizing of a uint8 image as PyTorch's CPU kernel computes
    it, exactly: in fixed point, the last dim first, each pass ``clamp((2^(p-1) +
    sum(pixel x weight)) >> p, 0, 255)`` in int32 and stored as uint8 before the next
    (PIL's scheme); a dim whose size does not change is skipped (``_uint8_taps``)."""
    for d in reversed(range(len(out_size))):
        axis, n_out = 2 + d, out_size[d]
        if x.shape[axis] == n_out:
            continue
        taps, fixed, precision = _uint8_taps(x.shape[axis], n_out, scales[d],
                                             align_corners, antialias, mode)
        shape = [1] * x.ndim
        shape[axis] = n_out
        total = ops.full_const(1 << (precision - 1), (), dt.int32)
        for t in range(taps.shape[1]):
            w = constant(fixed[:, t].reshape(shape), dtype=dt.int32, device=x.device)
            total = ops.add(total, ops.mul(ops.cast(_gather_dim(x, axis, taps[:, t]),
                                                    dt.int32), w))
        x = ops.cast(ops.clamp(total >> precision, 0, 255), dt.uint8)
    return x


def _copies_equal_sizes(mode: str, nd: int) -> bool:
    """Whether PyTorch's CPU kernel copies a dim whose size does not change, ignoring
    its scale factor (module docstring; measured against torch 2.13)."""
    return mode in ("linear", "bilinear", "trilinear") or (mode == "nearest" and nd == 2)


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """``torch.nn.functional.interpolate`` for ``nearest``, ``nearest-exact``,
    ``linear``/``bilinear``/``trilinear``, ``bicubic`` and ``area``, and with
    ``antialias=True`` for ``bilinear``, ``bicubic`` and ``lanczos`` (module docstring)."""
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
    if antialias and (mode not in _ANTIALIAS_MODES or nd != 2):
        raise ValueError(f"{op}: antialias=True needs mode 'bilinear', 'bicubic' or "
                         f"'lanczos' and a 4-D input, got mode {mode!r} and {input.shape}")
    if mode == "lanczos" and not antialias:
        raise ValueError(f"{op}: mode 'lanczos' needs antialias=True")
    if mode == "lanczos" and align_corners:
        raise ValueError(f"{op}: mode 'lanczos' does not support align_corners=True")
    uint8_image = input.dtype == dt.uint8 and (mode, antialias) in _UINT8_FILTERS
    if input.dtype == dt.uint8 and mode == "bicubic" and not antialias:
        raise TypeError(f"{op}: mode 'bicubic' of a uint8 image {input.shape} is supported "
                        "with antialias=True only (PyTorch's bytes, exactly); without "
                        "antialiasing, resize a float copy (x.float()) and round it back")
    if not input.dtype.is_floating_point and mode not in ("nearest", "nearest-exact") \
            and not uint8_image:
        raise DTypeError(f"{op}: mode {mode!r} needs a floating point input, got "
                         f"{input.dtype.name} (of the integer types, uint8 takes 'bilinear' "
                         "and antialiased 'bicubic' too, as in PyTorch)")
    out_size, scales = _sizes(op, input, nd, size, scale_factor, recompute_scale_factor)
    if uint8_image:
        return _uint8_resize(input, out_size, scales, bool(align_corners), antialias, mode)
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[nd - 1](
            input, out_size)
    if antialias:
        return _antialias(input, out_size, scales, mode, bool(align_corners))
    if _copies_equal_sizes(mode, nd):
        scales = tuple(None if n_in == n_out else s
                       for n_in, n_out, s in zip(input.shape[2:], out_size, scales))
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
                             constant(weights[:, j].reshape(shape), dtype=x.dtype,
                                    device=x.device)) for j in range(4)]
            x = ops.add(ops.add(ops.add(terms[0], terms[1]), terms[2]), terms[3])
        return x
    for d, (n_in, n_out, scale) in enumerate(zip(input.shape[2:], out_size, scales)):
        axis = 2 + d
        if n_in == n_out and (scale is None or align_corners):
            continue      # a scale of 1: every output reads its own pixel
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
        w1 = constant(t.reshape(shape), dtype=x.dtype, device=x.device)
        w0 = constant((ct(1.0) - t).reshape(shape), dtype=x.dtype, device=x.device)
        x = ops.add(ops.mul(_gather_dim(x, axis, lo), w0), ops.mul(_gather_dim(x, axis, hi), w1))
    return ops.unshared(x, input)         # (to the same size: the input, as a new tensor)


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

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        """PyTorch's text: the scale factor when given (as floats, the form PyTorch
        stores it in), else the size."""
        sf = self.scale_factor
        if isinstance(sf, tuple):
            sf = tuple(float(f) for f in sf)
        elif isinstance(sf, (int, float)):
            sf = float(sf) if sf else None
        what = f"scale_factor={sf!r}" if sf is not None else f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


__all__ = ["interpolate", "upsample", "Upsample"]
