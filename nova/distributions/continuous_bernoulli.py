"""``ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501))``: the
continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham, 2019)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.exp_family import ExponentialFamily
from nova.distributions.utils import (
    broadcast_all, clamp_probs, is_number, known_values, lazy_property,
    logits_to_probs, probs_to_logits, softplus,
)
from nova.tensor import ops
from nova.tensor.creation import rand
from nova.tensor.tensor import Tensor

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """The density ``C(p) p^x (1 - p)^(1 - x)`` on [0, 1], ``C(p)`` the normalizing
    constant; ``probs`` (in (0, 1), clamped to ``[eps, 1 - eps]`` as PyTorch does) or
    ``logits`` (real, ``probs = sigmoid(logits)``), not both. ``probs`` is not a
    probability nor ``logits`` a log-odds; the names follow ``Bernoulli``.

    Near ``probs = 1/2`` (inside ``lims``) the closed forms divide 0 by 0, so there the
    log normalizer, mean and variance are Taylor expansions around 1/2 and the cdf and
    icdf are the uniform's, as in PyTorch. ``rsample`` is ``icdf(u)`` for ``u``
    uniform: differentiable in the parameter. An exponential family with natural
    parameter ``logits``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs: Tensor | float | None = None, logits: Tensor | float | None = None,
                 lims: tuple[float, float] = (0.499, 0.501),
                 validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = is_number(probs)
            (given,) = broadcast_all(probs)
            self._given_probs = given
            self.probs = clamp_probs(given)
        else:
            is_scalar = is_number(logits)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        super().__init__(() if is_scalar else self._param.shape, validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        """``probs`` as given: the clamped ones are pending (PyTorch checks the given
        ones too, before clamping)."""
        value = getattr(self, param)
        if param == "probs" and "_given_probs" in self.__dict__:
            return value, known_values(self._given_probs)
        return value, known_values(value)

    def expand(self, batch_shape: Any, _instance: Any = None) -> ContinuousBernoulli:
        return self._expand_param(ContinuousBernoulli, batch_shape, _instance, _lims=self._lims)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    def _outside_unstable_region(self) -> Tensor:
        return ops.logical_or(self.probs <= self._lims[0], self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        """``probs``, replaced by ``lims[0]`` inside the unstable region (so the
        unused branch of each ``where`` stays finite, and so does its gradient)."""
        return ops.where(self._outside_unstable_region(), self.probs, self._lims[0])

    def _cont_bern_log_norm(self) -> Tensor:
        """``log C(probs)``: ``log(|log1p(-p) - log p| / |1 - 2p|)``, or its Taylor
        expansion ``log 2 + (4/3 + 104/45 x) x`` in ``x = (p - 1/2)^2`` near 1/2."""
        cut = self._cut_probs()
        below = ops.where(cut <= 0.5, cut, 0.0)
        above = ops.where(cut >= 0.5, cut, 1.0)
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - ops.where(
            cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ops.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ops.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        variances = (cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2)
                     + 1.0 / ((-cut).log1p() - cut.log()).pow(2))
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ops.where(self._outside_unstable_region(), variances, taylor)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        """``-binary_cross_entropy_with_logits(logits, value) + log C``, the cross
        entropy as sums of softplus terms (no cancellation in the tails)."""
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        bce = value * softplus(-logits) + (1 - value) * softplus(logits)
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = ops.where(self._outside_unstable_region(), cdfs, value)
        return ops.where(value <= 0.0, 0.0, ops.where(value >= 1.0, 1.0, unbounded))

    def icdf(self, value: Tensor) -> Tensor:
        cut = self._cut_probs()
        inverse = (((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p())
                   / (cut.log() - (-cut).log1p()))
        return ops.where(self._outside_unstable_region(), inverse, value)

    def entropy(self) -> Tensor:
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        """``log((exp(x) - 1) / x)``, or its Taylor expansion near 0 (the natural
        parameter inside the unstable region)."""
        outside = ops.logical_or(x <= self._lims[0] - 0.5, x > self._lims[1] - 0.5)
        cut = ops.where(outside, x, self._lims[0] - 0.5)
        log_norm = cut.expm1().abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return ops.where(outside, log_norm, taylor)
