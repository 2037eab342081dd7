"""Elementary functions and elementwise helpers beyond the dialect's own, with PyTorch's
names and semantics, written over the primitive ops so fusion sees through them and
their gradients come from the primitives' rules.

Accuracy is the rule here, not the shortest formula: ``log2``/``log10`` return exact
integers at exact powers (``log2(8.0)`` is 3, not 2.9999998), ``exp2`` is ``pow(2, x)``
(exact at integers); the hyperbolic functions of float32 and half inputs are
evaluated in float64 and rounded once (so ``sinh`` of a small ``x`` keeps every digit,
via ``expm1``, and nothing overflows before the float32 result would), float64 inputs
by overflow-safe forms; ``tan`` is ``sin / cos`` (in float64 for narrower floats); the
inverse trigonometric functions come from the dialect's ``atan2`` (libm's), ``asin`` and
``acos`` with ``sqrt((1 - x)(1 + x))`` in float64.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

import ml_dtypes
import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.tensor import grad_mode, ops
from nova.tensor.tensor import Tensor, unaliased_detach

_LN2 = math.log(2.0)


_float_arg = ops._as_float     # (integers and bools in the default dtype, as PyTorch)


def _in_float64(op: str, x: Tensor, fn) -> Tensor:
    """``fn(w)`` for ``w`` = ``x`` in float64, rounded once to ``x``'s float dtype."""
    x = _float_arg(op, x)
    return ops.cast(fn(ops.cast(x, dt.float64)), x.dtype)


def _odd(w: Tensor, magnitude: Tensor) -> Tensor:
    """``magnitude`` with the sign of ``w`` (an odd function from its value at ``|w|``)."""
    return ops.where(ops.lt(w, 0), ops.neg(magnitude), magnitude)


def _magnitude(w: Tensor) -> Tensor:
    """``|w|`` for an odd function's formula, as ``-w`` below 0 and ``w`` elsewhere: its
    slope at 0 is 1 (``abs``'s is 0, which gave ``atanh``'s gradient 0 there), and -0.0
    stays -0.0, so a result that keeps the argument's zero keeps its sign."""
    return ops.where(ops.lt(w, 0), ops.neg(w), w)


def _infinity(negative: Tensor, like: Tensor) -> Tensor:
    """-inf where ``negative``, else +inf, in ``like``'s dtype."""
    return ops.where(negative, ops.full_const(-math.inf, like.shape, like.dtype), math.inf)


def _steep(w: Tensor, at: Tensor, sign: Any = 1.0) -> Tensor:
    """Zero, with the infinite slope ``sign * inf`` in ``w`` where ``at`` and a zero
    gradient elsewhere. Added to the constant a function takes at the edge of its
    domain (``asin(1)``, ``atanh(1)``, ``erfinv(1)``, ``lgamma(0)``), it gives that
    point the infinite derivative PyTorch's formula gives there, where the constant
    alone would give 0 (and the formula's own pieces, 0 * inf, NaN). ``sqrt`` of ``w -
    w`` (0, with slope 1) has that slope; elsewhere it reads ``sqrt(1)``, so the zero
    gradient it gets stays finite."""
    d = ops.where(at, ops.sub(w, w.detach()), 1.0)
    return ops.where(at, ops.mul(ops.sqrt(d), sign), 0.0)


def _nan_slope(out: Tensor, w: Tensor, at: Tensor) -> Tensor:
    """``out``, with a NaN gradient into ``w`` where ``at`` (and ``out`` is infinite or
    NaN there), as PyTorch's quotient formulas give (``x / hypot(x, y)`` at an
    infinite ``x``, ``copysign``'s ``result / x``) where the value comes from a formula
    whose own slope is a number, or from a select that cuts the gradient. ``out`` is
    multiplied by ``pow(1, w)`` where ``at``: 1 for every ``w``, NaN included (IEEE),
    with the exponent's slope ``log(1) = 0``, which the product's rule scales by ``g *
    out``: inf * 0 = NaN. Elsewhere the exponent is 0 and reads no gradient. Without
    a gradient to ``w`` it is ``out`` itself."""
    if not (grad_mode.STATE.enabled and w.requires_grad):
        return out
    return ops.mul(out, ops.pow(1.0, ops.where(at, w, 0.0)))


