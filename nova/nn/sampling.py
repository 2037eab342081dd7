"""``F.affine_grid`` and ``F.grid_sample``: the spatial transformer's sampling grid and
the sampler that reads an image at it, with PyTorch's coordinate rules.

``affine_grid`` maps the output's normalized pixel centres (``[-1, 1]`` per dim; with
``align_corners=False`` the centres of ``n`` pixels are ``(2i + 1 - n) / n``, with
``True`` ``-1 + 2i / (n - 1)``) through each sample's affine matrix: one batched
product against a host-computed ``(P, nd + 1)`` table of ``[x, y, (z,) 1]``.

``grid_sample`` computes the source coordinate of every output position for all grid
components at once, as PyTorch's kernels do (unnormalize, then ``border`` clips to the
input and ``reflection`` reflects about its edges before clipping), and the taps each
component reads, on a trailing tap axis: the nearest pixel (``round``, ties to even),
the two neighbours of ``bilinear`` (weights ``(lo + 1) - src`` and ``src - lo``) or the
four of ``bicubic`` (PyTorch's cubic convolution weights, ``A = -0.75``, each tap's own
coordinate mapped by the padding mode). The components' taps combine into flat indices
into each input plane, read with one gather; a tap outside the input reads 0 (``zeros``
padding), so an inf or NaN it was pointed at never reaches the output. The gradient is
the gather's scatter-add for ``input`` and, through the weights (and the clip and
reflection, which pass it strictly inside the input only, as PyTorch's), the
primitives' rules for ``grid``. ``nearest`` reads no weights: its output is still
recorded as a function of ``grid``, with a zero gradient, as PyTorch's (the rounded
coordinates, cast to indices, would leave ``grid`` out of the graph: ``.grad`` None).

A NaN grid coordinate reads as 0 under ``border`` and ``reflection``, as PyTorch's 4-D
CPU kernel does (bicubic then gives NaN through its weights, as PyTorch), and as
outside the input under ``zeros``: 0 (PyTorch's 4-D bilinear and bicubic kernels give
NaN there, its nearest and 5-D kernels 0).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.interpolate import CUBIC_A
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.autocast_state import autocast_op
from nova.tensor.numeric import floor, fmod, round as round_even
from nova.tensor.tensor import Tensor

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")
_DEFAULT_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                    "align_corners=False since 1.3.0. Please specify align_corners=True if "
                    "the old behavior is desired. See the documentation of grid_sample for "
                    "details.")


def _default_align(align_corners: bool | None) -> bool:
    """``align_corners``, or False with PyTorch's warning when it is not given."""
    if align_corners is None:
        warnings.warn(_DEFAULT_WARNING, stacklevel=3)
        return False
    return bool(align_corners)


def _base_coords(n: int, align_corners: bool) -> np.ndarray:
    """The normalized centres of ``n`` pixels, in float64 (PyTorch's ``linspace(-1, 1,
    n)``, scaled by ``(n - 1) / n`` without ``align_corners``; 0 for ``n == 1``)."""
    if n <= 1:
        return np.zeros(n)
    i = np.arange(n, dtype=np.float64)
    return -1.0 + 2.0 * i / (n - 1) if align_corners else (2.0 * i + 1.0 - n) / n


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """The ``(N, H, W, 2)`` (or ``(N, D, H, W, 3)``) sampling grid of the affine maps
    ``theta`` (``(N, 2, 3)`` or ``(N, 3, 4)``) for an output of ``size`` ``(N, C, H, W)``
    (or ``(N, C, D, H, W)``): ``grid[n, ..., :] = theta[n] @ [x, y, (z,) 1]`` over the
    output's normalized pixel centres (``torch.nn.functional.affine_grid``)."""
    align = _default_align(align_corners)
    ops._check_tensor("affine_grid", theta)
    if not theta.dtype.is_floating_point:
        raise ValueError(f"affine_grid: expected theta to have floating point type, but got "
                         f"{theta.dtype.name}")
    size = tuple(size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid: only 4-D and 5-D sizes are supported, for "
                                  f"2-D and 3-D affine transforms, got size {size}")
    nd = len(size) - 2
    if theta.shape != (size[0], nd, nd + 1):
        raise ValueError(f"affine_grid: expected a batch of {nd}-D affine matrices of shape "
                         f"({size[0]}, {nd}, {nd + 1}) for size {size}, got {theta.shape}")
    spatial = size[2:]
    if align and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"affine_grid: expected a positive output size, got {size}")
    # [x, y, (z,) 1] per output position, x (the last dim) varying fastest
    axes = np.meshgrid(*[_base_coords(n, align) for n in spatial], indexing="ij")
    base = np.stack([a.reshape(-1) for a in reversed(axes)] + [np.ones(math.prod(spatial))],
                    1)
    table = constant(base.astype(theta.dtype.np), device=theta.device)
    grid = ops.matmul(table, theta.transpose(1, 2))
    return grid.reshape((size[0],) + tuple(spatial) + (nd,))


