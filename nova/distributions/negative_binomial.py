"""``NegativeBinomial(total_count, probs=None, logits=None)``: successes before a
number of failures."""
from __future__ import annotations

from typing import Any

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.gamma import Gamma
from nova.distributions.utils import (
    counts_and_param, lazy_property, logits_to_probs,
    probs_to_logits,
)
from nova.nn.functional import logsigmoid
from nova.tensor import ops
from nova.tensor.grad_mode import no_grad
from nova.tensor.sampling_ops import poisson
from nova.tensor.special import lgamma
from nova.tensor.tensor import Tensor

__all__ = ["NegativeBinomial"]


class NegativeBinomial(Distribution):
    """The number of successes of independent trials (success probability ``probs``
    in [0, 1), or ``sigmoid(logits)``) before ``total_count`` failures (a non-negative
    real: the distribution is defined for real counts).

    ``sample`` is a gamma-Poisson mixture, as PyTorch's: ``Poisson(G)`` with ``G ~
    Gamma(total_count, exp(-logits))`` (both exact; the draws realize at once)."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count: Tensor | float, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None, validate_args: bool | None = None):
        counts_and_param(self, total_count, probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> NegativeBinomial:
        return self._expand_param(NegativeBinomial, batch_shape, _instance,
                                  total_count=self.total_count.expand(tuple(batch_shape)))

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.logits.exp()

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / ops.sigmoid(-self.logits)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    @lazy_property
    def _gamma(self) -> Gamma:
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(),
                     validate_args=False)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            rate = self._gamma.sample(sample_shape)
            return poisson(rate)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = (self.total_count * logsigmoid(-self.logits)
                                 + value * logsigmoid(self.logits))
        log_normalization = (-lgamma(self.total_count + value) + lgamma(1.0 + value)
                             + lgamma(self.total_count))
        log_normalization = ops.where(self.total_count + value == 0.0, 0.0,
                                      log_normalization)
        return log_unnormalized_prob - log_normalization