def _slope_at_zero(a: Tensor, slope: Tensor, at: Tensor) -> Tensor:
    """+0 where ``at`` (``a`` is +-0 there) and 0 elsewhere, with the derivative
    ``slope`` in ``a`` where ``at`` and 0 elsewhere: ``(a - a.detach()) * slope``
    (+0 plus that product, so the value is +0 as ``xlogy(0, y)`` is), and ``_steep``'s
    infinite slope where ``slope`` is +inf (0 * inf would make the value NaN).
    ``slope`` must be finite or +inf where ``at``; it keeps its own gradient, so a
    second derivative across (``d/dy log(y)``) is there too."""
    top = ops.logical_and(at, ops.eq(slope, math.inf))
    s = ops.where(ops.logical_and(at, ops.logical_not(top)), slope, 0.0)
    d = ops.where(at, ops.sub(a, a.detach()), 0.0)
    return ops.add(ops.add(ops.mul(d, s), _steep(a, top)), 0.0)


def _exact_at_powers(x: Tensor, ratio: Tensor, base: float) -> Tensor:
    """``ratio`` (``log(x) / log(base)``), moved onto the integer ``n`` where ``x`` is
    ``base ** n``, so exact powers give exact logarithms. The correction ``n - ratio``
    is exact (the two are within a few ulps) and carries no gradient, so the derivative
    stays ``1 / (x log(base))`` there too.

    Base 2 asks ``2 ** n == x`` (every ``pow`` is exact there). Base 10 also accepts
    ``x`` within one ``eps`` of ``10 ** n`` for ``n != 0``: ``pow`` itself may be an
    ulp off (numpy's vectorized one is, at ``10 ** -5`` in float64), and for such an
    ``x`` the true logarithm is within ``0.9 eps`` of ``n``, whose rounding it is; and
    only normal ``x`` (a subnormal's relative spacing is far larger)."""
    n = ops.prim("round", [ratio], {}, ratio.shape, ratio.dtype)
    p = ops.pow(base, n)
    hit = ops.eq(p, x)
    if base != 2.0:
        info = np.finfo(np.float64 if x.dtype == dt.float64 else np.float32)
        near = ops.le(ops.abs(ops.sub(p, x)), ops.mul(ops.abs(x), float(info.eps)))
        hit = ops.logical_or(hit, ops.logical_and(near, ops.ne(n, 0)))
        # a subnormal nearest 10 ** n is far from it in relative terms (1.4e-45 is
        # float32's nearest to 1e-45, and its log10 is -44.85)
        hit = ops.logical_and(hit, ops.ge(x, float(info.tiny)))
    exact = ops.logical_and(hit, ops.lt(ops.abs(ratio), math.inf))
    nudge = ops.where(exact, ops.sub(n, ratio), 0.0).detach()   # (0 - inf: not at +-inf)
    return ops.add(ratio, nudge)


def log2(input: Tensor) -> Tensor:
    """Base-2 logarithm (``torch.log2``); exact at powers of two."""
    input = _float_arg("log2", input)
    return _exact_at_powers(input, ops.mul(ops.log(input), 1.0 / _LN2), 2.0)


def log10(input: Tensor) -> Tensor:
    """Base-10 logarithm (``torch.log10``); exact at the powers of ten the dtype holds."""
    input = _float_arg("log10", input)
    return _exact_at_powers(input, ops.mul(ops.log(input), 1.0 / math.log(10.0)), 10.0)


def exp2(input: Tensor) -> Tensor:
    """``2 ** x`` (``torch.exp2``), exact at integers."""
    return ops.pow(2.0, _float_arg("exp2", input))


# ln 2 rounded up to a multiple of 2^-32, so ``|w| - _LN2_UP`` is exact for every
# ``|w|`` from 20 on (the difference needs no bit below ``|w|``'s last one), and
# ``_HALF_SCALE = exp(_LN2_UP - ln 2)`` (from fdlibm's two-part ln 2: ``ln2_hi +
# ln2_lo`` is ln 2 to 1e-27), so ``exp(|w| - _LN2_UP) * _HALF_SCALE`` is ``exp(|w|) / 2``
_LN2_UP = math.ceil(_LN2 * 2.0 ** 32) / 2.0 ** 32
_HALF_SCALE = math.exp((_LN2_UP - 6.93147180369123816490e-01) - 1.90821492927058770002e-10)


def _half_exp(a: Tensor) -> Tensor:
    """``exp(a) / 2`` for ``a >= 20``, finite for every ``a`` whose result is (up to
    710.4758), and so is its derivative, the same number: ``exp(a - _LN2_UP)`` stays
    below ``exp(a) / 2``, and the exp rule's product ``g * exp(a - _LN2_UP)`` is taken
    after the scale. (``e * e / 2`` with ``e = exp(a / 2)`` has the right value, but its
    gradient multiplies ``e * e`` before halving: inf from 709.78 on, where the
    derivative is still finite.) One exp and one product: ~1 ulp."""
    return ops.mul(ops.exp(ops.sub(a, _LN2_UP)), _HALF_SCALE)


