"""``kl_divergence(p, q)`` and ``register_kl``: closed-form KL divergences, dispatched
on the pair of distribution types (``torch.distributions.kl``'s rules: the most
specific registered pair by subclass wins; an ambiguity warns).

Every pair PyTorch registers among Nova's families, with PyTorch's formulas: each
family with itself, and across families Normal, Laplace, Gumbel, Exponential, Gamma,
Beta, Pareto and Uniform against Normal, Gumbel, Exponential, Gamma, Beta, Pareto and
Uniform, Bernoulli, Poisson and Binomial among themselves, LowRankMultivariateNormal
with itself and with MultivariateNormal both ways, and ContinuousBernoulli with itself
and against Normal, Exponential, Pareto and Uniform (from Beta, Uniform and the
real-line and positive families to it); a pair whose ``q``
gives zero density where ``p`` has mass (Normal -> Exponential or -> Uniform, the
real-line families -> Exponential, Gamma, Beta, Pareto or Uniform, ...) is ``inf``
throughout, as PyTorch's. Two members of one ``ExponentialFamily`` subclass without a
closed form of their own (``Wishart``) get PyTorch's generic rule, a Bregman
divergence of the log normalizer. (Nova's older families do not derive from
``ExponentialFamily``; each has its own closed form.)"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import total_ordering
from typing import Any

from nova.distributions.bernoulli import Bernoulli
from nova.distributions.beta import Beta
from nova.distributions.binomial import Binomial
from nova.distributions.categorical import Categorical
from nova.distributions.cauchy import Cauchy
from nova.distributions.continuous_bernoulli import ContinuousBernoulli
from nova.distributions.dirichlet import Dirichlet
from nova.distributions.distribution import Distribution
from nova.distributions.exp_family import ExponentialFamily
from nova.distributions.exponential import Exponential
from nova.distributions.gamma import Gamma
from nova.distributions.geometric import Geometric
from nova.distributions.gumbel import Gumbel
from nova.distributions.half_normal import HalfNormal
from nova.distributions.independent import Independent
from nova.distributions.laplace import Laplace
from nova.distributions.lowrank_multivariate_normal import (
    LowRankMultivariateNormal, kl_lowrank_lowrank, kl_lowrank_mvn, kl_mvn_lowrank,
)
from nova.distributions.multivariate_normal import MultivariateNormal, kl_multivariate_normal
from nova.distributions.normal import Normal
from nova.distributions.one_hot_categorical import OneHotCategorical
from nova.distributions.pareto import Pareto
from nova.distributions.poisson import Poisson
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.uniform import Uniform
from nova.autograd.engine import grad
from nova.distributions.utils import euler_constant, known_values, softplus, sum_rightmost
from nova.tensor import ops
from nova.tensor.creation import full_like
from nova.tensor.elementary import xlogy
from nova.tensor.grad_mode import enable_grad
from nova.tensor.special import digamma, lgamma
from nova.tensor.tensor import Tensor

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict[tuple[type, type], Callable] = {}
_KL_MEMOIZE: dict[tuple[type, type], Any] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn(p, q)`` as the KL divergence of a pair of
    ``Distribution`` subclasses::

        @register_kl(Normal, Normal)
        def kl_normal_normal(p, q): ...
    """
    for name, t in (("type_p", type_p), ("type_q", type_q)):
        if not isinstance(t, type) or not issubclass(t, Distribution):
            raise TypeError(f"register_kl: expected {name} to be a Distribution subclass, "
                            f"got {t!r}")

    def decorator(fun: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()   # the lookup order may have changed
        return fun

    return decorator


@total_ordering
class _Match:
    """A registered (p, q) pair, ordered by specificity (subclass before base)."""

    __slots__ = ("types",)

    def __init__(self, *types: type):
        self.types = types

    def __eq__(self, other: Any) -> bool:
        return self.types == other.types

    def __le__(self, other: Any) -> bool:
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p: type, type_q: type) -> Any:
    """The most specific registered function for the pair, or NotImplemented."""
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left_p.__name__}, {right_q.__name__})",
                      RuntimeWarning, stacklevel=3)
    return left_fun


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """``KL(p || q)``, batched over the batch shape; NotImplementedError naming the
    pair when no closed form is registered for it."""
    key = (type(p), type(q))
    fun = _KL_MEMOIZE.get(key)
    if fun is None:
        fun = _KL_MEMOIZE[key] = _dispatch_kl(*key)
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)


