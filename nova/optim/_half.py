"""PyTorch's rounding for the updates of float16 and bfloat16 parameters.

Nova computes an op on half-precision tensors in float32 and rounds after every op
(``nova.compiler.codegen.scalar``). PyTorch's optimizers instead run each in-place
kernel (``exp_avg.lerp_``, ``exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)``,
``param.addcdiv_``) as one float32 expression rounded once into the half tensor, so
an update written op by op in the half type ended 1 ulp off PyTorch's in a few
elements per step. The functions here compute one PyTorch kernel each: the operands
widened to float32, the expression in float32 as PyTorch's vectorized CPU kernels
evaluate it, one rounding to the half type at the end; the optimizers use them for
half-precision parameters (float32 and float64 parameters keep their plain
expressions). What each kernel does, as measured against PyTorch's CPU kernels:

- a Scalar ``alpha`` of ``add(other, alpha=...)`` and the Scalar of ``add_(scalar)``
  are converted to the tensor's dtype first (``half_value``), every other Scalar
  (``mul_``, ``lerp_``'s weight, ``addcmul``/``addcdiv``'s ``value``, a division) to
  float32;
- ``lerp_`` and ``addcmul_`` use a fused multiply-add (``vec::fmadd``): ``fma`` rounds
  once, through float64 (a product of two float32 values is exact there);
- ``addcdiv_`` is ``self + (value * t1) / t2``, in that order.

PyTorch's CPU loops handle the elements past the last full vector (``numel % 32``
for bfloat16 with AVX-512) with scalar code that rounds to the half type after each
operator; those few elements can still differ by an ulp, as they differ between
PyTorch's own CPU builds.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import ops
from nova.tensor.tensor import Tensor

HALF_TYPES = (dt.float16, dt.bfloat16)


def is_half(dtype: dt.DType) -> bool:
    """Whether parameters of ``dtype`` are updated with PyTorch's half rounding."""
    return dtype in HALF_TYPES


def half_value(value: float, dtype: dt.DType) -> float:
    """``value`` as PyTorch converts a Scalar to a half tensor's dtype: to float32,
    then to ``dtype`` (round to nearest even each time)."""
    return float(np.asarray(value, np.float64).astype(np.float32).astype(dtype.np))


def lerp_weight(weight: float) -> tuple[float, float]:
    """The two runtime values of ``lerp_(end, weight)``: the coefficient and whether
    the kernel starts from ``self`` (1.0) or from ``end`` (0.0). PyTorch computes
    ``fma(w, end - self, self)`` for ``|w| < 0.5``, else ``fma(w - 1, end - self,
    end)``, ``w`` and ``w - 1`` in float32."""
    w = np.float32(weight)
    if abs(w) < 0.5:
        return float(w), 1.0
    return float(w - np.float32(1.0)), 0.0


def fma(a: Any, b: Tensor, c: Tensor) -> Tensor:
    """``a * b + c`` with one rounding to float32 (``a``, ``b``, ``c`` float32)."""
    a64 = a.double() if isinstance(a, Tensor) else float(a)
    return (a64 * b.double() + c.double()).float()


def mul(x: Tensor, s: Any) -> Tensor:
    """``x.mul_(s)``: ``s`` a float32 Scalar, or a tensor (of ``x``'s half type, whose
    product with ``x`` is exact in float32)."""
    return (x.float() * s).to(x.dtype)


def add(x: Tensor, other: Tensor, alpha: Any) -> Tensor:
    """``x.add(other, alpha=alpha)``; ``alpha`` already a ``half_value`` (a number or
    a runtime scalar)."""
    return (x.float() + other.float() * alpha).to(x.dtype)


def add_scalar(x: Tensor, value: float) -> Tensor:
    """``x.add_(value)``."""
    return (x.float() + half_value(value, x.dtype)).to(x.dtype)


def div_scalar(x: Tensor, s: Any) -> Tensor:
    """``x / s`` for a Scalar ``s``."""
    return (x.float() / s).to(x.dtype)


def div(x: Tensor, y: Tensor) -> Tensor:
    """``x.div_(y)`` for a tensor ``y``."""
    return (x.float() / y.float()).to(x.dtype)


def sqrt(x: Tensor) -> Tensor:
    """``x.sqrt()``."""
    return ops.sqrt(x.float()).to(x.dtype)


def lerp(x: Tensor, end: Tensor, coeff: Any, from_self: Any) -> Tensor:
    """``x.lerp_(end, w)`` given ``lerp_weight(w)`` (numbers, or runtime scalars when
    ``w`` changes between steps: then both forms are recorded and one is picked)."""
    x32, end32 = x.float(), end.float()
    if isinstance(from_self, Tensor):
        base = ops.where(from_self > 0.5, x32, end32)
    else:
        base = x32 if from_self else end32
    return fma(coeff, end32 - x32, base).to(x.dtype)


def addcmul(x: Tensor, t1: Tensor, t2: Tensor, value: Any) -> Tensor:
    """``x.addcmul_(t1, t2, value=value)``."""
    return fma(t1.float() * value, t2.float(), x.float()).to(x.dtype)


def addcdiv(x: Tensor, t1: Tensor, t2: Tensor, value: Any = None) -> Tensor:
    """``x.addcdiv_(t1, t2, value=value)`` (None: PyTorch's default 1)."""
    num = t1.float() if value is None else t1.float() * value
    return (x.float() + num / t2.float()).to(x.dtype)
