"""``torch.*``'s own names for ``torch.nn.functional``'s ops (``torch.conv2d``,
``torch.layer_norm``, ``torch.dropout``...), with the top-level signatures, which are
ATen's and differ from ``F``'s in places. Each maps onto Nova's ``nn.functional``
implementation; what differs is argument handling only:

* ``dropout(input, p, train)`` and its kin take ``p`` and ``train`` positionally, with no
  defaults; each has an in-place form (``dropout_``) that rebinds ``input`` as Nova's
  in-place ops do (``Tensor._assign``).
* ``batch_norm``/``instance_norm`` put ``weight, bias`` before the running statistics,
  and every argument is required; ``layer_norm``/``group_norm``/``batch_norm`` take a
  ``cudnn_enable(d)`` flag, which picks a PyTorch backend, never a value: Nova has no
  cuDNN, so it is accepted and changes nothing.
* ``embedding(weight, indices, padding_idx=-1, ...)`` takes the weight first; only a
  ``padding_idx`` in ``[0, num_embeddings)`` names a row (a negative one means none,
  as in ATen).
* the losses take ``reduction`` as ATen's int: 0 ``'none'``, 1 ``'mean'``, 2 ``'sum'``;
  left out it is 0, no reduction. (ATen's schema, and torch's stubs, say 1, but torch's
  Python binding reads that default as 0: ``torch.kl_div(x, y)`` returns the pointwise
  loss in torch 2.x, measured; Nova does what torch does.)
* the pools take no ``return_indices`` (``max_pool1d_with_indices`` and
  ``adaptive_max_pool1d`` return the indices too), and an empty ``stride`` means the
  kernel size.
"""
from __future__ import annotations

from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn import functional as F
from nova.tensor import movement, ops
from nova.tensor.creation import rand
from nova.tensor.tensor import Tensor

# Signatures F shares with torch's top level: the same functions.
conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = (
    F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)
bilinear = F.bilinear
cosine_similarity, pairwise_distance, pdist = F.cosine_similarity, F.pairwise_distance, F.pdist
pixel_shuffle, pixel_unshuffle = F.pixel_shuffle, F.pixel_unshuffle
channel_shuffle = native_channel_shuffle = F.channel_shuffle
adaptive_avg_pool1d = F.adaptive_avg_pool1d


# ---------------------------------------------------------------- dropout

def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.dropout``: ``F.dropout(input, p, training=train)``."""
    return F.dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.alpha_dropout``: ``F.alpha_dropout(input, p, training=train)``."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``alpha_dropout`` of whole channels (dim 1) of an ``(N, C, ...)`` input."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def _feature_dropout(input: Tensor, p: float, train: bool, inplace: bool) -> Tensor:
    ops._check_tensor("feature_dropout", input)
    if input.ndim < 2:
        raise ValueError(f"feature_dropout: feature dropout requires at least 2 dimensions "
                         f"in the input, got shape {input.shape}")
    mask_shape = input.shape[:2] + (1,) * (input.ndim - 2)
    return F._dropout("feature_dropout", input, p, train, inplace, mask_shape)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Zero whole channels: one draw per ``(sample, channel)`` of an ``(N, C, ...)``
    input (dim 0 is always the batch, unlike ``F.dropout2d``), the rest scaled by
    ``1 / (1 - p)`` (``torch.feature_dropout``)."""
    return _feature_dropout(input, p, train, False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return _feature_dropout(input, p, train, True)


# ---------------------------------------------------------------- activations

def selu(input: Tensor) -> Tensor:
    return F.selu(input)


def selu_(input: Tensor) -> Tensor:
    return F.selu(input, inplace=True)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    return F.celu(input, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return F.celu(input, alpha, inplace=True)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """``input`` where it is greater than ``threshold``, else ``value``."""
    return F.threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return F.threshold(input, threshold, value, inplace=True)


def _rrelu(input: Tensor, lower: float, upper: float, training: bool, generator: Any,
           inplace: bool) -> Tensor:
    """``F.rrelu``; with a ``generator`` the training slopes are drawn from it."""
    if generator is None or not training:
        return F.rrelu(input, lower, upper, training, inplace)
    if lower > upper:
        raise ValueError(f"rrelu: lower bound ({lower}) should be less than or equal to "
                         f"the upper bound ({upper})")
    x = ops._as_float("rrelu", input)
    slope = ops.add(ops.mul(rand(x.shape, dtype=x.dtype, generator=generator),
                            upper - lower), lower)
    return F.inplace_result("rrelu", input, ops.where(ops.gt(x, 0), x, ops.mul(x, slope)),
                            inplace)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, generator: Any = None) -> Tensor:
    """Leaky ReLU with slope ``(lower + upper) / 2``, or in training drawn per element
    from U[lower, upper) (from ``generator`` when given)."""
    return _rrelu(input, lower, upper, training, generator, False)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False, generator: Any = None) -> Tensor:
    return _rrelu(input, lower, upper, training, generator, True)


# ---------------------------------------------------------------- normalization

def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    """``F.layer_norm``; ``cudnn_enable`` picks a backend (see the module docstring)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    return F.rms_norm(input, normalized_shape, weight, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    """``torch.batch_norm``: ATen's argument order (weight and bias first), every
    argument required. In training the running statistics, when given, are updated in
    place, as ``F.batch_norm`` does."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                        eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                  running_mean: Tensor | None, running_var: Tensor | None,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    """``torch.instance_norm``: ATen's argument order, every argument required."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


# ---------------------------------------------------------------- embedding

