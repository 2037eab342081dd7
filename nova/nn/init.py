"""``nv.nn.init``: in-place initializers (under no_grad), PyTorch's formulas.

The random ones draw from ``generator`` (the default generator when None), as
``torch.nn.init``'s ``generator=`` keyword does. ``orthogonal_`` realizes its normal
draw and takes the QR factorization on the host with numpy (initialization runs once,
and Nova has no QR op); ``sparse_`` chooses each column's zeros on the host from one
uniform draw of the generator.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from nova.autograd.grad_mode import no_grad
from nova.core import dtypes as dt
from nova.tensor import ops
from nova.tensor.creation import eye as _eye
from nova.tensor.creation import rand, randn
from nova.tensor.creation import tensor as _host_tensor
from nova.tensor.random import Generator, host_uniform
from nova.tensor.special import erfinv
from nova.tensor.tensor import Tensor

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")
NONLINEARITIES = _LINEAR + ("tanh", "relu", "leaky_relu", "selu")


def calculate_gain(nonlinearity: str, param: int | float | None = None) -> float:
    """The recommended gain for a nonlinearity (``torch.nn.init.calculate_gain``): 1 for
    the linear ones and sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2))
    for leaky_relu (``param`` is the negative slope, 0.01 by default), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; valid: "
                     f"{', '.join(NONLINEARITIES)}")


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"init: fan in and fan out need a tensor with >= 2 dims, got shape "
                         f"{t.shape}")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(op: str, t: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(t)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Generator | None = None) -> Tensor:
    with no_grad():
        draw = rand(tensor.shape, dtype=tensor.dtype, generator=generator)
        return tensor.copy_(draw * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Generator | None = None) -> Tensor:
    with no_grad():
        draw = randn(tensor.shape, dtype=tensor.dtype, generator=generator)
        return tensor.copy_(draw * std + mean)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Generator | None = None) -> Tensor:
    """Normal(``mean``, ``std``) truncated to [``a``, ``b``], by PyTorch's inverse-CDF
    method: uniform in ``[2 cdf(a) - 1, 2 cdf(b) - 1]`` (in float64), through ``erfinv``,
    scaled, shifted, and clamped to [``a``, ``b``] in ``tensor``'s dtype."""
    if a > b:
        raise ValueError(f"trunc_normal_: a ({a}) must not be greater than b ({b})")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("trunc_normal_: mean is more than 2 std from [a, b]; the "
                      "distribution of values may be incorrect", stacklevel=2)
    lo = math.erf((a - mean) / std / math.sqrt(2.0))
    hi = math.erf((b - mean) / std / math.sqrt(2.0))
    with no_grad():
        u = rand(tensor.shape, dtype=dt.float64, generator=generator) * (hi - lo) + lo
        x = ops.cast(erfinv(u) * (std * math.sqrt(2.0)) + mean, tensor.dtype)
        return tensor.copy_(ops.clamp(x, a, b))


def zeros_(tensor: Tensor) -> Tensor:
    with no_grad():
        return tensor.zero_()


