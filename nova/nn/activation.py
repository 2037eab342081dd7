"""Activation functions beyond ``nv.nn.functional``'s core set, and their modules:
PyTorch's names, signatures, defaults and values, written over the primitive ops.

Kinks follow PyTorch's gradients, which is why the clamping functions are ``where``
selections rather than ``clamp``: ``hardtanh`` (so ``relu6``, ``hardsigmoid``,
``hardswish``) passes the gradient only strictly inside its bounds, the shrinks and
``threshold`` give 0 at their thresholds, and ``selu``/``celu``/``prelu``/``rrelu`` take
the negative branch's slope at 0. NaN propagates through every one of them.

``inplace=True`` rebinds the caller's handle to the result (Nova's in-place ops are
functionalized, see ``Tensor._assign``), so the caller sees the new values, as with
PyTorch's in-place forms; like them it refuses a leaf that requires grad.
"""
from __future__ import annotations

import warnings
from typing import Any

import ml_dtypes

from nova.core import dtypes as dt
from nova.core.shapes import normalize_dim
from nova.nn.convolution import (
    adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d, max_pool1d, max_pool2d,
    max_pool3d,
)
from nova.nn.functional import elu, elu_form, inplace_result, leaky_relu, relu
from nova.nn.interpolate import interpolate
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor import ops
from nova.tensor.arrays import hardshrink, prelu  # (also Tensor methods, so defined there)
from nova.tensor.creation import full, rand
from nova.tensor.tensor import Tensor

# SELU's constants (Klambauer et al. 2017), to the digits PyTorch uses
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _floating(op: str, x: Any) -> Tensor:
    """``x`` itself if floating point; integers compute in the default float dtype
    (where PyTorch raises for some of these functions, e.g. ``elu``, ``selu``)."""
    return ops._as_float(op, x)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``input`` clamped to [min_val, max_val]; the gradient is 1 strictly between the
    bounds and 0 at and beyond them, as PyTorch's."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val "
                         f"({max_val})")
    ops._check_tensor("hardtanh", input)
    return inplace_result("hardtanh", input, _hardtanh(input, min_val, max_val), inplace)


