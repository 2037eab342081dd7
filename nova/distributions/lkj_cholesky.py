"""``LKJCholesky(dim, concentration=1.0)``: the LKJ distribution over Cholesky factors
of correlation matrices (after NumPyro's, as PyTorch's)."""
from __future__ import annotations

import math
from typing import Any

from nova.core import dtypes as dt
from nova.distributions import constraints
from nova.distributions.beta import Beta
from nova.distributions.distribution import Distribution
from nova.distributions.utils import broadcast_all
from nova.tensor import ops
from nova.tensor.creation import arange, randn
from nova.tensor.grad_mode import no_grad
from nova.tensor.movement import cat
from nova.tensor.special import lgamma, mvlgamma
from nova.tensor.tensor import Tensor

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The distribution of the lower Cholesky factor ``L`` of a ``dim x dim``
    correlation matrix ``M = L L^T`` with density proportional to ``det(M)^(eta -
    1)``, ``eta`` = ``concentration`` (uniform over correlation matrices at 1).
    ``sample`` is the onion method (Lewandowski, Kurowicka and Joe, 2009, section 3):
    a Beta draw per row sets its off-diagonal length, a normalized normal vector its
    direction. No ``rsample`` (PyTorch has none).

    The first Beta parameter of row ``k`` is ``k / 2`` (the onion method's); PyTorch
    2.x uses ``k - 1/2``, so its draws for ``dim >= 3`` do not follow the LKJ law
    (their off-diagonal correlations beyond the first row are not ``Beta(eta - 1 +
    dim/2, eta - 1 + dim/2)`` on (-1, 1)); ``log_prob`` is the same as PyTorch's."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration: Tensor | float = 1.0,
                 validate_args: bool | None = None):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = tuple(self.concentration.shape)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = arange(self.dim - 1, dtype=self.concentration.dtype,
                        device=self.concentration.device)
        offset = cat([offset.new_zeros((1,)), offset])
        # row k (k off-diagonal entries) has squared length Beta(k / 2, eta + (dim - 2) / 2
        # - (k - 1) / 2); PyTorch's ``offset + 0.5`` gives rows k >= 2 the wrong law
        beta_conc1 = 0.5 * offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0, validate_args=False)
        super().__init__(batch_shape, (dim, dim), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> LKJCholesky:
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = tuple(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = randn(self._extended_shape(sample_shape), dtype=y.dtype,
                             device=y.device).tril(-1)
            # row 0 has no off-diagonal entries (0 / 0): it is left at zero
            first_row = (arange(self.dim, device=y.device) == 0).unsqueeze(-1)
            norm = u_normal.norm(dim=-1, keepdim=True)
            u_hypersphere = ops.where(first_row, 0.0, u_normal / norm)
            w = y.sqrt() * u_hypersphere
            tiny = dt.finfo(w.dtype).tiny
            diag_elems = (1 - (w ** 2).sum(-1)).clamp(min=tiny).sqrt()
            return w + diag_elems.diag_embed()

    def log_prob(self, value: Tensor) -> Tensor:
        """``sum_i (2 (eta - 1) + dim - i) log L_ii`` over rows ``i = 2..dim``, less
        the log normalizer (Lewandowski et al., through ``mvlgamma``)."""
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(0, -1, -2)[..., 1:]
        order = arange(2, self.dim + 1, dtype=self.concentration.dtype,
                       device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = lgamma(alpha) * dm1
        numerator = mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term
