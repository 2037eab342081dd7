"""``LowRankMultivariateNormal(loc, cov_factor, cov_diag)``: the Gaussian over vectors
with covariance ``cov_factor @ cov_factor.mT + diag(cov_diag)``."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova import linalg
from nova.core.shapes import broadcast_shapes
from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.multivariate_normal import MultivariateNormal, _batch_mahalanobis
from nova.distributions.utils import known_values, lazy_property
from nova.tensor.creation import eye, randn
from nova.tensor.movement import broadcast_tensors
from nova.tensor.tensor import Tensor

__all__ = ["LowRankMultivariateNormal"]


def _batch_mv(matrix: Tensor, vector: Tensor) -> Tensor:
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


def _plus_identity(matrix: Tensor) -> Tensor:
    return matrix + eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)


def _batch_capacitance_tril(W: Tensor, D: Tensor) -> Tensor:
    """The Cholesky factor of the capacitance ``I + W^T D^-1 W`` (rank x rank)."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return linalg.cholesky(_plus_identity(Wt_Dinv @ W))


def _batch_lowrank_logdet(W: Tensor, D: Tensor, capacitance_tril: Tensor) -> Tensor:
    """``log det(W W^T + D) = log det C + log det D`` (the matrix determinant lemma)."""
    return 2 * capacitance_tril.diagonal(0, -2, -1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W: Tensor, D: Tensor, x: Tensor,
                               capacitance_tril: Tensor) -> Tensor:
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity: ``x^T D^-1 x - |C^-1/2 W^T
    D^-1 x|^2``."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)


def _batch_trace_XXT(bmat: Tensor) -> Tensor:
    """``trace(X X^T)`` over the last two dims (the squared Frobenius norm)."""
    return bmat.pow(2).sum((-2, -1))


class LowRankMultivariateNormal(Distribution):
    """The multivariate normal with mean ``loc`` and covariance ``cov_factor @
    cov_factor.mT + diag(cov_diag)``, ``cov_factor`` of shape ``batch + (n, rank)`` and
    ``cov_diag`` positive of shape ``batch + (n,)``. The log-density and entropy only
    factor the rank x rank capacitance matrix ``I + W^T D^-1 W`` (Woodbury identity and
    determinant lemma), so a rank much below ``n`` is cheap. Building the distribution
    factors it with ``linalg.cholesky``, which reads the values (one realization), as
    PyTorch's does. ``rsample`` is ``loc + W e_W + sqrt(D) e_D``."""

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, cov_factor: Tensor, cov_diag: Tensor,
                 validate_args: bool | None = None):
        for name, value in (("loc", loc), ("cov_factor", cov_factor), ("cov_diag", cov_diag)):
            if not isinstance(value, Tensor):
                raise TypeError(f"LowRankMultivariateNormal: {name} must be a Tensor, got "
                                f"{type(value).__name__}")
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.ndim < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape "
                             f"{event_shape[0]} x m, got {tuple(cov_factor.shape)}")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}, "
                             f"got {tuple(cov_diag.shape)}")
        try:
            loc_, self.cov_factor, cov_diag_ = broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                             f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}"
                             ) from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = tuple(self.loc.shape[:-1])
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._given = {"loc": loc, "cov_factor": cov_factor, "cov_diag": cov_diag}
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        """The parameter's host values, broadcast from the argument as given (the
        broadcast parameter is a pending slice), so a bad ``cov_diag`` is reported
        before the capacitance is factored."""
        value = getattr(self, param)
        given = known_values(self.__dict__.get("_given", {}).get(param))
        if given is None:
            return value, known_values(value)
        return value, np.broadcast_to(given, tuple(value.shape))

    def expand(self, batch_shape: Any, _instance: Any = None) -> LowRankMultivariateNormal:
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        loc_shape = batch_shape + self.event_shape
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + self.cov_factor.shape[-1:])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return self._batch_shape + self._event_shape * 2

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1)
                + self._unbroadcasted_cov_diag).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        """``sqrt(D) chol(I + D^-1/2 W W^T D^-1/2)``: the lower factor of the
        covariance, without forming it."""
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / d_sqrt
        factor = linalg.cholesky(_plus_identity(Dinvsqrt_W @ Dinvsqrt_W.mT))
        return (d_sqrt * factor).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        W = self._unbroadcasted_cov_factor
        return (W @ W.mT + self._unbroadcasted_cov_diag.diag_embed()).expand(
            self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """``D^-1 - A^T A`` with ``A = C^-1/2 W^T D^-1`` (Woodbury)."""
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = self._unbroadcasted_cov_diag.reciprocal().diag_embed() - A.mT @ A
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_w = randn(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def _log_det(self) -> Tensor:
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                     self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, diff,
                                       self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self) -> Tensor:
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return H if not self._batch_shape else H.expand(self._batch_shape)


def _check_events(p: Distribution, q: Distribution) -> None:
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two (Low Rank) Multivariate Normals with "
                         f"different event shapes cannot be computed: {p.event_shape} and "
                         f"{q.event_shape}")


def _woodbury_A(q: LowRankMultivariateNormal) -> Tensor:
    """``A = C_q^-1/2 W_q^T D_q^-1``: ``Sigma_q^-1 = D_q^-1 - A^T A``."""
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return linalg.solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)


def kl_lowrank_lowrank(p: LowRankMultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    """``KL(p || q)`` for two low-rank normals (PyTorch's expansion of
    ``trace(Sigma_q^-1 Sigma_p)``)."""
    _check_events(p, q)
    term1 = q._log_det() - p._log_det()
    term3 = _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                       q.loc - p.loc, q._capacitance_tril)
    A = _woodbury_A(q)
    pW, pD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    qD = q._unbroadcasted_cov_diag
    term21 = (pD / qD).sum(-1)
    term22 = _batch_trace_XXT(pW * qD.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_XXT(A * pD.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(A @ pW)
    return 0.5 * (term1 + term21 + term22 - term23 - term24 + term3 - p.event_shape[0])


def kl_mvn_lowrank(p: MultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    """``KL(p || q)``, ``p`` a full-covariance normal."""
    _check_events(p, q)
    Lp = p._unbroadcasted_scale_tril
    term1 = q._log_det() - 2 * Lp.diagonal(0, -2, -1).log().sum(-1)
    term3 = _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                       q.loc - p.loc, q._capacitance_tril)
    A = _woodbury_A(q)
    term21 = _batch_trace_XXT(Lp * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(A @ Lp)
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


def kl_lowrank_mvn(p: LowRankMultivariateNormal, q: MultivariateNormal) -> Tensor:
    """``KL(p || q)``, ``q`` a full-covariance normal."""
    _check_events(p, q)
    Lq = q._unbroadcasted_scale_tril
    term1 = 2 * Lq.diagonal(0, -2, -1).log().sum(-1) - p._log_det()
    term3 = _batch_mahalanobis(Lq, q.loc - p.loc)
    n = p.event_shape[0]
    pW, pD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    batch = broadcast_shapes("kl_divergence", tuple(Lq.shape[:-2]), tuple(pW.shape[:-2]),
                             tuple(pD.shape[:-1]))
    Lq = Lq.expand(batch + (n, n))
    term21 = _batch_trace_XXT(linalg.solve_triangular(
        Lq, pW.expand(batch + tuple(pW.shape[-2:])), upper=False))
    term22 = _batch_trace_XXT(linalg.solve_triangular(
        Lq, pD.sqrt().diag_embed().expand(batch + (n, n)), upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - n)