def _hyperbolic(op: str, x: Tensor, small, large) -> Tensor:
    """``small(w)`` for ``|w| < 20`` and ``large(w, h)`` with ``h = exp(|w|) / 2``
    above (where ``exp(-|w|)`` no longer counts; ``_half_exp``), on ``w`` = ``x`` in
    float64, rounded to ``x``'s dtype. ``small`` sees 0 where it is not taken: its
    ``expm1(w)`` would be inf there, with an infinite slope, and the zero gradient
    ``where`` hands the untaken side would become 0 * inf = NaN (``sinh``'s gradient
    at 1e4 was NaN, not inf)."""
    def evaluate(w: Tensor) -> Tensor:
        a = ops.abs(w)
        near = ops.lt(a, 20.0)
        return ops.where(near, small(ops.where(near, w, 0.0)), large(w, _half_exp(a)))
    return _in_float64(op, x, evaluate)


def _sinh_small(w: Tensor) -> Tensor:
    """``(expm1(w) - expm1(-w)) / 2``: every digit near 0, and a derivative that is a
    sum (``(exp(w) + exp(-w)) / 2``), so it keeps them too."""
    return ops.mul(ops.sub(ops.expm1(w), ops.expm1(ops.neg(w))), 0.5)


def sinh(input: Tensor) -> Tensor:
    """Hyperbolic sine (``torch.sinh``): ``(expm1(x) - expm1(-x)) / 2``, exact to the
    last digit near 0."""
    return _hyperbolic("sinh", input, _sinh_small, lambda w, h: _odd(w, h))


def _cosh_small(w: Tensor) -> Tensor:
    """``1 + 2 sinh(w/2)^2``: ``(exp(w) + exp(-w)) / 2`` has the same value, but its
    derivative is a difference, ``(exp(w) - exp(-w)) / 2``, which cancels near 0 (at
    1e-8 it kept 8 of float64's 16 digits); this one's is ``2 s s'``, all products."""
    s = _sinh_small(ops.mul(w, 0.5))
    return ops.add(ops.mul(ops.mul(s, s), 2.0), 1.0)


def cosh(input: Tensor) -> Tensor:
    """Hyperbolic cosine (``torch.cosh``): ``1 + 2 sinh(x/2)^2``, whose gradient keeps
    every digit near 0."""
    return _hyperbolic("cosh", input, _cosh_small, lambda w, h: h)


def tan(input: Tensor) -> Tensor:
    """Tangent (``torch.tan``): ``sin / cos``, in float64 for narrower floats."""
    return _in_float64("tan", input, lambda w: ops.div(ops.sin(w), ops.cos(w)))


def atan2(input: Any, other: Any) -> Tensor:
    """The angle of the point (``other``, ``input``) in [-pi, pi] (``torch.atan2``; C's
    ``atan2``, signed zeros and infinities included), float32 and half through float64
    and rounded once (libm's ``atan2f`` is an ulp off at times). Integers give float32."""
    common = ops.promote("atan2", input, other)
    common = common if common.is_floating_point else dt.DEFAULT_FLOAT
    y, x = ops.operands("atan2", input, other, dtype=dt.float64)
    return ops.cast(ops.prim("atan2", [y, x], {}, y.shape, dt.float64), common)


arctan2 = atan2


def _inverse_trig(op: str, x: Tensor, angle, edge, slope: float) -> Tensor:
    """``angle(w, c)`` with ``w`` = ``x`` in float64 and ``c = sqrt((1 - w)(1 + w))``
    (no cancellation near +-1; NaN past them), rounded to ``x``'s dtype. At +-1 the
    value is ``edge(w)`` with the slope ``slope * inf``, as PyTorch's ``1 / sqrt(1 -
    x^2)`` (the product's rule gave inf * 0 = NaN there); the formula sees 0 there."""
    def evaluate(w: Tensor) -> Tensor:
        at = ops.eq(ops.abs(w), 1.0)
        ws = ops.where(at, 0.0, w)
        out = angle(ws, ops.sqrt(ops.mul(ops.sub(1.0, ws), ops.add(1.0, ws))))
        return ops.where(at, ops.add(edge(w), _steep(w, at, slope)), out)
    return _in_float64(op, x, evaluate)


def atan(input: Tensor) -> Tensor:
    """Inverse tangent (``torch.atan``): ``atan2(x, 1)``."""
    input = _float_arg("atan", input)
    return atan2(input, ops.full_const(1.0, input.shape, input.dtype))


def asin(input: Tensor) -> Tensor:
    """Inverse sine (``torch.asin``): ``atan2(x, sqrt((1 - x)(1 + x)))``; NaN past +-1."""
    return _inverse_trig("asin", input, lambda w, c: atan2(w, c),
                         lambda w: ops.mul(w, math.pi / 2), 1.0)


