"""``Categorical(probs=None, logits=None)``: one of K categories."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import (
    known_values, lazy_property, logits_to_probs, probs_to_logits, standard_uniform,
)
from nova.tensor import ops
from nova.tensor.creation import arange, full
from nova.tensor.movement import broadcast_tensors
from nova.tensor.tensor import Tensor

__all__ = ["Categorical"]


def _check_param(name: str, value: Any) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"Categorical: `{name}` must be a Tensor, got {type(value).__name__}")
    if value.ndim < 1:
        raise ValueError(f"`{name}` parameter must be at least one-dimensional.")
    return value


class Categorical(Distribution):
    """Samples are integers in ``{0, ..., K-1}``, K = ``probs.shape[-1]``, with
    probabilities ``probs`` (non-negative, finite, normalized to sum to 1 over the last
    dim) or ``softmax(logits)``; the leading dims are a batch of distributions.

    ``sample`` draws by the Gumbel-max trick in float64 (``argmax(log p + g)`` with
    ``g = -log(-log u)``), as ``nv.multinomial`` does, in the lazy graph: the same
    distribution as PyTorch's, other numbers. The noise is
    ``sample_shape + batch_shape + (K,)`` float64 values."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            probs = _check_param("probs", probs)
            self._given = probs
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            logits = _check_param("logits", logits)
            self._given = logits
            self.logits = ops.log_softmax(logits, -1)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = self._param.shape[:-1] if self._param.ndim > 1 else ()
        super().__init__(batch_shape, validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        """The normalized parameter's values, normalized on the host from the known
        values of the argument (the normalization itself is pending)."""
        value = getattr(self, param)
        given = known_values(self.__dict__.get("_given"))
        if given is None or self._param is not value:
            return value, known_values(value)
        with np.errstate(all="ignore"):
            if param == "probs":
                return value, given / given.sum(-1, keepdims=True)
            shift = given.max(-1, keepdims=True)
            shift = np.where(np.isfinite(shift), shift, 0)
            return value, given - shift - np.log(np.exp(given - shift).sum(-1, keepdims=True))

    def expand(self, batch_shape: Any, _instance: Any = None) -> Categorical:
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tuple(batch_shape)
        param_shape = batch_shape + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    @property
    def mean(self) -> Tensor:
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype,
                    device=self.probs.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype,
                    device=self.probs.device)

    def _log_weights(self) -> Tensor:
        """float64 log-probabilities to sample from: the normalized logits, or the log of
        the probabilities themselves (not the clamped logits, so a category of
        probability 0 is never drawn)."""
        if self._param is self.__dict__.get("logits"):
            return self.logits.detach().to(dt.float64)
        return self.probs.detach().to(dt.float64).log()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape) + (self._num_events,)
        u = standard_uniform(shape, self._param)
        return (self._log_weights() - (-u.log()).log()).argmax(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, log_pmf = broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        logits = self.logits.clamp(min=dt.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(self._num_events, dtype=dt.int64, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + self._batch_shape)
        return values
