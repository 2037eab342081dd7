"""``OneHotCategorical(probs=None, logits=None)``: a categorical draw as a one-hot
vector."""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.categorical import Categorical
from nova.distributions.distribution import Distribution
from nova.tensor import ops
from nova.tensor.creation import eye
from nova.tensor.tensor import Tensor

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]


class OneHotCategorical(Distribution):
    """Samples are one-hot vectors of size K = ``probs.shape[-1]`` (the event shape),
    in the parameters' float dtype; ``probs``/``logits`` as for ``Categorical``."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None):
        self._categorical = Categorical(probs, logits, validate_args=False)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        return self._categorical._known_parameter(param)

    def expand(self, batch_shape: Any, _instance: Any = None) -> OneHotCategorical:
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = tuple(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def mean(self) -> Tensor:
        return self._categorical.probs

    @property
    def mode(self) -> Tensor:
        probs = self._categorical.probs
        return ops.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self) -> Tensor:
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._categorical.param_shape

    def sample(self, sample_shape: Any = ()) -> Tensor:
        indices = self._categorical.sample(sample_shape)
        return ops.one_hot(indices, self._categorical._num_events).to(self._param.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = self.event_shape[0]
        values = eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + self.batch_shape + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategorical`` made reparameterizable by the straight-through estimator
    (Bengio et al., 2013): ``rsample`` is the one-hot draw in value, and its gradient
    is that of ``probs`` (``sample + probs - probs.detach()``), as PyTorch's."""

    has_rsample = True

    def expand(self, batch_shape: Any, _instance: Any = None
               ) -> OneHotCategoricalStraightThrough:
        new = self._get_checked_instance(OneHotCategoricalStraightThrough, _instance)
        return super().expand(batch_shape, _instance=new)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
