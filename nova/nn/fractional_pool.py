"""Fractional max pooling (Graham 2014): ``F.fractional_max_pool2d/3d`` (and their
``_with_indices`` forms) and ``nn.FractionalMaxPool2d/3d``, as PyTorch computes them.

The windows are ``kernel_size`` wide and start at pseudo-random places that
``_random_samples`` (shape ``(N, C, nd)``, values in [0, 1), one per plane and spatial
dim) fixes, as PyTorch's CPU kernel generates them: for a dim of input size ``n``,
output size ``o`` and kernel ``k``, ``alpha = (n - k) / (o - 1)``, window ``i < o - 1``
starts at ``int((i + u) * alpha) - int(u * alpha)`` and the last at ``n - k`` --
computed in the input's dtype (PyTorch's ``scalar_t``: its float32 arithmetic for a
float32 input, each op rounded to the half type for a half input), so the windows are
PyTorch's to the element. For the 2-D op sample 0 is the width's and sample 1 the
height's; for the 3-D op samples 0, 1, 2 are time, height, width (PyTorch's order).

Each output is the first maximum of its window in row-major order, or the window's
last NaN where it has one (PyTorch's ``val > max || isnan(val)``); ``return_indices``
gives its flat index into the input plane, as ``max_unpool`` takes it. The starts are
computed on the device from the samples (no host read), the windows gathered by flat
index, so the gradient reaches each window's maximum (summed where windows overlap).
Without ``_random_samples`` the samples are drawn with ``nv.rand``, as PyTorch draws them
with ``torch.rand``.

Under CPU autocast the op runs in float32 (PyTorch's CPU fp32 list): half inputs and
samples are raised to float32 first.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.module import Module
from nova.nn.windows import as_tuple, batched
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.autocast_state import LOWER
from nova.tensor.creation import rand, tensor
from nova.tensor.movement import cat
from nova.tensor.tensor import Tensor

_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}
# which sample of a plane each spatial dim uses (PyTorch's kernels)
_SAMPLE_OF_DIM = {2: (1, 0), 3: (0, 1, 2)}
_HALF = (dt.float16, dt.bfloat16)


def _output_size(op: str, nd: int, spatial: tuple[int, ...], output_size: Any,
                 output_ratio: Any) -> tuple[int, ...]:
    """``output_size``, or ``int(n * ratio)`` per dim from ``output_ratio``."""
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an "
                         "output_ratio")
    if output_size is not None:
        return as_tuple(op, "output_size", output_size, nd, 0)
    ratio = (output_ratio,) * nd if isinstance(output_ratio, numbers.Real) else \
        tuple(output_ratio)
    if len(ratio) != nd:
        raise ValueError(f"{op} requires output_ratio to either be a single number or a "
                         f"tuple of {nd} numbers, got {output_ratio!r}")
    return tuple(int(n * r) for n, r in zip(spatial, ratio))


def _check_sizes(op: str, nd: int, spatial: tuple[int, ...], kernel: tuple[int, ...],
                 out: tuple[int, ...]) -> None:
    """PyTorch's bound: ``out + k - 1`` at most the input size (2-D), below it (3-D)."""
    for name, n, k, o in zip(_DIM_NAMES[nd], spatial, kernel, out):
        last = o + k - 1
        if (last > n) if nd == 2 else (last >= n):
            room = n - k + 1 if nd == 2 else n - k
            raise RuntimeError(f"{op}(): pool {name} {k} too large relative to input "
                               f"{name} {n} (output {name} {o} needs output + kernel - 1 "
                               f"{'<=' if nd == 2 else '<'} input, so at most {room})")


