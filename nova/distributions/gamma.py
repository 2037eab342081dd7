"""``Gamma(concentration, rate)``: the gamma distribution."""
from __future__ import annotations

from typing import Any

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all, is_number
from nova.tensor.elementary import xlogy
from nova.tensor.sampling_ops import gammainc, log_standard_gamma
from nova.tensor.special import digamma, lgamma
from nova.tensor.tensor import Tensor

__all__ = ["Gamma"]


def _tiny_clamped(x: Tensor) -> Tensor:
    """``x`` at least the smallest normal number of its dtype, in value only (PyTorch
    clamps its draws in place, outside autograd)."""
    return x + (x.clamp(min=dt.finfo(x.dtype).tiny) - x).detach()


class Gamma(Distribution):
    """The gamma distribution with shape ``concentration`` (alpha) and ``rate`` (beta
    = 1 / scale).

    ``rsample`` draws by Marsaglia and Tsang's rejection method in float64 and is
    differentiable in both parameters: in ``rate`` through ``x / rate``, in
    ``concentration`` by implicit reparameterization, ``dx/dalpha = -(dF/dalpha) /
    (dF/dx)`` with ``F`` the regularized incomplete gamma function evaluated exactly
    (PyTorch approximates it, to about 1e-4). A draw realizes at once (one step: the
    sampler reads back an "all accepted" flag so that no element is left with a
    rejected proposal; see ``nova/tensor/sampling_ops.py``). ``cdf`` is
    ``gammainc(concentration, rate * value)``, which reads the largest concentration
    on the host (a sync when it is pending) to size its series."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration: Tensor | float, rate: Tensor | float,
                 validate_args: bool | None = None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if is_number(concentration) and is_number(rate):
            batch_shape: tuple[int, ...] = ()
        else:
            batch_shape = self.concentration.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Gamma:
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        log_x = log_standard_gamma(self.concentration.expand(shape))
        value = (log_x.exp() / self.rate.expand(shape).to(dt.float64)).to(self.rate.dtype)
        return _tiny_clamped(value)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (xlogy(self.concentration, self.rate) + xlogy(self.concentration - 1, value)
                - self.rate * value - lgamma(self.concentration))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        return (self.concentration - self.rate.log() + lgamma(self.concentration)
                + (1.0 - self.concentration) * digamma(self.concentration))
