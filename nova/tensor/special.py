"""Special functions with PyTorch's names and semantics: the error function family
(``erfc``, ``erfinv``, and ``erfcx``, ``ndtr``, ``ndtri``, ``log_ndtr`` for
``nova.special``), the gamma family (``lgamma``, ``digamma``, ``polygamma``,
``mvlgamma``), the Bessel function ``i0`` (and ``i0e``), and the floating-point helpers
``logaddexp2``, ``copysign``, ``signbit``, ``frexp``, ``ldexp``, ``nextafter``.

Every function is a composite of the dialect's primitives (so fusion sees through it and
its gradient comes from their rules), evaluated in float64 and rounded once to the
input's float dtype, by formulas that keep every digit where the naive one loses them:

- ``erfc(x)`` is ``1 - erf(x)`` below 0.5 and ``exp(-x^2) erfcx(x)`` above, with
  ``exp(-x^2)`` split so the rounding of ``x^2`` is not amplified and ``erfcx`` a
  Chebyshev series in ``(x - 4) / (x + 4)``: full precision down to the last subnormal.
- ``erfinv`` starts from Winitzki's closed form (within 0.3%) and takes three Newton
  steps, on ``erf`` near 0 and on ``log erfc`` in the tails (from ``1 - |x|``, exact),
  which converge to the float64 value everywhere; the gradient flows through the
  steps, so it is ``sqrt(pi)/2 exp(erfinv(x)^2)`` to the same precision.
- ``lgamma`` reduces ``x`` in [0, 10) to [1.5, 2.5] by recurrence (a Chebyshev series of
  ``lgamma(2 + d) / d`` there, so the zeros at 1 and 2 are exact and their
  neighbourhoods keep their relative precision), Stirling's series from 10 on, and
  reflection with ``sin(pi x)`` reduced exactly for negative ``x``.
- ``digamma`` is ``(x - x0) Q(x)`` on [1, 2] around its positive root ``x0``
  (``x0`` in two parts, so ``x - x0`` is exact), recurrence below 10, the asymptotic
  series above, reflection for negative ``x``; ``polygamma(n, x)`` is ``(-1)^(n+1) n!
  zeta(n + 1, x)`` by recurrence and the Euler-Maclaurin tail, and the reflection
  formula's n-th derivative of ``cot`` for negative ``x``.
- ``i0`` is its power series (positive terms) up to 25 and the asymptotic series above,
  with ``exp(|x|)`` applied in two halves, so float64 values are finite up to the
  largest double.
- ``frexp``, ``ldexp`` and ``nextafter`` are exact: the exponent comes from ``log2``
  corrected by one exact scaling, so every other step multiplies by powers of two.

The Chebyshev coefficients below interpolate the named function at 60 (100 for
``erfcx``) Chebyshev nodes, evaluated with mpmath at 50 digits, and are cut where they
fall below 1e-18 (the functions are of order 1 there).

At the edges of their domains the gradients are PyTorch's infinities, not the NaN
(0 * inf) or 0 (a constant branch) the formulas' pieces would give: ``erfinv``'s at
+-1 and ``ndtri``'s at 0 and 1 are +inf, ``lgamma``'s -inf at +0 and +inf at -0,
``digamma``'s +inf at its poles (where ``polygamma(1, x)`` is +inf; PyTorch's is +inf
at 0 and a huge finite number, its reflection formula's rounding, at the negative
integers), ``polygamma(n, x)``'s ``polygamma(n + 1, x)``'s infinity at its poles.

Limits. float64 results near the negative zeros of ``lgamma`` and ``digamma`` carry
the reflection formula's absolute error (~1e-16), not a relative one (float32 results
are unaffected). The sign bit of a NaN is not expressible here (the primitives have no
bit cast), so ``signbit`` of any NaN is False and ``copysign(x, nan)`` is ``|x|``, where
PyTorch reads the bit (NaNs made by arithmetic on x86 are negative).
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

import ml_dtypes

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.tensor import grad_mode, ops, tape
from nova.tensor.elementary import (_in_float64, _infinity, _magnitude, _nan_slope, _steep,
                                    _x_log, logaddexp_shifted)
from nova.tensor.tensor import Tensor

_SQRT_PI_2 = math.sqrt(math.pi) / 2       # 1 / erf'(0)
_LN2 = math.log(2.0)

# erfcx(x) (x + 4) for x >= 0, in s = (x - 4) / (x + 4)
_ERFCX = (
    1.6320978781965259, -1.5054329427054698, 0.5903214182888945, -0.19828527172011035,
    0.0569084302284687, -0.013773973050870096, 0.002729016733135232,
    -0.00041361807903024755, 3.89141838079606e-05, 4.795485503364818e-07,
    -8.699107081379825e-07, 1.2116707094396558e-07, 3.79196702608182e-09,
    -3.4533646779963824e-09, 2.748862570381361e-10, 6.813959375318511e-11,
    -1.3568522747316355e-11, -1.0463235067416098e-12, 4.851070321243456e-13,
    8.458758172979236e-15, -1.6469363733616713e-14, 2.5314850886802834e-16,
    5.757244393379938e-16, -1.8245979193136522e-17, -2.135637703191254e-17,
)
_ERFCX_K = 4.0
_ERFCX_LAST_FINITE = -26.62873571375149   # erfcx(x) overflows float64 below this
_ERFCX_SLOPE_LAST_FINITE = -26.554043693782734   # and its slope below this

# lgamma(2 + d) / d for d in [-0.5, 0.5], in s = 2 d
_LGAMMA_2 = (
    0.41418612492156676, 0.16322170068760064, -0.008658972394126285,
    0.0006727515726001485, -6.139556963628233e-05, 6.110065797003576e-06,
    -6.410003033826223e-07, 6.962242692768951e-08, -7.747248733788217e-09,
    8.774075140687239e-10, -1.0070266869830198e-10, 1.1678602130652374e-11,
    -1.3656871334744932e-12, 1.6079351149711552e-13, -1.9039501088488732e-14,
    2.2653768767833064e-15, -2.706656814831896e-16, 3.245660731626191e-17,
    -3.904483378457447e-18,
)

# digamma(x) / (x - x0) for x in [1, 2], in s = 2 x - 3; x0 = _DIGAMMA_ROOT[0] + [1]
_DIGAMMA_1_2 = (
    0.983570260441567, -0.2270640863346444, 0.03336889902393011, -0.005320077271596548,
    0.0008788656937820505, -0.00014773492650606044, 2.5060543468359146e-05,
    -4.2721034029993324e-06, 7.302769272465923e-07, -1.2502886813559594e-07,
    2.1425009322359472e-08, -3.673295918565179e-09, 6.299717236108931e-10,
    -1.080593028883266e-10, 1.853735192053638e-11, -3.18023536582553e-12,
    5.456147570322795e-13, -9.360993131036438e-14, 1.606064636295075e-14,
    -2.7555431377438815e-15, 4.727736178601912e-16, -8.11148420346509e-17,
    1.391707769474154e-17, -2.3877901082188625e-18,
)
_DIGAMMA_ROOT = (1.4616321449683622, 9.549995429965697e-17)

# B_2k for k = 1..9 (Stirling's and the Euler-Maclaurin series)
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798)

_ASYMPTOTIC_FROM = 10.0     # lgamma, digamma: 8 terms of the series reach 1e-17 here
_I0_SERIES_TO = 25.0        # i0: 40 terms of the power series, 20 of the asymptotic one
_I0_SERIES_TERMS = 41
_I0_ASYMPTOTIC_TERMS = 21
_I0_LAST_FINITE = 713.9869085439682   # i0 overflows float64 above this
_I0_LOG_FROM = 700.0         # i0: its gradient from the log form above


# ---------------------------------------------------------------- float64 building blocks
# Each takes and returns float64 tensors; the public functions round once at the end.

def _chebyshev(s: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    """``sum c_k T_k(s)`` by Clenshaw's recurrence (stable on [-1, 1])."""
    s2 = ops.mul(s, 2.0)
    b1, b2 = ops.add(ops.mul(s2, coeffs[-1]), coeffs[-2]), coeffs[-1]
    for c in reversed(coeffs[1:-2]):
        b1, b2 = ops.add(ops.sub(ops.mul(s2, b1), b2), c), b1
    return ops.add(ops.sub(ops.mul(s, b1), b2), coeffs[0])