def ones_(tensor: Tensor) -> Tensor:
    with no_grad():
        return tensor.fill_(1.0)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val`` (torch's keyword name: ``constant_(w, val=0)``)."""
    with no_grad():
        return tensor.fill_(val)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (ones on the main diagonal) in a 2-D tensor."""
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape "
                         f"{tensor.shape}")
    with no_grad():
        return tensor.copy_(_eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta of a convolution weight (3, 4 or 5 dims): with ``groups``, output
    channel ``g * (out / groups) + d`` passes input channel ``d`` through at the kernel's
    centre, for ``d < min(out / groups, in)``; zero elsewhere."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, "
                         f"got shape {tensor.shape}")
    if tensor.shape[0] % groups:
        raise ValueError(f"dirac_: dim 0 ({tensor.shape[0]}) must be divisible by groups "
                         f"({groups})")
    per_group = tensor.shape[0] // groups
    values = np.zeros(tensor.shape, dtype=np.float64)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, tensor.shape[1])):
            values[(g * per_group + d, d) + centre] = 1.0
    with no_grad():
        return tensor.copy_(_host_tensor(values, dtype=tensor.dtype))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Generator | None = None) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Generator | None = None) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _empty(t: Tensor) -> bool:
    """A tensor with no elements (PyTorch's kaiming initializers warn and do nothing)."""
    if 0 in t.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    """U(-b, b) with b = gain * sqrt(3 / fan) (``a`` is leaky_relu's negative slope)."""
    if _empty(tensor):
        return tensor
    fan = _fan("kaiming_uniform_", tensor, mode)
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    """N(0, std^2) with std = gain / sqrt(fan) (``a`` is leaky_relu's negative slope)."""
    if _empty(tensor):
        return tensor
    fan = _fan("kaiming_normal_", tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0,
                generator: Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix times ``gain``, over the dims after the first flattened:
    the Q of the QR factorization of a standard normal draw (of its transpose when there
    are fewer rows than columns), each column's sign fixed by the sign of R's diagonal so
    the result is uniformly distributed, as PyTorch computes it."""
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are "
                         f"supported, got shape {tensor.shape}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        draw = randn((rows, cols), dtype=tensor.dtype, generator=generator).numpy()
    flat = draw.astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        return tensor.copy_(_host_tensor(q.reshape(tensor.shape) * gain, dtype=tensor.dtype))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01,
            generator: Generator | None = None) -> Tensor:
    """N(0, std^2) values with ``ceil(sparsity * rows)`` zeros in each column, at rows
    chosen uniformly at random (2-D tensors)."""
    if tensor.ndim != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got shape "
                         f"{tensor.shape}")
    rows, cols = tensor.shape
    zeros = math.ceil(sparsity * rows)
    with no_grad():
        values = randn(tensor.shape, dtype=tensor.dtype, generator=generator) * std
        ranks = np.argsort(np.argsort(host_uniform(rows * cols, generator).reshape(rows, cols),
                                      axis=0, kind="stable"), axis=0, kind="stable")
        return tensor.copy_(ops.where(_host_tensor(ranks < zeros), 0.0, values))



# PyTorch's private helpers, by their torch names: timm and reset_parameters code copied
# from torch modules call them directly.


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight: dim 1 (dim 0) times the receptive field."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer "
                         f"than 2 dimensions (got shape {tuple(tensor.shape)})")
    return _fans(tensor)


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    """The fan for ``mode`` (``'fan_in'``/``'fan_out'``, any case)."""
    if not isinstance(mode, str):
        raise TypeError(f"_calculate_correct_fan: mode must be a str, got "
                        f"{type(mode).__name__}")
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _no_grad_uniform_(tensor: Tensor, a: float, b: float,
                      generator: Generator | None = None) -> Tensor:
    return uniform_(tensor, a, b, generator=generator)


def _no_grad_normal_(tensor: Tensor, mean: float, std: float,
                     generator: Generator | None = None) -> Tensor:
    return normal_(tensor, mean, std, generator=generator)


def _no_grad_trunc_normal_(tensor: Tensor, mean: float, std: float, a: float, b: float,
                           generator: Generator | None = None) -> Tensor:
    return trunc_normal_(tensor, mean, std, a, b, generator=generator)


def _no_grad_fill_(tensor: Tensor, val: float) -> Tensor:
    return constant_(tensor, val)


def _no_grad_zero_(tensor: Tensor) -> Tensor:
    return zeros_(tensor)


def _make_deprecate(meth: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``meth`` under its old torch name (without the trailing underscore): warns a
    FutureWarning, as torch's, then runs the in-place version."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return meth(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"Deprecated alias of :func:`{new_name}`."
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "zeros_", "ones_",
    "constant_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
    "kaiming_normal_", "orthogonal_", "sparse_", "uniform", "normal", "constant", "eye",
    "dirac", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal",
    "orthogonal", "sparse",
]