def acos(input: Tensor) -> Tensor:
    """Inverse cosine (``torch.acos``): ``atan2(sqrt((1 - x)(1 + x)), x)``; NaN past
    +-1."""
    return _inverse_trig("acos", input, lambda w, c: atan2(c, w),
                         lambda w: ops.mul(ops.sub(1.0, w), math.pi / 2), -1.0)


arctan, arcsin, arccos = atan, asin, acos


def atanh(input: Tensor) -> Tensor:
    """Inverse hyperbolic tangent (``torch.atanh``): ``sign(x) log1p(2|x| / (1 - |x|))
    / 2`` (odd, so ``log1p`` never sees an argument near -1, where it would amplify
    the quotient's rounding: 90 ulps at -0.999 in float64); +-inf at +-1, with the
    slope +inf there as PyTorch's ``1 / (1 - x^2)``; NaN beyond."""
    def evaluate(w: Tensor) -> Tensor:
        at = ops.eq(ops.abs(w), 1.0)
        ws = ops.where(at, 0.0, w)
        a = _magnitude(ws)
        out = _odd(ws, ops.mul(ops.log1p(ops.div(ops.mul(a, 2.0), ops.sub(1.0, a))), 0.5))
        return ops.where(at, ops.add(_infinity(ops.lt(w, 0), w), _steep(w, at)), out)
    return _in_float64("atanh", input, evaluate)


def asinh(input: Tensor) -> Tensor:
    """Inverse hyperbolic sine (``torch.asinh``): ``sign(x) log1p(|x| + x^2 / (1 +
    sqrt(1 + x^2)))``, and ``sign(x) (log|x| + log 2)`` where ``x^2`` would overflow;
    each branch sees a harmless argument where the other is taken (``log(0)``'s
    infinite slope made the gradient at 0 NaN), and +-0 are returned as they are."""
    def evaluate(w: Tensor) -> Tensor:
        a = _magnitude(w)
        big = ops.gt(a, 1e150)
        an = ops.where(big, 0.0, a)
        sq = ops.mul(an, an)
        near = ops.log1p(ops.add(an, ops.div(sq, ops.add(1.0, ops.sqrt(ops.add(1.0, sq))))))
        far = ops.add(ops.log(ops.where(big, a, 1.0)), _LN2)
        return ops.where(ops.eq(w, 0), w, _odd(w, ops.where(big, far, near)))
    return _in_float64("asinh", input, evaluate)