def _horner(t: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    """``sum c_k t^k``."""
    out = ops.add(ops.mul(t, coeffs[-1]), coeffs[-2])
    for c in reversed(coeffs[:-2]):
        out = ops.add(ops.mul(out, t), c)
    return out


def _finite(t: Tensor) -> Tensor:
    return ops.lt(ops.abs(t), math.inf)       # (NaN compares false)


def _round(t: Tensor) -> Tensor:
    return ops.prim("round", [t], {}, t.shape, t.dtype)


def _floor(t: Tensor) -> Tensor:
    return ops.prim("floor", [t], {}, t.shape, t.dtype)


def _exp_square(w: Tensor, scale: float) -> Tensor:
    """``exp(scale w^2)`` for ``|w| <= 64`` and ``scale`` in {1, -1, 0.5, -0.5}, with
    ``w = h + l``, ``h`` on a 1/256 grid: ``scale h^2`` is exact, and only the small
    ``scale l (w + h)`` is rounded, so the result keeps its relative precision where
    ``exp(scale w^2)`` would turn the rounding of ``w^2`` into an error of ``w^2`` ulps."""
    h = ops.div(_round(ops.mul(w, 256.0)), 256.0)
    lo = ops.sub(w, h)
    return ops.mul(ops.exp(ops.mul(ops.mul(h, h), scale)),
                   ops.exp(ops.mul(ops.mul(lo, ops.add(w, h)), scale)))


def _erfcx_nonneg(w: Tensor) -> Tensor:
    """``exp(w^2) erfc(w)`` for ``w >= 0`` (0 at +inf)."""
    den = ops.add(w, _ERFCX_K)
    s = ops.sub(1.0, ops.div(2.0 * _ERFCX_K, den))
    return ops.div(_chebyshev(s, _ERFCX), den)


def _erfc64(w: Tensor) -> Tensor:
    """``erfc(w)``: ``1 - erf(w)`` below 0.5 (no cancellation there), ``exp(-w^2)
    erfcx(w)`` above (from 28 on, both 0 in float64)."""
    tail = ops.clamp(w, 0.5, 28.0)
    return ops.where(ops.lt(w, 0.5), ops.sub(1.0, ops.erf(w)),
                     ops.mul(_exp_square(tail, -1.0), _erfcx_nonneg(tail)))


def _erfinv64(x: Tensor, c: Tensor) -> Tensor:
    """``erfinv(x)`` for ``|x| < 1`` given ``c = 1 - |x|`` to full relative precision.

    Start: Winitzki's ``sqrt(sqrt(b^2 - w/a) - b)``, ``w = log(1 - x^2)``, ``b = 2/(pi
    a) + w/2``, ``a = 0.147``, detached (its gradient is not the one wanted, and it is
    infinite at 0). Then three Newton steps: on ``erf(y) - x`` in the middle, on
    ``log erfc(|y|) - log c`` in the tails (``c < 0.45``, where ``|y| > 0.5``), which
    converges from 0.3% off where ``erfc`` itself is nearly exponential. Each step's
    gradient is ``1 / erf'(y)`` plus terms that vanish as it converges."""
    sign = ops.where(ops.lt(x, 0), -1.0, 1.0)
    w = ops.add(ops.log(c), ops.log(ops.sub(2.0, c)))
    b = ops.add(ops.mul(w, 0.5), 2.0 / (math.pi * 0.147))
    y = ops.mul(ops.sqrt(ops.sub(ops.sqrt(ops.sub(ops.mul(b, b), ops.div(w, 0.147))), b)),
                sign).detach()
    tails = ops.lt(c, 0.45)
    log_c = ops.log(ops.where(tails, c, 0.5))
    for _ in range(3):
        a = ops.clamp(ops.mul(y, sign), 0.5, 28.0)       # |y| in the tails
        e = _erfcx_nonneg(a)
        log_erfc = ops.add(ops.neg(ops.mul(a, a)), ops.log(e))
        tail_step = ops.mul(ops.mul(ops.sub(log_erfc, log_c), e), _SQRT_PI_2)
        m = ops.where(tails, 0.0, y)                      # (exp(y^2) finite where used)
        mid_step = ops.mul(ops.mul(ops.sub(x, ops.erf(m)), ops.exp(ops.mul(m, m))),
                           _SQRT_PI_2)
        y = ops.add(y, ops.where(tails, ops.mul(tail_step, sign), mid_step))
    return y


def _erfinv_finish(x: Tensor, y: Tensor, scale: float, low: Tensor, high: Tensor,
                   inside: Tensor) -> Tensor:
    """``y`` (``scale erfinv(x)``) where ``inside``; at ``x = +-0`` the signed zero
    ``scale sqrt(pi)/2 x``, with that gradient; -inf where ``low``, +inf where ``high``,
    both with the slope +inf (PyTorch's ``exp(erfinv(x)^2)`` there), NaN elsewhere
    (outside the domain, NaN)."""
    out = ops.where(ops.eq(x, 0), ops.mul(x, scale * _SQRT_PI_2), y)
    ends = ops.logical_or(low, high)
    out = ops.where(ends, ops.add(_infinity(low, x), _steep(x, ends)), out)
    outside = ops.logical_not(ops.logical_or(inside, ends))      # (NaN included)
    return _nan_slope(ops.where(outside, math.nan, out), x, outside)


def _lgamma_nonneg(a: Tensor) -> Tensor:
    """``lgamma(a)`` for ``a >= 0`` (-0 and +inf included).

    Below 10: ``n = round(a)``, ``d = a - n`` (exact, in [-0.5, 0.5]) and ``lgamma(a) =
    lgamma(2 + d) + log((a - 1)(a - 2)...(a - n + 2))`` for ``n >= 3``, ``- log a`` for
    ``n = 1``, ``- log a - log1p(a)`` for ``n = 0``, with ``lgamma(2 + d) = d P(d)``.
    From 10: Stirling's series, ``(a - 1/2)(log a - 1) - 1/2 + log(2 pi)/2 + sum
    B_2k / (2k (2k - 1) a^(2k-1))``."""
    small = ops.lt(a, _ASYMPTOTIC_FROM)
    t = ops.where(small, a, 2.0)
    n = _round(t)
    d = ops.sub(t, n)
    core = ops.mul(d, _chebyshev(ops.mul(d, 2.0), _LGAMMA_2))
    factors = None
    for k in range(1, int(_ASYMPTOTIC_FROM) - 1):
        f = ops.where(ops.ge(n, k + 2), ops.sub(t, float(k)), 1.0)
        factors = f if factors is None else ops.mul(factors, f)
    below = ops.log(ops.where(ops.lt(n, 2), t, 1.0))
    below = ops.add(below, ops.where(ops.lt(n, 1), ops.log1p(t), 0.0))
    small_value = ops.add(core, ops.sub(ops.log(factors), below))

    big = ops.where(small, _ASYMPTOTIC_FROM, a)
    r = ops.reciprocal(big)
    series = ops.mul(r, _horner(ops.mul(r, r), tuple(
        b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI[:8], 1))))
    stirling = ops.add(ops.mul(ops.sub(big, 0.5), ops.sub(ops.log(big), 1.0)),
                       0.5 * math.log(2 * math.pi) - 0.5)
    return ops.where(small, small_value, ops.add(stirling, series))


