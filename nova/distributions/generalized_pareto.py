"""``GeneralizedPareto(loc, scale, concentration)``: the generalized Pareto
distribution."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all, is_number
from nova.tensor import ops
from nova.tensor.creation import rand
from nova.tensor.elementary import isclose
from nova.tensor.tensor import Tensor

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution with ``loc``, ``scale`` and shape
    ``concentration`` (xi): survival function ``(1 + xi z)^(-1/xi)`` for ``z = (x -
    loc) / scale`` (``exp(-z)`` at ``xi = 0``), support ``[loc, loc - scale / xi]`` for
    ``xi < 0`` and ``[loc, inf)`` otherwise. Special cases: Exponential (``loc = 0, xi
    = 0``), Pareto (``xi > 0, loc = scale / xi``), Uniform (``xi = -1``). As in
    PyTorch (after TensorFlow Probability), a ``concentration`` within ``isclose`` of 0
    is taken as 0. ``rsample`` is ``icdf(u)``, differentiable in all three."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 concentration: Tensor | float, validate_args: bool | None = None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        scalar = is_number(loc) and is_number(scale) and is_number(concentration)
        super().__init__(() if scalar else self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> GeneralizedPareto:
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = tuple(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _safe_concentration(self) -> tuple[Tensor, Tensor]:
        """Whether the concentration is (close to) 0, and the concentration with 1
        there (so the unused branch is finite)."""
        eq_zero = isclose(self.concentration, 0.0)
        return eq_zero, ops.where(eq_zero, 1.0, self.concentration)

    def _z(self, x: Tensor) -> Tensor:
        return (x - self.loc) / self.scale

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._safe_concentration()
        y = 1 / safe + 1
        where_nonzero = ops.where(y == 0, y, y * (safe * z).log1p())
        return -self.scale.log() - ops.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value: Tensor) -> Tensor:
        """``log P(X > value)``."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._safe_concentration()
        return ops.where(eq_zero, -z, -(safe * z).log1p() / safe)

    def log_cdf(self, value: Tensor) -> Tensor:
        """``log P(X <= value)``."""
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        eq_zero, safe = self._safe_concentration()
        logu = (-value).log1p()
        where_nonzero = self.loc + self.scale / safe * (-safe * logu).expm1()
        where_zero = self.loc - self.scale * logu
        return ops.where(eq_zero, where_zero, where_nonzero)

    @property
    def mean(self) -> Tensor:
        valid = self.concentration < 1
        safe = ops.where(valid, self.concentration, 0.5)
        return ops.where(valid, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self) -> Tensor:
        valid = self.concentration < 0.5
        safe = ops.where(valid, self.concentration, 0.25)
        result = self.scale ** 2 / ((1 - safe) ** 2 * (1 - 2 * safe))
        return ops.where(valid, result, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    def entropy(self) -> Tensor:
        return (self.scale.log() + self.concentration + 1).expand(self._batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        lower = self.loc
        upper = ops.where(self.concentration < 0, lower - self.scale / self.concentration,
                          math.inf)
        return constraints.interval(lower, upper)