def acosh(input: Tensor) -> Tensor:
    """Inverse hyperbolic cosine (``torch.acosh``): ``log1p(t + sqrt(2t + t^2))`` with
    ``t = x - 1`` (no cancellation near 1), ``log(x) + log 2`` where ``x^2`` would
    overflow; NaN below 1. Each branch sees a harmless argument where the other is
    taken (the near one's inf * 0 made the gradient at +inf NaN, PyTorch's 0), and 1
    is 0 with the slope +inf, PyTorch's ``1 / sqrt(x^2 - 1)`` (the product rule of
    ``t^2`` gave inf * 0 = NaN)."""
    def evaluate(w: Tensor) -> Tensor:
        big, at = ops.gt(w, 1e150), ops.eq(w, 1.0)
        t = ops.sub(ops.where(ops.logical_or(big, at), 2.0, w), 1.0)
        near = ops.log1p(ops.add(t, ops.sqrt(ops.add(ops.mul(t, 2.0), ops.mul(t, t)))))
        out = ops.where(big, ops.add(ops.log(ops.where(big, w, 1.0)), _LN2), near)
        out = ops.where(at, _steep(w, at), out)
        return ops.where(ops.lt(w, 1.0), math.nan, out)   # (t^2 hides a negative 2t + t^2)
    return _in_float64("acosh", input, evaluate)


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(a) + exp(b))`` without overflow (``torch.logaddexp``), in float64
    (rounded once for narrower floats): ``logaddexp_shifted``."""
    common = ops.promote("logaddexp", input, other)
    common = common if common.is_floating_point else dt.DEFAULT_FLOAT
    x, y = ops.operands("logaddexp", input, other, dtype=dt.float64)   # (a result near 0 cancels:
    return ops.cast(logaddexp_shifted(x, y, 1.0), common)      # float32 lost 37 ulps there)


def logaddexp_shifted(x: Tensor, y: Tensor, log_base: float) -> Tensor:
    """``log_b(b^x + b^y)`` (``log_base`` = ln b) as ``m + log1p(expm1((x - m) ln b) +
    exp((y - m) ln b)) / ln b``, with ``m`` the larger of the two taken as a constant
    (no history; 0 where it is not finite, which the infinities then carry through).
    One of the two terms is ``expm1(0) = 0`` exactly, so the value is ``m + log1p(small)``
    as precise as the textbook ``max + log1p(exp(-|x - y|))``, while its derivatives are
    the softmax weights at every order: ``|x - y|`` had slope 0 at a tie, so the second
    derivative there was 0 instead of ``p (1 - p)`` (0.25)."""
    m = unaliased_detach(ops.maximum(x, y))
    m = ops.where(isfinite(m), m, 0.0)

    def scaled(t: Tensor) -> Tensor:
        d = ops.sub(t, m)
        return d if log_base == 1.0 else ops.mul(d, log_base)
    s = ops.log1p(ops.add(ops.expm1(scaled(x)), ops.exp(scaled(y))))
    return ops.add(m, s if log_base == 1.0 else ops.mul(s, 1.0 / log_base))


def _x_log(op: str, x: Any, y: Any, log, domain: float, int_dtype: dt.DType) -> Tensor:
    """``x * log(y)`` for ``xlogy`` (``log``, defined above ``domain`` = 0) and
    ``xlog1py`` (``log1p``, above -1), with PyTorch's values and gradients: 0 where ``x
    == 0`` unless ``y`` is NaN (``xlogy(0, inf)`` and ``xlog1py(0, -1)`` included); there
    d/dx is ``log(y)``, 0 for ``y`` at or below ``domain`` (PyTorch 2's ``xlogy(grad,
    y).masked_fill((x == 0) & (y <= 0), 0)``; +inf at ``y = inf``), and d/dy is the
    rule's ``x / y`` (``x / (1 + y)``: NaN at 0/0, as PyTorch). Integers compute in
    ``int_dtype``."""
    common = ops.promote(op, x, y)
    a, b = ops.operands(op, x, y, dtype=common if common.is_floating_point else int_dtype)
    zero = ops.logical_and(ops.eq(a, 0), ops.logical_not(ops.isnan(b)))
    product = ops.mul(a, ops.where(zero, 0.0, log(b)))
    if not (grad_mode.STATE.enabled and a.requires_grad):
        return ops.where(zero, 0.0, product)
    inside = ops.gt(b, domain)
    slope = ops.where(inside, log(ops.where(inside, b, domain + 1.0)), 0.0)
    return ops.where(zero, _slope_at_zero(a, slope, zero), product)


def xlogy(input: Any, other: Any) -> Tensor:
    """``x * log(y)``, 0 where ``x == 0`` unless ``other`` is NaN (``torch.xlogy``); at ``x
    == 0`` the gradient for ``input`` is ``log(y)`` (0 for ``y <= 0``) and for ``other`` the
    rule's ``x / y``, as PyTorch 2 (``_x_log``)."""
    return _x_log("xlogy", input, other, ops.log, 0.0, dt.DEFAULT_FLOAT)


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(x / (1 - x))`` (``torch.logit``), ``input`` clamped to ``[eps, 1 - eps]`` when
    ``eps`` is given; -inf at 0 and inf at 1 with the slope +inf there, as PyTorch's
    ``1 / (x (1 - x))`` (the quotient's rule gave 0 * inf = NaN)."""
    input = _float_arg("logit", input)
    if eps is not None:
        input = ops.clamp(input, eps, 1.0 - eps)
    at = ops.logical_or(ops.eq(input, 0), ops.eq(input, 1))
    xs = ops.where(at, 0.5, input)
    return ops.where(at, ops.add(_infinity(ops.eq(input, 0), input), _steep(input, at)),
                     ops.log(ops.div(xs, ops.sub(1.0, xs))))


# sinc's Taylor series in t = (pi x)^2, sum (-t)^k / (2k + 1)!, to below float64's
# rounding of the result up to its cut-off (t^9 / 19! is 1e-19 there)
_SINC_SERIES = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(10))
_SINC_SERIES_TO = 0.25