def _reduced(x: Tensor) -> Tensor:
    """``x - round(x)``, in [-1/2, 1/2] and exact: ``sin(pi r)`` and ``cot(pi r)`` are
    ``+-sin(pi x)`` and ``cot(pi x)`` without the error of ``pi x`` for large ``x``."""
    return ops.sub(x, _round(x))


def _cot_pi(r: Tensor) -> Tensor:
    """``cot(pi r)`` for ``r`` in [-1/2, 1/2] (not 0), as ``sin(pi (1/2 - |r|)) / sin(pi
    r)``: exactly 0 at +-1/2 and accurate near it, where ``cos(pi r)`` would leave the
    rounding of ``pi / 2`` (6e-17) behind."""
    return ops.div(ops.sin(ops.mul(ops.sub(0.5, ops.abs(r)), math.pi)),
                   ops.sin(ops.mul(r, math.pi)))


def _negative_zero(w: Tensor) -> Tensor:
    """Where ``w`` is -0.0 (``1 / w`` is -inf)."""
    w = w.detach()
    return ops.logical_and(ops.eq(w, 0), ops.lt(ops.div(1.0, w), 0))


def _lgamma64(w: Tensor) -> Tensor:
    """``lgamma(w)``: reflection ``log(pi / |sin(pi w)|) - lgamma(1 - w)`` below 0,
    +inf at the poles (0, the negative integers) and at -inf, as PyTorch. At +-0 the
    slope is PyTorch's ``digamma(+-0)``, -inf and +inf (the formula sees 1 there: its
    pieces' infinite slopes gave NaN), and at +inf ``digamma(inf)``, +inf (Stirling's
    ``log a + (a - 1/2) / a - 1`` is inf / inf there); at the negative integers NaN, as
    PyTorch's."""
    zero = ops.eq(w, 0)
    top = ops.eq(w, math.inf)
    edge = ops.logical_or(zero, top)
    pole = ops.add(ops.full_const(math.inf, w.shape, w.dtype),
                   _steep(w, zero, ops.where(_negative_zero(w), 1.0, -1.0)))
    pole = ops.where(top, ops.mul(w, w), pole)       # inf, with the slope 2w = inf
    return ops.where(edge, pole, _lgamma_regular(ops.where(edge, 1.0, w)))


