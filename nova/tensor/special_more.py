"""The special functions of ``torch.special`` that have no top-level name: the Bessel
functions ``i1``/``i1e``, ``bessel_j0``/``j1``/``y0``/``y1``, ``modified_bessel_i0``/
``i1``/``k0``/``k1``, ``scaled_modified_bessel_k0``/``k1``, ``spherical_bessel_j0``, the
Airy function ``airy_ai`` and the Hurwitz zeta function ``zeta(x, q)`` (``nova.special``;
the orthogonal polynomials are in ``nova.tensor.special_poly``).

As in ``nova.tensor.special``, each is a composite of the dialect's primitives,
evaluated in float64 and rounded once to the argument's float dtype (integers give
float32), so it compiles on every engine:

- ``i1`` is its power series ``(x/2) sum (x^2/4)^k / (k! (k+1)!)`` up to 25 and the
  asymptotic series ``exp(a) / sqrt(2 pi a) sum c_k / a^k`` above (``exp(a)`` in two
  halves, as ``i0``), so float64 values are finite up to the largest double.
- ``j0``, ``j1``, ``y0``, ``y1``, ``k0``, ``k1`` (and the scaled ``k``) are Cephes'
  rational and Chebyshev approximations (Stephen L. Moshier's Cephes Math Library,
  3-clause BSD, the coefficients PyTorch's and SciPy's kernels use): a rational
  function of ``x^2`` up to 5 (``j0``'s and ``j1``'s with their first two zeros as
  exact factors; ``y`` adds ``2/pi log(x) j``), Hankel's asymptotic form ``sqrt(2 /
  (pi x)) (P cos(x - phase) - (5/x) Q sin(x - phase))`` above; ``k`` a Chebyshev series
  in ``x^2 - 2`` (with ``- log(x/2) i``) up to 2, in ``8/x - 2`` times ``exp(-x) /
  sqrt(x)`` above. PyTorch's port evaluates the denominators without Cephes' leading
  coefficient 1 (``p1evl``), which puts its float64 ``bessel_j0``/``j1``/``y0``/``y1``
  up to 7e-7 off near 5; these are Cephes' (SciPy's) values.
- ``airy_ai`` is Cephes' ``airy``: its Maclaurin series for ``|x| < 2.09``, the
  asymptotic forms with rational corrections in ``1/zeta``, ``zeta = 2/3 |x|^(3/2)``,
  outside (PyTorch's port again drops the leading 1 of two denominators).
- ``zeta(x, q) = sum_k (q + k)^-x`` by the Euler-Maclaurin formula, Cephes' choice:
  the terms below ``N = 10`` (or 9 terms from ``q``), then ``(q+N)^(1-x) / (x - 1) +
  (q+N)^-x / 2 + sum_j B_2j / (2j)! x (x+1) ... (x+2j-2) (q+N)^(-x-2j+1)``. A negative
  non-integer ``q`` (defined for integer ``x``) is reduced to positive ones: with ``f``
  in (0, 1] and ``m`` terms from ``q`` to 0, ``zeta(x, q) = (-1)^x (zeta(x, f) -
  zeta(x, 1 - q)) + zeta(x, 1 - f)``.

Values at the edges are the functions' limits: ``bessel_j0``, ``j1``, ``y0``, ``y1`` are
0 at +inf (``j0``/``j1`` at -inf too), ``airy_ai`` 0 at +-inf, ``i1`` +-inf at +-inf,
``i1e`` +-0 (PyTorch's CPU kernels give NaN there, from ``cos(inf)`` or ``inf * 0``;
SciPy's too for the ``j``/``y``). ``y0``/``y1`` are -inf at 0 and NaN below;
``k0``/``k1`` +inf at 0 and NaN below.

**Gradients** are PyTorch's: ``i1`` and ``i1e`` are differentiable (through their
formulas' ops); ``zeta`` in ``q`` (``-x zeta(x + 1, q)``, through its ops) but not in
``x``, where, as PyTorch, the backward raises ``NotImplementedError``; the others have
none in PyTorch (their results do not require grad), nor here (detached results).
"""
from __future__ import annotations

import math
from typing import Any

from nova.core import dtypes as dt
from nova.tensor import grad_mode, movement, ops, tape
from nova.tensor.elementary import _in_float64
from nova.tensor.special import _BERNOULLI, _chebyshev, _floor, _i0_64
from nova.tensor.tensor import Tensor

__all__ = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "i1", "i1e",
    "modified_bessel_i0",
    "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "zeta",
]

_SQ2OPI = math.sqrt(2.0 / math.pi)
_TWOOPI = 2.0 / math.pi
_PIO4 = math.pi / 4
_3PIO4 = 3 * math.pi / 4
_J0_ZEROS_SQ = (5.78318596294678452118E0, 3.04712623436620863991E1)   # j0's first zeros^2
_J1_ZEROS_SQ = (1.46819706421238932572E1, 4.92184563216946036703E1)

