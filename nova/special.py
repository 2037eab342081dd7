"""``nv.special``: PyTorch's ``torch.special`` namespace.

Each name is the same function as its top-level counterpart where one exists
(``nv.special.gammaln is nv.lgamma``); those only ``torch.special`` has (``erfcx``,
``ndtr``, ``ndtri``, ``log_ndtr``, ``i0e``, ``xlog1py``, ``entr``) live with the other
special functions in ``nova.tensor.special``.
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

psi = digamma

__all__ = [
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
    "gammainc", "gammaincc", "gammaln", "i0", "i0e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax",
    "xlog1py", "xlogy",
]
