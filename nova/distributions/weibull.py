"""``Weibull(scale, concentration)``: the two-parameter Weibull distribution."""
from __future__ import annotations

from typing import Any

from nova.distributions import constraints
from nova.distributions.exponential import Exponential
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import AffineTransform, PowerTransform
from nova.distributions.utils import broadcast_all, euler_constant
from nova.tensor.creation import ones_like
from nova.tensor.special import lgamma
from nova.tensor.tensor import Tensor

__all__ = ["Weibull"]


class Weibull(TransformedDistribution):
    """The Weibull distribution with ``scale`` (lambda) and ``concentration`` (k):
    ``scale E^(1/k)``, ``E ~ Exponential(1)`` (PyTorch's construction)."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale: Tensor | float, concentration: Tensor | float,
                 validate_args: bool | None = None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal),
                      AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Weibull:
        new = self._get_checked_instance(Weibull, _instance)
        batch_shape = tuple(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        transforms = [PowerTransform(exponent=new.concentration_reciprocal),
                      AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.scale * lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self) -> Tensor:
        return (self.scale * ((self.concentration - 1) / self.concentration)
                ** self.concentration.reciprocal())

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (lgamma(1 + 2 * self.concentration_reciprocal).exp()
                                    - (2 * lgamma(1 + self.concentration_reciprocal)).exp())

    def entropy(self) -> Tensor:
        return (euler_constant * (1 - self.concentration_reciprocal)
                + (self.scale * self.concentration_reciprocal).log() + 1)