def sinc(input: Tensor) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0 (``torch.sinc``), in float64 (rounded once for
    narrower floats). Below |x| = 0.25 it is the Taylor series of ``t = (pi x)^2``
    (``_SINC_SERIES``), so every derivative at 0 is the true one (the second is
    -pi^2/3; a constant branch at 0 gave 0, the bare quotient NaN), and the quotient's
    derivative, a difference of two terms of ``1/x`` that cancel toward 0, is only
    used from 0.25 on, where they keep all but ~2 bits (float32's gradient at 1e-3, by
    the quotient in float32, was 5% off); the quotient sees 1 where the series is
    taken, so its unselected branch has finite derivatives."""
    def evaluate(w: Tensor) -> Tensor:
        small = ops.lt(ops.abs(w), _SINC_SERIES_TO)
        px = ops.mul(ops.where(small, 1.0, w), math.pi)
        ws = ops.where(small, w, 0.0)
        t = ops.mul(ops.mul(ws, ws), math.pi * math.pi)
        series = _polynomial(t, _SINC_SERIES)
        return ops.where(small, series, ops.div(ops.sin(px), px))
    return _in_float64("sinc", input, evaluate)


def _polynomial(t: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    """``sum coeffs[k] t^k`` by Horner's rule."""
    out = ops.add(ops.mul(t, coeffs[-1]), coeffs[-2])
    for c in reversed(coeffs[:-2]):
        out = ops.add(ops.mul(out, t), c)
    return out


