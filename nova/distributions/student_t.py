"""``StudentT(df, loc=0, scale=1)``: Student's t-distribution."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions import constraints
from nova.distributions.chi2 import Chi2
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all
from nova.tensor import ops
from nova.tensor.creation import randn
from nova.tensor.special import digamma, lgamma
from nova.tensor.tensor import Tensor

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t with ``df`` degrees of freedom, location ``loc`` and ``scale``.

    ``rsample`` is ``loc + scale X / sqrt(Z / df)`` for ``X`` standard normal and ``Z``
    ``Chi2(df)`` (PyTorch's construction), differentiable in all three parameters (in
    ``df`` through the chi-squared draw's implicit gradient; see ``Gamma``, whose
    draws realize at once). The mean is NaN for ``df <= 1``; the variance is infinite
    for ``1 < df <= 2`` and NaN for ``df <= 1``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df: Tensor | float, loc: Tensor | float = 0.0,
                 scale: Tensor | float = 1.0, validate_args: bool | None = None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df, validate_args=False)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> StudentT:
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = tuple(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return ops.where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        return ops.where(self.df > 2, finite, ops.where(self.df > 1, math.inf, math.nan))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = randn(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        y = x * (z / self.df).rsqrt()
        return self.loc + self.scale * y

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + lgamma(0.5 * self.df) - lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y ** 2 / self.df).log1p() - z

    def entropy(self) -> Tensor:
        lbeta = lgamma(0.5 * self.df) + math.lgamma(0.5) - lgamma(0.5 * (self.df + 1))
        return (self.scale.log()
                + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
