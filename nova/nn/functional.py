"""``nv.nn.functional``: stateless layers, written with the op front end (so fusion
later sees the primitives, and autograd differentiates them)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import ops
from nova.tensor.autocast_state import full_precision, lowered
from nova.tensor.creation import ones, rand, tensor
from nova.tensor.function_template import stamped
from nova.tensor.tensor import Tensor

relu = ops.relu
gelu = ops.gelu
silu = ops.silu
softmax = ops.softmax
log_softmax = ops.log_softmax
sigmoid = ops.sigmoid
tanh = ops.tanh


@stamped
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` with PyTorch's (out_features, in_features) weight."""
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out, in), got shape {weight.shape}")
    if x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} has {x.shape[-1] if x.ndim else 0} features "
                         f"but weight {weight.shape} expects {weight.shape[1]}")
    out = ops.matmul(x, weight.transpose(0, 1))
    # under autocast the bias joins the product's precision, as PyTorch's addmm does
    return out if bias is None else ops.add(out, lowered(bias))


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p). The mask comes
    from the counter-based generator (its seed and offset are runtime inputs), so a
    training loop with dropout compiles once."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return ops.mul(x, 0.0)
    keep = ops.ge(rand(x.shape, dtype=x.dtype if x.dtype.is_floating_point else dt.float32), p)
    return ops.where(keep, ops.mul(x, 1.0 / (1.0 - p)), 0.0)


def _normalized_axes(op: str, x: Tensor, normalized_shape: Any) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if x.shape[x.ndim - len(shape):] != shape or len(shape) > x.ndim:
        raise ValueError(f"{op}: normalized_shape {shape} does not match the trailing dims of "
                         f"input {x.shape}")
    return tuple(range(x.ndim - len(shape), x.ndim))


