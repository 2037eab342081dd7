"""``Poisson(rate)``: the Poisson distribution."""
from __future__ import annotations

from typing import Any

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all, is_number
from nova.tensor.elementary import xlogy
from nova.tensor.grad_mode import no_grad
from nova.tensor.sampling_ops import poisson
from nova.tensor.special import lgamma
from nova.tensor.tensor import Tensor

__all__ = ["Poisson"]


class Poisson(Distribution):
    """Counts with mean ``rate`` (non-negative): ``rate^k e^-rate / k!``.

    ``sample`` is ``nv.poisson`` (exact: arrival counting below rate 10, Hormann's
    PTRS rejection sampler above; the draw realizes at once, see
    ``nova/tensor/sampling_ops.py``)."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = () if is_number(rate) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Poisson:
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = tuple(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return poisson(self.rate.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - lgamma(value + 1)
