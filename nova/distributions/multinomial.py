"""``Multinomial(total_count=1, probs=None, logits=None)``: category counts of a
number of draws."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.binomial import Binomial
from nova.distributions.categorical import Categorical
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all, size_arg
from nova.tensor import ops
from nova.tensor.creation import arange, tensor
from nova.tensor.special import lgamma
from nova.tensor.tensor import Tensor

__all__ = ["Multinomial"]


class _Multinomial(constraints.Constraint):
    """Non-negative integer vectors summing to at most ``upper_bound``
    (``torch.distributions.constraints.multinomial``)."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound: int):
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)




class Multinomial(Distribution):
    """Counts of ``total_count`` (an int: PyTorch's sampling needs one count for the
    whole batch) draws of a ``Categorical(probs, logits)`` over the last dim.
    ``log_prob`` reads the count off the value, so it allows any count.

    ``sample`` draws the ``total_count`` categorical draws (Gumbel-max, in the lazy
    graph: nothing is read back) and counts each category: its noise is
    ``total_count * sample_shape * batch_shape * K`` float64 values."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None):
        if isinstance(total_count, bool) or not isinstance(total_count, (int, np.integer)):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = int(total_count)
        self._categorical = Categorical(probs=probs, logits=logits, validate_args=False)
        self._binomial = Binomial(total_count=self.total_count, probs=self.probs,
                                  validate_args=False)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        return self._categorical._known_parameter(param)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Multinomial:
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new.probs,
                                 validate_args=False)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> constraints.Constraint:
        return _Multinomial(self.total_count)

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._categorical.param_shape

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        sample_shape = size_arg(sample_shape, "sample_shape")
        k = self._categorical._num_events
        draws = self._categorical.sample((self.total_count,) + sample_shape)
        hits = ops.eq(draws.unsqueeze(-1), arange(k, device=self.probs.device))
        return hits.to(self.probs.dtype).sum(0) if self.total_count else \
            ops.full_const(0.0, self._extended_shape(sample_shape), self.probs.dtype)

    def entropy(self) -> Tensor:
        n = tensor(float(self.total_count), dtype=self.probs.dtype)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = lgamma(support + 1)
        term2 = (binomial_probs * weights).sum(0).sum(-1)
        return term1 + term2

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = ops.where((value == 0) & (logits == -math.inf), 0.0, logits)
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
