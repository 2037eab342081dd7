"""``MultivariateNormal(loc, scale_tril=...)``: the Gaussian over vectors, from a
lower-triangular factor of its covariance.

Only ``scale_tril`` is accepted: the ``covariance_matrix`` and ``precision_matrix``
forms need a Cholesky factorization, which Nova does not have yet. Triangular solves
are a blocked forward substitution written with slices and matmuls (``solve_lower``),
so they are differentiable and stay in the lazy graph; the graph grows linearly with
the event size ``n`` (about 4n nodes per solve), which suits the small ``n`` (up to a
few dozen) such distributions usually have."""
from __future__ import annotations

import math
from typing import Any

from nova.core.shapes import broadcast_shapes
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import lazy_property
from nova.tensor.creation import eye, randn
from nova.tensor.movement import cat
from nova.tensor.tensor import Tensor

__all__ = ["MultivariateNormal"]


def solve_lower(L: Tensor, B: Tensor) -> Tensor:
    """``X`` with ``L @ X = B`` for lower-triangular ``L`` (..., n, n) and ``B`` (..., n,
    k), batch dims broadcast: forward substitution by halves, ``X1 = L11^-1 B1`` and
    ``X2 = L22^-1 (B2 - L21 X1)``, down to divisions by the diagonal."""
    n = L.shape[-1]
    if n == 1:
        return B / L
    h = n // 2
    x1 = solve_lower(L[..., :h, :h], B[..., :h, :])
    x2 = solve_lower(L[..., h:, h:], B[..., h:, :] - L[..., h:, :h] @ x1)
    return cat([x1, x2], -2)


def _batch_mahalanobis(L: Tensor, x: Tensor) -> Tensor:
    """``x^T (L L^T)^-1 x`` over the last dim of ``x``, batch dims broadcast."""
    return solve_lower(L, x.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)


def _half_log_det(L: Tensor) -> Tensor:
    return L.diagonal(0, -2, -1).log().sum(-1)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution with mean ``loc`` and covariance
    ``scale_tril @ scale_tril.mT`` (``scale_tril`` lower-triangular with a positive
    diagonal; leading dims of either argument are batch dims)."""

    arg_constraints = {"loc": constraints.real_vector, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None):
        if not isinstance(loc, Tensor) or loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [covariance_matrix is not None, precision_matrix is not None,
                 scale_tril is not None]
        if sum(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        if scale_tril is None:
            name = "covariance_matrix" if given[0] else "precision_matrix"
            raise NotImplementedError(
                f"MultivariateNormal: {name} needs a Cholesky factorization, which Nova "
                "does not have yet; pass its lower-triangular factor as scale_tril")
        if scale_tril.ndim < 2 or scale_tril.shape[-1] != scale_tril.shape[-2]:
            raise ValueError(f"scale_tril must be a square matrix with optional leading batch "
                             f"dimensions, got shape {scale_tril.shape}")
        if scale_tril.shape[-1] != loc.shape[-1]:
            raise ValueError(f"MultivariateNormal: loc of shape {loc.shape} and scale_tril of "
                             f"shape {scale_tril.shape} disagree on the event size")
        batch_shape = broadcast_shapes("MultivariateNormal", scale_tril.shape[:-2],
                                       loc.shape[:-1])
        self.scale_tril = scale_tril.expand(batch_shape + (-1, -1))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        self._unbroadcasted_scale_tril = scale_tril

    def expand(self, batch_shape: Any, _instance: Any = None) -> MultivariateNormal:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        new.scale_tril = self.scale_tril.expand(batch_shape + self.event_shape * 2)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return self._batch_shape + self._event_shape * 2

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        inverse = solve_lower(L, eye(L.shape[-1], dtype=L.dtype, device=L.device))
        return (inverse.mT @ inverse).expand(self._matrix_shape())

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            self._batch_shape + self._event_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        L = self._unbroadcasted_scale_tril
        m = _batch_mahalanobis(L, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - _half_log_det(L)

    def entropy(self) -> Tensor:
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + _half_log_det(self._unbroadcasted_scale_tril)
        return h.expand(self._batch_shape)


def kl_multivariate_normal(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    """``KL(p || q)``: ``log det Lq - log det Lp + (|Lq^-1 Lp|_F^2 + |Lq^-1 (mq - mp)|^2
    - n) / 2``."""
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two Multivariate Normals with different "
                         f"event shapes cannot be computed: {p.event_shape} and "
                         f"{q.event_shape}")
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    half_term1 = _half_log_det(lq) - _half_log_det(lp)
    term2 = solve_lower(lq, lp).pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)
