"""``Beta(concentration1, concentration0)``: the beta distribution on [0, 1]."""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.dirichlet import Dirichlet
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all, is_number, known_values
from nova.tensor.creation import tensor
from nova.tensor.movement import stack
from nova.tensor.tensor import Tensor

__all__ = ["Beta"]


class Beta(Distribution):
    """The beta distribution with ``concentration1`` (alpha) and ``concentration0``
    (beta): a two-category ``Dirichlet`` (PyTorch's construction), its first
    coordinate. ``rsample`` is differentiable in both concentrations (see
    ``Dirichlet``)."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Tensor | float, concentration0: Tensor | float,
                 validate_args: bool | None = None):
        if is_number(concentration1) and is_number(concentration0):
            both = tensor([float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            both = stack([concentration1, concentration0], -1)
        self._given = (concentration1, concentration0)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        """The concentration as given (the property is a pending slice of the
        stacked pair)."""
        given = self.__dict__.get("_given")
        value = getattr(self, param)
        if given is None:
            return value, known_values(value)
        return value, known_values(given[0 if param == "concentration1" else 1])

    def expand(self, batch_shape: Any, _instance: Any = None) -> Beta:
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = tuple(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    def __repr__(self) -> str:
        parts = []
        for name, given in zip(("concentration1", "concentration0"),
                               self.__dict__.get("_given", (None, None))):
            host = known_values(given)
            parts.append(f"{name}: {host.item()}" if host is not None and host.size == 1
                         else f"{name}: {tuple(self.batch_shape)}")
        return f"Beta({', '.join(parts)})"
