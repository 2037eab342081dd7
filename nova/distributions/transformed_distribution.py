"""``TransformedDistribution``: a base distribution pushed through a chain of
``Transform`` s (``torch.distributions.TransformedDistribution``)."""
from __future__ import annotations

from typing import Any

from nova.distributions import constraints
from nova.distributions.distribution import Distribution
from nova.distributions.independent import Independent
from nova.distributions.transforms import ComposeTransform, Transform
from nova.distributions.utils import sum_rightmost
from nova.tensor import ops
from nova.tensor.grad_mode import no_grad
from nova.tensor.tensor import Tensor

__all__ = ["TransformedDistribution"]


class TransformedDistribution(Distribution):
    """``Y = f(X)`` for ``X ~ base_distribution`` and ``f`` the composition of
    ``transforms`` (applied in order): ``log p(Y) = log p(X) - log |det dY/dX|``.

    The event shape is the larger of the base's and the transforms' (a transform that
    couples dims makes them one event)."""

    arg_constraints: dict[str, constraints.Constraint] = {}

    def __init__(self, base_distribution: Distribution, transforms: Transform | list,
                 validate_args: bool | None = None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list):
            if not all(isinstance(t, Transform) for t in transforms):
                raise ValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = transforms
        else:
            raise ValueError(f"transforms must be a Transform or list, but was {transforms!r}")
        base_shape = base_distribution.batch_shape + base_distribution.event_shape
        base_event_dim = len(base_distribution.event_shape)
        chain = ComposeTransform(self.transforms)
        domain_dim, codomain_dim = chain.domain.event_dim, chain.codomain.event_dim
        if len(base_shape) < domain_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least "
                             f"{domain_dim}, but got {base_shape}.")
        forward_shape = chain.forward_shape(base_shape)
        expanded_base_shape = chain.inverse_shape(forward_shape)
        if base_shape != expanded_base_shape:
            base_distribution = base_distribution.expand(
                expanded_base_shape[:len(expanded_base_shape) - base_event_dim])
        if domain_dim > base_event_dim:
            base_distribution = Independent(base_distribution, domain_dim - base_event_dim)
        self.base_dist = base_distribution
        event_dim = max(codomain_dim, base_event_dim + codomain_dim - domain_dim)
        cut = len(forward_shape) - event_dim
        super().__init__(forward_shape[:cut], forward_shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> TransformedDistribution:
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = tuple(batch_shape)
        shape = batch_shape + self.event_shape
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        new.base_dist = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self) -> constraints.Constraint:
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape) - support.event_dim)
        return support

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for transform in self.transforms:
                x = transform(x)
            return x

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value: Tensor) -> Tensor:
        """The base log-density of the inverted value, less each transform's
        log-determinant."""
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob: Any = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            event_dim += transform.domain.event_dim - transform.codomain.event_dim
            log_prob = log_prob - sum_rightmost(transform.log_abs_det_jacobian(x, y),
                                                event_dim - transform.domain.event_dim)
            y = x
        return log_prob + sum_rightmost(self.base_dist.log_prob(y),
                                        event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value: Tensor) -> Tensor:
        """``1 - value`` where the chain is decreasing, so the cdf increases, and
        ``value`` itself elsewhere (PyTorch's ``sign (value - 1/2) + 1/2`` rounds small
        values to 0 even where the sign is +1, as it is for a tensor ``scale``)."""
        sign: Any = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, int):
            return value if sign == 1 else 1 - value
        return ops.where(sign < 0, 1 - value, value)

    def cdf(self, value: Tensor) -> Tensor:
        for transform in self.transforms[::-1]:
            value = transform.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value: Tensor) -> Tensor:
        value = self.base_dist.icdf(self._monotonize_cdf(value))
        for transform in self.transforms:
            value = transform(value)
        return value
