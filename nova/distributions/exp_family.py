"""``ExponentialFamily``: the base class of the distributions whose density is
``exp(<t(x), theta> - F(theta) + k(x))`` (``torch.distributions.ExponentialFamily``)."""
from __future__ import annotations

from typing import Any

from nova.autograd.engine import grad
from nova.distributions.distribution import Distribution
from nova.tensor.grad_mode import enable_grad
from nova.tensor.tensor import Tensor

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """An exponential family: a subclass gives its natural parameters ``theta``
    (``_natural_params``), the log normalizer ``F`` (``_log_normalizer(*theta)``) and
    the expected carrier measure ``E[k(x)]`` (``_mean_carrier_measure``). The entropy
    is then the Bregman divergence form ``F(theta) - <theta, grad F(theta)> - E[k(x)]``
    (Nielsen and Nock), with ``grad F`` by autograd, and ``kl_divergence`` of two
    members of one family is ``F(theta_q) - F(theta_p) - <theta_q - theta_p,
    grad F(theta_p)>`` (registered in ``kl.py``). As in PyTorch, ``grad F`` is taken
    at detached copies of the natural parameters, so these generic forms carry no
    gradient back to the distribution's parameters (a subclass with a closed-form
    ``entropy``, as ContinuousBernoulli and Wishart have, does)."""

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        """The natural parameters ``theta``, a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        """The log normalizer ``F(theta)``, batched over ``batch_shape``."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> Any:
        """``E[k(x)]``, the expected carrier measure (what the entropy needs)."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """``F(theta) - <theta, grad F(theta)> - E[k(x)]``."""
        result: Any = -self._mean_carrier_measure
        with enable_grad():
            nparams = [p.detach().requires_grad_() for p in self._natural_params]
            lg_normal = self._log_normalizer(*nparams)
            gradients = grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for theta, g in zip(nparams, gradients):
            result = result - (theta * g).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
