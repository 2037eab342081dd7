"""``Laplace(loc, scale)``: the Laplace (double exponential) distribution."""
from __future__ import annotations

from typing import Any

from nova.core import dtypes as dt
from nova.distributions.distribution import LocScale
from nova.distributions.utils import standard_uniform
from nova.tensor import ops
from nova.tensor.tensor import Tensor

__all__ = ["Laplace"]


class Laplace(LocScale):
    """The Laplace distribution with location ``loc`` and scale ``scale``.

    ``cdf`` and ``icdf`` take each half of the line on its own (``exp(z) / 2`` below the
    location, ``log(2p)`` below one half), where PyTorch's one-line forms subtract from
    1/2 and lose the digits of tail values."""

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return 2 ** 0.5 * self.scale

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """``loc - scale sign(u) log1p(-|u|)`` for ``u`` uniform in ``[eps - 1, 1)``
        (PyTorch's; drawn in float64, so ``|u| < 1`` and the result is finite)."""
        shape = self._extended_shape(sample_shape)
        eps = dt.finfo(dt.float64).eps
        u = standard_uniform(shape, self.loc) * (2 - eps) + (eps - 1)
        noise = (u.sign() * (-u.abs()).log1p()).to(self.loc.dtype)
        return self.loc - self.scale * noise

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        below = z < 0
        return ops.where(below, 0.5 * ops.where(below, z, 0.0).exp(), 0.5 - 0.5 * (-z).expm1())

    def icdf(self, value: Tensor) -> Tensor:
        low = value < 0.5
        lower = self.loc + self.scale * (2 * ops.where(low, value, 0.25)).log()
        upper = self.loc - self.scale * (2 - 2 * ops.where(low, 0.75, value)).log()
        return ops.where(low, lower, upper)

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()

