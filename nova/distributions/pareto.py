"""``Pareto(scale, alpha)``: the Pareto type I distribution."""
from __future__ import annotations

from typing import Any

from nova.distributions import constraints
from nova.distributions.exponential import Exponential
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import AffineTransform, ExpTransform
from nova.distributions.utils import broadcast_all
from nova.tensor.tensor import Tensor

__all__ = ["Pareto"]


class Pareto(TransformedDistribution):
    """The Pareto type I distribution with minimum ``scale`` and shape ``alpha``:
    ``scale exp(E)``, ``E ~ Exponential(alpha)`` (PyTorch's construction). The mean is
    infinite for ``alpha <= 1`` and the variance for ``alpha <= 2`` (PyTorch's
    clamped formulas)."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale: Tensor | float, alpha: Tensor | float,
                 validate_args: bool | None = None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Pareto:
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.alpha = self.alpha.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.greater_than_eq(self.scale)

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