def _lgamma_regular(w: Tensor) -> Tensor:
    """``lgamma(w)`` away from 0 (``_lgamma64``)."""
    neg = ops.lt(w, 0)
    a = ops.where(neg, ops.sub(1.0, w), w)
    wn = ops.where(ops.logical_and(neg, _finite(w)), w, -0.5)
    sin = ops.abs(ops.sin(ops.mul(_reduced(wn), math.pi)))
    reflected = ops.sub(ops.sub(math.log(math.pi), ops.log(sin)), _lgamma_nonneg(a))
    out = ops.where(neg, reflected, _lgamma_nonneg(a))
    return ops.where(ops.eq(w, -math.inf), math.inf, out)


def _digamma_nonneg(a: Tensor) -> Tensor:
    """``digamma(a)`` for ``a >= 0`` (+inf at -0, -inf at +0, as PyTorch).

    Below 10: ``v = 1 + frac(a)`` in [1, 2) (``a + 1`` below 1), ``digamma(v) = (v -
    x0) Q(v)``, and the recurrence ``digamma(a) = digamma(v) + sum 1/(a - k)`` over
    ``k = 1 .. floor(a) - 1`` (``- 1/a`` below 1). From 10: ``log a - 1/(2a) - sum
    B_2k / (2k a^2k)``."""
    small = ops.lt(a, _ASYMPTOTIC_FROM)
    t = ops.where(small, a, 1.5)
    below_one = ops.lt(t, 1.0)
    fl = _floor(t)
    v = ops.where(below_one, ops.add(t, 1.0), ops.add(ops.sub(t, fl), 1.0))
    centered = ops.sub(ops.sub(v, _DIGAMMA_ROOT[0]), _DIGAMMA_ROOT[1])
    value = ops.mul(centered, _chebyshev(ops.sub(ops.mul(v, 2.0), 3.0), _DIGAMMA_1_2))
    value = ops.sub(value, ops.div(1.0, ops.where(below_one, t, math.inf)))
    for k in range(1, int(_ASYMPTOTIC_FROM) - 1):
        take = ops.ge(fl, k + 1)
        value = ops.add(value, ops.div(ops.where(take, 1.0, 0.0),
                                       ops.where(take, ops.sub(t, float(k)), 1.0)))

    big = ops.where(small, _ASYMPTOTIC_FROM, a)
    r = ops.reciprocal(big)
    r2 = ops.mul(r, r)
    series = ops.mul(r2, _horner(r2, tuple(b / (2 * k) for k, b in
                                           enumerate(_BERNOULLI[:8], 1))))
    asymptotic = ops.sub(ops.sub(ops.log(big), ops.mul(r, 0.5)), series)
    return ops.where(small, value, asymptotic)


def _digamma64(w: Tensor) -> Tensor:
    """``digamma(w)``: reflection ``digamma(1 - w) - pi cot(pi w)`` below 0; -inf at
    +0, +inf at -0, NaN at the negative integers and -inf, as PyTorch. At the poles
    (0 and the negative integers) the slope is +inf, ``polygamma(1, x)``'s value there;
    the formula sees 1.5 there (its own pieces' infinite slopes gave NaN)."""
    neg = ops.lt(w, 0)
    r = _reduced(ops.where(ops.logical_and(neg, _finite(w)), w, -0.5))
    pole = ops.logical_or(ops.eq(w, 0), ops.logical_and(neg, ops.eq(r, 0)))
    ws = ops.where(pole, 1.5, w)
    neg = ops.lt(ws, 0)
    a = ops.where(neg, ops.sub(1.0, ws), ws)
    r = _reduced(ops.where(ops.logical_and(neg, _finite(ws)), ws, -0.5))
    # one evaluation feeds both sides: a second one under the reflection's select got a
    # zero gradient there, which its reciprocal's infinite slope at a subnormal x made NaN
    positive = _digamma_nonneg(a)
    reflected = ops.sub(positive, ops.mul(_cot_pi(r), math.pi))
    out = ops.where(neg, reflected, positive)
    out = ops.where(ops.eq(ws, -math.inf), math.nan, out)
    at_pole = ops.where(ops.eq(w, 0), _infinity(ops.logical_not(_negative_zero(w)), w),
                        math.nan)
    return ops.where(pole, ops.add(at_pole, _steep(w, pole)), out)


def _cot_derivative(n: int) -> list[int]:
    """Coefficients (lowest first) of ``D_n(c)`` with ``d^n/dz^n cot z = D_n(cot z)``:
    ``D_0 = c``, ``D_{k+1} = -(1 + c^2) D_k'``."""
    poly = [0, 1]
    for _ in range(n):
        deriv = [k * a for k, a in enumerate(poly)][1:]
        poly = [0] * (len(deriv) + 2)
        for k, a in enumerate(deriv):
            poly[k] -= a
            poly[k + 2] -= a
    return poly


def _polygamma_pos(n: int, a: Tensor) -> Tensor:
    """``(-1)^(n+1) n! zeta(n + 1, a)`` for ``a > 0`` (``n >= 1``; +inf excluded).

    With ``s = n + 1`` and ``c = n!^(1/s)`` every term is a power ``(c / u)^s``, so
    nothing overflows before the result does (``n!`` alone would from ``n = 171``):
    the terms ``u = a + k`` below ``N``, then at ``u >= N`` the Euler-Maclaurin tail
    ``(c/u)^s (u/n + 1/2 + sum B_2j / (2j)! s(s+1)...(s+2j-2) / u^(2j-1))``. ``N``
    grows with ``n`` so that the tail's nine terms reach 1e-17."""
    s = n + 1
    c = math.exp(math.lgamma(s) / s)
    big_n = float(max(10, 2 * s))
    total = None
    u = a
    for _ in range(int(big_n)):
        take = ops.lt(u, big_n)
        term = ops.where(take, ops.pow(ops.div(c, ops.where(take, u, 1.0)), float(s)), 0.0)
        total = term if total is None else ops.add(total, term)
        u = ops.where(take, ops.add(u, 1.0), u)
    r = ops.reciprocal(u)
    coeffs, rising = [], float(s)
    for j, b in enumerate(_BERNOULLI, 1):
        coeffs.append(b / math.factorial(2 * j) * rising)
        rising *= (s + 2 * j - 1) * (s + 2 * j)
    r2 = ops.mul(r, r)
    # (c/u)^s (u/n + 1/2 + r H) as (c/u)^n (c/n + (c/u)(1/2 + r H)): (c/u)^s alone
    # underflowed where the result does not (polygamma(1, 1e300) is 1e-300)
    rc = ops.mul(r, c)
    tail = ops.add(c / n, ops.mul(rc, ops.add(0.5, ops.mul(r, _horner(r2, tuple(coeffs))))))
    value = ops.add(total, ops.mul(ops.pow(rc, float(n)), tail))
    return value if n % 2 else ops.neg(value)


