"""``Geometric(probs=None, logits=None)``: failures before the first success."""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import (
    broadcast_all, is_number, known_values, lazy_property, logits_to_probs, probs_to_logits,
    softplus, standard_uniform,
)
from nova.tensor import ops
from nova.tensor.grad_mode import no_grad
from nova.tensor.creation import zeros_like
from nova.tensor.tensor import Tensor

__all__ = ["Geometric"]


class Geometric(Distribution):
    """The number of failures before the first success of Bernoulli trials with
    success probability ``probs`` in (0, 1] (or ``sigmoid(logits)``): ``P(X = k) =
    (1 - p)^k p``, k = 0, 1, ... (``Tensor.geometric_`` counts the trials, 1, 2,
    ...). ``sample`` is ``floor(log u / log1p(-p))``, in float64."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Tensor | float | None = None, logits: Tensor | float | None = None,
                 validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        given = probs if probs is not None else logits
        batch_shape = () if is_number(given) else given.shape
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            host = known_values(self.probs)
            if host is not None and not np.all(host > 0):
                raise ValueError(
                    f"Expected parameter probs ({type(self.probs).__name__} of shape "
                    f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but "
                    f"found invalid values:\n{host[~(host > 0)]}")

    def expand(self, batch_shape: Any, _instance: Any = None) -> Geometric:
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = tuple(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            probs = self.probs.detach()
            u = standard_uniform(shape, probs).clamp(min=np.finfo(np.float64).tiny)
            draw = (u.log() / (-probs.double()).log1p()).floor()
            return draw.abs().to(probs.dtype)       # (p = 1: -0.0)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = ops.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        """``BCE_with_logits(logits, probs) / probs`` (PyTorch's), with the exact
        ``log(1 + exp(x))``."""
        return (softplus(self.logits) - self.logits * self.probs) / self.probs
