"""``MultivariateNormal(loc, covariance_matrix=... | precision_matrix=... | scale_tril=...)``:
the Gaussian over vectors.

Everything is computed from the lower-triangular factor ``L`` of the covariance
(``scale_tril`` as given, else ``nv.linalg.cholesky`` of ``covariance_matrix``, or of the
flipped ``precision_matrix`` as PyTorch does), with ``nv.linalg.solve_triangular`` for
the solves. A ``covariance_matrix`` or ``precision_matrix`` that is not positive-definite
raises ``nv.linalg.LinAlgError`` from the Cholesky factorization, which needs the values:
building the distribution from one of them realizes the pending work (as PyTorch's
reads them back), so inside an ``nv.compile`` function pass ``scale_tril``. With
validation on, a covariance or precision the host already knows is checked first
(symmetric and positive-definite) and a bad one raises ``ValueError``, as PyTorch's
``constraints.positive_definite``."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova import linalg
from nova.core.shapes import broadcast_shapes
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.utils import lazy_property
from nova.tensor.creation import eye, randn
from nova.tensor.elementary import isclose
from nova.tensor.numeric import flip
from nova.tensor.tensor import Tensor

__all__ = ["MultivariateNormal"]


class _PositiveDefinite(constraints.Constraint):
    """Symmetric (to ``atol=1e-6``) positive-definite square matrices, as PyTorch's
    ``constraints.positive_definite``; host values are checked with numpy (a
    symmetric matrix is positive-definite when its eigenvalues are), tensors with
    ``cholesky_ex``'s ``info``."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            if value.shape[-1] != value.shape[-2]:
                return np.zeros(value.shape[:-2], dtype=bool)
            symmetric = np.isclose(value, np.swapaxes(value, -1, -2), atol=1e-6).all((-2, -1))
            return symmetric & (np.linalg.eigvalsh(value) > 0).all(-1)
        symmetric = isclose(value, value.mT, atol=1e-6).all(-1).all(-1)
        return symmetric & (linalg.cholesky_ex(value).info == 0)


positive_definite = _PositiveDefinite()


def _precision_to_scale_tril(P: Tensor) -> Tensor:
    """The lower factor of ``P^-1``, without inverting ``P``: with ``J`` the reversal,
    ``chol(J P J) = J U J`` for ``P = U U^T``, ``U`` upper-triangular, so ``L = U^-T``
    (PyTorch's formula)."""
    Lf = linalg.cholesky(flip(P, (-2, -1)))
    L_inv = flip(Lf, (-2, -1)).mT
    return linalg.solve_triangular(L_inv, eye(P.shape[-1], dtype=P.dtype, device=P.device),
                                   upper=False)


def _batch_mahalanobis(L: Tensor, x: Tensor) -> Tensor:
    """``x^T (L L^T)^-1 x`` over the last dim of ``x``, batch dims broadcast."""
    return linalg.solve_triangular(L, x.unsqueeze(-1), upper=False).squeeze(-1).pow(2).sum(-1)


def _half_log_det(L: Tensor) -> Tensor:
    return L.diagonal(0, -2, -1).log().sum(-1)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution with mean ``loc`` and covariance given by
    exactly one of ``covariance_matrix``, ``precision_matrix`` (its inverse) or
    ``scale_tril`` (lower-triangular with a positive diagonal, covariance ``scale_tril
    @ scale_tril.mT``); leading dims of either argument are batch dims."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": positive_definite,
                       "precision_matrix": positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None):
        if not isinstance(loc, Tensor) or loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {name: m for name, m in (("covariance_matrix", covariance_matrix),
                                         ("precision_matrix", precision_matrix),
                                         ("scale_tril", scale_tril)) if m is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        (name, matrix), = given.items()
        if matrix.ndim < 2 or matrix.shape[-1] != matrix.shape[-2]:
            raise ValueError(f"{name} must be a square matrix with optional leading batch "
                             f"dimensions, got shape {matrix.shape}")
        if matrix.shape[-1] != loc.shape[-1]:
            raise ValueError(f"MultivariateNormal: loc of shape {loc.shape} and {name} of "
                             f"shape {matrix.shape} disagree on the event size")
        batch_shape = broadcast_shapes("MultivariateNormal", matrix.shape[:-2], loc.shape[:-1])
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape: Any, _instance: Any = None) -> MultivariateNormal:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape + self.event_shape * 2))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return self._batch_shape + self._event_shape * 2

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        inverse = linalg.solve_triangular(L, eye(L.shape[-1], dtype=L.dtype, device=L.device),
                                          upper=False)
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
    term2 = linalg.solve_triangular(lq, lp, upper=False).pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)