@stamped
def layer_norm(x: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    axes = _normalized_axes("layer_norm", x, normalized_shape)
    x = full_precision(x, cuda_only=True)
    mu = ops.mean(x, axes, keepdim=True)
    centered = ops.sub(x, mu)
    var = ops.mean(ops.mul(centered, centered), axes, keepdim=True)
    out = ops.mul(centered, ops.rsqrt(ops.add(var, eps)))
    if weight is not None:
        out = ops.mul(out, weight)
    if bias is not None:
        out = ops.add(out, bias)
    return out


def rms_norm(x: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    axes = _normalized_axes("rms_norm", x, normalized_shape)
    x = full_precision(x, cuda_only=True)
    eps = 1e-6 if eps is None else eps
    out = ops.mul(x, ops.rsqrt(ops.add(ops.mean(ops.mul(x, x), axes, keepdim=True), eps)))
    return out if weight is None else ops.mul(out, weight)


def _reduce(op: str, loss: Tensor, reduction: str, weight_sum: Tensor | None = None) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "mean":
        return ops.div(ops.sum(loss), weight_sum) if weight_sum is not None else ops.mean(loss)
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross entropy over class dim 1 of ``input`` (N, C) or (N, C, d1, ...) with
    integer class ``target`` (N,) or (N, d1, ...). Targets equal to ``ignore_index``
    contribute nothing and are left out of the mean. ``weight`` (C,) weighs each
    sample by its target's class (the mean divides by the weights' sum) and, with
    ``label_smoothing``, each class of the smoothing term, as PyTorch does."""
    input, target = _class_targets("cross_entropy", full_precision(input), target)
    c_dim = 1
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    logp = ops.log_softmax(input, c_dim)
    valid = ops.ne(target, ignore_index)
    safe = ops.where(valid, target, 0)
    nll = ops.neg(ops.gather(logp, c_dim, safe.unsqueeze(c_dim)).squeeze(c_dim))
    w = ops.cast(valid, nll.dtype)
    shaped = _class_weights("cross_entropy", weight, input.shape[1], input.ndim)
    if shaped is not None:
        w = ops.mul(w, weight[safe])
    loss = ops.mul(nll, w)
    if label_smoothing == 0.0:
        return _reduce("cross_entropy", loss, reduction,
                       ops.sum(w) if reduction == "mean" else None)
    # PyTorch's smoothing term: -sum_c w_c log p_c / C for each sample that is not
    # ignored; its mean, like the nll's, divides by the summed sample weights
    per_class = logp if shaped is None else ops.mul(logp, shaped)
    smooth = ops.mul(ops.div(ops.neg(ops.sum(per_class, c_dim)), input.shape[c_dim]),
                     ops.cast(valid, nll.dtype))
    if reduction == "mean":
        nll_part = ops.div(ops.sum(loss), ops.sum(w))
        smooth_part = ops.div(ops.sum(smooth), ops.sum(w))
        return ops.add(ops.mul(nll_part, 1.0 - label_smoothing),
                       ops.mul(smooth_part, label_smoothing))
    combined = ops.add(ops.mul(loss, 1.0 - label_smoothing), ops.mul(smooth, label_smoothing))
    return _reduce("cross_entropy", combined, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    input, target = _check_pair("mse_loss", input, target)
    d = ops.sub(input, target)
    return _reduce("mse_loss", ops.mul(d, d), reduction)


def _check_pair(op: str, input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Both tensors of a pointwise loss, checked, and raised to float32 under autocast
    (PyTorch's losses run in float32 there)."""
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{op}: input and target must be Tensors")
    if input.shape != target.shape:
        raise ValueError(f"{op}: input {input.shape} and target {target.shape} must have "
                         "the same shape")
    return full_precision(input), full_precision(target)


def _class_targets(op: str, input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """(input, target) as (N, C, ...) and (N, ...): a 1-D input is one sample."""
    if input.ndim < 1 or not input.dtype.is_floating_point:
        raise ValueError(f"{op}: input must be floating point, got {input.dtype.name} of "
                         f"shape {input.shape}")
    if target.dtype not in (dt.int32, dt.int64):
        raise TypeError(f"{op}: target must hold class indices (int32/int64), got "
                        f"{target.dtype.name}")
    if input.ndim == 1:
        input, target = input.unsqueeze(0), target.reshape(1)
    expected = input.shape[:1] + input.shape[2:]
    if target.shape != expected:
        raise ValueError(f"{op}: target shape {target.shape} does not match input "
                         f"{input.shape} (expected {expected})")
    return input, target


def _class_weights(op: str, weight: Tensor | None, classes: int, ndim: int) -> Tensor | None:
    """``weight`` (C,) shaped to broadcast along class dim 1 of an ``ndim``-dim input."""
    if weight is None:
        return None
    if weight.shape != (classes,):
        raise ValueError(f"{op}: weight must have shape ({classes},) (one per class), got "
                         f"{weight.shape}")
    return weight.reshape((1, classes) + (1,) * (ndim - 2))


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class ``target`` under log-probabilities ``input``
    (N, C) or (N, C, d1, ...). With ``weight``, each sample counts ``weight[target]``
    and the mean divides by their sum; ``ignore_index`` targets count 0."""
    input, target = _class_targets("nll_loss", full_precision(input), target)
    valid = ops.ne(target, ignore_index)
    safe = ops.where(valid, target, 0)
    picked = ops.neg(ops.gather(input, 1, safe.unsqueeze(1)).squeeze(1))
    w = ops.cast(valid, input.dtype)
    if weight is not None:
        _class_weights("nll_loss", weight, input.shape[1], input.ndim)
        w = ops.mul(w, weight[safe])
    return _reduce("nll_loss", ops.mul(picked, w), reduction,
                   ops.sum(w) if reduction == "mean" else None)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    input, target = _check_pair("l1_loss", input, target)
    return _reduce("l1_loss", ops.abs(ops.sub(input, target)), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: L1)."""
    input, target = _check_pair("smooth_l1_loss", input, target)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = ops.abs(ops.sub(input, target))
    if beta == 0:
        return _reduce("smooth_l1_loss", d, reduction)
    loss = ops.where(ops.lt(d, beta), ops.mul(ops.mul(d, d), 0.5 / beta), ops.sub(d, 0.5 * beta))
    return _reduce("smooth_l1_loss", loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    input, target = _check_pair("huber_loss", input, target)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    d = ops.abs(ops.sub(input, target))
    loss = ops.where(ops.lt(d, delta), ops.mul(ops.mul(d, d), 0.5),
                     ops.mul(ops.sub(d, 0.5 * delta), delta))
    return _reduce("huber_loss", loss, reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) for probabilities ``input``; each log is clamped
    at -100, as PyTorch does, so p = 0 or 1 gives a finite loss."""
    input, target = _check_pair("binary_cross_entropy", input, target)
    log_p = ops.maximum(ops.log(input), -100.0)
    log_q = ops.maximum(ops.log1p(ops.neg(input)), -100.0)
    loss = ops.neg(ops.add(ops.mul(target, log_p), ops.mul(ops.sub(1.0, target), log_q)))
    if weight is not None:
        loss = ops.mul(loss, weight)
    return _reduce("binary_cross_entropy", loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """The binary cross entropy of sigmoid(``input``), computed stably from the logits:
    (1 - y) x + (1 + (pw - 1) y) softplus(-x), with softplus(-x) = log1p(exp(-|x|)) +
    max(-x, 0); ``pos_weight`` (broadcast along the last dim) weighs the positives."""
    input, target = _check_pair("binary_cross_entropy_with_logits", input, target)
    soft = ops.add(ops.log1p(ops.exp(ops.neg(ops.abs(input)))), ops.relu(ops.neg(input)))
    scale = 1.0 if pos_weight is None else ops.add(ops.mul(ops.sub(pos_weight, 1.0), target),
                                                   1.0)
    loss = ops.add(ops.mul(ops.sub(1.0, target), input), ops.mul(scale, soft))
    if weight is not None:
        loss = ops.mul(loss, weight)
    return _reduce("binary_cross_entropy_with_logits", loss, reduction)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return ops.where(ops.gt(x, 0), x, ops.mul(x, negative_slope))


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    return ops.where(ops.gt(x, 0), x, ops.mul(ops.expm1(ops.minimum(x, 0.0)), alpha))


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > ``threshold`` (PyTorch)."""
    bx = ops.mul(x, beta)
    smooth = ops.div(ops.add(ops.log1p(ops.exp(ops.neg(ops.abs(bx)))), ops.relu(bx)), beta)
    return ops.where(ops.gt(bx, threshold), x, smooth)


def mish(x: Tensor) -> Tensor:
    return ops.mul(x, ops.tanh(softplus(x)))


def logsigmoid(x: Tensor) -> Tensor:
    return ops.neg(softplus(ops.neg(x)))


@stamped
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None) -> Tensor:
    """softmax(q k^T * scale + mask) v over the last two dims (batch dims broadcast)."""
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: query {query.shape}, key {key.shape} "
                         f"and value {value.shape} do not fit (..., L, E), (..., S, E), (..., S, Ev)")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = ops.mul(ops.matmul(query, key.transpose(-2, -1)), scale)
    L, S = query.shape[-2], key.shape[-2]
    if is_causal:
        future = ops.triu(ones(L, S, dtype=dt.bool_), 1)
        scores = ops.masked_fill(scores, future, -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype == dt.bool_:
            scores = ops.masked_fill(scores, ops.logical_not(attn_mask), -math.inf)
        else:
            scores = ops.add(scores, attn_mask)
    att = ops.softmax(scores, -1)
    if dropout_p > 0.0:
        att = dropout(att, dropout_p, True)
    return ops.matmul(att, value)


# np.pad's name for each of PyTorch's index-mapping modes
_PAD_INDEX_MODES = {"replicate": "edge", "reflect": "reflect", "circular": "wrap"}


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """``torch.nn.functional.pad``: ``pad`` = (left, right) of the last dim, then of the
    one before it, and so on. ``constant`` fills with ``value`` (0) and crops where a
    pad is negative; ``replicate``, ``reflect`` and ``circular`` map each new position
    to a source one, as PyTorch does (reflect needs pads < the dim's size, circular <=
    it; neither crops). Unlike PyTorch, the index modes accept any number of dims."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pad: expected a Tensor, got {type(input).__name__}")
    pads = tuple(pad)
    if len(pads) % 2 or len(pads) // 2 > input.ndim or \
            not all(isinstance(p, int) and not isinstance(p, bool) for p in pads):
        raise ValueError(f"pad: padding {pads} must be pairs of ints for at most the "
                         f"{input.ndim} dims of shape {input.shape}")
    if mode not in ("constant", *_PAD_INDEX_MODES):
        raise ValueError(f"pad: mode {mode!r} is not one of 'constant', 'reflect', "
                         "'replicate', 'circular'")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ValueError(f"pad: a value ({value}) is only used by mode='constant'")
    widths = [(0, 0)] * input.ndim
    for k in range(len(pads) // 2):
        widths[input.ndim - 1 - k] = (pads[2 * k], pads[2 * k + 1])
    if mode == "constant":
        return _pad_constant(input, widths, 0.0 if value is None else value)
    out = input
    for d, (lo, hi) in enumerate(widths):
        if lo == hi == 0:
            continue
        n = input.shape[d]
        limit = n - 1 if mode == "reflect" else n
        if lo < 0 or hi < 0 or max(lo, hi) > limit or n == 0:
            raise ValueError(f"pad: {mode} padding ({lo}, {hi}) of dim {d} (size {n}) must be "
                             f"in [0, {limit}]")
        source = np.pad(np.arange(n), (lo, hi), mode=_PAD_INDEX_MODES[mode])
        shape = [1] * out.ndim
        shape[d] = source.size
        index = tensor(source.reshape(shape), device=out.device)
        full = list(out.shape)
        full[d] = source.size
        out = ops.gather(out, d, index.expand(*full))
    return out


def _pad_constant(x: Tensor, widths: list[tuple[int, int]], value: Any) -> Tensor:
    window = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0))
                   for d, (lo, hi) in enumerate(widths))
    if any(s.start > s.stop for s in window):
        raise ValueError(f"pad: cropping {widths} removes more than shape {x.shape}")
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        x = x[window]
    low = tuple(max(lo, 0) for lo, _ in widths)
    high = tuple(max(hi, 0) for _, hi in widths)
    if not any(low) and not any(high):
        return x
    shape = tuple(n + a + b for n, a, b in zip(x.shape, low, high))
    fill = ops.full_const(value, (), x.dtype)
    return ops.prim("pad", [x, fill], {"low": low, "high": high, "interior": (0,) * x.ndim},
                    shape, x.dtype)


def embedding(input: Tensor, weight: Tensor) -> Tensor:
    if input.dtype not in (dt.int32, dt.int64):
        raise TypeError(f"embedding: indices must be int32 or int64, got {input.dtype.name}")
    return weight[input]


def one_hot(x: Tensor, num_classes: int = -1) -> Tensor:
    return ops.one_hot(x, num_classes)


from nova.nn.convolution import (  # noqa: E402  (they import pad from here)
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d,
    adaptive_max_pool2d, adaptive_max_pool3d, avg_pool1d, avg_pool2d,
    avg_pool3d, conv1d, conv2d, conv3d, max_pool1d, max_pool2d, max_pool3d,
)
from nova.nn.interpolate import interpolate, upsample  # noqa: E402
from nova.nn.normalization import batch_norm, group_norm, normalize  # noqa: E402

__all__ = ["linear", "dropout", "pad", "layer_norm", "rms_norm", "cross_entropy", "mse_loss",
           "nll_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "leaky_relu", "elu", "softplus", "mish",
           "logsigmoid",
           "scaled_dot_product_attention", "embedding", "one_hot", "relu", "gelu", "silu",
           "softmax", "log_softmax", "sigmoid", "tanh", "conv1d", "conv2d", "conv3d",
           "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "batch_norm",
           "group_norm", "normalize", "interpolate", "upsample"]
