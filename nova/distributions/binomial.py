"""``Binomial(total_count=1, probs=None, logits=None)``: successes in a number of
trials."""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import (
    counts_and_param, known_values, lazy_property,
    logits_to_probs, probs_to_logits,
)
from nova.tensor.creation import arange
from nova.tensor.grad_mode import no_grad
from nova.tensor.sampling_ops import binomial
from nova.tensor.special import lgamma
from nova.tensor.tensor import Tensor

__all__ = ["Binomial"]


def _clamp_by_zero(x: Tensor) -> Tensor:
    """``max(x, 0)`` whose gradient at 0 is 1/2 (PyTorch's ``_clamp_by_zero``)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


def host_total_count(total_count: Tensor, what: str) -> int:
    """The one total count of a homogeneous batch, read on the host (a sync when it is
    pending, as PyTorch's ``int(total_count.max())``); NotImplementedError when the
    counts differ, as PyTorch's."""
    known = known_values(total_count)
    if known is None:
        known = total_count.detach().numpy()
    known = np.asarray(known)
    top = int(known.max()) if known.size else 0
    if known.size and not known.min() == top:
        raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
    return top


class Binomial(Distribution):
    """The number of successes in ``total_count`` (a non-negative integer, or a tensor
    of them, broadcast with the probabilities) independent trials of success
    probability ``probs`` (or ``sigmoid(logits)``; give exactly one).

    ``sample`` is ``nv.binomial`` (exact: waiting times for means below 10, Hormann's
    BTRS above; the draw realizes at once). ``entropy`` and ``enumerate_support`` need
    one total count for the whole batch, read on the host, as PyTorch's."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count: Tensor | int = 1, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None, validate_args: bool | None = None):
        counts_and_param(self, total_count, probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Binomial:
        return self._expand_param(Binomial, batch_shape, _instance,
                                  total_count=self.total_count.expand(tuple(batch_shape)))

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = lgamma(self.total_count + 1)
        log_factorial_k = lgamma(value + 1)
        log_factorial_nmk = lgamma(self.total_count - value + 1)
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * (-self.logits.abs()).exp().log1p()
                          - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self) -> Tensor:
        host_total_count(self.total_count, "entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total_count = host_total_count(self.total_count, "enumerate_support")
        values = arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + self._batch_shape)
        return values
