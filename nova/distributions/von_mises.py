"""``VonMises(loc, concentration)``: the von Mises distribution on the circle."""
from __future__ import annotations

import math
from typing import Any

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all, lazy_property
from nova.tensor import ops
from nova.tensor.creation import ones_like, rand
from nova.tensor.grad_mode import no_grad
from nova.tensor.sampling_ops import _first_accepted, _until_accepted
from nova.tensor.special import i0e
from nova.tensor.tensor import Tensor

__all__ = ["VonMises"]

# Proposals per element in one pass of Best and Fisher's sampler (acceptance >= 0.65
# for every concentration, so a second pass is needed for about 1e-9 of the elements;
# module constant so a test can force the retry path).
VON_MISES_ROUNDS = 20
# Below this the series of I1 is summed, above it the asymptotic expansion.
_I1_SWITCH = 20.0


def _i1e_series(x: Tensor) -> Tensor:
    """``exp(-x) I1(x)`` for ``0 <= x <= 20`` from the power series ``sum (x/2)^(2k+1)
    / (k! (k+1)!)`` (positive terms: no cancellation; 60 terms reach 1e-17
    relative at x = 20)."""
    half = x * 0.5
    quarter_sq = half * half
    term = half
    total = half
    for k in range(1, 60):
        term = term * quarter_sq / (k * (k + 1))
        total = total + term
    return total * (-x).exp()


def _i1e_asymptotic(x: Tensor) -> Tensor:
    """``exp(-x) I1(x)`` for ``x >= 20`` from Hankel's expansion ``(2 pi x)^(-1/2) sum
    (-1)^k prod_{j<=k} (4 - (2j-1)^2) / (k! (8x)^k)`` (30 terms: 1e-16 at x = 20)."""
    term = ones_like(x)
    total = term
    for k in range(1, 30):
        term = term * (-(4.0 - (2 * k - 1) ** 2)) / (8.0 * k * x)
        total = total + term
    return total * (2 * math.pi * x).rsqrt()


def _log_i0(x: Tensor) -> Tensor:
    """``log I0(x)`` for ``x >= 0``, to float64 rounding (PyTorch uses polynomial fits
    good to about 1e-7)."""
    return i0e(x).log() + x


def _bessel_ratio(x: Tensor) -> Tensor:
    """``I1(x) / I0(x)`` for ``x >= 0``, computed in float64."""
    w = x.to(dt.float64)
    small = _i1e_series(w.clamp(max=_I1_SWITCH))
    large = _i1e_asymptotic(w.clamp(min=_I1_SWITCH))
    i1e = ops.where(w < _I1_SWITCH, small, large)
    return (i1e / i0e(w)).to(x.dtype)


def _best_fisher_pass(loc: Tensor, kappa: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
    """One pass of Best and Fisher's (1979) rejection sampler in float64:
    ``VON_MISES_ROUNDS`` proposals per element, the first accepted kept."""
    shape = loc.shape + (VON_MISES_ROUNDS,)
    u1, u2, u3 = (rand(shape, dtype=dt.float64, device=loc.device) for _ in range(3))
    z = (math.pi * u1).cos()
    r1, k1 = r.unsqueeze(-1), kappa.unsqueeze(-1)
    f = ((1 + r1 * z) / (r1 + z)).clamp(-1.0, 1.0)
    c = k1 * (r1 - f)
    ok = ops.logical_or(c * (2 - c) - u2 > 0, (c / u2).log() + 1 - c >= 0)
    angle = (u3 - 0.5).sign() * f.acos()
    return _first_accepted(ok, angle)


class VonMises(Distribution):
    """The von Mises distribution with mean direction ``loc`` (an angle in radians, any
    real: taken modulo 2 pi) and ``concentration`` (kappa > 0): density ``exp(kappa
    cos(x - loc)) / (2 pi I0(kappa))``. ``mean`` and ``variance`` are the circular ones
    (``loc`` and ``1 - I1(kappa)/I0(kappa)``).

    ``sample`` is Best and Fisher's rejection method in float64 (as PyTorch), draws in
    ``[-pi, pi)``; it realizes at once (a fixed number of proposals per element and
    another pass for the elements left without an accepted one; see
    ``nova/tensor/sampling_ops.py``). No ``rsample`` (PyTorch has none)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc: Tensor | float, concentration: Tensor | float,
                 validate_args: bool | None = None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, (), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> VonMises:
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = tuple(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_norm = _log_i0(self.concentration.to(dt.float64)).to(self.concentration.dtype)
        return self.concentration * (value - self.loc).cos() - math.log(2 * math.pi) - log_norm

    @lazy_property
    def _proposal_r(self) -> Tensor:
        """Best and Fisher's ``r`` (float64), by its Taylor form below kappa = 1e-5."""
        kappa = self.concentration.detach().to(dt.float64)
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal = (1 + rho ** 2) / (2 * rho)
        return ops.where(kappa < 1e-5, 1 / kappa + kappa, proposal)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            loc = self.loc.detach().to(dt.float64).expand(shape)
            kappa = self.concentration.detach().to(dt.float64).expand(shape)
            r = self._proposal_r.expand(shape)
            x = _until_accepted("VonMises.sample", lambda: _best_fisher_pass(loc, kappa, r))
            return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)

    @property
    def mean(self) -> Tensor:
        """The circular mean, ``loc``."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        """The circular variance, ``1 - I1(kappa) / I0(kappa)``."""
        return 1 - _bessel_ratio(self.concentration)
