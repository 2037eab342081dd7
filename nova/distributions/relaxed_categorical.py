"""``RelaxedOneHotCategorical(temperature, probs=None, logits=None)`` (the Concrete /
Gumbel-softmax distribution on the simplex) and ``ExpRelaxedCategorical``, its log."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.categorical import Categorical
from nova.distributions.distribution import Distribution
from nova.distributions.relaxed_bernoulli import temperature_arg
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import ExpTransform
from nova.distributions.utils import standard_uniform
from nova.tensor.movement import broadcast_tensors
from nova.tensor.tensor import Tensor

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


def gumbel_noise(shape: tuple[int, ...], like: Tensor) -> Tensor:
    """Standard Gumbel draws ``-log(-log u)``, drawn and transformed in float64 (``u``
    kept off 0 so they are finite) and rounded to ``like``'s dtype."""
    u = standard_uniform(shape, like).clamp(min=dt.finfo(dt.float64).tiny)
    return (-(-u.log()).log()).to(like.dtype)


class ExpRelaxedCategorical(Distribution):
    """The log of a ``RelaxedOneHotCategorical`` draw: ``log_softmax((logits + G) /
    temperature)`` for ``G`` standard Gumbel noise (Maddison et al., 2017; Jang et
    al., 2017). ``probs``/``logits`` as for ``Categorical``; ``temperature`` broadcasts
    in the formulas and is not part of the batch shape (as in PyTorch)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector   # the true support is a submanifold of this
    has_rsample = True

    def __init__(self, temperature: Tensor | float, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None):
        self._categorical = Categorical(probs, logits, validate_args=False)
        self.temperature = temperature_arg(type(self).__name__, temperature,
                                           self._categorical._param)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        return self._categorical._known_parameter(param)

    def expand(self, batch_shape: Any, _instance: Any = None) -> ExpRelaxedCategorical:
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = tuple(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._categorical.param_shape

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        scores = (self.logits + gumbel_noise(shape, self._categorical._param)) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        """``lgamma(K) + (K - 1) log t + sum(s - logsumexp(s))`` with ``s = logits - t
        value`` (PyTorch's formula: the Concrete density of ``exp(value)``, times its
        Jacobian)."""
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, value)
        log_scale = math.lgamma(k) + (k - 1) * self.temperature.log()
        score = logits - value * self.temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """A relaxed ``OneHotCategorical`` on the simplex: ``softmax((logits + G) /
    temperature)`` for ``G`` standard Gumbel noise (the Gumbel-softmax / Concrete
    distribution), reparameterizable: ``rsample`` is differentiable in
    ``probs``/``logits`` and ``temperature``. The argmax of a draw is
    ``Categorical(probs)``-distributed at any temperature."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature: Tensor | float, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None):
        base_dist = ExpRelaxedCategorical(temperature, probs, logits,
                                          validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        return self.base_dist._known_parameter(param)

    def expand(self, batch_shape: Any, _instance: Any = None) -> RelaxedOneHotCategorical:
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs
