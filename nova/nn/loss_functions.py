"""Divergence, margin and likelihood losses of ``nv.nn.functional``: ``kl_div``,
``cosine_embedding_loss``, ``margin_ranking_loss``, ``hinge_embedding_loss``,
``soft_margin_loss``, ``multilabel_soft_margin_loss``, ``multi_margin_loss``,
``triplet_margin_loss``, ``poisson_nll_loss`` and ``gaussian_nll_loss``, with PyTorch's
argument order (the deprecated ``size_average``/``reduce`` included, mapped to
``reduction`` with PyTorch's warning), defaults, broadcasting and values.

Where PyTorch's formula loses a finite answer, these keep it: ``soft_margin_loss`` is
``softplus(-y x)`` (PyTorch's ``log1p(exp(-y x))`` overflows to inf past ``-y x`` of
~88 in float32), and ``poisson_nll_loss``'s Stirling term reads only targets above 1
(PyTorch computes it everywhere and masks it, so a target of 0 gives a NaN gradient).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.distance import pairwise_distance
from nova.nn.functional import _reduce, log1p_exp, logsigmoid
from nova.tensor import ops
from nova.tensor.autocast_state import autocast_op
from nova.tensor.elementary import xlogy
from nova.tensor.tensor import Tensor


def legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """``reduction``, or the one PyTorch derives from the deprecated ``size_average``
    and ``reduce`` when either is given (both default to True), with its warning."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    out = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{out}' instead.", stacklevel=3)
    return out


def _floats(op: str, *tensors: Any) -> list[Tensor]:
    """The tensors broadcast together, in their common floating dtype."""
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(t).__name__}")
    common = ops.promote(op, *tensors)
    return ops.operands(op, *tensors, dtype=common if common.is_floating_point
                        else dt.DEFAULT_FLOAT)


@autocast_op("kl_div")
def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Pointwise ``target * (log(target) - input)`` for log-probabilities ``input``
    (0 where ``target`` is 0), or ``exp(target) * (target - input)`` when ``target``
    is given as log-probabilities (``log_target``). ``reduction='batchmean'`` divides
    the sum by the batch size (dim 0), the KL divergence's definition; ``'mean'``
    divides by every element, with PyTorch's warning."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x, t = _floats("kl_div", input, target)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                      "the support size.'batchmean' divides only by the batch size, and "
                      "aligns with the KL div math definition.'mean' will be changed to "
                      "behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    if log_target:
        loss = ops.mul(ops.exp(t), ops.sub(t, x))
    else:
        loss = ops.sub(xlogy(t, t), ops.mul(t, x))
    if reduction == "batchmean":
        return ops.div(ops.sum(loss), input.shape[0] if input.ndim else 1)
    return _reduce("kl_div", loss, reduction)


@autocast_op("cosine_embedding_loss")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)``
    where it is -1 (0 elsewhere), for rows ``(N, D)`` with target ``(N,)`` or vectors
    ``(D,)`` with a 0-d target. The cosine is ``x1.x2 / sqrt((|x1|^2 + 1e-12)
    (|x2|^2 + 1e-12))``, as PyTorch's."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        ops._check_tensor(f"cosine_embedding_loss {name}", t)
    if target.ndim not in (0, 1):
        raise ValueError(f"cosine_embedding_loss: expected a 0-D or 1-D target (one "
                         f"label per pair), got shape {target.shape}")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise ValueError(f"cosine_embedding_loss: a {target.ndim}-D target expects "
                         f"{target.ndim + 1}-D inputs, got {input1.shape} and {input2.shape}")
    x1, x2 = _floats("cosine_embedding_loss", input1, input2)
    d = target.ndim
    eps = 1e-12
    dot = ops.sum(ops.mul(x1, x2), d)
    mag = ops.mul(ops.add(ops.sum(ops.mul(x1, x1), d), eps),
                  ops.add(ops.sum(ops.mul(x2, x2), d), eps))
    cos = ops.div(dot, ops.sqrt(mag))
    pos = ops.where(ops.eq(target, 1), ops.sub(1.0, cos), 0.0)
    neg = ops.where(ops.eq(target, -1), ops.clamp(ops.sub(cos, margin), min=0.0), 0.0)
    return _reduce("cosine_embedding_loss", ops.add(pos, neg), reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``: ``target`` 1 asks ``input1``
    to rank above ``input2`` by ``margin``, -1 below. The three must have the same
    number of dims (then they broadcast), as PyTorch checks."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x1, x2, t = _floats("margin_ranking_loss", *_same_ndim(
        "margin_ranking_loss", input1=input1, input2=input2, target=target))
    loss = ops.clamp(ops.add(ops.mul(ops.neg(t), ops.sub(x1, x2)), margin), min=0.0)
    return _reduce("margin_ranking_loss", loss, reduction)


