"""``Cauchy(loc, scale)``: the Cauchy (Lorentz) distribution."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions.distribution import LocScale
from nova.distributions.utils import standard_uniform
from nova.tensor import ops
from nova.tensor.creation import full
from nova.tensor.elementary import atan2
from nova.tensor.tensor import Tensor

__all__ = ["Cauchy"]


class Cauchy(LocScale):
    """The Cauchy distribution with median ``loc`` and half width at half maximum
    ``scale``; its mean is undefined (NaN) and its variance infinite.

    ``cdf`` is ``atan2(1, -z) / pi`` (equal to PyTorch's ``atan(z) / pi + 1/2``, without
    the cancellation that zeroes the far lower tail) and ``icdf`` is ``-1 / tan(pi p)``
    (resp. ``1 / tan(pi (1 - p))``) in the outer quarters, where ``tan(pi (p - 1/2))``
    would amplify the rounding of ``p - 1/2``."""

    @property
    def mean(self) -> Tensor:
        return full(self._extended_shape(), math.nan, dtype=self.loc.dtype,
                    device=self.loc.device)

    @property
    def variance(self) -> Tensor:
        return full(self._extended_shape(), math.inf, dtype=self.loc.dtype,
                    device=self.loc.device)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = standard_uniform(shape, self.loc)
        return self.loc + (math.pi * (u - 0.5)).tan().to(self.loc.dtype) * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return atan2(1.0, -z) / math.pi

    def icdf(self, value: Tensor) -> Tensor:
        low, high = value < 0.25, value > 0.75
        middle = (math.pi * (ops.where(low | high, 0.5, value) - 0.5)).tan()
        lower = -(math.pi * ops.where(low, value, 0.25)).tan().reciprocal()
        upper = (math.pi * (1 - ops.where(high, value, 0.75))).tan().reciprocal()
        z = ops.where(low, lower, ops.where(high, upper, middle))
        return z * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()