def _const(values: Any, like: Tensor, dtype: dt.DType | None = None) -> Tensor:
    """A host constant in ``like``'s dtype (or ``dtype``) and device."""
    return constant(np.asarray(values, dtype=(dtype or like.dtype).np), device=like.device)


def _unnormalize(coord: Tensor, sizes: np.ndarray, align: bool) -> Tensor:
    """Normalized coordinates in ``[-1, 1]`` as pixel coordinates of dims of ``sizes``
    (PyTorch's ``grid_sampler_unnormalize``)."""
    if align:
        return ops.mul(ops.div(ops.add(coord, 1.0), 2.0), _const(sizes - 1, coord))
    return ops.div(ops.sub(ops.mul(ops.add(coord, 1.0), _const(sizes, coord)), 1.0), 2.0)


def _clip(coord: Tensor, high: np.ndarray) -> Tensor:
    """``coord`` clipped to ``[0, high]``; the gradient passes strictly inside only, and
    NaN becomes 0, as in PyTorch's ``clip_coordinates``."""
    inside = ops.where(ops.gt(coord, 0.0), coord, 0.0)
    top = _const(high, coord)
    return ops.where(ops.lt(inside, top), inside, top)


def _reflect(coord: Tensor, low: float, span: np.ndarray) -> Tensor:
    """``coord`` reflected about ``low`` and ``low + span`` until it lies between them
    (PyTorch's ``reflect_coordinates``); 0 where ``span`` is 0."""
    dist = ops.abs(ops.sub(coord, low))
    spans = _const(np.where(span > 0, span, 1), coord)
    extra = fmod(dist, spans)
    flips = floor(ops.div(dist, spans))
    even = ops.eq(fmod(flips, 2.0), 0.0)
    out = ops.where(even, ops.add(extra, low), ops.add(ops.sub(spans, extra), low))
    if np.any(span == 0):
        out = ops.where(_const(span == 0, coord, dt.bool_), 0.0, out)
    return out


def _pad_coord(coord: Tensor, sizes: np.ndarray, padding_mode: str, align: bool) -> Tensor:
    """Pixel coordinates mapped by the padding mode (PyTorch's ``compute_coordinates``):
    ``zeros`` keeps them, ``border`` clips them to the input, ``reflection`` reflects
    them about the input's edges (its corner pixels' centres with ``align_corners``,
    else their outer edges), then clips."""
    if padding_mode == "zeros":
        return coord
    if padding_mode == "reflection":
        coord = _reflect(coord, 0.0, sizes - 1) if align else _reflect(coord, -0.5, sizes)
    return _clip(coord, sizes - 1)


def _cubic_weights(t: Tensor) -> Tensor:
    """The cubic convolution weights ``(..., 4)`` of the taps ``floor(src) - 1 .. + 2``
    at fractions ``t`` (PyTorch's ``get_cubic_upsample_coefficients``): the taps'
    distances ``t + 1, t, 1 - t, 2 - t`` through the far, near, near and far pieces."""
    a = CUBIC_A
    x = ops.mul(ops.sub(t.unsqueeze(-1), _const([-1, 0, 1, 2], t)), _const([1, 1, -1, -1], t))
    near = ops.add(ops.mul(ops.mul(ops.sub(ops.mul(x, a + 2.0), a + 3.0), x), x), 1.0)
    far = ops.sub(ops.mul(ops.add(ops.mul(ops.sub(ops.mul(x, a), 5.0 * a), x), 8.0 * a), x),
                  4.0 * a)
    return ops.where(_const([False, True, True, False], t, dt.bool_), near, far)


def _taps(grid: Tensor, sizes: np.ndarray, mode: str, padding_mode: str, align: bool
          ) -> tuple[Tensor, Tensor | None]:
    """The pixel coordinates ``(..., nd, k)`` (floats, integral, possibly outside the
    input) that each grid component reads, and their weights (None for ``nearest``).
    ``sizes`` holds the input's size along each component's dim."""
    src = _unnormalize(grid, sizes, align)
    if mode == "bicubic":
        lo = floor(src)
        starts = ops.add(lo.unsqueeze(-1), _const([-1, 0, 1, 2], lo))
        return (_pad_coord(starts, sizes[:, None], padding_mode, align),
                _cubic_weights(ops.sub(src, lo)))
    src = _pad_coord(src, sizes, padding_mode, align)
    if mode == "nearest":
        return round_even(src).unsqueeze(-1), None
    lo = floor(src)
    # PyTorch's weights, (lo + 1) - src and src - lo: at an integral coordinate the
    # gradient is the one-sided one of the taps lo and lo + 1
    weights = ops.where(_const([True, False], lo, dt.bool_),
                        ops.sub(ops.add(lo, 1.0), src).unsqueeze(-1),
                        ops.sub(src, lo).unsqueeze(-1))
    return ops.add(lo.unsqueeze(-1), _const([0, 1], lo)), weights


