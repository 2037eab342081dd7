"""``InverseGamma(concentration, rate)``: the distribution of ``1 / X`` for ``X ~
Gamma(concentration, rate)``."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions import constraints
from nova.distributions.gamma import Gamma
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import PowerTransform
from nova.tensor import ops
from nova.tensor.creation import tensor
from nova.tensor.special import digamma, lgamma
from nova.tensor.tensor import Tensor

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """The inverse gamma distribution with shape ``concentration`` (alpha) and
    ``rate`` (beta: the scale of ``1 / X``): ``Gamma(concentration, rate)`` through
    ``PowerTransform(-1)`` (PyTorch's construction), so ``rsample`` is differentiable
    in both parameters (see ``Gamma``). The mean is infinite for ``concentration <= 1``
    and the variance for ``concentration <= 2``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration: Tensor | float, rate: Tensor | float,
                 validate_args: bool | None = None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = tensor(-1.0, dtype=base_dist.rate.dtype, device=base_dist.rate.device)
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> InverseGamma:
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self) -> Tensor:
        return self.base_dist.concentration

    @property
    def rate(self) -> Tensor:
        return self.base_dist.rate

    @property
    def mean(self) -> Tensor:
        result = self.rate / (self.concentration - 1)
        return ops.where(self.concentration > 1, result, math.inf)

    @property
    def mode(self) -> Tensor:
        return self.rate / (self.concentration + 1)

    @property
    def variance(self) -> Tensor:
        result = self.rate.square() / ((self.concentration - 1).square()
                                       * (self.concentration - 2))
        return ops.where(self.concentration > 2, result, math.inf)

    def entropy(self) -> Tensor:
        return (self.concentration + self.rate.log() + lgamma(self.concentration)
                - (1 + self.concentration) * digamma(self.concentration))