_I1_SERIES_TO = 25.0
_I1_SERIES_TERMS = 41
_I1_ASYMPTOTIC_TERMS = 21

# Cephes' coefficients (highest power first, as its polevl/p1evl and chbevl read them)
_BESSEL_J0_PP = (
    0.0007969367292973471, 0.08283523921074408, 1.239533716464143, 5.447250030587687,
    8.74716500199817, 5.303240382353949, 1.0,
)
_BESSEL_J0_PQ = (
    0.0009244088105588637, 0.08562884743544745, 1.2535274390105895, 5.470977403304171,
    8.761908832370695, 5.306052882353947, 1.0,
)
_BESSEL_J0_QP = (
    -0.011366383889846916, -1.2825271867050931, -19.553954425773597, -93.20601521237683,
    -177.68116798048806, -147.07750515495118, -51.41053267665993, -6.050143506007285,
)
_BESSEL_J0_QQ = (
    64.3178256118178, 856.4300259769806, 3882.4018360540163, 7240.467741956525,
    5930.727011873169, 2062.0933166032783, 242.0057402402914,
)
_BESSEL_J0_RP = (
    -4794432209.782018, 1956174919465.5657, -249248344360967.72, 9708622510473064.0,
)
_BESSEL_J0_RQ = (
    499.563147152651, 173785.4016763747, 48440965.83399621, 11185553704.535683,
    2112775201154.892, 310518229857422.56, 3.1812195594320496e+16, 1.7108629408104315e+18,
)
# Y0's asymptotic expansion shares J0's P and Q rational functions (Cephes)
_BESSEL_Y0_PP = _BESSEL_J0_PP
_BESSEL_Y0_PQ = _BESSEL_J0_PQ
_BESSEL_Y0_QP = _BESSEL_J0_QP
_BESSEL_Y0_QQ = _BESSEL_J0_QQ
_BESSEL_J1_PP = (
    0.0007621256162081731, 0.07313970569409176, 1.1271960812968493, 5.112079511468076,
    8.424045901417724, 5.214515986823615, 1.0,
)
_BESSEL_J1_PQ = (
    0.0005713231280725487, 0.06884559087544954, 1.105142326340617, 5.073863861286015,
    8.399855543276042, 5.209828486823619, 1.0,
)
_BESSEL_J1_QP = (
    0.05108625947501766, 4.982138729512334, 75.82382841325453, 366.7796093601508,
    710.8563049989261, 597.4896124006136, 211.68875710057213, 25.207020585802372,
)
_BESSEL_J1_QQ = (
    74.23732770356752, 1056.4488603826283, 4986.410583376536, 9562.318924047562,
    7997.041604473507, 2826.1927851763908, 336.0936078106983,
)
_BESSEL_J1_RP = (
    -899971225.7055594, 452228297998.19403, -72749424522181.83, 3682957328638529.0,
)
_BESSEL_J1_RQ = (
    620.8364781180543, 256987.25675774884, 83514679.14319493, 22151159547.97925,
    4749141220799.914, 784369607876235.9, 8.952223361846274e+16, 5.322786203326801e+18,
)
# Y1's asymptotic expansion shares J1's P and Q rational functions (Cephes)
_BESSEL_Y1_PP = _BESSEL_J1_PP
_BESSEL_Y1_PQ = _BESSEL_J1_PQ
_BESSEL_Y1_QP = _BESSEL_J1_QP
_BESSEL_Y1_QQ = _BESSEL_J1_QQ
_BESSEL_Y0_YP = (
    15592.436785523574, -14663929.59039716, 5435264770.518765, -982136065717.9115,
    87590639439536.7, -3466283033847297.0, 4.4273326857256984e+16, -1.8495080043698668e+16,
)
_BESSEL_Y0_YQ = (
    1041.2835366425984, 626107.330137135, 268919633.39381415, 86400248710.3935,
    20297961275010.555, 3171577528429750.5, 2.5059625617265306e+17,
)
_BESSEL_Y1_YP = (
    1263204747.9017804, -647355876379.1603, 114509511541823.73, -8127702555013251.0,
    2.024394757135949e+17, -7.788771962659501e+17,
)
_BESSEL_Y1_YQ = (
    594.3015923461282, 235564.09294306856, 73481194.44597217, 18760131610.870617,
    3882312774962.3857, 620557727146953.8, 6.871410873553005e+16, 3.9727060811656064e+18,
)
_MODIFIED_BESSEL_K0_A = (
    1.374465435613523e-16, 4.25981614279661e-14, 1.0349695257633842e-11,
    1.904516377220209e-09, 2.5347910790261494e-07, 2.286212103119452e-05,
    0.001264615411446926, 0.0359799365153615, 0.3442898999246285, -0.5353273932339028,
)
_MODIFIED_BESSEL_K0_B = (
    5.300433772686263e-18, -1.6475804301524212e-17, 5.2103915050390274e-17,
    -1.678231096805412e-16, 5.512055978524319e-16, -1.848593377343779e-15,
    6.3400764774050706e-15, -2.2275133269916698e-14, 8.032890775363575e-14,
    -2.9800969231727303e-13, 1.140340588208475e-12, -4.514597883373944e-12,
    1.8559491149547177e-11, -7.957489244477107e-11, 3.577397281400301e-10,
    -1.69753450938906e-09, 8.574034017414225e-09, -4.660489897687948e-08,
    2.766813639445015e-07, -1.8317555227191195e-06, 1.39498137188765e-05,
    -0.00012849549581627802, 0.0015698838857300533, -0.0314481013119645, 2.4403030820659555,
)
_MODIFIED_BESSEL_K1_A = (
    -7.023863479386288e-18, -2.427449850519366e-15, -6.666901694199329e-13,
    -1.4114883926335278e-10, -2.213387630734726e-08, -2.4334061415659684e-06,
    -0.0001730288957513052, -0.006975723859639864, -0.12261118082265715,
    -0.3531559607765449, 1.5253002273389478,
)
_MODIFIED_BESSEL_K1_B = (
    -5.756744483665017e-18, 1.7940508731475592e-17, -5.689462558442859e-17,
    1.838093544366639e-16, -6.057047248373319e-16, 2.038703165624334e-15,
    -7.019837090418314e-15, 2.4771544244813043e-14, -8.976705182324994e-14,
    3.3484196660784293e-13, -1.2891739609510289e-12, 5.13963967348173e-12,
    -2.1299678384275683e-11, 9.218315187605006e-11, -4.1903547593418965e-10,
    2.015049755197033e-09, -1.0345762465678097e-08, 5.7410841254500495e-08,
    -3.5019606030878126e-07, 2.406484947837217e-06, -1.936197974166083e-05,
    0.00019521551847135162, -0.002857816859622779, 0.10392373657681724, 2.7206261904844427,
)
_AIRY_AI_AN = (
    0.346538101525629, 12.007595273964581, 76.27960536152345, 168.08922493463058,
    159.75639135016442, 70.53609068404442, 14.026469116338967, 1.0,
)
_AIRY_AI_AD = (
    0.5675945326387702, 14.75625625848472, 84.51389701414746, 177.31808814540045,
    164.2346928715297, 71.47784008255756, 14.095913560783403, 1.0,
)
_AIRY_AI_AFN = (
    -0.1316963234183318, -0.6264565444319123, -0.6931580360369335, -0.2797799815451191,
    -0.04919001326095003, -0.004062659235948854, -0.0001592764962392621,
    -2.776491081552329e-06, -1.6778769848911465e-08,
)
_AIRY_AI_AFD = (
    13.356042070655324, 32.682503279522464, 26.736704094149957, 9.187074029072596,
    1.4752914677166642, 0.11568717379518804, 0.004402916416152112, 7.547203482874142e-05,
    4.5185009297058035e-07,
)
_AIRY_AI_AGN = (
    0.01973399320916857, 0.39110302961568827, 1.0657989759959559, 0.9391692298166502,
    0.35146565610554764, 0.06338889196289255, 0.005858041130483885, 0.000282851600836737,
    6.98793669997261e-06, 8.117892395543892e-08, 3.415517847659236e-10,
)
_AIRY_AI_AGD = (
    9.30892908077442, 19.835292871831214, 15.564662893286462, 5.476860694229755,
    0.9542936116189619, 0.08645808263523921, 0.004126565238242226, 0.00010125908511650914,
    1.1716673321441352e-06, 4.9183457006293e-09,
)


