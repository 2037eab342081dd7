"""``Wishart(df, covariance_matrix=... | precision_matrix=... | scale_tril=...)``: the
Wishart distribution over positive-definite matrices."""
from __future__ import annotations

import math
import warnings
from typing import Any

from nova import linalg
from nova.core import dtypes as dt
from nova.core.shapes import broadcast_shapes
from nova.distributions import constraints
from nova.distributions.chi2 import Chi2
from nova.distributions.distribution import Distribution
from nova.distributions.exp_family import ExponentialFamily
from nova.distributions.multivariate_normal import _precision_to_scale_tril
from nova.distributions.transforms import vec_to_tril_matrix
from nova.distributions.utils import is_number, known_values, lazy_property
from nova.tensor import ops
from nova.tensor.creation import arange, eye, randn, tensor
from nova.tensor.special import digamma, mvlgamma
from nova.tensor.tensor import Tensor

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function ``sum_i digamma(x - i/2)``, ``i < p``."""
    offsets = arange(p, dtype=x.dtype, device=x.device) / 2
    return digamma(x.unsqueeze(-1) - offsets).sum(-1)


def _cholesky_solve(b: Tensor, lower: Tensor) -> Tensor:
    """``(L L^T)^-1 b`` by two triangular solves."""
    y = linalg.solve_triangular(lower, b, upper=False)
    return linalg.solve_triangular(lower.mT, y, upper=True)


class Wishart(ExponentialFamily):
    """The Wishart distribution with ``df`` degrees of freedom (``> p - 1`` for ``p x
    p`` matrices) and scale matrix given by exactly one of ``covariance_matrix``,
    ``precision_matrix`` (its inverse) or ``scale_tril`` (its lower Cholesky factor),
    as ``MultivariateNormal``'s (a covariance or precision is factored with
    ``linalg.cholesky``, which reads the values).

    ``rsample`` uses the Bartlett decomposition ``L A A^T L^T`` (``A`` lower-triangular,
    chi draws on its diagonal and normals below it), differentiable in ``df`` (through
    the chi-squared draws, see ``Gamma``) and the scale. A draw that is not
    positive-definite (likely only for ``p - 1 < df < p``) is drawn again, up to
    ``max_try_correction`` times (10), then kept with a warning: its ``log_prob`` may
    be ``-inf`` (PyTorch checks the support with the result inverted and so warns
    about every draw)."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:  # type: ignore[override]
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df: Tensor | float, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None):
        given = [(n, m) for n, m in (("covariance_matrix", covariance_matrix),
                                     ("precision_matrix", precision_matrix),
                                     ("scale_tril", scale_tril)) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        (name, param), = given
        if not isinstance(param, Tensor) or param.ndim < 2 or param.shape[-1] != param.shape[-2]:
            raise ValueError(f"{name} must be a square matrix with optional leading batch "
                             f"dimensions, got shape {getattr(param, 'shape', None)}")
        if is_number(df):
            batch_shape = tuple(param.shape[:-2])
            self.df = tensor(float(df), dtype=param.dtype, device=param.device)
        elif isinstance(df, Tensor):
            batch_shape = broadcast_shapes("Wishart", tuple(param.shape[:-2]), tuple(df.shape))
            self.df = df.expand(batch_shape)
        else:
            raise TypeError(f"Wishart: df must be a number or a Tensor, got {type(df).__name__}")
        event_shape = tuple(param.shape[-2:])
        p = event_shape[-1]
        host_df = known_values(df)
        if host_df is not None and (host_df <= p - 1).any():
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        setattr(self, name, param.expand(batch_shape + (-1, -1)))
        if host_df is not None and (host_df < p).any():
            warnings.warn("Low df values detected. Singular samples are highly likely to "
                          "occur for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2()

    def _chi2(self) -> Chi2:
        """The chi-squared laws of the Bartlett factor's squared diagonal: ``df - i``
        degrees of freedom in row ``i``."""
        p = self._event_shape[-1]
        offsets = arange(p, dtype=self._unbroadcasted_scale_tril.dtype,
                         device=self._unbroadcasted_scale_tril.device)
        return Chi2(self.df.unsqueeze(-1) - offsets.expand(self._batch_shape + (-1,)),
                    validate_args=False)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Wishart:
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2()
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return self._batch_shape + self._event_shape

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
        identity = eye(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return _cholesky_solve(identity, L).expand(self._matrix_shape())

    def _df_matrix(self) -> Tensor:
        return self.df.reshape(self._batch_shape + (1, 1))

    @property
    def mean(self) -> Tensor:
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = ops.where(factor <= 0, math.nan, factor)
        return factor.reshape(self._batch_shape + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix
        diag_V = V.diagonal(0, -2, -1)
        return self._df_matrix() * (V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape: tuple[int, ...]) -> Tensor:
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        chi = chi.clamp(min=dt.finfo(chi.dtype).eps)
        below = randn(tuple(sample_shape) + self._batch_shape + (p * (p - 1) // 2,),
                      dtype=chi.dtype, device=chi.device)
        noise = chi.diag_embed() + vec_to_tril_matrix(below, diag=-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def _positive_definite(self, sample: Tensor) -> Tensor:
        """Whether each sample (all of its batch) is positive-definite, by the
        Cholesky factorization's ``info``."""
        ok = linalg.cholesky_ex(sample.detach()).info == 0
        return ok.reshape(ok.shape[:ok.ndim - len(self._batch_shape)] + (-1,)).all(-1) \
            if self._batch_shape else ok

    def rsample(self, sample_shape: Any = (), max_try_correction: int | None = None) -> Tensor:
        """A Bartlett draw; samples that are not positive-definite are drawn again (all
        of one batch together), up to ``max_try_correction`` times (one host read of an
        "all positive-definite" flag per try)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = tuple(self._extended_shape(sample_shape)[
            :len(tuple(sample_shape))])
        sample = self._bartlett_sampling(sample_shape)
        ok = self._positive_definite(sample)
        if bool(ok.all().item()):
            return sample
        warnings.warn("Singular sample detected.", stacklevel=2)
        keep = ok.reshape(ok.shape + (1,) * (len(self._batch_shape) + 2))
        for _ in range(max_try_correction):
            sample = ops.where(keep, sample, self._bartlett_sampling(sample_shape))
            ok = self._positive_definite(sample)
            if bool(ok.all().item()):
                break
            keep = ok.reshape(ok.shape + (1,) * (len(self._batch_shape) + 2))
        return sample

    def _half_log_det_scale(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        trace = _cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(0, -2, -1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + self._half_log_det_scale())
                - mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * linalg.slogdet(value).logabsdet
                - trace / 2)

    def entropy(self) -> Tensor:
        nu = self.df
        p = self._event_shape[-1]
        return ((p + 1) * (p * _LOG_2 / 2 + self._half_log_det_scale())
                + mvlgamma(nu / 2, p) - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
                + nu * p / 2)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p)
                + mvlgamma(y + (p + 1) / 2, p))