def _check_sample_args(input: Tensor, grid: Tensor, mode: str, padding_mode: str) -> int:
    """The number of spatial dims, after PyTorch's checks of the arguments."""
    if mode not in _MODES:
        raise ValueError(f"grid_sample: expected mode to be 'bilinear', 'nearest' or "
                         f"'bicubic', but got: {mode!r}")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"grid_sample: expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: {padding_mode!r}")
    ops._check_tensor("grid_sample", input)
    ops._check_tensor("grid_sample grid", grid)
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise ValueError(f"grid_sample: expected 4-D or 5-D input and grid with the same "
                         f"number of dims, got input {input.shape} and grid {grid.shape}")
    nd = input.ndim - 2
    if grid.shape[0] != input.shape[0]:
        raise ValueError(f"grid_sample: expected grid and input to have the same batch "
                         f"size, got input {input.shape} and grid {grid.shape}")
    if grid.shape[-1] != nd:
        raise ValueError(f"grid_sample: expected grid to have size {nd} in the last dim for "
                         f"a {input.ndim}-D input, got grid {grid.shape}")
    if mode == "bicubic" and nd != 2:
        raise ValueError(f"grid_sample: bicubic interpolation only supports 4-D input, got "
                         f"{input.shape}")
    if 0 in input.shape[2:]:
        raise ValueError(f"grid_sample: expected input to have non-empty spatial dims, got "
                         f"{input.shape}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"grid_sample: expected a floating point input, got "
                         f"{input.dtype.name}")
    if grid.dtype != input.dtype:
        raise DTypeError(f"grid_sample: expected input and grid to have the same dtype, got "
                         f"{input.dtype.name} and {grid.dtype.name}")
    return nd


@autocast_op("grid_sample")
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """``input`` ``(N, C, H, W)`` (or ``(N, C, D, H, W)``) read at the normalized
    locations ``grid`` ``(N, Ho, Wo, 2)`` (or ``(N, Do, Ho, Wo, 3)``, ``x`` indexing the
    last dim), giving ``(N, C, Ho, Wo)`` (``torch.nn.functional.grid_sample``; module
    docstring). ``bicubic`` is 4-D only, as in PyTorch."""
    nd = _check_sample_args(input, grid, mode, padding_mode)
    align = _default_align(align_corners)
    n, c = input.shape[:2]
    spatial, out = input.shape[2:], grid.shape[1:-1]
    sizes = np.array(spatial[::-1])                  # grid component j reads dim nd-1-j
    strides = np.array([math.prod(spatial[nd - j:]) for j in range(nd)])
    coords, weights = _taps(grid, sizes, mode, padding_mode, align)
    inside = ops.logical_and(ops.ge(coords, 0.0), ops.le(coords, _const(sizes[:, None] - 1,
                                                                          coords)))
    index = ops.mul(ops.cast(ops.where(inside, coords, 0.0), dt.int64),
                    _const(strides[:, None], coords, dt.int64))
    k = coords.shape[-1]
    flat = valid = weight = None
    # the taps of all components in one block, z's outermost; x first, so the weights
    # multiply x * y * z as PyTorch's
    for j in range(nd):
        shape = (n,) + out + (1,) * (nd - 1 - j) + (k,) + (1,) * j
        pos, ok = index[..., j, :].reshape(shape), inside[..., j, :].reshape(shape)
        flat = pos if flat is None else ops.add(flat, pos)
        valid = ok if valid is None else ops.logical_and(valid, ok)
        if weights is not None:
            w = weights[..., j, :].reshape(shape)
            weight = w if weight is None else ops.mul(weight, w)
    full = (n,) + out + (k ** nd,)
    positions = math.prod(out) * k ** nd
    gather_at = flat.reshape(n, 1, positions).expand(n, c, positions)
    plane = math.prod(spatial)
    values = ops.gather(input.reshape(n, c, plane), 2, gather_at).reshape((n, c) + full[1:])
    valid = valid.reshape(full).unsqueeze(1)
    if weight is None:
        return ops.zero_gradient_to(ops.where(valid, values, 0.0).squeeze(-1),
                                    ops.sum(grid) if grid.requires_grad else None)
    weighted = ops.mul(values, weight.reshape(full).unsqueeze(1))
    return ops.sum(ops.where(valid, weighted, 0.0), -1)


__all__ = ["affine_grid", "grid_sample"]
