"""``RelaxedBernoulli(temperature, probs=None, logits=None)`` (the binary Concrete /
Gumbel-sigmoid distribution on (0, 1)) and ``LogitRelaxedBernoulli``, its logit."""
from __future__ import annotations

from typing import Any

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import SigmoidTransform
from nova.distributions.utils import (
    broadcast_all, is_number, lazy_property, logits_to_probs, probs_to_logits,
    softplus, standard_uniform,
)
from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


def temperature_arg(op: str, temperature: Any, like: Tensor) -> Tensor:
    """``temperature`` as a tensor (a number becomes one of ``like``'s dtype; PyTorch
    takes a tensor only, and a number fails there in ``log_prob``)."""
    if isinstance(temperature, Tensor):
        return temperature
    if is_number(temperature):
        return tensor(float(temperature), dtype=like.dtype, device=like.device)
    raise TypeError(f"{op}: temperature must be a Tensor or a number, got "
                    f"{type(temperature).__name__}")


def logistic_noise(shape: tuple[int, ...], like: Tensor) -> Tensor:
    """``log u - log(1 - u)`` for ``u`` uniform, drawn and transformed in float64
    (``u`` kept off 0 so the noise is finite) and rounded to ``like``'s dtype."""
    u = standard_uniform(shape, like).clamp(min=dt.finfo(dt.float64).tiny)
    return (u.log() - (-u).log1p()).to(like.dtype)


class LogitRelaxedBernoulli(Distribution):
    """The logit of a ``RelaxedBernoulli``: ``(logits + L) / temperature`` for ``L``
    standard logistic noise (Maddison et al., 2017). ``temperature`` is not a batch
    parameter (as in PyTorch, it broadcasts in the formulas); the batch shape is that of
    ``probs``/``logits``. ``rsample`` is differentiable in ``probs``/``logits`` and in
    ``temperature``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature: Tensor | float, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None, validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = is_number(probs)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = is_number(logits)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self.temperature = temperature_arg(type(self).__name__, temperature, self._param)
        super().__init__(() if is_scalar else self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> LogitRelaxedBernoulli:
        return self._expand_param(LogitRelaxedBernoulli, batch_shape, _instance,
                                  temperature=self.temperature)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """``(logits + L) / temperature``: the given logits (PyTorch goes through the
        clamped probabilities, the same draw unless |logits| > 16.6 in float32), or
        those of the probabilities clamped to ``[eps, 1 - eps]``."""
        shape = self._extended_shape(sample_shape)
        return (self.logits.expand(shape) + logistic_noise(shape, self._param)) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        """``log t + d - 2 softplus(d)`` with ``d = logits - t value``."""
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * softplus(diff)


class RelaxedBernoulli(TransformedDistribution):
    """A relaxed ``Bernoulli`` on (0, 1): ``sigmoid`` of a ``LogitRelaxedBernoulli``
    draw, reparameterizable (the Gumbel-sigmoid / binary Concrete). As ``temperature``
    goes to 0 the draws approach 0/1 coins with ``P(1) = probs``; at any temperature
    ``P(X > 1/2) = probs``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature: Tensor | float, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None, validate_args: bool | None = None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> RelaxedBernoulli:
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
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