def _samples(op: str, nd: int, x: Tensor, given: Any) -> Tensor:
    """The ``(N, C, nd)`` samples: ``given`` checked as PyTorch checks it (its dtype the
    input's, at least N rows, C planes, ``nd`` values each), or drawn uniform."""
    n, c = x.shape[:2]
    if given is None:
        return rand(n, c, nd, dtype=x.dtype, device=x.device)
    if not isinstance(given, Tensor):
        raise TypeError(f"{op}: _random_samples must be a Tensor, got {type(given).__name__}")
    if given.dtype != x.dtype:
        raise RuntimeError(f"{op}: Expect _random_samples to have the same dtype as input "
                           f"(got {given.dtype.name}, input {x.dtype.name})")
    if given.ndim != 3:
        raise RuntimeError(f"{op}: Expect _random_samples to have 3 dimensions, got "
                           f"{given.ndim} (shape {tuple(given.shape)}; expected (N, C, {nd}))")
    if given.shape[0] < n:
        raise RuntimeError(f"{op}: Expect _random_samples.size(0) no less then input batch "
                           f"size (got {given.shape[0]}, batch {n})")
    if given.shape[1] != c:
        raise RuntimeError(f"{op}: Expect _random_samples.size(1) equals to input channel "
                           f"size (got {given.shape[1]}, channels {c})")
    if given.shape[2] != nd:
        raise RuntimeError(f"{op}: Expect _random_samples.size(2) equals to {nd}; got "
                           f"{given.shape[2]}.")
    return given if given.shape[0] == n else given[:n]


def _starts(u: Tensor, n: int, o: int, k: int) -> Tensor:
    """``(N, C)`` samples -> ``(N, C, o)`` int64 window starts along one dim (see the
    module docstring), in ``u``'s dtype as PyTorch's ``generate_intervals<scalar_t>``."""
    npd = u.dtype.np.type
    last = ops.full_const(n - k, tuple(u.shape) + (1,), dt.int64)
    if o <= 1:
        return last[..., :o]
    alpha = float(npd(n - k) / npd(o - 1))          # (the division in scalar_t)
    i = constant(np.arange(o - 1).astype(npd), dtype=u.dtype, device=u.device)
    shifted = ops.cast(ops.mul(ops.add(i, u.unsqueeze(-1)), alpha), dt.int64)
    base = ops.cast(ops.mul(u, alpha), dt.int64).unsqueeze(-1)
    return cat([ops.sub(shifted, base), last], -1)


def _window_indices(starts: list[Tensor], spatial: tuple[int, ...], kernel: tuple[int, ...],
                    out: tuple[int, ...]) -> Tensor:
    """``(N, C, K, *out)`` flat indices into each input plane: for each kernel offset (in
    row-major order, dim 2) the element that offset reads at each output position."""
    nd = len(spatial)
    count = math.prod(kernel)
    offsets = np.array(np.unravel_index(np.arange(count), kernel))     # (nd, K)
    flat = None
    stride = math.prod(spatial)
    for d in range(nd):
        stride //= spatial[d]
        shape = [1] * nd
        shape[d] = out[d]
        n, c = starts[d].shape[:2]
        start = starts[d].reshape(n, c, 1, *shape)
        koff = tensor(offsets[d].reshape((1, 1, count) + (1,) * nd), dtype=dt.int64,
                      device=starts[d].device)
        coord = ops.mul(ops.add(start, koff), stride)
        flat = coord if flat is None else ops.add(flat, coord)
    return flat


def _fractional_max_pool(op: str, nd: int, input: Tensor, kernel_size: Any,
                         output_size: Any, output_ratio: Any, return_indices: bool,
                         random_samples: Any) -> Any:
    x, unbatched = batched(op, input, nd)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating-point input, got {x.dtype.name}")
    if any(s == 0 for s in x.shape[1:]):
        raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but got {list(input.shape)}")
    state = LOWER.get()
    if state is not None and state[1] == "cpu" and x.dtype in _HALF:   # CPU fp32 list
        x = ops.cast(x, dt.float32)
        if isinstance(random_samples, Tensor) and random_samples.dtype in _HALF:
            random_samples = ops.cast(random_samples, dt.float32)
    spatial = tuple(x.shape[2:])
    kernel = as_tuple(op, "kernel_size", kernel_size, nd, 1)
    out = _output_size(op, nd, spatial, output_size, output_ratio)
    _check_sizes(op, nd, spatial, kernel, out)
    u = _samples(op, nd, x, random_samples)
    starts = [_starts(u[:, :, _SAMPLE_OF_DIM[nd][d]], spatial[d], out[d], kernel[d])
              for d in range(nd)]
    flat = _window_indices(starts, spatial, kernel, out)
    n, c = x.shape[:2]
    count = math.prod(kernel)
    windows = ops.gather(x.reshape(n, c, -1), 2, flat.reshape(n, c, -1))
    windows = windows.reshape(n, c, count, *out)
    pick = _pick(windows, count, nd)
    result = ops.gather(windows, 2, pick).squeeze(2)
    indices = ops.gather(flat, 2, pick).squeeze(2) if return_indices else None
    if unbatched:
        result = result.squeeze(0)
        indices = None if indices is None else indices.squeeze(0)
    return (result, indices) if return_indices else result


