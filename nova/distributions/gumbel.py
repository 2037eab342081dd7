"""``Gumbel(loc, scale)``: the type-I extreme value distribution."""
from __future__ import annotations

import math
from typing import Any

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import AffineTransform, ExpTransform
from nova.distributions.uniform import Uniform
from nova.distributions.utils import broadcast_all, euler_constant, is_number
from nova.tensor.creation import full_like, ones_like
from nova.tensor.tensor import Tensor

__all__ = ["Gumbel"]


class Gumbel(TransformedDistribution):
    """The Gumbel distribution: ``loc - scale log(-log U)`` for ``U`` uniform on
    ``[tiny, 1 - eps)`` of the dtype (PyTorch's construction, as a
    ``TransformedDistribution``). ``cdf`` and ``icdf`` are the closed forms
    ``exp(-exp(-z))`` and ``loc - scale log(-log p)`` (PyTorch goes through the
    uniform's cdf and a ``1 - p`` flip of the two decreasing steps, which loses the
    lower tail)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None):
        self.loc, self.scale = broadcast_all(loc, scale)
        info = dt.finfo(self.loc.dtype)
        if is_number(loc) and is_number(scale):
            base_dist = Uniform(info.tiny, 1 - info.eps, validate_args=validate_args)
        else:
            base_dist = Uniform(full_like(self.loc, info.tiny), full_like(self.loc, 1 - info.eps),
                                validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-ones_like(self.scale)),
                      ExpTransform().inv, AffineTransform(loc=self.loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Gumbel:
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(tuple(batch_shape))
        new.scale = self.scale.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc - self.scale * (-value.log()).log()

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * euler_constant

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + euler_constant)