def _same_ndim(op: str, **tensors: Any) -> list[Tensor]:
    for name, t in tensors.items():
        ops._check_tensor(f"{op} {name}", t)
    if len({t.ndim for t in tensors.values()}) > 1:
        shapes = ", ".join(f"{name} {t.shape}" for name, t in tensors.items())
        raise ValueError(f"{op}: all input tensors should have the same number of dims, "
                         f"got {shapes}")
    return list(tensors.values())


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1 (for
    other labels both terms count, as in PyTorch's formula)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x, t = _floats("hinge_embedding_loss", input, target)
    below = ops.where(ops.ne(t, 1), ops.clamp(ops.sub(margin, x), min=0.0), 0.0)
    self_term = ops.where(ops.ne(t, -1), x, 0.0)
    return _reduce("hinge_embedding_loss", ops.add(below, self_term), reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``, as a stable softplus (finite for every finite
    input)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x, t = _floats("soft_margin_loss", input, target)
    return _reduce("soft_margin_loss", log1p_exp(ops.neg(ops.mul(t, x))), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Per sample, the mean over the classes (last dim) of the binary cross entropy of
    ``sigmoid(input)`` against the 0/1 ``target``, each class weighted by ``weight``;
    ``reduction`` then acts on the per-sample losses."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x, t = _floats("multilabel_soft_margin_loss", input, target)
    if x.ndim == 0:
        raise ValueError("multilabel_soft_margin_loss: expected an input of (C,) or (N, C), "
                         "got a 0-d tensor")
    loss = ops.neg(ops.add(ops.mul(t, logsigmoid(x)),
                           ops.mul(ops.sub(1.0, t), logsigmoid(ops.neg(x)))))
    if weight is not None:
        loss = ops.mul(loss, weight)
    loss = ops.div(ops.sum(loss, -1), x.shape[-1])
    return _reduce("multilabel_soft_margin_loss", loss, reduction)


@autocast_op("multi_margin_loss")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The multi-class hinge loss of scores ``(N, C)`` (or ``(C,)``) against class
    indices ``target``: per sample, ``sum_{i != y} w[y] max(0, margin - x[y] + x[i])^p
    / C`` (p = 1 or 2). The gradient is 0 where a term is exactly 0, as PyTorch's."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p!r}")
    ops._check_tensor("multi_margin_loss", input)
    ops._check_tensor("multi_margin_loss target", target)
    if input.ndim not in (1, 2) or input.shape[-1] == 0:
        raise ValueError(f"multi_margin_loss: expected a non-empty (C,) or (N, C) input, got "
                         f"shape {input.shape}")
    if target.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"multi_margin_loss: target must hold class indices (int32/int64), "
                         f"got {target.dtype.name}")
    samples = input.shape[0] if input.ndim == 2 else 1
    if target.numel() != samples or target.ndim > 1:
        raise ValueError(f"multi_margin_loss: target should be 1-D with one class index per "
                         f"sample ({samples}), got shape {target.shape} for input "
                         f"{input.shape}")
    c = input.shape[-1]
    if weight is not None and weight.shape != (c,):
        raise ValueError(f"multi_margin_loss: weight must have shape ({c},) (one per "
                         f"class), got {weight.shape}")
    x = ops._as_float("multi_margin_loss", input).reshape(samples, c)
    t = target.reshape(samples, 1)
    z = ops.add(ops.sub(margin, ops.gather(x, 1, t)), x)
    other = ops.ne(ops.prim("iota", [], {"dim": 1}, (samples, c), dt.int64), t)
    h = ops.where(ops.logical_and(other, ops.gt(z, 0)), z if p == 1 else ops.mul(z, z), 0.0)
    if weight is not None:
        h = ops.mul(h, weight[t])
    loss = ops.div(ops.sum(h, 1), c).reshape(target.shape)
    return _reduce("multi_margin_loss", loss, reduction)


@autocast_op("triplet_margin_loss")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the ``pairwise_distance``
    (``p``-norm of ``x1 - x2 + eps`` along the last dim); with ``swap``, ``d(a, n)``
    is replaced by ``d(p, n)`` where that is smaller."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _same_ndim("triplet_margin_loss", anchor=anchor, positive=positive, negative=negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ops.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    loss = ops.clamp(ops.sub(ops.add(d_pos, margin), d_neg), min=0.0)
    return _reduce("triplet_margin_loss", loss, reduction)


@autocast_op("poisson_nll_loss")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of ``target`` counts under a Poisson of rate
    ``exp(input)`` (``log_input``) or ``input``: ``exp(x) - t x`` resp.
    ``x - t log(x + eps)``. ``full`` adds Stirling's approximation of ``log(t!)``,
    ``t log t - t + log(2 pi t) / 2``, for targets above 1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x, t = _floats("poisson_nll_loss", input, target)
    if log_input:
        loss = ops.sub(ops.exp(x), ops.mul(t, x))
    else:
        loss = ops.sub(x, ops.mul(t, ops.log(ops.add(x, eps))))
    if full:
        above = ops.gt(t, 1)
        ts = ops.where(above, t, 2.0)
        stirling = ops.add(ops.sub(ops.mul(ts, ops.log(ts)), ts),
                           ops.mul(ops.log(ops.mul(ts, 2 * math.pi)), 0.5))
        loss = ops.add(loss, ops.where(above, stirling, 0.0))
    return _reduce("poisson_nll_loss", loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of ``target`` under Gaussians of mean ``input`` and
    variance ``var``: ``(log(var) + (input - target)^2 / var) / 2`` (``full``: plus
    ``log(2 pi) / 2``). ``var`` has ``input``'s shape, or it with the last dim 1 or
    dropped (one variance per row), or is a number. It is clamped at ``eps`` for
    stability, the gradient flowing as if unclamped, as in PyTorch. PyTorch reads a
    tensor ``var`` on the host to reject negative entries; Nova does not read lazy
    values, so the loss is NaN where ``var`` is negative instead (a number is checked)."""
    ops._check_tensor("gaussian_nll_loss", input)
    ops._check_tensor("gaussian_nll_loss target", target)
    if not isinstance(var, Tensor):
        if not var >= 0:
            raise ValueError(f"gaussian_nll_loss: var has negative entry/entries ({var})")
        var = ops.full_const(float(var), input.shape, ops._as_float("gaussian_nll_loss",
                                                                    input).dtype)
    elif var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (var.ndim and input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError(f"gaussian_nll_loss: var of shape {var.shape} must have input's "
                             f"shape {input.shape}, or it with the last dim 1 or dropped")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"gaussian_nll_loss: reduction must be 'mean', 'sum' or 'none', "
                         f"got {reduction!r}")
    x, t, v = _floats("gaussian_nll_loss", input, target, var)
    # (where, not v + (max(v, eps) - v): an infinite variance gave inf - inf = NaN)
    clamped = ops.where(ops.ge(v, eps), v, ops.add(v, ops.sub(eps, v).detach()))
    d = ops.sub(x, t)
    loss = ops.mul(ops.add(ops.log(clamped), ops.div(ops.mul(d, d), clamped)), 0.5)
    if full:
        loss = ops.add(loss, 0.5 * math.log(2 * math.pi))
    loss = ops.where(ops.lt(v, 0), math.nan, loss)
    return _reduce("gaussian_nll_loss", loss, reduction)


__all__ = ["kl_div", "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss",
           "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss"]