def _polygamma64(n: int, w: Tensor) -> Tensor:
    """``polygamma(n, w)`` for ``n >= 1``: reflection ``(-1)^n psi_n(1 - w) - pi^(n+1)
    D_n(cot(pi w))`` below 0; ``(-1)^(n+1) inf`` at the poles (0, the negative integers)
    and at -inf, and ``(-1)^(n+1) 0`` at +inf, as SciPy gives (and PyTorch for n >= 2)."""
    sign = 1.0 if n % 2 else -1.0
    neg = ops.lt(w, 0)
    finite = _finite(w)
    a = ops.where(neg, ops.sub(1.0, w), w)
    a = ops.where(ops.logical_and(ops.gt(a, 0), finite), a, 1.0)
    r = _reduced(ops.where(ops.logical_and(neg, finite), w, -0.5))
    pole = ops.logical_or(ops.eq(w, 0), ops.logical_and(neg, ops.eq(r, 0)))
    cot = _cot_pi(ops.where(pole, 0.5, r))
    poly = _cot_derivative(n)
    cot_term = ops.mul(_horner(cot, tuple(float(p) for p in poly)), math.pi ** (n + 1))
    pos = _polygamma_pos(n, a)
    reflected = ops.sub(pos if n % 2 == 0 else ops.neg(pos), cot_term)
    out = ops.where(neg, reflected, pos)
    out = ops.where(ops.eq(w, -math.inf), sign * math.inf, out)
    # at a pole the slope is polygamma(n + 1)'s infinity there, of the other sign
    out = ops.where(pole, ops.add(sign * math.inf, _steep(w, pole, -sign)), out)
    out = ops.where(ops.eq(w, math.inf), sign * 0.0, out)
    nan = ops.isnan(w)
    return _nan_slope(ops.where(nan, w, out), w, nan)         # NaN in, NaN gradient


