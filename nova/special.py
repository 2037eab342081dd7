"""``nv.special``: PyTorch's ``torch.special`` namespace.

Each name is the same function as its top-level counterpart where one exists
(``nv.special.gammaln is nv.lgamma``); those only ``torch.special`` has (``erfcx``,
``ndtr``, ``ndtri``, ``log_ndtr``, ``i0e``, ``xlog1py``, ``entr``) live with the other
special functions in ``nova.tensor.special``, the Bessel functions beyond ``i0`` and the
Hurwitz ``zeta`` in ``nova.tensor.special_more``, the orthogonal polynomials in
``nova.tensor.special_poly``.
"""
from __future__ import annotations

from nova.tensor.elementary import exp2, logit, sinc, xlogy
from nova.tensor.numeric import round  # noqa: A004 (torch's name)
from nova.tensor.ops import erf, expm1, log1p, log_softmax, logsumexp, softmax
from nova.tensor.ops import sigmoid as expit
from nova.tensor.special import (
    digamma, entr, erfc, erfcx, erfinv, i0, i0e, log_ndtr, ndtr, ndtri, polygamma, xlog1py,
)
from nova.tensor.special import lgamma as gammaln
from nova.tensor.special import mvlgamma as multigammaln
from nova.tensor.sampling_ops import gammainc, gammaincc
from nova.tensor.special_more import (
    airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1, i1, i1e, modified_bessel_i0,
    modified_bessel_i1, modified_bessel_k0, modified_bessel_k1, scaled_modified_bessel_k0,
    scaled_modified_bessel_k1, spherical_bessel_j0, zeta,
)
from nova.tensor.special_poly import (
    chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,
    chebyshev_polynomial_w, hermite_polynomial_h, hermite_polynomial_he, laguerre_polynomial_l,
    legendre_polynomial_p, shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w,
)

psi = digamma

__all__ = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
    "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "hermite_polynomial_h", "hermite_polynomial_he", "i1", "i1e", "laguerre_polynomial_l",
    "legendre_polynomial_p", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
    "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "spherical_bessel_j0",
    "zeta",
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
    "gammainc", "gammaincc", "gammaln", "i0", "i0e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax",
    "xlog1py", "xlogy",
]
