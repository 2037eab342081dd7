"""``Kumaraswamy(concentration1, concentration0)``: the Kumaraswamy distribution on
(0, 1)."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions import constraints
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import AffineTransform, PowerTransform
from nova.distributions.uniform import Uniform
from nova.distributions.utils import broadcast_all, euler_constant
from nova.tensor import ops
from nova.tensor.creation import full_like
from nova.tensor.special import digamma, lgamma
from nova.tensor.tensor import Tensor

__all__ = ["Kumaraswamy"]


def _moments(a: Tensor, b: Tensor, n: int) -> Tensor:
    """``E[X^n] = b B(1 + n/a, b)``."""
    arg1 = 1 + n / a
    return b * (lgamma(arg1) + lgamma(b) - lgamma(arg1 + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """The density ``a b x^(a-1) (1 - x^a)^(b-1)`` on (0, 1), ``a`` =
    ``concentration1`` and ``b`` = ``concentration0``: ``(1 - U^(1/b))^(1/a)`` for
    ``U`` uniform (PyTorch's construction), so ``rsample`` is differentiable in both.

    ``mode`` is ``((a - 1) / (a b - 1))^(1/a)`` where ``a >= 1`` and ``b >= 1`` (not
    both 1), NaN elsewhere (PyTorch's formula has a typo and gives NaN everywhere)."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Tensor | float, concentration0: Tensor | float,
                 validate_args: bool | None = None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(full_like(self.concentration0, 0), full_like(self.concentration0, 1),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Kumaraswamy:
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        log_mode = ((a - 1).log() - (a * b - 1).log()) / a
        defined = ops.logical_and(a >= 1, b >= 1)
        return ops.where(defined, log_mode.exp(), math.nan)

    @property
    def variance(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - self.concentration1.log() - self.concentration0.log()
