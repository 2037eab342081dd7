"""``Dirichlet(concentration)``: the Dirichlet distribution on the simplex."""
from __future__ import annotations

from typing import Any

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.tensor import ops
from nova.tensor.creation import arange
from nova.tensor.elementary import xlogy
from nova.tensor.sampling_ops import log_standard_gamma
from nova.tensor.special import digamma, lgamma
from nova.tensor.tensor import Tensor

__all__ = ["Dirichlet"]


def _simplex_clamped(x: Tensor) -> Tensor:
    """Draws clamped into ``[tiny, 1 - eps/2]`` in value only, as PyTorch clamps its
    Dirichlet draws (outside autograd): every coordinate strictly inside (0, 1)."""
    info = dt.finfo(x.dtype)
    return x + (x.clamp(min=info.tiny, max=1.0 - info.eps / 2) - x).detach()


class Dirichlet(Distribution):
    """The Dirichlet distribution with ``concentration`` (alpha, positive, at least
    1-D: the last dim is the event, the others a batch).

    ``rsample`` normalizes Gamma(alpha_i, 1) draws, in log space (a softmax of their
    logs: small concentrations, whose draws underflow, still give a point of the
    simplex), and is differentiable in ``concentration`` through the Gamma draws'
    exact implicit gradients and the normalization. That is a pathwise gradient of
    the same expectation as PyTorch's, though per draw not the same numbers (PyTorch
    differentiates each coordinate's Beta marginal; both are unbiased). A draw
    realizes at once (see ``Gamma``)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None):
        if not isinstance(concentration, Tensor):
            raise TypeError(f"Dirichlet: `concentration` must be a Tensor, got "
                            f"{type(concentration).__name__}")
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Dirichlet:
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self.event_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        log_gamma = log_standard_gamma(self.concentration.expand(shape))
        return _simplex_clamped(ops.softmax(log_gamma, -1).to(self.concentration.dtype))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (xlogy(self.concentration - 1.0, value).sum(-1)
                + lgamma(self.concentration.sum(-1)) - lgamma(self.concentration).sum(-1))

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        """``(alpha - 1)+ / sum``; where every alpha is below 1, PyTorch's one-hot at
        the argmax of that (all-NaN) row: the first category."""
        shifted = (self.concentration - 1).clamp(min=0.0)
        mode = shifted / shifted.sum(-1, keepdim=True)
        below = (self.concentration < 1).all(-1, keepdim=True)
        k = self.concentration.shape[-1]
        first = ops.eq(arange(k, device=self.concentration.device), 0).to(mode.dtype)
        return ops.where(below, first, mode)

    @property
    def variance(self) -> Tensor:
        total = self.concentration.sum(-1, keepdim=True)
        return (self.concentration * (total - self.concentration)
                / (total.pow(2) * (total + 1)))

    def entropy(self) -> Tensor:
        k = self.concentration.shape[-1]
        a0 = self.concentration.sum(-1)
        return (lgamma(self.concentration).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0)
                - ((self.concentration - 1.0) * digamma(self.concentration)).sum(-1))
