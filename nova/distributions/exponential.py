"""``Exponential(rate)``: the exponential distribution."""
from __future__ import annotations

from typing import Any

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all, is_number, standard_uniform
from nova.tensor.creation import zeros_like
from nova.tensor.tensor import Tensor

__all__ = ["Exponential"]


class Exponential(Distribution):
    """The exponential distribution with ``rate`` = 1 / scale. ``cdf`` is
    ``-expm1(-rate x)`` (PyTorch: ``1 - exp(-rate x)``, which loses the digits of small
    values)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = () if is_number(rate) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Exponential:
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = tuple(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = standard_uniform(shape, self.rate)
        return (-(-u).log1p()).to(self.rate.dtype) / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(-self.rate * value).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()