def _i0_parts(a: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """For ``a = |x|``: ``(near, series, root, is_near)`` with ``i0 = near`` (the power
    series ``sum (a^2/4)^k / k!^2``) up to 25 and ``i0 = exp(a) series / root`` above it
    (the asymptotic series ``sum ((2k-1)!!)^2 / (k! 8^k a^k)`` over ``sqrt(2 pi a)``),
    each evaluated on the operands it is meant for."""
    near_ok = ops.le(a, _I0_SERIES_TO)
    an = ops.where(near_ok, a, 0.0)
    coeffs = tuple(1.0 / math.factorial(k) ** 2 for k in range(_I0_SERIES_TERMS))
    near = _horner(ops.mul(ops.mul(an, an), 0.25), coeffs)
    af = ops.where(near_ok, _I0_SERIES_TO, a)
    terms, term = [1.0], 1.0
    for k in range(1, _I0_ASYMPTOTIC_TERMS):
        term *= (2 * k - 1) ** 2 / (8 * k)
        terms.append(term)
    return (near, _horner(ops.reciprocal(af), tuple(terms)),
            ops.sqrt(ops.mul(af, 2 * math.pi)), near_ok)


def _i0_64(w: Tensor) -> Tensor:
    """``i0(w)``; ``exp(a)`` as ``exp(a/2)^2`` around the series, so values up to
    float64's largest are finite and keep their last digits. The gradient from 700 is
    ``G = exp(a + log(series) - log(root)) / 2``'s, doubled (``middle.detach() + 2 (G -
    G.detach())``): the slope ``i1`` is as large as the value there, and the product's
    partial products ``g exp(a)`` overflow from 709.8 (the gradient was -inf at 710,
    where ``i1`` is 3e306); G's are no larger than the value. +inf at +-inf with the
    slope +-inf (``a^4`` there), and past the last finite value (713.99) +inf with
    ``_steep``'s. ``a`` is ``_magnitude(w)``, whose slope at 0 is 1, so the second
    derivative there is ``i1'(0) = 1/2`` (``abs``'s 0 gave 0)."""
    a = _magnitude(w)
    top = ops.eq(a, math.inf)
    over = ops.logical_and(ops.gt(a, _I0_LAST_FINITE), ops.logical_not(top))
    edge = ops.logical_or(top, over)
    af = ops.where(edge, 0.0, a)
    near, series, root, near_ok = _i0_parts(af)
    huge = ops.gt(af, _I0_LOG_FROM)
    half = ops.exp(ops.mul(ops.where(near_ok, 0.0, af), 0.5))
    middle = ops.mul(ops.mul(half, ops.div(series, root)), half)
    log_half = ops.sub(ops.add(ops.where(huge, af, 0.0), ops.log(series)),
                       ops.add(ops.log(root), _LN2))
    g = ops.exp(log_half)
    big = ops.add(middle.detach(), ops.mul(ops.sub(g, g.detach()), 2.0))
    out = ops.where(near_ok, near, ops.where(huge, big, middle))
    a_top = ops.where(top, a, 0.0)
    square = ops.mul(a_top, a_top)
    overflow = ops.add(_steep(ops.where(top, 0.0, a), over), math.inf)
    return ops.where(top, ops.mul(square, square), ops.where(over, overflow, out))


def _i0e64(w: Tensor) -> Tensor:
    """``exp(-|w|) i0(w)``."""
    a = ops.abs(w)
    near, series, root, near_ok = _i0_parts(a)
    return ops.where(near_ok, ops.mul(near, ops.exp(ops.neg(ops.where(near_ok, a, 0.0)))),
                     ops.div(series, root))


# ---------------------------------------------------------------- public functions

def erfc(input: Tensor) -> Tensor:
    """Complementary error function ``1 - erf(x)`` (``torch.erfc``), to the last digit
    of float32 deep into the tail (``erfc(10)`` is 2e-45, not 0)."""
    return _in_float64("erfc", input, _erfc64)


def erfcx(input: Tensor) -> Tensor:
    """Scaled complementary error function ``exp(x^2) erfc(x)``
    (``torch.special.erfcx``): finite for every ``x >= 0``, ~``1/(x sqrt(pi))`` for
    large ``input``; ``exp(x^2)(1 - erf(x))`` below 0, +inf below -26.6287 with the slope
    ``2x erfcx(x) - 2/sqrt(pi)``, -inf, there (as PyTorch)."""
    def evaluate(w: Tensor) -> Tensor:
        neg = ops.lt(w, 0)
        over = ops.lt(w, _ERFCX_LAST_FINITE)
        # where the slope overflows the formula's value is kept and its slope is
        # _steep's -inf: the formula's own slope there is inf - inf, its pieces'
        # (exp(h^2) exp(l (w + h)) with l and w + h of opposite signs)
        steep_at = ops.lt(w, _ERFCX_SLOPE_LAST_FINITE)
        at_inf = ops.eq(w, -math.inf)
        wd = ops.where(steep_at, w.detach(), w)
        wn = ops.where(ops.logical_and(neg, ops.logical_not(over)), wd, 0.0)
        negative = ops.mul(_exp_square(wn, 1.0), ops.sub(1.0, ops.erf(wn)))
        negative = ops.where(over, math.inf, negative)
        steep = _steep(ops.where(at_inf, -30.0, w),
                       ops.logical_and(steep_at, ops.logical_not(at_inf)), -1.0)
        # at -inf: w^4, +inf with the slope 4 w^3 = -inf
        w_inf = ops.where(at_inf, w, 0.0)
        square = ops.mul(w_inf, w_inf)
        negative = ops.where(at_inf, ops.mul(square, square), ops.add(negative, steep))
        return ops.where(neg, negative, _erfcx_nonneg(ops.where(neg, 0.0, w)))
    return _in_float64("erfcx", input, evaluate)


def erfinv(input: Tensor) -> Tensor:
    """Inverse error function (``torch.erfinv``): +-inf at +-1, NaN outside [-1, 1];
    within an ulp of the float64 value, near +-1 too."""
    def evaluate(w: Tensor) -> Tensor:
        a = ops.abs(w)
        inside = ops.lt(a, 1.0)
        ws = ops.where(inside, w, 0.5)
        y = _erfinv64(ws, ops.sub(1.0, ops.where(inside, a, 0.5)))
        return _erfinv_finish(w, y, 1.0, ops.eq(w, -1.0), ops.eq(w, 1.0), inside)
    return _in_float64("erfinv", input, evaluate)


def _ndtr64(w: Tensor) -> Tensor:
    """``ndtr(w)``: ``erfc(-w / sqrt(2)) / 2``, and ``exp(-w^2/2) erfcx(-w / sqrt(2)) /
    2`` below -1 (so the rounding of ``w / sqrt(2)`` is not squared into the tail)."""
    low = ops.lt(w, -1.0)
    wl = ops.clamp(w, -40.0, -1.0)
    tail = ops.mul(ops.mul(_exp_square(wl, -0.5), _erfcx_nonneg(
        ops.mul(wl, -1 / math.sqrt(2)))), 0.5)
    body = ops.mul(_erfc64(ops.mul(ops.where(low, 0.0, w), -1 / math.sqrt(2))), 0.5)
    return ops.where(low, tail, body)


def ndtr(input: Tensor) -> Tensor:
    """Standard normal CDF ``(1 + erf(x / sqrt(2))) / 2`` (``torch.special.ndtr``), to
    full relative precision in the lower tail."""
    return _in_float64("ndtr", input, _ndtr64)


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))`` (``torch.special.log_ndtr``), finite and accurate for very
    negative ``input``: ``-x^2/2 + log(erfcx(-x/sqrt(2)) / 2)`` below -1, ``log(ndtr(x))``
    up to 0 and ``log1p(-ndtr(-x))`` above."""
    def evaluate(w: Tensor) -> Tensor:
        low, high = ops.lt(w, -1.0), ops.gt(w, 0.0)
        wl = ops.where(low, w, -1.0)
        tail = ops.add(ops.mul(ops.mul(wl, wl), -0.5),
                       ops.log(ops.mul(_erfcx_nonneg(ops.mul(wl, -1 / math.sqrt(2))), 0.5)))
        middle = ops.log(_ndtr64(ops.where(ops.logical_or(low, high), 0.0, w)))
        upper = ops.log1p(ops.neg(_ndtr64(ops.neg(ops.where(high, w, 0.0)))))
        return ops.where(low, tail, ops.where(high, upper, middle))
    return _in_float64("log_ndtr", input, evaluate)


def ndtri(input: Tensor) -> Tensor:
    """Inverse of ``ndtr`` (``torch.special.ndtri``): ``sqrt(2) erfinv(2p - 1)`` with
    ``1 - |2p - 1|`` taken as ``2 min(p, 1 - p)`` (exact), so tiny ``input`` keep their
    digits; -inf at 0, +inf at 1, NaN outside [0, 1]."""
    def evaluate(w: Tensor) -> Tensor:
        inside = ops.logical_and(ops.gt(w, 0.0), ops.lt(w, 1.0))
        ws = ops.where(inside, w, 0.25)
        c = ops.mul(ops.minimum(ws, ops.sub(1.0, ws)), 2.0)
        x = ops.sub(ops.mul(ws, 2.0), 1.0)
        y = ops.mul(_erfinv64(x, c), math.sqrt(2.0))
        return _erfinv_finish(ops.sub(ops.mul(w, 2.0), 1.0), y, math.sqrt(2.0),
                              ops.eq(w, 0.0), ops.eq(w, 1.0), inside)
    return _in_float64("ndtri", input, evaluate)


def lgamma(input: Tensor) -> Tensor:
    """``log|Gamma(x)|`` (``torch.lgamma``): exactly 0 at 1 and 2, +inf at the poles
    (0 and the negative integers) and at +-inf."""
    return _in_float64("lgamma", input, _lgamma64)


def digamma(input: Tensor) -> Tensor:
    """``d/dx lgamma(x)`` (``torch.digamma``): -inf at +0, +inf at -0, NaN at the
    negative integers, as PyTorch."""
    return _in_float64("digamma", input, _digamma64)


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of ``digamma`` (``torch.polygamma(n, x)``); ``n = 0`` is
    ``digamma``."""
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int):
        raise TypeError(f"polygamma: n must be an int, got {n!r}")
    if n < 0:
        raise ValueError(f"polygamma: n must be non-negative, got {n}")
    if n == 0:
        return digamma(input)
    return _in_float64("polygamma", input, lambda w: _polygamma64(n, w))


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """``x.polygamma(n)``: the tensor comes first, unlike ``polygamma(n, x)``."""
    return polygamma(n, self)


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """Multivariate log-gamma ``sum_{i<p} lgamma(x - i/2) + p(p-1)/4 log(pi)``
    (``torch.mvlgamma``). Defined for ``x > (p - 1)/2``; like PyTorch, other values are
    not checked and give the same sum (inf where a term is at a pole)."""
    if isinstance(p, builtins.bool) or not isinstance(p, builtins.int):
        raise TypeError(f"mvlgamma: p must be an int, got {p!r}")
    if p < 1:
        raise ValueError(f"mvlgamma: p has to be greater than or equal to 1, got {p}")

    def evaluate(w: Tensor) -> Tensor:
        total = ops.full_const(p * (p - 1) / 4 * math.log(math.pi), w.shape, w.dtype)
        for i in range(p):
            total = ops.add(total, _lgamma64(ops.sub(w, i / 2)))
        return total
    return _in_float64("mvlgamma", input, evaluate)


