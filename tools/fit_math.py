"""Fit the polynomials of the CPU emitter's float32 math (nova/compiler/targets/cpu/
llvm_emit.py: ``Emitter._exp_f32``, ``_tanh_f32``, ``_erf_f32``, ``_log1p_f32`` and
``_log_f32``) and print them as the emitter spells them (float32 values as Python
floats).

Run: ``python tools/fit_math.py`` (numpy, scipy; about 20 seconds). Each fit is a minimax
fit in float64 by Lawson's iteratively reweighted least squares on a Chebyshev basis over
a dense grid, converted to the power basis Horner's rule evaluates; the error it prints
is the fit's own in float64, weighted as the function's use needs (relative where the
result is relative, absolute in erf where the tail's value is 1 - P^4). What the emitted
float32 code achieves, rounding included, is measured by ``tools/check_float32_math.py``
(every float32) and ``tests/compiler/test_cpu_math.py`` (samples, in the suite).

- ``EXP_POLY``: exp(r) = 1 + r + r^2 Q(r) for |r| <= ln2/2 (degree 6; relative error
  3.1e-9 against the degree-7 Taylor polynomial's 5.4e-9).
- ``TANH_SMALL``: tanh(x) = x + x^3 P(x^2) for |x| < ``TANH_SPLIT`` = 0.8 (degree 5 P).
- ``TANH_EXP``: exp(2r) for |r| <= ln2/4 (degree 5), the part of tanh's exp(2|x|) that
  the reduction 2|x| = n ln2 + 2r leaves; an error of 1e-7 in it is a fraction of an
  ulp of tanh = 1 - 2 / (exp(2|x|) + 1) from |x| = 0.8 up.
- ``ERF_SMALL``: erf(x) / x - 1 as a degree-7 polynomial in x*x for |x| < ``ERF_SPLIT``
  = 1.1 (the emitter adds x back: erf(x) = x + x P(x*x)).
- ``ERF_TAIL``: erfc(z)^(1/4) as a degree-7 polynomial in z - 2 for 1.1 <= z <= 4, so
  erf(z) = 1 - P(z - 2)^4 (erf rounds to 1 in float32 from 3.9192 up; at 4, where the
  emitter clamps z, P^4 < 2^-25 and 1 - P^4 is 1 exactly). erfc^(1/4) is nearly
  exp(-z^2/4): smooth enough for degree 7, where erf itself took degree 14 over [1, 3.92].
  The weight makes the fit's error that of erf (P's relative error times 4 erfc(z));
  centred at 2, Horner's rule cancels less (in z itself: 1.72 ulp near 1.14, against
  1.37).
- ``LOG1P_POLY``: log1p(f) = f + f^2 Q(f) for f in [-1/4, 1/2], the reduced argument of
  log and log1p (x = 2^e (1 + f) with 1 + f in [3/4, 3/2); degree 8 Q, relative error
  in log1p(f)).
"""
from __future__ import annotations

import numpy as np
import scipy.special as sp
from numpy.polynomial import Chebyshev, Polynomial

LN2 = float(np.log(2.0))


def minimax(x: np.ndarray, y: np.ndarray, degree: int, weight: np.ndarray | None = None,
            iterations: int = 300) -> tuple[list[float], float]:
    """Power-basis coefficients (lowest first, rounded to float32) of the polynomial of
    ``degree`` that minimizes max |p(x) - y| / weight over the grid, and that maximum
    (of the float64 fit)."""
    weight = np.ones_like(x) if weight is None else weight
    lo, hi = float(x.min()), float(x.max())
    basis = np.polynomial.chebyshev.chebvander((2 * x - lo - hi) / (hi - lo), degree)
    lawson = np.full_like(x, 1.0 / len(x))
    for _ in range(iterations):
        scale = np.sqrt(lawson) / weight
        coef, *_ = np.linalg.lstsq(basis * scale[:, None], y * scale, rcond=None)
        error = np.abs(basis @ coef - y) / weight
        lawson = lawson * error
        lawson /= lawson.sum()
    power = Chebyshev(coef, domain=[lo, hi]).convert(kind=Polynomial, domain=[-1, 1],
                                                       window=[-1, 1]).coef
    return [float(np.float32(c)) for c in power], float(error.max())


def _away_from_zero(lo: float, hi: float, n: int = 40001, gap: float = 1e-5) -> np.ndarray:
    x = np.linspace(lo, hi, n)
    return x[np.abs(x) > gap]


def fit_exp() -> tuple[list[float], float]:
    r = _away_from_zero(-LN2 / 2 * 1.0002, LN2 / 2 * 1.0002, gap=1e-4)
    q, err = minimax(r, (np.exp(r) - 1 - r) / r**2, 4, np.exp(r) / r**2)
    return [1.0, 1.0] + q, err


def fit_tanh_small(split: float) -> tuple[list[float], float]:
    x = np.linspace(1e-6, split * 1.001, 40001)
    return minimax(x * x, (np.tanh(x) / x - 1) / x**2, 5, np.tanh(x) / x**3)


def fit_tanh_exp() -> tuple[list[float], float]:
    r = _away_from_zero(-LN2 / 4 * 1.0002, LN2 / 4 * 1.0002)
    q, err = minimax(r, np.expm1(2 * r) / r, 4, np.exp(2 * r) / np.abs(r))
    return [1.0] + q, err


def fit_erf_small(split: float) -> tuple[list[float], float]:
    x = np.linspace(1e-5, split * 1.0005, 40001)
    return minimax(x * x, sp.erf(x) / x - 1, 7, sp.erf(x) / x)


def fit_erf_tail(split: float, one: float, center: float) -> tuple[list[float], float]:
    z = np.linspace(split * 0.9995, one, 40001)
    erfc = sp.erfc(z)
    root = erfc ** 0.25
    return minimax(z - center, root, 7, root / (4 * erfc))


def fit_log1p() -> tuple[list[float], float]:
    f = _away_from_zero(-0.25 - 1e-4, 0.5 + 1e-4, gap=1e-6)
    log1p = np.log1p(f)
    return minimax(f, (log1p - f) / f**2, 8, np.abs(log1p) / f**2)


def main() -> None:
    for name, (coef, err) in (("EXP_POLY", fit_exp()),
                              ("TANH_SMALL", fit_tanh_small(0.8)),
                              ("TANH_EXP", fit_tanh_exp()),
                              ("ERF_SMALL", fit_erf_small(1.1)),
                              ("ERF_TAIL", fit_erf_tail(1.1, 4.0, 2.0)),
                              ("LOG1P_POLY", fit_log1p())):
        print(f"{name} = {tuple(coef)}  # max fit error {err:.1e}")


if __name__ == "__main__":
    main()