def _infinite_where(condition: Tensor, value: Tensor) -> Tensor:
    return ops.where(condition, math.inf, value)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = ops.where(p.probs == 0, 0.0, _infinite_where(q.probs == 0, t1))
    t2 = p._complement() * (softplus(q.logits) - softplus(p.logits))
    t2 = ops.where(p.probs == 1, 0.0, _infinite_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = _infinite_where(q.probs == 0, t)
    t = ops.where(p.probs == 0, 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p: OneHotCategorical,
                                            q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


register_kl(MultivariateNormal, MultivariateNormal)(kl_multivariate_normal)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * euler_constant
    t3 = (ct2 + lgamma(1 + ct1) - ct3).exp()
    return t1 + t2 + t3 - (1 + euler_constant)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            f"KL(Independent || Independent) needs the same reinterpreted_batch_ndims, got "
            f"{p.reinterpreted_batch_ndims} and {q.reinterpreted_batch_ndims}")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: TransformedDistribution,
                                q: TransformedDistribution) -> Tensor:
    if p.transforms != q.transforms:
        raise NotImplementedError("KL(TransformedDistribution || TransformedDistribution) "
                                  "needs equal transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError(f"KL(TransformedDistribution || TransformedDistribution) "
                                  f"needs equal event shapes, got {p.event_shape} and "
                                  f"{q.event_shape}")
    return kl_divergence(p.base_dist, q.base_dist)


# ---------------------------------------------------------------- across families


def _infinite_like(value: Tensor) -> Tensor:
    """``inf`` in ``value``'s shape and dtype: KL(p || q) where ``q`` is zero on a part
    of ``p``'s support."""
    return full_like(value, math.inf)


@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p: Exponential, q: Distribution) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p: Exponential, q: Gumbel) -> Tensor:
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = loc_scale_ratio.exp() * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p: Exponential, q: Normal) -> Tensor:
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi).log()
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p: Gumbel, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p: Gumbel, q: Normal) -> Tensor:
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * euler_constant - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (euler_constant + 1)


@register_kl(Laplace, Exponential)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p: Laplace, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p: Laplace, q: Normal) -> Tensor:
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Exponential)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p: Normal, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p: Normal, q: Gumbel) -> Tensor:
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = (-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio).exp()
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Normal, q: Laplace) -> Tensor:
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = scale_ratio.log()
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * loc_diff_scale_ratio.pow(2)).exp()
    t3 = loc_diff * (math.sqrt(0.5) * loc_diff_scale_ratio).erf()
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p: Uniform, q: Exponential) -> Tensor:
    """Infinite where the uniform reaches below 0, outside the exponential's support."""
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _infinite_where(p.low < q.support.lower_bound, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p: Uniform, q: Gumbel) -> Tensor:
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * ((-high_loc_diff).exp() - (-low_loc_diff).exp())
    return t1 - t2


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> Tensor:
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


# ---------------------------------------------------------------- the Gamma, Beta,
# Pareto and counting families


