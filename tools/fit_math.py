"""Fit the polynomials of the CPU emitter's float32 ``erf`` (nova/compiler/targets/cpu/
llvm_emit.py, ``Emitter._erf_f32``) and print them as the emitter spells them.

Run: ``python tools/fit_math.py`` (numpy, scipy). Least squares on a Chebyshev basis
over a dense grid, converted to the power basis that Horner's rule evaluates; the
printed maximum error is the fit's own in float64. What the emitted float32 code
achieves is checked by tests/compiler/test_cpu_math.py (within 2 ulp of the correctly
rounded result).

- ``ERF_SMALL``: erf(x) / x - 1 as a polynomial in x*x for |x| < 1 (the emitter adds x
  back exactly: erf(x) = x + x P(x*x), so rounding the coefficients to float32 costs
  a fraction of an ulp; 2/sqrt(pi) itself rounds by 0.9 ulp).
- ``ERF_TAIL``: erf(z) itself as a degree-14 polynomial in z - 2.46 for 1 <= z <= 3.92
  (erf rounds to 1 in float32 beyond 3.92). erf is 0.84..1 there, so the fit's absolute
  error (2e-8) is a fraction of an ulp; centring the variable keeps Horner's rule from
  cancelling (in z itself the same degree is off by hundreds of ulp in float32).
"""
from __future__ import annotations

import numpy as np
import scipy.special as sp
from numpy.polynomial import Chebyshev, Polynomial


def fit(x: np.ndarray, y: np.ndarray, degree: int) -> tuple[list[float], float]:
    cheb = Chebyshev.fit(x, y, degree, domain=[x.min(), x.max()])
    coef = cheb.convert(kind=Polynomial, domain=[-1, 1], window=[-1, 1]).coef
    return [float(np.float32(c)) for c in coef], float(np.abs(Polynomial(coef)(x) - y).max())


def main() -> None:
    x = np.linspace(1e-6, 1.0, 40001)
    small, err = fit(x * x, sp.erf(x) / x - 1, 6)
    print(f"ERF_SMALL = {small}  # max fit error {err:.1e}")
    z = np.linspace(1.0, 3.92, 200001)
    tail, err = fit(z - 2.46, sp.erf(z), 14)
    print(f"ERF_TAIL = {tail}  # max fit error {err:.1e}")


if __name__ == "__main__":
    main()
