"""``Bernoulli(probs=None, logits=None)``: a 0/1 coin."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import (
    broadcast_all, is_number, lazy_property, logits_to_probs, probs_to_logits,
    softplus,
)
from nova.tensor import ops
from nova.tensor.compat import bernoulli
from nova.tensor.creation import arange
from nova.tensor.tensor import Tensor

__all__ = ["Bernoulli"]


class Bernoulli(Distribution):
    """Samples are 1 with probability ``probs`` (or ``sigmoid(logits)``) and 0 otherwise;
    give exactly one of the two. As in PyTorch, ``logits`` derived from ``probs`` are
    those of the probabilities clamped to ``[eps, 1 - eps]``.

    ``log_prob(v)`` is ``-(v softplus(-logits) + (1 - v) softplus(logits))`` and the
    entropy ``p softplus(-logits) + (1 - p) softplus(logits)``: sums of non-negative
    terms, so no digits cancel (PyTorch's ``binary_cross_entropy_with_logits`` form
    subtracts, and loses the small values far in the tails)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs: Tensor | float | None = None, logits: Tensor | float | None = None,
                 validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = is_number(probs)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = is_number(logits)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(() if is_scalar else self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Bernoulli:
        return self._expand_param(Bernoulli, batch_shape, _instance)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    def _complement(self) -> Tensor:
        """``1 - probs``, from the logits when they are the parameter (``1 -
        sigmoid(l)`` loses the digits that ``sigmoid(-l)`` keeps)."""
        if self._param is self.__dict__.get("logits"):
            return ops.sigmoid(-self.logits)
        return 1 - self.probs

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return ops.where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * self._complement()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return bernoulli(self.probs.detach().expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -(value * softplus(-logits) + (1 - value) * softplus(logits))

    def entropy(self) -> Tensor:
        return self.probs * softplus(-self.logits) + self._complement() * softplus(self.logits)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + self._batch_shape)
        return values
