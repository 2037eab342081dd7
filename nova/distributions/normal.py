"""``Normal(loc, scale)``: the Gaussian distribution."""
from __future__ import annotations

import math
from typing import Any

from nova.distributions.distribution import LocScale
from nova.tensor.creation import randn
from nova.tensor.special import ndtr, ndtri
from nova.tensor.tensor import Tensor

__all__ = ["Normal"]


class Normal(LocScale):
    """The normal distribution with mean ``loc`` and standard deviation ``scale``.

    ``cdf`` is ``ndtr`` and ``icdf`` ``ndtri`` of the standardized value (the same
    functions as PyTorch's ``erf`` forms, with full relative precision in the lower
    tail, where ``(1 + erf(z / sqrt(2))) / 2`` rounds to 0)."""

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return (-((value - self.loc) ** 2) / (2 * var) - self.scale.log()
                - math.log(math.sqrt(2 * math.pi)))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ndtr((value - self.loc) / self.scale)

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * ndtri(value)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()