def _hardtanh(x: Tensor, lo: float, hi: float) -> Tensor:
    """``x`` clamped by selections (see the module docstring); an integer ``x`` with
    whole bounds stays integer, as in PyTorch."""
    if not x.dtype.is_floating_point and float(lo).is_integer() and float(hi).is_integer():
        lo, hi = int(lo), int(hi)
    return ops.where(ops.le(x, lo), lo, ops.where(ops.ge(x, hi), hi, x))


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``; the gradient is 0 at 0 and at 6, as PyTorch's."""
    ops._check_tensor("relu6", input)
    return inplace_result("relu6", input, _hardtanh(input, 0.0, 6.0), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``: ``(x + 3) / 6`` strictly between -3 and 3, 0 and 1 outside,
    NaN at NaN, whose gradient is 0, as PyTorch's (its backward passes ``g / 6`` only
    strictly inside; clamping NaN passed it through)."""
    x = _floating("hardsigmoid", input)
    inside = ops.logical_and(ops.gt(x, -3.0), ops.lt(x, 3.0))
    outside = ops.where(ops.le(x, -3.0), 0.0, ops.where(ops.ge(x, 3.0), 1.0, float("nan")))
    out = ops.where(inside, ops.div(ops.add(x, 3.0), 6.0), ops.cast(outside, x.dtype))
    return inplace_result("hardsigmoid", input, out, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``: the gradient is 0 up to -3, ``x/3 + 1/2`` strictly
    between -3 and 3 and 1 from 3 on and at NaN (PyTorch's backward takes its last
    branch there), and ``-inf`` gives NaN (``-inf * 0``), as in PyTorch. The identity
    side is still ``x * 6 / 6``, PyTorch's value bit for bit."""
    x = _floating("hardswish", input)
    upper = ops.logical_not(ops.le(x, 3.0))
    xs = ops.where(upper, 0.0, x)
    body = ops.div(ops.mul(xs, _hardtanh(ops.add(xs, 3.0), 0.0, 6.0)), 6.0)
    out = ops.where(upper, ops.div(ops.mul(x, 6.0), 6.0), body)
    return inplace_result("hardswish", input, out, inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * (x if x > 0 else alpha * (exp(x) - 1))`` with SELU's constants."""
    x = _floating("selu", input)
    out = elu_form(x, SELU_ALPHA, SELU_SCALE)
    return inplace_result("selu", input, out, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x if x > 0 else alpha * (exp(x / alpha) - 1)``."""
    if alpha == 0:
        raise ValueError("celu: alpha cannot be 0")
    out = elu_form(_floating("celu", input), alpha, 1.0, 1.0 / alpha)
    return inplace_result("celu", input, out, inplace)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``a * sigmoid(b)`` for the two halves ``a``, ``b`` of ``input`` along ``dim``."""
    ops._check_tensor("glu", input)
    if input.ndim == 0:
        raise ValueError("glu: does not support scalars because halving size must be even")
    d = normalize_dim("glu", dim, input.ndim, input.shape)
    if input.shape[d] % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {d} of "
                         f"input {input.shape} is size {input.shape[d]}")
    a, b = _floating("glu", input).chunk(2, d)
    return ops.mul(a, ops.sigmoid(b))


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Leaky ReLU whose negative slope is ``(lower + upper) / 2`` in evaluation and,
    in training, drawn uniformly from [lower, upper) per element from Nova's generator
    (the gradient uses the drawn slope, as PyTorch's)."""
    if lower > upper:
        raise ValueError(f"rrelu: lower bound ({lower}) should be less than or equal to "
                         f"the upper bound ({upper})")
    x = _floating("rrelu", input)
    if training:
        slope = ops.add(ops.mul(rand(x.shape, dtype=x.dtype), upper - lower), lower)
    else:
        slope = (lower + upper) / 2
    return inplace_result("rrelu", input, ops.where(ops.gt(x, 0), x, ops.mul(x, slope)),
                          inplace)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    x = _floating("softsign", input)
    return ops.div(x, ops.add(ops.abs(x), 1.0))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between (and at)
    them."""
    if not lambd >= 0:
        raise ValueError(f"softshrink: lambd must be >= 0, got {lambd}")
    x = _floating("softshrink", input)
    shifted = ops.where(ops.gt(x, 0), ops.sub(x, lambd), ops.add(x, lambd))
    return ops.where(ops.le(ops.abs(x), lambd), 0.0, shifted)


# x - tanh(x) = sum_k c_k x^(2k+1) (k >= 1); below _TANHSHRINK_SERIES the series replaces
# the subtraction, whose cancellation would lose the small result's digits
_TANHSHRINK_COEFFS = (1 / 3, -2 / 15, 17 / 315, -62 / 2835, 1382 / 155925)
_TANHSHRINK_SERIES = 0.05


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``, in float64 and rounded once for narrower floats, with the Taylor
    series near 0 (where the subtraction cancels), so small inputs keep their digits
    (PyTorch's plain float32 difference does not)."""
    x = _floating("tanhshrink", input)
    w = ops.cast(x, dt.float64)
    small = ops.lt(ops.abs(w), _TANHSHRINK_SERIES)
    ws = ops.where(small, w, 0.0)
    sq = ops.mul(ws, ws)
    poly = _TANHSHRINK_COEFFS[-1]
    for c in reversed(_TANHSHRINK_COEFFS[:-1]):
        poly = ops.add(ops.mul(poly, sq), c)
    series = ops.mul(ops.mul(sq, ws), poly)
    return ops.cast(ops.where(small, series, ops.sub(w, ops.tanh(w))), x.dtype)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``, in the input's dtype: an integer
    input takes ``value`` converted to it (truncated; refused where it cannot hold it),
    as PyTorch's, never a float result."""
    ops._check_tensor("threshold", input)
    if not input.dtype.is_floating_point and not input.dtype.is_complex:
        value = dt.checked_scalar(value, input.dtype, "threshold")
    return inplace_result("threshold", input, ops.where(ops.le(input, threshold), value, input),
                          inplace)


_threshold = threshold     # (``threshold_``'s own argument takes the name)


def implicit_softmax_dim(op: str, ndim: int) -> int:
    """PyTorch's legacy choice when a softmax is given no ``dim`` (0 for 0-, 1- and 3-d
    inputs, else 1), with its deprecation warning."""
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: Any = None) -> Tensor:
    """``softmax(-input)`` along ``dim`` (cast to ``dtype`` first when given)."""
    ops._check_tensor("softmin", input)
    if dim is None:
        dim = implicit_softmax_dim("softmin", input.ndim)
    if dtype is not None:
        input = ops.cast(input, dt.get_dtype(dtype))
    return ops.softmax(ops.neg(_floating("softmin", input)), dim)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """``softmax((logits + g) / tau)`` with Gumbel noise ``g = -log(e)``, ``e ~ Exp(1)``
    drawn from Nova's generator (``e = -log(1 - u)``, kept above the dtype's smallest
    normal so ``g`` is finite). ``hard=True`` returns the one-hot of the argmax with the
    soft sample's gradient (straight-through: ``one_hot - soft.detach() + soft``).
    ``eps`` is unused, as in PyTorch (kept for its signature)."""
    x = _floating("gumbel_softmax", logits)
    d = normalize_dim("gumbel_softmax", dim, x.ndim, x.shape)
    u = rand(x.shape, dtype=x.dtype)
    e = ops.maximum(ops.neg(ops.log1p(ops.neg(u))), float(ml_dtypes.finfo(x.dtype.np).tiny))
    soft = ops.softmax(ops.div(ops.sub(x, ops.log(e)), tau), d)
    if not hard:
        return soft
    index = ops.argmax(soft, d, keepdim=True)
    one_hot = ops.cast(ops.eq(_positions(soft.shape, d), index), soft.dtype)
    return ops.add(ops.sub(one_hot, soft.detach()), soft)


def _positions(shape: tuple[int, ...], d: int) -> Tensor:
    """Each element's index along dim ``d`` (an iota broadcast to ``shape``)."""
    return ops.prim("iota", [], {"dim": d}, shape, dt.int64)


# ---------------------------------------------------------------- modules


def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


def _join(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


# ---------------------------------------------------------------- in-place forms
# ``F.relu_(x)`` and the rest: ``x`` rebound to the result and returned, as PyTorch's
# (``inplace_result``: views of ``x`` see it, gradients flow through a non-leaf, a leaf
# that requires grad is refused with PyTorch's error)

def relu_(input: Tensor) -> Tensor:
    return relu(input, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return _threshold(input, threshold, value, inplace=True)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    return rrelu(input, lower, upper, training, inplace=True)


# ---------------------------------------------------------------- torch's other names
# (deprecated aliases and the always-indexed pools, kept here while interpolate.py and
# convolution.py are the functions' homes)

def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """``interpolate(..., mode="nearest")``, with PyTorch's deprecation warning."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """``interpolate(..., mode="bilinear", align_corners=True)`` (PyTorch's choice for
    this old name), with its deprecation warning."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``max_pool1d(..., return_indices=True)``: ``(output, indices)`` whatever
    ``return_indices`` says, as PyTorch's."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``max_pool2d(..., return_indices=True)``: ``(output, indices)`` whatever
    ``return_indices`` says, as PyTorch's."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``max_pool3d(..., return_indices=True)``: ``(output, indices)`` whatever
    ``return_indices`` says, as PyTorch's."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool1d(..., return_indices=True)``, as PyTorch's."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool2d(..., return_indices=True)``, as PyTorch's."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool3d(..., return_indices=True)``, as PyTorch's."""
    return adaptive_max_pool3d(input, output_size, True)


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if max_val < min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val "
                             f"({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:
        return hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return _join(f"min_val={self.min_val}, max_val={self.max_val}",
                     _inplace_repr(self.inplace))


class _InplaceActivation(Module):
    """An activation whose only option is ``inplace``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ReLU6(_InplaceActivation):
    def forward(self, input: Tensor) -> Tensor:
        return relu6(input, self.inplace)


class Hardswish(_InplaceActivation):
    def forward(self, input: Tensor) -> Tensor:
        return hardswish(input, self.inplace)


class Hardsigmoid(_InplaceActivation):
    def forward(self, input: Tensor) -> Tensor:
        return hardsigmoid(input, self.inplace)


class SELU(_InplaceActivation):
    def forward(self, input: Tensor) -> Tensor:
        return selu(input, self.inplace)


class CELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return _join(f"alpha={self.alpha}", _inplace_repr(self.inplace))


class GLU(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """A learnable negative slope: one (``num_parameters=1``) shared by all channels, or
    one per channel of dim 1; each starts at ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype: Any = None):
        super().__init__()
        if not isinstance(num_parameters, int) or num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got "
                             f"{num_parameters!r}")
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype))

    def reset_parameters(self) -> None:
        from nova.nn import init as nn_init
        nn_init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        if lower > upper:
            raise ValueError(f"RReLU: lower bound ({lower}) should be less than or equal to "
                             f"the upper bound ({upper})")
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return _join(f"lower={self.lower}, upper={self.upper}", _inplace_repr(self.inplace))