def i0(input: Tensor) -> Tensor:
    """Modified Bessel function of the first kind, order 0 (``torch.i0``); +inf at
    +-inf (PyTorch's CPU kernel gives NaN there)."""
    return _in_float64("i0", input, _i0_64)


def i0e(input: Tensor) -> Tensor:
    """Exponentially scaled ``i0``: ``exp(-|x|) i0(x)`` (``torch.special.i0e``)."""
    return _in_float64("i0e", input, _i0e64)


def _float_binary(op: str, a: Any, b: Any) -> tuple[Tensor, Tensor, dt.DType]:
    """``a``, ``b`` broadcast in float64, and their result dtype (the promoted float
    dtype, float32 for integers)."""
    common = ops.promote(op, a, b)
    common = common if common.is_floating_point else dt.float32
    x, y = ops.operands(op, a, b, dtype=dt.float64)
    return x, y, common


def logaddexp2(input: Any, other: Any) -> Tensor:
    """``log2(2^a + 2^b)`` without overflow (``torch.logaddexp2``), in float64
    (``logaddexp_shifted``)."""
    x, y, common = _float_binary("logaddexp2", input, other)
    return ops.cast(logaddexp_shifted(x, y, _LN2), common)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``x * log1p(y)``, 0 where ``x == 0`` unless ``other`` is NaN
    (``torch.special.xlog1py``); at ``x == 0`` the gradient for ``input`` is ``log1p(y)``
    (0 for ``y <= -1``) and for ``other`` the rule's ``x / (1 + y)`` (NaN at ``y = -1``), as
    PyTorch 2 (``_x_log``)."""
    return _x_log("xlog1py", input, other, ops.log1p, -1.0, dt.float32)


def entr(input: Tensor) -> Tensor:
    """Elementwise entropy ``-x log x`` (``torch.special.entr``): 0 at 0, -inf below.
    The gradient ``-(log x + 1)`` is PyTorch's at the edges too: +inf at 0, -inf at
    +inf, NaN below 0 and at NaN."""
    input = ops._as_float("entr", input)
    top = ops.eq(input, math.inf)
    pos = ops.logical_and(ops.gt(input, 0), ops.logical_not(top))
    xs = ops.where(pos, input, 1.0)
    out = ops.where(pos, ops.neg(ops.mul(xs, ops.log(xs))), _steep(input, ops.eq(input, 0)))
    bad = ops.logical_or(ops.lt(input, 0), ops.isnan(input))
    out = ops.where(top, ops.neg(ops.mul(input, input)), out)   # -inf, slope -2x = -inf
    out = ops.where(ops.lt(input, 0), -math.inf, ops.where(ops.isnan(input), input, out))
    return _nan_slope(out, input, bad)


def signbit(input: Tensor) -> Tensor:
    """Whether the sign bit is set (``torch.signbit``): True below 0 and at -0.0 (seen
    as ``1 / x = -inf``); False for every NaN (see the module docstring)."""
    ops._check_tensor("signbit", input)
    if input.dtype == dt.bool_:
        return ops.full_const(False, input.shape, dt.bool_)
    if not input.dtype.is_floating_point:
        return ops.lt(input, 0)
    negative_zero = ops.logical_and(ops.eq(input, 0), ops.lt(ops.div(1.0, input), 0))
    return ops.logical_or(ops.lt(input, 0), negative_zero)


def copysign(input: Any, other: Any) -> Tensor:
    """``|a|`` with the sign of ``other`` (``torch.copysign``; -0.0 counts as negative).
    Integers give float32. The gradient is 0 for ``other``, and for ``input`` PyTorch's
    ``result / a`` with 0 at ``a == 0``: +-1, and NaN at an infinite or NaN ``input``
    (``_nan_slope``; ``|a|``'s rule alone gave +-1 and 0 there)."""
    common = ops.promote("copysign", input, other)
    x, y = ops.operands("copysign", input, other,
                        dtype=common if common.is_floating_point else dt.float32)
    mag = ops.abs(x)
    out = ops.where(signbit(y), ops.neg(mag), mag)
    out = _nan_slope(out, x, ops.logical_not(ops.lt(mag, math.inf)))
    return ops.zero_gradient_to(out, y)


_Frexp = namedtuple("frexp", ["mantissa", "exponent"])


def _frexp64(w: Tensor) -> tuple[Tensor, Tensor]:
    """``(m, e)`` with ``w = m 2^e``, ``0.5 <= |m| < 1``, both float64 (``(w, 0)`` at 0,
    inf and NaN). ``e`` starts as ``floor(log2 |w|) + 1`` (off by at most one near
    powers of two) and is corrected by the exact scaled value; subnormals are first
    scaled by ``2^64``."""
    a = ops.abs(w)
    regular = ops.logical_and(ops.gt(a, 0), ops.lt(a, math.inf))
    sub = ops.lt(a, 2.0 ** -1022)
    b = ops.where(regular, ops.mul(a, ops.where(sub, 2.0 ** 64, 1.0)), 1.0)
    e = ops.add(_floor(ops.mul(ops.log(b), 1.0 / _LN2)), 1.0).detach()
    m = ops.mul(b, ops.pow(2.0, ops.neg(e)))
    e = ops.add(e, ops.sub(ops.cast(ops.ge(m, 1.0), dt.float64),
                           ops.cast(ops.lt(m, 0.5), dt.float64)))
    m = ops.mul(b, ops.pow(2.0, ops.neg(e)))
    mantissa = ops.where(regular, ops.where(ops.lt(w, 0), ops.neg(m), m), w)
    exponent = ops.where(regular, ops.sub(e, ops.where(sub, 64.0, 0.0)), 0.0)
    return mantissa, exponent


def frexp(input: Tensor) -> tuple[Tensor, Tensor]:
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and ``0.5 <=
    |mantissa| < 1`` (``torch.frexp``; exponent int32); ``(x, 0)`` at 0, +-inf and NaN.
    Exact, subnormals included."""
    ops._check_tensor("frexp", input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"frexp: only floating-point dtypes are supported, got "
                         f"{input.dtype.name}")
    m, e = _frexp64(ops.cast(input, dt.float64))
    return _Frexp(ops.cast(m, input.dtype), ops.cast(e, dt.int32))


def ldexp(input: Any, other: Any) -> Tensor:
    """``x * 2**other`` (``torch.ldexp``), exact (one rounding, at the end) whatever the
    exponents: ``input``'s mantissa times three powers of two, each within float64's range,
    so no intermediate overflows or underflows before the result does."""
    w, e, common = _float_binary("ldexp", input, other)
    m, k = _frexp64(w)
    n = ops.clamp(ops.add(e, k), -2999.0, 2999.0)
    n1 = ops.clamp(n, -1000.0, 1000.0)
    rest = ops.sub(n, n1)
    n2 = ops.clamp(rest, -1000.0, 1000.0)
    n3 = ops.sub(rest, n2)
    out = m
    for part in (n1, n2, n3):
        out = ops.mul(out, ops.pow(2.0, part))
    return ops.cast(out, common)


def nextafter(input: Any, other: Any) -> Tensor:
    """The next value of ``input``'s float dtype after ``input`` toward ``other``
    (``torch.nextafter``); ``other`` where they are equal, NaN where either is NaN.
    Exact: ``input`` plus or minus its spacing (from ``frexp``; half of it below a power
    of two going toward zero, never less than the smallest subnormal). The gradient is
    PyTorch's: 1 for ``input``, 0 for ``other``."""
    common = ops.promote("nextafter", input, other)
    if not common.is_floating_point:
        raise DTypeError(f"nextafter: expected floating point operands, got {common.name}")
    x, y = ops.operands("nextafter", input, other, dtype=dt.float64)
    x, y = x.detach(), y.detach()
    info = ml_dtypes.finfo(common.np)
    digits, tiny = int(info.nmant) + 1, float(info.smallest_subnormal)
    up = ops.lt(x, y)
    _, k = _frexp64(x)
    spacing = ops.pow(2.0, ops.sub(k, float(digits)))
    toward_zero = ops.ne(up, ops.gt(x, 0))
    at_power = ops.eq(ops.abs(x), ops.pow(2.0, ops.sub(k, 1.0)))
    spacing = ops.where(ops.logical_and(toward_zero, at_power), ops.mul(spacing, 0.5), spacing)
    spacing = ops.maximum(spacing, tiny)
    out = ops.add(x, ops.where(up, spacing, ops.neg(spacing)))
    out = ops.where(ops.eq(out, 0), ops.mul(x, 0.0), out)             # keeps -0 from -tiny
    toward = ops.where(up, 1.0, -1.0)
    out = ops.where(ops.eq(x, 0), ops.mul(toward, ops.full_const(tiny, x.shape, dt.float64)),
                    out)
    top = ops.full_const(float(info.max), x.shape, dt.float64)     # (toward a finite y)
    out = ops.where(ops.isinf(x), ops.mul(ops.neg(toward), top), out)
    out = ops.where(ops.eq(x, y), y, out)
    out = ops.cast(ops.where(ops.logical_or(ops.isnan(x), ops.isnan(y)), math.nan, out),
                   common)
    if grad_mode.STATE.enabled and isinstance(input, Tensor) and input.requires_grad:
        # the value computed above, with an identity gradient to ``a`` (broadcast and
        # cast as the value was)
        through = ops.cast(ops.broadcast_to(input, out.shape), out.dtype)
        out = Tensor._wrap(out.node, grad_fn=tape.alias_fn(through._grad_edge(), out.node))
    return ops.zero_gradient_to(out, other)


Tensor.polygamma = _polygamma_method

TENSOR_METHODS = (
    "erfc", "erfinv", "lgamma", "digamma", "mvlgamma", "i0", "logaddexp2", "copysign",
    "signbit", "frexp", "ldexp", "nextafter",
)

__all__ = [
    "erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "logaddexp2",
    "copysign", "signbit", "frexp", "ldexp", "nextafter",
]
