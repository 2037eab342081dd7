"""``Chi2(df)``: the chi-squared distribution, ``Gamma(df / 2, 1 / 2)``."""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.gamma import Gamma
from nova.distributions.utils import known_values
from nova.tensor.tensor import Tensor

__all__ = ["Chi2"]


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom: exactly
    ``Gamma(concentration=0.5 * df, rate=0.5)`` (sampling, ``rsample`` gradients in
    ``df`` and ``cdf`` included)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Tensor | float, validate_args: bool | None = None):
        self._given_df = df
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        """``df`` as given (the property is a pending product of the concentration),
        or twice the host's copy of the concentration (after ``expand``)."""
        known = known_values(self.__dict__.get("_given_df"))
        if known is None:
            half = known_values(self.concentration)
            known = None if half is None else half * 2
        return self.df, known

    def expand(self, batch_shape: Any, _instance: Any = None) -> Chi2:
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2
