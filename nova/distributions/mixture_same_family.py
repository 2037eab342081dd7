"""``MixtureSameFamily(mixture_distribution, component_distribution)``: a mixture of
distributions of one family."""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.categorical import Categorical
from nova.distributions.distribution import Distribution
from nova.tensor import ops
from nova.tensor.grad_mode import no_grad
from nova.tensor.tensor import Tensor

__all__ = ["MixtureSameFamily"]


class _MixtureSameFamilyConstraint(constraints.Constraint):
    """A component family's support, checked on a mixture's value: the value of each
    batch element is valid when it is valid for the (every) component
    (``torch.distributions.constraints.MixtureSameFamilyConstraint``)."""

    def __init__(self, base_constraint: constraints.Constraint):
        self.base_constraint = base_constraint

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return self.base_constraint.event_dim

    def check(self, value: Any) -> Any:
        if value.ndim < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.ndim}")
        if isinstance(value, Tensor):
            unsqueezed = value.unsqueeze(-1 - self.event_dim)
        else:                                   # a host array (validation)
            unsqueezed = np.expand_dims(value, value.ndim - self.event_dim)
        result = self.base_constraint.check(unsqueezed)
        keep = value.ndim - self.event_dim
        return result.reshape(tuple(result.shape[:keep]) + (-1,)).all(-1)

    def __repr__(self) -> str:
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


class MixtureSameFamily(Distribution):
    """A batch of mixtures whose components are one family with different parameters:
    ``mixture_distribution`` (a ``Categorical`` over K components, batch shape ``()``
    or broadcastable to the components' batch minus its last dim) picks the
    component; ``component_distribution``'s rightmost batch dim (of size K) indexes
    it. ``log_prob`` is the ``logsumexp`` of the components' scores and mixture log
    weights; ``sample`` draws a component per element and gathers its draw; ``mean``
    and ``variance`` (law of total variance) and ``cdf`` combine the components'.
    Not reparameterizable (``has_rsample`` is False), as PyTorch's."""

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = False

    def __init__(self, mixture_distribution: Categorical,
                 component_distribution: Distribution, validate_args: bool | None = None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of "
                             "nova.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of "
                             "nova.distributions.Distribution")
        mdbs = mixture_distribution.batch_shape
        cdbs = component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not "
                                 f"compatible with `component_distribution.batch_shape`"
                                 f"({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1] if component_distribution.batch_shape \
            else None
        if kc is None or km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(batch_shape=cdbs, event_shape=event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> MixtureSameFamily:
        batch_shape = tuple(batch_shape)
        batch_shape_comp = batch_shape + (self._num_component,)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(batch_shape_comp)
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        event_shape = new._component_distribution.event_shape
        Distribution.__init__(new, batch_shape=batch_shape, event_shape=event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self) -> constraints.Constraint:
        return _MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self) -> Categorical:
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        return self._component_distribution

    @property
    def mean(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        mean_cond_var = (probs * self.component_distribution.variance).sum(
            -1 - self._event_ndims)
        var_cond_mean = (probs * (self.component_distribution.mean
                                  - self._pad(self.mean)).pow(2.0)).sum(-1 - self._event_ndims)
        return mean_cond_var + var_cond_mean

    def cdf(self, x: Tensor) -> Tensor:
        x = self._pad(x)
        cdf_x = self.component_distribution.cdf(x)
        mix_prob = self.mixture_distribution.probs
        return (cdf_x * mix_prob).sum(-1)

    def log_prob(self, x: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(x)
        x = self._pad(x)
        log_prob_x = self.component_distribution.log_prob(x)               # [S, B, k]
        log_mix_prob = ops.log_softmax(self.mixture_distribution.logits, -1)  # [B, k]
        return (log_prob_x + log_mix_prob).logsumexp(-1)                  # [S, B]

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            sample_shape = tuple(sample_shape)
            gather_dim = len(sample_shape) + len(self.batch_shape)
            es = self.event_shape
            mixture = self.mixture_distribution
            if mixture.batch_shape != self.batch_shape:
                # weights shared by the batch (or broadcast to it): an independent
                # component per batch element (PyTorch's gather fails here)
                mixture = mixture.expand(self.batch_shape)
            mix_sample = mixture.sample(sample_shape)
            mix_shape = mix_sample.shape
            comp_samples = self.component_distribution.sample(sample_shape)
            index = mix_sample.reshape(mix_shape + (1,) * (len(es) + 1))
            index = index.expand(comp_samples.shape[:gather_dim] + (1,) + es)
            return comp_samples.gather(gather_dim, index).squeeze(gather_dim)

    def _pad(self, x: Tensor) -> Tensor:
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x: Tensor) -> Tensor:
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        xs = x.shape
        return x.reshape(xs[:-1] + (1,) * pad_ndims + xs[-1:] + (1,) * self._event_ndims)

    def __repr__(self) -> str:
        return (f"MixtureSameFamily(\n  {self.mixture_distribution},\n  "
                f"{self.component_distribution})")