# ---------------------------------------------------------------- evaluation helpers

def _polevl(t: Tensor, coeffs: tuple[float, ...], monic: bool = False) -> Tensor:
    """``sum coeffs[i] t^(n-i)`` (Horner, highest first); with ``monic`` a leading
    coefficient 1 goes before them (Cephes' ``p1evl``)."""
    out = ops.add(t, coeffs[0]) if monic else ops.add(ops.mul(t, 0.0), coeffs[0])
    for c in coeffs[1:]:
        out = ops.add(ops.mul(out, t), c)
    return out


def _chbevl(t: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    """Cephes' ``chbevl``: ``sum' c_k T_k(t/2)`` for ``t`` in [-2, 2], the coefficients
    highest order first and the constant term halved."""
    return _chebyshev(ops.mul(t, 0.5), (coeffs[-1] * 0.5,) + tuple(reversed(coeffs[:-1])))


def _odd(w: Tensor, magnitude: Tensor) -> Tensor:
    return ops.where(ops.lt(w, 0), ops.neg(magnitude), magnitude)


def _hankel(a: Tensor, pp: tuple, pq: tuple, qp: tuple, qq: tuple, phase: float,
            second: bool) -> Tensor:
    """``sqrt(2/(pi a)) (P cos(a - phase) - (5/a) Q sin(a - phase))`` (``J``), or with
    ``sin``/``cos`` exchanged and ``+`` (``Y``, ``second``), for ``a > 5``; 0 at +inf."""
    w = ops.div(5.0, a)
    z = ops.mul(w, w)
    p = ops.div(_polevl(z, pp), _polevl(z, pq))
    q = ops.div(_polevl(z, qp), _polevl(z, qq, monic=True))
    top = ops.lt(a, math.inf)
    xn = ops.sub(ops.where(top, a, 10.0), phase)
    c, s = ops.cos(xn), ops.sin(xn)
    if second:
        value = ops.add(ops.mul(p, s), ops.mul(ops.mul(w, q), c))
    else:
        value = ops.sub(ops.mul(p, c), ops.mul(ops.mul(w, q), s))
    return ops.where(top, ops.div(ops.mul(value, _SQ2OPI), ops.sqrt(a)), 0.0)


def _split(a: Tensor, at: float, low: float, high: float) -> tuple[Tensor, Tensor, Tensor]:
    """``(a <= at, a there else low, a above else high)``: each branch's formula sees
    only operands it is meant for."""
    near = ops.le(a, at)
    return near, ops.where(near, a, low), ops.where(near, high, a)


# ---------------------------------------------------------------- float64 kernels

def _j0_64(w: Tensor) -> Tensor:
    a = ops.abs(w)
    near, an, af = _split(a, 5.0, 1.0, 10.0)
    z = ops.mul(an, an)
    small = ops.mul(ops.mul(ops.sub(z, _J0_ZEROS_SQ[0]), ops.sub(z, _J0_ZEROS_SQ[1])),
                    ops.div(_polevl(z, _BESSEL_J0_RP), _polevl(z, _BESSEL_J0_RQ, monic=True)))
    far = _hankel(af, _BESSEL_J0_PP, _BESSEL_J0_PQ, _BESSEL_J0_QP, _BESSEL_J0_QQ, _PIO4, False)
    return ops.where(near, small, far)


def _j1_64(w: Tensor) -> Tensor:
    a = ops.abs(w)
    near, an, af = _split(a, 5.0, 1.0, 10.0)
    z = ops.mul(an, an)
    small = ops.mul(ops.mul(ops.div(_polevl(z, _BESSEL_J1_RP),
                                    _polevl(z, _BESSEL_J1_RQ, monic=True)), an),
                    ops.mul(ops.sub(z, _J1_ZEROS_SQ[0]), ops.sub(z, _J1_ZEROS_SQ[1])))
    far = _hankel(af, _BESSEL_J1_PP, _BESSEL_J1_PQ, _BESSEL_J1_QP, _BESSEL_J1_QQ, _3PIO4, False)
    return _odd(w, ops.where(near, small, far))


def _y_edges(w: Tensor, value: Tensor) -> Tensor:
    """-inf at 0, NaN below (and at NaN), as the functions' limits."""
    out = ops.where(ops.eq(w, 0), -math.inf, value)
    return ops.where(ops.lt(w, 0), math.nan, out)


def _y0_64(w: Tensor) -> Tensor:
    near, an, af = _split(w, 5.0, 1.0, 10.0)
    an = ops.where(ops.gt(an, 0), an, 1.0)
    z = ops.mul(an, an)
    small = ops.add(ops.div(_polevl(z, _BESSEL_Y0_YP), _polevl(z, _BESSEL_Y0_YQ, monic=True)),
                    ops.mul(ops.mul(ops.log(an), _TWOOPI), _j0_64(an)))
    far = _hankel(af, _BESSEL_Y0_PP, _BESSEL_Y0_PQ, _BESSEL_Y0_QP, _BESSEL_Y0_QQ, _PIO4, True)
    return _y_edges(w, ops.where(near, small, far))


def _y1_64(w: Tensor) -> Tensor:
    near, an, af = _split(w, 5.0, 1.0, 10.0)
    an = ops.where(ops.gt(an, 0), an, 1.0)
    z = ops.mul(an, an)
    small = ops.mul(an, ops.div(_polevl(z, _BESSEL_Y1_YP),
                                _polevl(z, _BESSEL_Y1_YQ, monic=True)))
    small = ops.add(small, ops.mul(ops.sub(ops.mul(_j1_64(an), ops.log(an)),
                                           ops.reciprocal(an)), _TWOOPI))
    far = _hankel(af, _BESSEL_Y1_PP, _BESSEL_Y1_PQ, _BESSEL_Y1_QP, _BESSEL_Y1_QQ, _3PIO4, True)
    return _y_edges(w, ops.where(near, small, far))


def _i1_parts(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For ``a = |x|``: ``(near, far, is_near)`` with ``i1 = near`` (the power series) up
    to 25 and ``exp(a) far`` above (``far`` the asymptotic series over ``sqrt(2 pi
    a)``), as ``nova.tensor.special._i0_parts``."""
    near_ok = ops.le(a, _I1_SERIES_TO)
    an = ops.where(near_ok, a, 0.0)
    coeffs = tuple(1.0 / (math.factorial(k) * math.factorial(k + 1))
                   for k in range(_I1_SERIES_TERMS))
    near = ops.mul(ops.mul(an, 0.5), _horner(ops.mul(ops.mul(an, an), 0.25), coeffs))
    af = ops.where(near_ok, _I1_SERIES_TO, a)
    terms, term = [1.0], 1.0
    for k in range(1, _I1_ASYMPTOTIC_TERMS):
        term *= ((2 * k - 1) ** 2 - 4) / (8 * k)
        terms.append(term)
    far = ops.div(_horner(ops.reciprocal(af), tuple(terms)), ops.sqrt(ops.mul(af, 2 * math.pi)))
    return near, far, near_ok


def _i1_64(w: Tensor) -> Tensor:
    a = ops.where(ops.lt(w, 0), ops.neg(w), w)
    near, far, near_ok = _i1_parts(a)
    half = ops.exp(ops.mul(ops.where(near_ok, 0.0, a), 0.5))
    out = ops.where(near_ok, near, ops.mul(ops.mul(half, far), half))
    return _odd(w, ops.where(ops.eq(a, math.inf), math.inf, out))


def _i1e_64(w: Tensor) -> Tensor:
    a = ops.where(ops.lt(w, 0), ops.neg(w), w)
    near, far, near_ok = _i1_parts(a)
    out = ops.where(near_ok, ops.mul(near, ops.exp(ops.neg(ops.where(near_ok, a, 0.0)))),
                    ops.where(ops.eq(a, math.inf), 0.0, far))
    return _odd(w, out)


def _k_64(w: Tensor, order: int, scaled: bool) -> Tensor:
    """``k0``/``k1`` (``exp(x)`` times them when ``scaled``): +inf at 0, NaN below."""
    near, an, af = _split(w, 2.0, 1.0, 4.0)
    an = ops.where(ops.gt(an, 0), an, 1.0)
    y = ops.sub(ops.mul(an, an), 2.0)
    log_half = ops.log(ops.mul(an, 0.5))
    if order == 0:
        small = ops.sub(_chbevl(y, _MODIFIED_BESSEL_K0_A), ops.mul(log_half, _i0_64(an)))
        series = _MODIFIED_BESSEL_K0_B
    else:
        small = ops.add(ops.mul(log_half, _i1_64(an)),
                        ops.div(_chbevl(y, _MODIFIED_BESSEL_K1_A), an))
        series = _MODIFIED_BESSEL_K1_B
    if scaled:
        small = ops.mul(small, ops.exp(an))
    top = ops.lt(af, math.inf)
    afs = ops.where(top, af, 4.0)
    far = ops.div(_chbevl(ops.sub(ops.div(8.0, afs), 2.0), series), ops.sqrt(afs))
    if not scaled:
        far = ops.mul(far, ops.exp(ops.neg(afs)))
    far = ops.where(top, far, 0.0)
    out = ops.where(near, small, far)
    out = ops.where(ops.eq(w, 0), math.inf, out)
    return ops.where(ops.lt(w, 0), math.nan, out)


def _spherical_j0_64(w: Tensor) -> Tensor:
    """``sin(x) / x``: its Taylor polynomial below 0.5 (PyTorch's), 0 at +-inf."""
    small = ops.lt(ops.abs(w), 0.5)
    ws = ops.where(small, w, 0.0)
    taylor = _horner(ops.mul(ws, ws), tuple((-1) ** k / math.factorial(2 * k + 1)
                                            for k in range(7)))
    top = ops.lt(ops.abs(w), math.inf)
    wl = ops.where(ops.logical_or(small, ops.logical_not(top)), 1.0, w)
    out = ops.where(small, taylor, ops.div(ops.sin(wl), wl))
    return ops.where(ops.logical_and(ops.logical_not(top), ops.logical_not(ops.isnan(w))),
                     0.0, out)


_AIRY_C1, _AIRY_C2 = 0.355028053887817239260, 0.258819403792806798405   # Ai(0), -Ai'(0)
_AIRY_SERIES_TERMS = 20      # |x|^3 <= 9.2: the 20th terms are below 1e-30


def _airy_ai_64(w: Tensor) -> Tensor:
    """Cephes' ``airy`` for ``Ai``: the Maclaurin series ``c1 f(x) - c2 g(x)`` for ``|x| <
    2.09``, the asymptotic forms ``exp(-zeta) P(1/zeta) / (2 sqrt(pi) x^(1/4))`` above
    and ``(sin(theta) U - cos(theta) V) / (sqrt(pi) |x|^(1/4))`` below (``zeta = 2/3
    |x|^(3/2)``, ``theta = zeta + pi/4``); 0 at +-inf (the limits) and from 103.892 on."""
    sqpii = 1.0 / math.sqrt(math.pi)
    high, low = ops.ge(w, 2.09), ops.lt(w, -2.09)
    mid = ops.logical_not(ops.logical_or(high, low))
    # x >= 2.09
    xh = ops.where(ops.logical_and(high, ops.le(w, 103.892)), w, 4.0)
    zh = ops.mul(ops.mul(xh, ops.sqrt(xh)), 2.0 / 3.0)
    rz = ops.reciprocal(zh)
    big = ops.div(ops.mul(_polevl(rz, _AIRY_AI_AN), sqpii),
                  ops.mul(ops.mul(ops.mul(ops.sqrt(ops.sqrt(xh)), 2.0), _polevl(rz, _AIRY_AI_AD)),
                          ops.exp(zh)))
    big = ops.where(ops.le(w, 103.892), big, 0.0)
    # x < -2.09
    finite = ops.gt(w, -math.inf)
    xl = ops.where(ops.logical_and(low, finite), ops.neg(w), 4.0)
    zl = ops.mul(ops.mul(xl, ops.sqrt(xl)), 2.0 / 3.0)
    z = ops.reciprocal(zl)
    zz = ops.mul(z, z)
    uf = ops.add(ops.div(ops.mul(zz, _polevl(zz, _AIRY_AI_AFN)),
                         _polevl(zz, _AIRY_AI_AFD, monic=True)), 1.0)
    ug = ops.div(ops.mul(z, _polevl(zz, _AIRY_AI_AGN)), _polevl(zz, _AIRY_AI_AGD, monic=True))
    theta = ops.add(zl, math.pi / 4)
    osc = ops.div(ops.mul(ops.sub(ops.mul(ops.sin(theta), uf), ops.mul(ops.cos(theta), ug)),
                          sqpii), ops.sqrt(ops.sqrt(xl)))
    osc = ops.where(finite, osc, 0.0)
    # |x| < 2.09: f = sum 3^k (1/3)_k x^3k / (3k)!, g = sum 3^k (2/3)_k x^(3k+1) / (3k+1)!
    xm = ops.where(mid, w, 0.0)
    cube = ops.mul(ops.mul(xm, xm), xm)
    fc, gc, m, n = [1.0], [1.0], 1.0, 1.0
    for k in range(1, _AIRY_SERIES_TERMS):
        m /= (3 * k - 1) * (3 * k)
        n /= (3 * k) * (3 * k + 1)
        fc.append(m)
        gc.append(n)
    series = ops.sub(ops.mul(_horner(cube, tuple(fc)), _AIRY_C1),
                     ops.mul(ops.mul(_horner(cube, tuple(gc)), xm), _AIRY_C2))
    return ops.where(high, big, ops.where(low, osc, series))


def _horner(t: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    """``sum c_k t^k`` (lowest first)."""
    out = ops.add(ops.mul(t, coeffs[-1]), coeffs[-2])
    for c in reversed(coeffs[:-2]):
        out = ops.add(ops.mul(out, t), c)
    return out


# ---------------------------------------------------------------- zeta

_ZETA_TERMS = 10        # the terms q .. q + 9, then the tail from q + 10 (Cephes')


def _zeta_pos(x: Tensor, q: Tensor) -> Tensor:
    """``zeta(x, q)`` for ``x > 1`` and ``q > 0`` (float64, broadcast): the terms ``(q +
    k)^-x`` for k < 10, then the Euler-Maclaurin tail from ``u = q + 10`` (``u^(1-x) /
    (x-1) + u^-x / 2 + sum_j B_2j / (2j)! x (x+1) ... (x+2j-2) u^(-x-2j+1)``). Where the
    tail's asymptotic series would diverge (``x`` much larger than ``2 pi u``), it is
    below the sum's rounding: ``(u / q)^-x`` is."""
    nx = ops.neg(x)
    total = ops.pow(q, nx)
    for k in range(1, _ZETA_TERMS):
        total = ops.add(total, ops.pow(ops.add(q, float(k)), nx))
    u = ops.add(q, float(_ZETA_TERMS))
    b = ops.pow(u, nx)
    tail = ops.add(ops.div(ops.mul(b, u), ops.sub(x, 1.0)), ops.mul(b, 0.5))
    r = ops.reciprocal(u)
    r2 = ops.mul(r, r)
    rising, power = x, ops.mul(b, r)
    for j, bern in enumerate(_BERNOULLI, 1):
        if j > 1:
            rising = ops.mul(ops.mul(rising, ops.add(x, float(2 * j - 3))),
                             ops.add(x, float(2 * j - 2)))
            power = ops.mul(power, r2)
        tail = ops.add(tail, ops.mul(ops.mul(rising, power), bern / math.factorial(2 * j)))
    return ops.add(total, tail)


def _zeta64(x: Tensor, q: Tensor) -> Tensor:
    """``zeta(x, q)``: +inf at ``x = 1`` and at the poles ``q`` = 0, -1, ...; NaN for
    ``x < 1`` and for a negative non-integer ``q`` with a non-integer ``x``; the limits
    at ``x = +inf`` (``q^-x``: 1 at ``q = 1``, 0 above, +inf below) and at ``q = +inf``
    (0); NaN at ``q = -inf``."""
    domain = ops.gt(x, 1.0)
    xs = ops.where(domain, x, 2.0)
    x_finite = ops.lt(xs, math.inf)
    xs = ops.where(x_finite, xs, 2.0)
    neg = ops.le(q, 0.0)
    pole = ops.logical_and(neg, ops.eq(q, _floor(q)))
    x_int = ops.eq(xs, _floor(xs))
    q_ok = ops.logical_and(ops.gt(q, 0.0), ops.lt(q, math.inf))
    qp = ops.where(q_ok, q, 1.0)
    # q < 0, not an integer: (-1)^x (zeta(x, f) - zeta(x, 1 - q)) + zeta(x, 1 - f); the
    # four evaluations are one, on the stacked arguments (a quarter of the graph)
    reflect = ops.logical_and(ops.logical_and(neg, ops.logical_not(pole)), _finite(q))
    qn = ops.where(reflect, q, -0.5)
    r = ops.neg(qn)
    f = ops.sub(r, _floor(r))                                         # frac(-q), in (0, 1)
    z = _zeta_pos(movement.stack([xs] * 4, 0),
                  movement.stack([qp, f, ops.sub(1.0, qn), ops.sub(1.0, f)], 0))
    positive = z[0]
    sign = ops.where(ops.eq(ops.sub(xs, ops.mul(_floor(ops.mul(xs, 0.5)), 2.0)), 1.0), -1.0, 1.0)
    negative = ops.add(ops.mul(sign, ops.sub(z[1], z[2])), z[3])
    out = ops.where(reflect, ops.where(x_int, negative, math.nan), positive)
    out = ops.where(pole, math.inf, out)
    # x = +inf: q^-inf
    at_inf = ops.where(ops.eq(q, 1.0), 1.0, ops.where(ops.gt(q, 1.0), 0.0, math.inf))
    out = ops.where(x_finite, out, at_inf)
    out = ops.where(ops.eq(x, 1.0), math.inf, ops.where(domain, out, math.nan))
    out = ops.where(ops.eq(q, math.inf), ops.where(domain, 0.0, out), out)
    out = ops.where(ops.logical_or(ops.isnan(q), ops.eq(q, -math.inf)), math.nan, out)
    return ops.where(ops.isnan(x), math.nan, out)


def _finite(t: Tensor) -> Tensor:
    return ops.lt(ops.abs(t), math.inf)


def _refuse_gradient(out: Tensor, x: Tensor, message: str) -> Tensor:
    """``out`` plus a zero whose history is a node over ``x`` that raises
    ``NotImplementedError(message)`` when a backward pass reaches it (PyTorch's
    ``not_implemented`` derivative)."""
    def refuse(g: Tensor, create_graph: bool) -> tuple[Tensor | None, ...]:
        raise NotImplementedError(message)
    zero = ops.full_const(0.0, out.shape, out.dtype)
    fn = tape.GradFn(tape.FUNCTION, {"apply": refuse, "name": "ZetaNotImplemented"},
                     (x._grad_edge(),), [x.node], None)
    return ops.add(out, Tensor._wrap(zero.node, grad_fn=fn))


# ---------------------------------------------------------------- public functions

def i1(input: Tensor) -> Tensor:
    """Modified Bessel function of the first kind, order 1 (``torch.special.i1``); odd,
    +-inf at +-inf; differentiable (``i0(x) - i1(x)/x``, through its ops)."""
    return _in_float64("i1", input, _i1_64)


def i1e(input: Tensor) -> Tensor:
    """Exponentially scaled ``i1``: ``exp(-|x|) i1(x)`` (``torch.special.i1e``);
    differentiable."""
    return _in_float64("i1e", input, _i1e64_wrapped)


def _i1e64_wrapped(w: Tensor) -> Tensor:
    return _i1e_64(w)


def _constant(op: str, input: Tensor, fn: Any) -> Tensor:
    """``fn`` in float64, rounded once, without a gradient (PyTorch defines none); NaN
    at NaN (the kernels' selects would otherwise pick a branch for it)."""
    return _in_float64(op, input.detach() if isinstance(input, Tensor) else input,
                       lambda w: ops.where(ops.isnan(w), w, fn(w)))


def bessel_j0(input: Tensor) -> Tensor:
    """Bessel function of the first kind, order 0 (``torch.special.bessel_j0``)."""
    return _constant("bessel_j0", input, _j0_64)


def bessel_j1(input: Tensor) -> Tensor:
    """Bessel function of the first kind, order 1 (``torch.special.bessel_j1``)."""
    return _constant("bessel_j1", input, _j1_64)


def bessel_y0(input: Tensor) -> Tensor:
    """Bessel function of the second kind, order 0 (``torch.special.bessel_y0``): -inf
    at 0, NaN below."""
    return _constant("bessel_y0", input, _y0_64)


def bessel_y1(input: Tensor) -> Tensor:
    """Bessel function of the second kind, order 1 (``torch.special.bessel_y1``): -inf
    at 0, NaN below."""
    return _constant("bessel_y1", input, _y1_64)


def modified_bessel_i0(input: Tensor) -> Tensor:
    """``i0`` without a gradient (``torch.special.modified_bessel_i0``)."""
    return _constant("modified_bessel_i0", input, _i0_64)


def modified_bessel_i1(input: Tensor) -> Tensor:
    """``i1`` without a gradient (``torch.special.modified_bessel_i1``)."""
    return _constant("modified_bessel_i1", input, _i1_64)


def modified_bessel_k0(input: Tensor) -> Tensor:
    """Modified Bessel function of the second kind, order 0
    (``torch.special.modified_bessel_k0``): +inf at 0, NaN below."""
    return _constant("modified_bessel_k0", input, lambda w: _k_64(w, 0, False))


def modified_bessel_k1(input: Tensor) -> Tensor:
    """Modified Bessel function of the second kind, order 1
    (``torch.special.modified_bessel_k1``): +inf at 0, NaN below."""
    return _constant("modified_bessel_k1", input, lambda w: _k_64(w, 1, False))


def scaled_modified_bessel_k0(input: Tensor) -> Tensor:
    """``exp(x) k0(x)`` (``torch.special.scaled_modified_bessel_k0``)."""
    return _constant("scaled_modified_bessel_k0", input, lambda w: _k_64(w, 0, True))


def scaled_modified_bessel_k1(input: Tensor) -> Tensor:
    """``exp(x) k1(x)`` (``torch.special.scaled_modified_bessel_k1``)."""
    return _constant("scaled_modified_bessel_k1", input, lambda w: _k_64(w, 1, True))


def spherical_bessel_j0(input: Tensor) -> Tensor:
    """Spherical Bessel function of the first kind, order 0, ``sin(x) / x``
    (``torch.special.spherical_bessel_j0``): 1 at 0, 0 at +-inf."""
    return _constant("spherical_bessel_j0", input, _spherical_j0_64)


def airy_ai(input: Tensor) -> Tensor:
    """The Airy function ``Ai`` (``torch.special.airy_ai``): 0 at +-inf (PyTorch's kernel
    gives NaN there)."""
    return _constant("airy_ai", input, _airy_ai_64)


def zeta(input: Any, other: Any) -> Tensor:
    """The Hurwitz zeta function ``sum_k (other + k)^-input`` (``torch.special.zeta``;
    ``zeta(x, 1)`` is Riemann's); see the module docstring for its domain. Either
    argument may be a Python number. Differentiable in ``other`` (``-x zeta(x + 1,
    q)``); a backward pass that reaches ``input`` raises ``NotImplementedError``, as
    PyTorch's."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"zeta: expected a Tensor argument, got {type(input).__name__} and "
                        f"{type(other).__name__}")
    common = ops.promote("zeta", input, other)
    common = common if common.is_floating_point else dt.float32
    x, q = ops.operands("zeta", input.detach() if isinstance(input, Tensor) else input, other,
                        dtype=dt.float64)
    out = ops.cast(_zeta64(x, q), common)
    if grad_mode.STATE.enabled and isinstance(input, Tensor) and input.requires_grad:
        out = _refuse_gradient(out, input, "the derivative for 'zeta' is not implemented.")
    return out