class Softsign(Module):
    def forward(self, input: Tensor) -> Tensor:
        return softsign(input)


class Tanhshrink(Module):
    def forward(self, input: Tensor) -> Tensor:
        return tanhshrink(input)


class Softshrink(Module):
    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    def forward(self, input: Tensor) -> Tensor:
        return hardshrink(input, self.lambd)


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:
        return threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return _join(f"threshold={self.threshold}, value={self.value}",
                     _inplace_repr(self.inplace))


class Softmin(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return softmin(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of a ``(N, C, H, W)`` or ``(C, H, W)`` input."""

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor) or input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        return ops.softmax(input, -3)


__all__ = ["hardtanh", "relu6", "hardsigmoid", "hardswish", "selu", "celu", "glu", "prelu",
           "rrelu", "softsign", "softshrink", "hardshrink", "tanhshrink", "threshold",
           "softmin", "gumbel_softmax", "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid",
           "SELU", "CELU", "GLU", "PReLU", "RReLU", "Softsign", "Tanhshrink", "Softshrink",
           "Hardshrink", "Threshold", "Softmin", "Softmax2d", "relu_", "leaky_relu_", "elu_",
           "selu_", "celu_", "hardtanh_", "threshold_", "rrelu_", "upsample_nearest",
           "upsample_bilinear", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "max_pool3d_with_indices", "adaptive_max_pool1d_with_indices",
           "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices"]