def _x_log_x(t: Tensor) -> Tensor:
    """``t log t`` (0 at 0), PyTorch's ``_x_log_x``."""
    return xlogy(t, t)


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_params_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_params_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    """PyTorch's: NotImplementedError where ``q`` has more trials than ``p`` anywhere
    (the counts read on the host: a sync when they are pending, as PyTorch's
    ``.any()``), infinite where it has fewer."""
    fewer = p.total_count < q.total_count
    known = known_values(p.total_count), known_values(q.total_count)
    if known[0] is not None and known[1] is not None:
        any_fewer = bool((known[0] < known[1]).any())
    else:
        any_fewer = bool(fewer.any().item())
    if any_fewer:
        raise NotImplementedError("KL between Binomials where q.total_count > "
                                  "p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return _infinite_where(p.total_count > q.total_count, kl)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = lgamma(sum_p_concentration) - lgamma(sum_q_concentration)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p_concentration).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Geometric, q: Geometric) -> Tensor:
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: HalfNormal, q: HalfNormal) -> Tensor:
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Pareto, q: Pareto) -> Tensor:
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    return _infinite_where(p.support.lower_bound < q.support.lower_bound, result)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Bernoulli, q: Poisson) -> Tensor:
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p: Beta, q: Distribution) -> Tensor:
    return _infinite_like(p.concentration1)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p: Beta, q: Exponential) -> Tensor:
    return (-p.entropy() - q.rate.log()
            + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0)))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p: Beta, q: Gamma) -> Tensor:
    t1 = -p.entropy()
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (digamma(p.concentration1)
                                  - digamma(p.concentration1 + p.concentration0))
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p: Beta, q: Normal) -> Tensor:
    e_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (e_beta * (1 - e_beta) / (p.concentration1 + p.concentration0 + 1)
          + e_beta.pow(2)) * 0.5
    t4 = q.loc * e_beta
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p: Beta, q: Uniform) -> Tensor:
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound)
    return _infinite_where(outside, result)


@register_kl(Exponential, Beta)
@register_kl(Exponential, Pareto)
def _kl_exponential_infinity_more(p: Exponential, q: Distribution) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Exponential, q: Gamma) -> Tensor:
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return (t1 + ratio + lgamma(q.concentration) + q.concentration * euler_constant
            - (1 + euler_constant))


@register_kl(Gamma, Beta)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p: Gamma, q: Distribution) -> Tensor:
    return _infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Gamma, q: Exponential) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p: Gamma, q: Gumbel) -> Tensor:
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = ((p.concentration - 1) * digamma(p.concentration) - lgamma(p.concentration)
          - p.concentration)
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = (loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration)
          - loc_scale_ratio)
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p: Gamma, q: Normal) -> Tensor:
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = (0.5 * (beta_sqr * var_normal * 2 * math.pi).log() - p.concentration
          - lgamma(p.concentration))
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return (t1 + (p.concentration - 1) * digamma(p.concentration)
            + (t2 - t3 + t4) / var_normal)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
def _kl_gumbel_infinity_more(p: Gumbel, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Laplace, Beta)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Pareto)
def _kl_laplace_infinity_more(p: Laplace, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Normal, Beta)
@register_kl(Normal, Gamma)
@register_kl(Normal, Pareto)
def _kl_normal_infinity_more(p: Normal, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Pareto, Beta)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p: Pareto, q: Distribution) -> Tensor:
    return _infinite_like(p.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p: Pareto, q: Exponential) -> Tensor:
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    return _infinite_where(p.alpha <= 1, t1 - t2 + t3 - 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p: Pareto, q: Gamma) -> Tensor:
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _infinite_where(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p: Pareto, q: Normal) -> Tensor:
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    return _infinite_where(p.alpha <= 2, t1 - t2 + (t3 + t4) / var_normal - 1)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p: Poisson, q: Distribution) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Uniform, q: Beta) -> Tensor:
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = ((q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term)
          / common_term)
    t3 = ((q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term)
          / common_term)
    t4 = (lgamma(q.concentration1) + lgamma(q.concentration0)
          - lgamma(q.concentration1 + q.concentration0))
    result = t3 + t4 - t1 - t2
    outside = (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound)
    return _infinite_where(outside, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p: Uniform, q: Gamma) -> Tensor:
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = ((1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term)
          / common_term)
    t4 = q.rate * (p.high + p.low) / 2
    return _infinite_where(p.low < q.support.lower_bound, -t1 + t2 + t3 + t4)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Uniform, q: Pareto) -> Tensor:
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * support_uniform).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - support_uniform) / support_uniform
    return _infinite_where(p.low < q.support.lower_bound, t2 * (q.alpha + 1) - t1)


