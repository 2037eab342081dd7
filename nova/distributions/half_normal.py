"""``HalfNormal(scale)``: ``|X|`` for ``X ~ Normal(0, scale)``."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions import constraints
from nova.distributions.normal import Normal
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import AbsTransform
from nova.tensor import ops
from nova.tensor.creation import zeros_like
from nova.tensor.tensor import Tensor

__all__ = ["HalfNormal"]


class HalfNormal(TransformedDistribution):
    """The half-normal distribution: ``Y = |X|``, ``X ~ Normal(0, scale)`` (PyTorch's
    construction, a ``TransformedDistribution`` through ``AbsTransform``)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None):
        base_dist = Normal(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> HalfNormal:
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return ops.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