def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at ``indices`` (``torch.embedding``: the weight first).
    Positions holding ``padding_idx`` give its row no gradient; a ``padding_idx``
    outside ``[0, num_embeddings)`` (the default -1) matches no index, as in ATen."""
    ops._check_tensor("embedding weight", weight)
    ops._check_tensor("embedding indices", indices)
    n = weight.shape[0] if weight.ndim else 0
    pad = padding_idx if 0 <= padding_idx < n else None
    return F.embedding(indices, weight, pad, scale_grad_by_freq=scale_grad_by_freq,
                       sparse=sparse)


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float,
                      norm_type: float) -> Tensor:
    """Scale in place each row of the 2-D ``input`` that ``indices`` names and whose
    ``norm_type``-norm exceeds ``max_norm`` to norm ``max_norm`` (``torch.
    embedding_renorm_``, what ``F.embedding(max_norm=...)`` does first)."""
    ops._check_tensor("embedding_renorm_ input", input)
    ops._check_tensor("embedding_renorm_ indices", indices)
    if input.ndim != 2:
        raise ValueError(f"embedding_renorm_: expected a 2-dimensional weight, got shape "
                         f"{input.shape}")
    if indices.dtype.category != dt.INT:
        raise DTypeError(f"embedding_renorm_: indices must be an integer tensor, got "
                         f"{indices.dtype.name}")
    F._renorm_looked_up_(input, indices, max_norm, norm_type)
    return input


# ---------------------------------------------------------------- pooling

def _stride(stride: Any) -> Any:
    """ATen's empty ``stride`` (its default) is ``F``'s None: the kernel size."""
    return None if stride is None or (isinstance(stride, (list, tuple)) and not stride) \
        else stride


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False) -> Tensor:
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False) -> Tensor:
    return F.max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False) -> Tensor:
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = (),
                            padding: Any = 0, dilation: Any = 1,
                            ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """The max pool and the index (along the last dim) of each window's maximum."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode,
                        return_indices=True)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    return F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode,
                        count_include_pad)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple[Tensor, Tensor]:
    """``(values, indices)``: torch's top-level form always returns both."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


# ---------------------------------------------------------------- convolution

def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """The 1-D convolution of a time-batch-channel ``input`` ``(T, N, C_in)`` with a
    ``(K, C_in, C_out)`` ``weight`` and ``(C_out,)`` ``bias``, ``pad`` zeros at both ends
    of time: ``(T + 2 pad - K + 1, N, C_out)`` (``torch.conv_tbc``)."""
    for name, t, nd in (("input", input, 3), ("weight", weight, 3), ("bias", bias, 1)):
        ops._check_tensor(f"conv_tbc {name}", t)
        if t.ndim != nd:
            raise ValueError(f"conv_tbc: {name} must have {nd} dims, got shape {t.shape}")
    if weight.shape[1] != input.shape[2] or bias.shape[0] != weight.shape[2]:
        raise ValueError(f"conv_tbc: input (T, N, C_in) {input.shape}, weight (K, C_in, "
                         f"C_out) {weight.shape} and bias (C_out,) {bias.shape} disagree")
    out = F.conv1d(movement.permute(input, 1, 2, 0), movement.permute(weight, 2, 1, 0), bias,
                   padding=pad)
    return movement.permute(out, 2, 0, 1)


# ---------------------------------------------------------------- losses

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(op: str, reduction: Any) -> str:
    """ATen's int ``reduction`` as ``F``'s string."""
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        raise TypeError(f"{op}: reduction must be an int (0 'none', 1 'mean', 2 'sum', "
                        f"ATen's enum; nn.functional.{op} takes the string), got "
                        f"{reduction!r}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 0 ('none'), 1 ('mean') or 2 ('sum'), "
                         f"got {reduction}")
    return _REDUCTIONS[reduction]


def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *,
           log_target: bool = False) -> Tensor:
    """``F.kl_div`` with ATen's int reduction (default 0, none: see the module
    docstring); 1 is the mean over every element, without ``F``'s warning about
    ``'batchmean'`` (ATen's op has none)."""
    how = _reduction("kl_div", reduction)
    loss = F.kl_div(input, target, reduction="none", log_target=log_target)
    return ops.mean(loss) if how == "mean" else F._reduce("kl_div", loss, how)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None,
                                     reduction: int = 0) -> Tensor:
    """ATen's order: ``pos_weight`` before ``reduction`` (an int)."""
    return F.binary_cross_entropy_with_logits(
        input, target, weight,
        reduction=_reduction("binary_cross_entropy_with_logits", reduction),
        pos_weight=pos_weight)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor,
                          margin: float = 0.0, reduction: int = 0) -> Tensor:
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction("cosine_embedding_loss", reduction))


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction: int = 0) -> Tensor:
    return F.hinge_embedding_loss(input, target, margin,
                                  reduction=_reduction("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 0) -> Tensor:
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction("margin_ranking_loss", reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                        swap: bool = False, reduction: int = 0) -> Tensor:
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    """``torch.poisson_nll_loss``: every argument required, ``reduction`` an int."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction("poisson_nll_loss", reduction))


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: int = 0, zero_infinity: bool = False) -> Tensor:
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction("ctc_loss", reduction), zero_infinity)


__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "conv_tbc", "bilinear", "cosine_similarity", "pairwise_distance", "pdist",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
    "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "selu", "selu_", "celu",
    "celu_", "threshold", "threshold_", "rrelu", "rrelu_", "layer_norm", "rms_norm",
    "group_norm", "batch_norm", "instance_norm", "embedding", "embedding_renorm_",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "avg_pool1d",
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "kl_div",
    "binary_cross_entropy_with_logits", "cosine_embedding_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss", "ctc_loss",
]