def deg2rad(input: Tensor) -> Tensor:
    return ops.mul(_float_arg("deg2rad", input), math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    return ops.mul(_float_arg("rad2deg", input), 180.0 / math.pi)


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(a^2 + b^2)`` without overflow or underflow (``torch.hypot``): ``m sqrt(
    (a/m)^2 + (b/m)^2)`` for ``m = max(|a|, |b|)`` (one quotient is +-1); inf if either
    is infinite (NaN beside an infinity included, IEEE's). ``m`` is held constant for
    the gradient (the form is ``hypot`` for every ``m > 0``), so the slopes are the
    form's ``a / hypot`` and ``b / hypot``, second derivatives included (through
    ``|a|`` and ``max`` the second derivative was 0 at ``a = 0`` and at ``|a| = |b|``).
    At the origin and beside an infinity they are PyTorch's (``_hypot_edge``): 0/0 =
    NaN, +-0 for a finite operand and NaN for the infinite (or NaN) one."""
    common = ops.promote("hypot", input, other)
    if not common.is_floating_point:
        raise DTypeError(f"hypot: expected floating point operands, got {common.name}")
    x, y = ops.operands("hypot", input, other)
    edge = ops.logical_or(ops.logical_or(ops.isinf(x), ops.isinf(y)),
                          ops.logical_and(ops.eq(x, 0), ops.eq(y, 0)))
    xs, ys = ops.where(edge, 1.0, x), ops.where(edge, 1.0, y)
    m = ops.maximum(ops.abs(xs), ops.abs(ys)).detach()     # (> 0 off the edge points)
    u, v = ops.div(xs, m), ops.div(ys, m)
    out = ops.mul(ops.sqrt(ops.add(ops.mul(u, u), ops.mul(v, v))), m)
    return ops.where(edge, _hypot_edge(x, y, edge), out)


def _hypot_edge(x: Tensor, y: Tensor, edge: Tensor) -> Tensor:
    """``hypot`` where an operand is infinite or both are 0, as ``sqrt(x^2 + y^2)``:
    inf or 0, and its rule's slopes are PyTorch's ``x / hypot`` (``0.5 / sqrt(s) *
    2x``: inf * 0 = NaN at the origin, 0 * inf = NaN for an infinite ``x``, 0 * x =
    +-0 beside one). A NaN beside an infinity is read as 0 (the value is inf), and
    ``_nan_slope`` gives both operands the NaN gradient PyTorch's ``nan / inf`` and
    ``inf / inf`` do. Off the edge the operands read 1."""
    nx, ny = ops.isnan(x), ops.isnan(y)
    xe = ops.where(nx, 0.0, ops.where(edge, x, 1.0))
    ye = ops.where(ny, 0.0, ops.where(edge, y, 1.0))
    out = ops.sqrt(ops.add(ops.mul(xe, xe), ops.mul(ye, ye)))
    return _nan_slope(out, ops.add(x, y), ops.logical_and(edge, ops.logical_or(nx, ny)))


def lerp(input: Tensor, end: Any, weight: Any) -> Tensor:
    """``start + weight (end - start)`` (``torch.lerp``), in PyTorch's two forms: from
    ``input`` for ``|weight| < 0.5``, from ``end`` otherwise (exact at ``weight`` 0 and 1);
    half types in float32, rounded once."""
    def evaluate(start: Tensor, end: Any, weight: Any) -> Tensor:
        diff = ops.sub(end, start)
        low = ops.add(start, ops.mul(weight, diff))
        high = ops.sub(end, ops.mul(diff, ops.sub(1.0, weight)))
        w = weight if isinstance(weight, Tensor) else ops.full_const(weight, (), low.dtype)
        return ops.where(ops.lt(ops.abs(w), 0.5), low, high)
    ops._check_tensor("lerp", input)
    dtype = ops.promote("lerp", input, end) if isinstance(end, Tensor) else input.dtype
    if isinstance(weight, Tensor):
        # the weight's dtype counts too (int64 ends, a float32 weight: float32), and every
        # tensor is cast to the result dtype first, as PyTorch's: ``end - start`` of
        # uint8 ends wrapped at 256 (lerp(255, 0, 5.8125) gave 4.8, PyTorch -1224)
        dtype = ops.promote("lerp", input, end, weight)
        input, end, weight = (ops.cast(v, dtype) if isinstance(v, Tensor) else v
                              for v in (input, end, weight))
    return ops._rounded_once(dtype, evaluate, input, end, weight)


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 * tensor2`` (``torch.addcmul``), in the three tensors'
    common dtype: ``value`` does not widen it, and for an integer result it is
    truncated to an int, as PyTorch converts it; half types in float32, rounded once."""
    common = ops.promote("addcmul", input, tensor1, tensor2)
    input, tensor1, tensor2 = _all_cast(common, input, tensor1, tensor2)

    def evaluate(input: Tensor, tensor1: Tensor, tensor2: Tensor) -> Tensor:
        kind = ops.promote("addcmul", input, tensor1, tensor2)
        prod = ops.mul(ops.cast(tensor1, kind), ops.cast(tensor2, kind))
        if value != 1:
            prod = ops.mul(prod, value if kind.is_floating_point else int(value))
        return ops.add(input, prod)
    return ops._rounded_once(common, evaluate, input, tensor1, tensor2)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (``torch.addcdiv``); half types in
    float32, rounded once."""
    def evaluate(input: Tensor, tensor1: Tensor, tensor2: Tensor) -> Tensor:
        quot = ops.div(tensor1, tensor2)
        return ops.add(input, quot if value == 1 else ops.mul(quot, value))
    common = ops.promote("addcdiv", input, tensor1, tensor2)
    common = common if common.is_floating_point else dt.DEFAULT_FLOAT
    return ops._rounded_once(common, evaluate, *_all_cast(common, input, tensor1, tensor2))


def _all_cast(dtype: dt.DType, *args: Any) -> list[Any]:
    """The tensors among ``args`` cast to the result dtype before any arithmetic, as
    PyTorch's kernels take their operands: ``uint8 / bfloat16`` inside a float32
    ``addcdiv`` was rounded to bfloat16 (0.2% off), and an int32 factor of a float16
    ``addcmul`` that float16 cannot hold is inf there, not a finite product."""
    return [ops.cast(a, dtype) if isinstance(a, Tensor) else a for a in args]


def isfinite(input: Tensor) -> Tensor:
    """Neither infinite nor NaN (``torch.isfinite``); integers and bools always are."""
    ops._check_tensor("isfinite", input)
    if not input.dtype.is_floating_point:
        return ops.full_const(True, input.shape, dt.bool_)
    return ops.lt(ops.abs(input), math.inf)       # (NaN compares false)


def isposinf(input: Tensor) -> Tensor:
    ops._check_tensor("isposinf", input)
    if not input.dtype.is_floating_point:
        return ops.full_const(False, input.shape, dt.bool_)
    return ops.eq(input, math.inf)


def isneginf(input: Tensor) -> Tensor:
    ops._check_tensor("isneginf", input)
    if not input.dtype.is_floating_point:
        return ops.full_const(False, input.shape, dt.bool_)
    return ops.eq(input, -math.inf)


def isclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: builtins.bool = False) -> Tensor:
    """``|a - b| <= atol + rtol |b|`` elementwise, or equal (infinities), or both NaN
    with ``equal_nan`` (``torch.isclose``)."""
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, "
                         f"atol={atol}")
    common = ops.promote("isclose", input, other)
    x, y = ops.operands("isclose", input, other, dtype=common if common.is_floating_point
                        else dt.float64)
    close = ops.le(ops.abs(ops.sub(x, y)), ops.add(ops.mul(ops.abs(y), rtol), atol))
    finite = ops.logical_and(isfinite(x), isfinite(y))      # (inf - inf <= inf otherwise)
    out = ops.logical_or(ops.eq(x, y), ops.logical_and(finite, close))
    if equal_nan:
        out = ops.logical_or(out, ops.logical_and(ops.isnan(x), ops.isnan(y)))
    return out


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0,
    the dtype's largest and lowest finite values; ``torch.nan_to_num``)."""
    ops._check_tensor("nan_to_num", input)
    if not input.dtype.is_floating_point:
        return input.clone()
    info = ml_dtypes.finfo(input.dtype.np)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = ops.where(ops.isnan(input), nan, input)
    out = ops.where(ops.eq(input, math.inf), hi, out)
    return ops.where(ops.eq(input, -math.inf), lo, out)


def clamp_min(input: Tensor, min: Any) -> Tensor:  # noqa: A002 (torch's name)
    return ops.clamp(input, min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:  # noqa: A002 (torch's name)
    return ops.clamp(input, max=max)


def fmax(input: Tensor, other: Any) -> Tensor:
    """Elementwise maximum ignoring NaN: the other operand where one is NaN
    (``torch.fmax``). ``input`` wins ties (and is NaN only if both are), so it takes the
    whole gradient there, as in PyTorch (``maximum`` splits it)."""
    x, y = ops.operands("fmax", input, other)
    if not x.dtype.is_floating_point:
        return ops.maximum(x, y)
    return ops.where(ops.logical_or(ops.ge(x, y), ops.isnan(y)), x, y)


def fmin(input: Tensor, other: Any) -> Tensor:
    """Elementwise minimum ignoring NaN (``torch.fmin``); ``input`` wins ties, as in
    ``fmax``."""
    x, y = ops.operands("fmin", input, other)
    if not x.dtype.is_floating_point:
        return ops.minimum(x, y)
    return ops.where(ops.logical_or(ops.le(x, y), ops.isnan(y)), x, y)


def float_power(input: Any, exponent: Any) -> Tensor:
    """``a ** b`` in float64 (``torch.float_power``)."""
    wide = [ops.cast(v, dt.float64) if isinstance(v, Tensor) else float(v)
            for v in (input, exponent)]
    return ops.pow(*wide)


def heaviside(input: Tensor, values: Any) -> Tensor:
    """0 below zero, 1 above, ``values`` at zero (``torch.heaviside``; NaN gives 0, as
    PyTorch's kernel)."""
    ops._check_tensor("heaviside", input)
    step = ops.cast(ops.gt(input, 0), input.dtype)
    return ops.where(ops.eq(input, 0), values, step)


def nansum(input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *,
           dtype: Any = None) -> Tensor:
    """``sum`` with NaN counted as zero (``torch.nansum``)."""
    ops._check_tensor("nansum", input)
    if input.dtype.is_floating_point:
        input = ops.where(ops.isnan(input), 0.0, input)
    return ops.sum(input, dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *,
            dtype: Any = None) -> Tensor:
    """``mean`` over the non-NaN elements (``torch.nanmean``; NaN where all are);
    float16/bfloat16 in float32, rounded once, as ``mean`` (PyTorch divides a half
    ``nansum``, so its ``nanmean`` of 1024 float16 hundreds is inf; Nova's is 100)."""
    ops._check_tensor("nanmean", input)
    if dtype is not None:
        input = ops.cast(input, dt.get_dtype(dtype))
    if not input.dtype.is_floating_point:
        raise DTypeError(f"nanmean: input dtype must be floating point, got {input.dtype.name}")

    def evaluate(w: Tensor) -> Tensor:
        keep = ops.logical_not(ops.isnan(w))
        total = ops.sum(ops.where(keep, w, 0.0), dim, keepdim)
        count = ops.sum(ops.cast(keep, w.dtype), dim, True)
        out = ops.div(total, count if keepdim else _dropped(count, dim))
        # An all-NaN slice: NaN, and -- as PyTorch's nansum backward gives, g / 0 * 0
        # -- a NaN gradient to each of its elements. The amax of a slice of NaNs has
        # that gradient (no element equals its NaN maximum: g / 0 counts); the other
        # slices feed it zeros.
        if w.numel() == 0:
            return out
        empty = ops.eq(count, 0)
        nan_max = ops.amax(ops.where(empty, w, 0.0), dim, keepdim)
        return ops.where(empty if keepdim else _dropped(empty, dim), nan_max, out)

    return ops._in_float32(input, evaluate)


def _dropped(t: Tensor, dim: Any) -> Tensor:
    """``t`` (reduced with ``keepdim=True`` over ``dim``) without the reduced dims."""
    axes = ops.reduction_axes("nanmean", dim, t.ndim, t.shape)
    return t.reshape(tuple(n for k, n in enumerate(t.shape) if k not in axes))


TENSOR_METHODS = (
    "atan2", "arctan2", "atan", "asin", "acos", "arctan", "arcsin", "arccos", "log2", "log10", "exp2", "sinh", "cosh", "tan", "atanh", "asinh", "acosh", "logaddexp",
    "xlogy", "logit", "sinc", "deg2rad", "rad2deg", "hypot", "lerp", "addcmul", "addcdiv",
    "isfinite", "isposinf", "isneginf", "isclose", "nan_to_num", "clamp_min", "clamp_max",
    "fmax", "fmin", "float_power", "heaviside", "nansum", "nanmean",
)

__all__ = list(TENSOR_METHODS)