def _pick(windows: Tensor, count: int, nd: int) -> Tensor:
    """Per window (dim 2 of ``windows``), the position PyTorch's loop keeps: the last
    NaN if there is one, else the first maximum; keepdim."""
    first_max = ops.argmax(windows, 2, keepdim=True)
    nan = ops.isnan(windows)
    rank = constant(np.arange(count).reshape((1, 1, count) + (1,) * nd), dtype=dt.int64,
                    device=windows.device)
    nan_rank = ops.where(nan, rank, -1)
    last_nan = ops.argmax(nan_rank, 2, keepdim=True)
    has_nan = ops.amax(nan_rank, 2, keepdim=True) >= 0
    return ops.where(has_nan, last_nan, first_max)


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None
                                       ) -> tuple[Tensor, Tensor]:
    """``F.fractional_max_pool2d_with_indices``: the pooled values and their flat indices
    into each ``H * W`` plane (see the module docstring)."""
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size,
                                output_ratio, True, _random_samples)


def fractional_max_pool2d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Tensor | None = None) -> Any:
    """``F.fractional_max_pool2d``: max over ``kernel_size`` windows at pseudo-random
    strides reaching ``output_size`` (or ``output_ratio`` of the input size); with
    ``return_indices``, also their flat indices into each plane."""
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size,
                                output_ratio, return_indices, _random_samples)


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None
                                       ) -> tuple[Tensor, Tensor]:
    """``F.fractional_max_pool3d_with_indices``: the pooled values and their flat indices
    into each ``T * H * W`` volume."""
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size,
                                output_ratio, True, _random_samples)


def fractional_max_pool3d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Tensor | None = None) -> Any:
    """``F.fractional_max_pool3d`` (see ``fractional_max_pool2d``)."""
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size,
                                output_ratio, return_indices, _random_samples)


class _FractionalMaxPoolNd(Module):
    _nd: int = 0
    _fn: Any = None

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Tensor | None = None):
        super().__init__()
        name, nd = type(self).__name__, self._nd
        self.kernel_size = as_tuple(name, "kernel_size", kernel_size, nd, 1)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else \
            as_tuple(name, "output_size", output_size, nd, 0)
        self.output_ratio = None if output_ratio is None else _ratio(name, output_ratio, nd)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a "
                             "pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified "
                             f"({name} got output_size={output_size!r}, "
                             f"output_ratio={output_ratio!r})")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor) -> Any:
        return type(self)._fn(input, self.kernel_size, self.output_size, self.output_ratio,
                              self.return_indices, _random_samples=self._random_samples)


def _ratio(name: str, value: Any, nd: int) -> tuple[float, ...]:
    vals = (value,) * nd if isinstance(value, numbers.Real) else tuple(value)
    if len(vals) != nd:
        raise ValueError(f"{name}: output_ratio must be a number or a tuple of {nd} "
                         f"numbers, got {value!r}")
    return tuple(float(v) for v in vals)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """``nn.FractionalMaxPool2d``: ``F.fractional_max_pool2d`` with fixed arguments; a
    given ``_random_samples`` is a buffer, as in PyTorch."""

    _nd, _fn = 2, staticmethod(fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """``nn.FractionalMaxPool3d`` (see ``FractionalMaxPool2d``)."""

    _nd, _fn = 3, staticmethod(fractional_max_pool3d)


__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices",
           "FractionalMaxPool2d", "FractionalMaxPool3d"]