# ---------------------------------------------------------------- exponential families


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: ExponentialFamily, q: ExponentialFamily) -> Tensor:
    """``F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>``, ``F`` the
    log normalizer (its gradient by autograd at detached copies of ``p``'s natural
    parameters, as PyTorch's). Each term is summed over all but the batch dims (PyTorch
    sums ``len(event_shape)`` dims, which for Wishart's scalar parameter also sums
    over the batch)."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot be computed using Bregman divergences "
                                  f"(p is {type(p).__name__}, q is {type(q).__name__})")
    with enable_grad():
        p_nparams = [theta.detach().requires_grad_() for theta in p._natural_params]
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = grad(lg_normal.sum(), p_nparams, create_graph=True)
    q_nparams = q._natural_params
    result = q._log_normalizer(*q_nparams) - lg_normal
    batch = tuple(result.shape)
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        term = (qnp - pnp) * g
        result = result - term.reshape(batch + (-1,)).sum(-1)
    return result


register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)(kl_lowrank_lowrank)
register_kl(MultivariateNormal, LowRankMultivariateNormal)(kl_mvn_lowrank)
register_kl(LowRankMultivariateNormal, MultivariateNormal)(kl_lowrank_mvn)


# ---------------------------------------------------------------- ContinuousBernoulli


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p: ContinuousBernoulli,
                                                  q: ContinuousBernoulli) -> Tensor:
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


def _cross_entropy_to_continuous_bernoulli(p: Distribution, q: ContinuousBernoulli
                                           ) -> Tensor:
    """``-H(p) - E_p[log q]`` for ``p`` on [0, 1]: ``log q(x) = x logits_q +
    log1p(-probs_q) + log C_q``."""
    return -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p: Beta, q: ContinuousBernoulli) -> Tensor:
    return _cross_entropy_to_continuous_bernoulli(p, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p: Uniform, q: ContinuousBernoulli) -> Tensor:
    """Infinite where ``p`` reaches outside [0, 1] (PyTorch's test, ``p.high >= 1 or
    p.low <= 0``, also makes ``Uniform(0, 1)`` infinite, where the divergence is
    finite)."""
    result = _cross_entropy_to_continuous_bernoulli(p, q)
    outside = (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound)
    return _infinite_where(outside, result)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_infinity(p: ContinuousBernoulli, q: Distribution) -> Tensor:
    return _infinite_like(p.probs)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p: ContinuousBernoulli, q: Exponential) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p: ContinuousBernoulli, q: Normal) -> Tensor:
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).square()) + q.scale.log()
    t3 = (p.variance + p.mean.square() - 2.0 * q.loc * p.mean) / (2.0 * q.scale.square())
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p: ContinuousBernoulli, q: Uniform) -> Tensor:
    """Infinite where ``q`` does not cover [0, 1] (PyTorch's test, ``q.low >= 0 or
    q.high <= 1``, also makes ``q = Uniform(0, 1)`` infinite, where the divergence
    is finite)."""
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound)
    return _infinite_where(outside, result)


for _p_type, _fun in ((Exponential, _kl_exponential_infinity),
                      (Gamma, _kl_gamma_infinity), (Gumbel, _kl_gumbel_infinity),
                      (Laplace, _kl_laplace_infinity), (Normal, _kl_normal_infinity),
                      (Pareto, _kl_pareto_infinity)):
    register_kl(_p_type, ContinuousBernoulli)(_fun)
del _p_type, _fun
