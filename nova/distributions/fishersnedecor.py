"""``FisherSnedecor(df1, df2)``: the F distribution."""
from __future__ import annotations

import math
from typing import Any

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.gamma import Gamma
from nova.distributions.utils import broadcast_all, is_number
from nova.tensor import ops
from nova.tensor.special import lgamma
from nova.tensor.tensor import Tensor

__all__ = ["FisherSnedecor"]


def _clamped_tiny(x: Tensor) -> Tensor:
    """``x`` at least the smallest normal number, in value only (PyTorch clamps in
    place, outside autograd)."""
    return x + (x.clamp(min=dt.finfo(x.dtype).tiny) - x).detach()


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom: ``X1 / X2``
    for ``Xi ~ Gamma(dfi / 2, dfi)`` (chi-squared over its degrees of freedom),
    PyTorch's construction; ``rsample`` is differentiable in both (see ``Gamma``).
    The mean is NaN for ``df2 <= 2``, the variance for ``df2 <= 4`` and the mode for
    ``df1 <= 2``, as in PyTorch."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Tensor | float, df2: Tensor | float,
                 validate_args: bool | None = None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)
        batch_shape = () if is_number(df1) and is_number(df2) else self.df1.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> FisherSnedecor:
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = tuple(batch_shape)
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return ops.where(self.df2 > 2, self.df2 / (self.df2 - 2), math.nan)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return ops.where(self.df1 > 2, mode, math.nan)

    @property
    def variance(self) -> Tensor:
        df1, df2 = self.df1, self.df2
        result = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return ops.where(df2 > 4, result, math.nan)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = _clamped_tiny(self._gamma2.rsample(sample_shape).reshape(shape))
        return _clamped_tiny(x1 / x2)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = lgamma(ct1 + ct2) - lgamma(ct1) - lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
