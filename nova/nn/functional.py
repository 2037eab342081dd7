"""``nv.nn.functional``: stateless layers, written with the op front end (so fusion
later sees the primitives, and autograd differentiates them)."""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from nova.autograd.function import Function
from nova.core import dtypes as dt
from nova.core.errors import ArgumentError, DTypeError, ShapeError
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.autocast_state import (POLICIES, autocast_op, biased_product,
                                       full_precision, lowered)
from nova.tensor.complex import ComplexTensor
from nova.tensor.creation import ones, rand
from nova.tensor.function_template import stamped
from nova.tensor.tensor import Tensor, unaliased_detach

gelu = ops.gelu
sigmoid = ops.sigmoid
tanh = ops.tanh


def inplace_result(op: str, input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    """``out``, or with ``inplace`` the caller's ``input`` rebound to it (``op_``, an
    in-place op of Nova's functionalized kind: the handle, and views of it, see the new
    values; a leaf that requires grad is refused, as PyTorch refuses it)."""
    return input._assign(out, f"{op}_") if inplace else out


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return inplace_result("relu", input, ops.relu(input), inplace)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    return inplace_result("silu", input, ops.silu(input), inplace)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: Any = None) -> Tensor:
    """Softmax along ``dim``; with no ``dim``, PyTorch's deprecated implicit choice (0
    for 0-, 1- and 3-d inputs, else 1) and its warning."""
    if dim is None:
        ops._check_tensor("softmax", input)
        dim = implicit_softmax_dim("softmax", input.ndim)
    return ops.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype: Any = None) -> Tensor:
    """Log-softmax along ``dim`` (no ``dim``: as ``softmax``)."""
    if dim is None:
        ops._check_tensor("log_softmax", input)
        dim = implicit_softmax_dim("log_softmax", input.ndim)
    return ops.log_softmax(input, dim, dtype)


@stamped
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` with PyTorch's (out_features, in_features) weight; a 1-D
    weight (in_features,) without a bias is ``x @ weight``, the features dim dropped,
    as in PyTorch."""
    if weight.ndim == 1 and bias is None:
        if input.ndim == 0 or input.shape[-1] != weight.shape[0]:
            raise ShapeError(f"linear: input {input.shape} has "
                             f"{input.shape[-1] if input.ndim else 0} features but weight "
                             f"{weight.shape} expects {weight.shape[0]}")
        return ops.matmul(lowered(input), lowered(weight))
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out, in), or 1-D (in,) without a "
                         f"bias, got shape {weight.shape}"
                         f"{'' if bias is None else ' with a bias'}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(f"linear: input {input.shape} has "
                         f"{input.shape[-1] if input.ndim else 0} features but weight "
                         f"{weight.shape} expects {weight.shape[1]}")
    input, weight = lowered(input), lowered(weight)           # autocast (no-op outside it)
    if bias is None:
        return ops.matmul(input, weight.transpose(0, 1))
    # Under autocast the bias joins the product's precision, as in PyTorch's addmm; a
    # half product and its bias are summed in float32 and rounded once, as there.
    return biased_product(_linear_product, (input, weight), lowered(bias))


def _linear_product(x: Tensor, weight: Tensor) -> Tensor:
    return ops.matmul(x, weight.transpose(0, 1))


def _check_p(op: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: probability must be in [0, 1], got {p}")


def _keep(x: Tensor, shape: tuple[int, ...], p: float) -> Tensor:
    """A bool mask of ``shape``, each element True with probability ``1 - p``. It comes
    from the counter-based generator (its seed and offset are runtime inputs), so a
    training loop with dropout compiles once."""
    return ops.ge(rand(shape, dtype=x.dtype if x.dtype.is_floating_point else dt.float32), p)


def _dropout(op: str, x: Tensor, p: float, training: bool, inplace: bool,
             mask_shape: tuple[int, ...]) -> Tensor:
    """Zero with probability ``p`` (per element of ``mask_shape``, broadcast over ``x``)
    and scale the rest by 1/(1-p)."""
    _check_p(op, p)
    if not training or p == 0.0 or x.numel() == 0:
        return x
    if p == 1.0:
        out = ops.mul(x, 0.0)
    else:
        out = ops.where(_keep(x, mask_shape, p), ops.mul(x, 1.0 / (1.0 - p)), 0.0)
    return inplace_result(op, x, out, inplace)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p)."""
    return _dropout("dropout", input, p, training, inplace, input.shape)


def _channel_mask_shape(op: str, x: Tensor, spatial: int) -> tuple[int, ...]:
    """The mask shape of channel-wise dropout over ``spatial`` dims: one draw per
    (sample, channel) of a batched ``(N, C, *spatial)`` input, or per channel of an
    unbatched ``(C, *spatial)`` one."""
    ops._check_tensor(op, x)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{op}: expected a {spatial + 1}-D or {spatial + 2}-D input "
                         f"((C, *spatial) or (N, C, *spatial) with {spatial} spatial dims), "
                         f"got shape {x.shape}")
    lead = 2 if x.ndim == spatial + 2 else 1
    return x.shape[:lead] + (1,) * (x.ndim - lead)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``."""
    return _dropout("dropout1d", input, p, training, inplace,
                    _channel_mask_shape("dropout1d", input, 1))


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` with probability ``p``. A 3-D input is
    taken as ``(N, C, L)``, with PyTorch's warning (its behaviour for 3-D input)."""
    ops._check_tensor("dropout2d", input)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim. This behavior will "
                      "change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise "
                      "dropout behavior, please switch to using dropout1d instead.",
                      stacklevel=2)
    elif input.ndim != 4:
        raise ValueError(f"dropout2d: expected a 4-D input (N, C, H, W) (or 3-D, taken as "
                         f"(N, C, L)), got shape {input.shape}")
    return _dropout("dropout2d", input, p, training, inplace,
                    input.shape[:2] + (1,) * (input.ndim - 2))


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability
    ``p``."""
    return _dropout("dropout3d", input, p, training, inplace,
                    _channel_mask_shape("dropout3d", input, 3))


# SELU's scale * alpha: alpha dropout sets a dropped unit to -_ALPHA_PRIME (SELU's negative
# saturation) before its affine fix
_ALPHA_PRIME = 1.7580993408473766


def _alpha_dropout(op: str, x: Tensor, p: float, training: bool, inplace: bool,
                   mask_shape: tuple[int, ...]) -> Tensor:
    """Dropped units are set to SELU's negative saturation and the result is moved back
    to the input's mean and variance: ``a * (x if kept else -alpha') + b`` with PyTorch's
    ``a = 1 / sqrt((alpha'^2 p + 1)(1 - p))`` and ``b = a alpha' p``."""
    _check_p(op, p)
    if not training or p == 0.0 or x.numel() == 0:
        return x
    if p == 1.0:
        return inplace_result(op, x, ops.mul(x, 0.0), inplace)
    a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    out = ops.where(_keep(x, mask_shape, p), ops.add(ops.mul(x, a), a * _ALPHA_PRIME * p),
                    a * _ALPHA_PRIME * (p - 1))
    return inplace_result(op, x, out, inplace)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout that keeps a SELU network's self-normalization (mean and variance)."""
    ops._check_tensor("alpha_dropout", input)
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, input.shape)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """``alpha_dropout`` of whole channels (dim 1) of an ``(N, C, ...)`` input."""
    ops._check_tensor("feature_alpha_dropout", input)
    if input.ndim < 2:
        raise ValueError(f"feature_alpha_dropout: feature dropout requires at least 2 "
                         f"dimensions in the input, got shape {input.shape}")
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace,
                          input.shape[:2] + (1,) * (input.ndim - 2))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None
             ) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``:
    one matmul against the weight laid out (in1, out * in2), then a product and sum
    over in2."""
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        ops._check_tensor(f"bilinear {name}", t)
    if weight.ndim != 3:
        raise ValueError(f"bilinear: weight must be 3-D (out, in1, in2), got shape "
                         f"{weight.shape}")
    o, i1, i2 = weight.shape
    if input1.ndim == 0 or input1.shape[:-1] != input2.shape[:-1] or \
            input1.shape[-1] != i1 or input2.ndim == 0 or input2.shape[-1] != i2:
        raise ValueError(f"bilinear: inputs {input1.shape} and {input2.shape} must be "
                         f"(*, {i1}) and (*, {i2}) with the same leading dims for weight "
                         f"{weight.shape}")
    if bias is not None and bias.shape != (o,):
        raise ValueError(f"bilinear: bias must have shape ({o},), got {bias.shape}")
    lead = input1.shape[:-1]
    t = ops.matmul(input1.reshape(-1, i1), weight.permute(1, 0, 2).reshape(i1, o * i2))
    y = ops.sum(ops.mul(t.reshape(-1, o, i2), input2.reshape(-1, 1, i2)), 2)
    if bias is not None:
        y = ops.add(y, bias)
    return y.reshape(*lead, o)


def _normalized_axes(op: str, x: Tensor, normalized_shape: Any) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape:
        raise ValueError(f"{op}: normalized_shape must have at least one dim (PyTorch's "
                         f"'at least 1-dimensional'), got () for input {x.shape}")
    if x.shape[x.ndim - len(shape):] != shape or len(shape) > x.ndim:
        raise ValueError(f"{op}: normalized_shape {shape} does not match the trailing dims of "
                         f"input {x.shape}")
    return tuple(range(x.ndim - len(shape), x.ndim))


@stamped
def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """A float16/bfloat16 ``input`` is normalized in float32 and rounded once, as PyTorch's
    kernels accumulate (in the half dtype the squares overflow past 256)."""
    axes = _normalized_axes("layer_norm", input, normalized_shape)

    def normalized(x: Tensor) -> Tensor:
        mu = ops.mean(x, axes, keepdim=True)
        centered = ops.sub(x, mu)
        var = ops.mean(ops.mul(centered, centered), axes, keepdim=True)
        out = ops.mul(centered, ops.rsqrt(ops.add(var, eps)))
        if weight is not None:
            out = ops.mul(out, weight)
        return out if bias is None else ops.add(out, bias)
    return ops._in_float32(full_precision(input, cuda_only=True), normalized)


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """In float32 for a half ``input``, rounded once (as ``layer_norm``). ``eps=None``
    is the machine epsilon of the type it computes in, as PyTorch's: float64's for
    float64, float32's otherwise (a half input computes in float32)."""
    axes = _normalized_axes("rms_norm", input, normalized_shape)
    if eps is None:
        eps = float(np.finfo(np.float64 if input.dtype == dt.float64 else np.float32).eps)

    def normalized(x: Tensor) -> Tensor:
        out = ops.mul(x, ops.rsqrt(ops.add(ops.mean(ops.mul(x, x), axes, keepdim=True), eps)))
        return out if weight is None else ops.mul(out, weight)
    return ops._in_float32(full_precision(input, cuda_only=True), normalized)


def _reduce(op: str, loss: Tensor, reduction: str, weight_sum: Tensor | None = None) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "mean":
        return _weighted_mean(ops.sum(loss), weight_sum) if weight_sum is not None \
            else ops.mean(loss)
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _weighted_mean(total: Tensor, weight_sum: Tensor) -> Tensor:
    """``total / weight_sum`` for the class-index losses' mean, with PyTorch's gradient
    when every sample is ignored (``weight_sum == 0``): the value is still the division
    (0 / 0 = NaN, as PyTorch's), but the gradient is 0, as PyTorch's backward skips the
    ignored samples; a plain division sends 0 * (1 / 0) = NaN into the input's gradient,
    and one all-padding micro-batch would poison every parameter's. Costs two selects on
    0-d tensors."""
    empty = ops.eq(weight_sum, 0)
    value = ops.div(total.detach(), weight_sum.detach())
    return ops.where(empty, value, ops.div(total, ops.where(empty, 1.0, weight_sum)))


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0, size_average: bool | None = None,
                  reduce: bool | None = None) -> Tensor:
    """Softmax cross entropy over class dim 1 of ``input`` (N, C) or (N, C, d1, ...), or
    dim 0 of one sample (C,).

    ``target`` holds either class indices (integers, of shape (N,) or (N, d1, ...)), or,
    when it has ``input``'s shape, class probabilities (floats: mixup, distillation),
    as in PyTorch; see ``_cross_entropy_indices`` and ``_cross_entropy_probs``. A 1-D
    input with ``reduction='none'`` gives a 0-d loss."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError("cross_entropy: input and target must be Tensors")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    single = input.ndim == 1
    if target.shape == input.shape:
        loss = _cross_entropy_probs(full_precision(input), full_precision(target), weight,
                                    ignore_index, reduction, label_smoothing)
    else:
        _check_known_targets("cross_entropy", input, target, ignore_index)
        loss = _cross_entropy_indices(full_precision(input), target, weight, ignore_index,
                                      reduction, label_smoothing)
    return loss.reshape(()) if single and reduction == "none" else loss


def _cross_entropy_indices(input: Tensor, target: Tensor, weight: Tensor | None,
                           ignore_index: int, reduction: str,
                           label_smoothing: float) -> Tensor:
    """Class-index targets. Targets equal to ``ignore_index`` contribute nothing and are
    left out of the mean. ``weight`` (C,) weighs each sample by its target's class
    (the mean divides by the weights' sum) and, with ``label_smoothing``, each class of
    the smoothing term, as PyTorch does."""
    input, target = _class_targets("cross_entropy", input, target)
    c_dim = 1
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
        nll_part = _weighted_mean(ops.sum(loss), ops.sum(w))
        smooth_part = _weighted_mean(ops.sum(smooth), ops.sum(w))
        return ops.add(ops.mul(nll_part, 1.0 - label_smoothing),
                       ops.mul(smooth_part, label_smoothing))
    combined = ops.add(ops.mul(loss, 1.0 - label_smoothing), ops.mul(smooth, label_smoothing))
    return _reduce("cross_entropy", combined, reduction)


def _cross_entropy_probs(input: Tensor, target: Tensor, weight: Tensor | None,
                         ignore_index: int, reduction: str, label_smoothing: float) -> Tensor:
    """Class-probability targets (``target`` of ``input``'s shape), as PyTorch computes
    them: per sample, -sum_c w_c t_c log_softmax(input)_c, where ``label_smoothing``
    mixes the target with the uniform distribution, t (1 - ls) + ls / C. Unlike class
    indices, the mean divides by the number of samples (N d1 ...), not by the weights,
    and there is nothing to ignore: PyTorch refuses a non-negative ``ignore_index``."""
    op = "cross_entropy"
    if input.ndim < 1 or not input.dtype.is_floating_point:
        raise ValueError(f"{op}: input must be a floating-point tensor of shape (C,) or "
                         f"(N, C, ...), got {input.dtype.name} of shape {input.shape}")
    if not target.dtype.is_floating_point:
        raise DTypeError(f"{op}: a target of the input's shape {input.shape} holds class "
                         f"probabilities and must be floating point, got {target.dtype.name} "
                         f"(class indices have shape {input.shape[:1] + input.shape[2:]})")
    if ignore_index >= 0:
        raise ValueError(f"{op}: ignore_index={ignore_index} is not supported with "
                         f"class-probability targets (target of the input's shape "
                         f"{input.shape}); leave it at its default (-100)")
    if input.ndim == 1:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    classes = input.shape[1]
    if label_smoothing > 0.0:
        target = ops.add(ops.mul(target, 1.0 - label_smoothing), label_smoothing / classes)
    shaped = _class_weights(op, weight, classes, input.ndim)
    if shaped is not None:
        target = ops.mul(target, shaped)
    loss = ops.neg(ops.sum(ops.mul(ops.log_softmax(input, 1), target), 1))
    return _reduce(op, loss, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean", *,
             size_average: bool | None = None, reduce: bool | None = None,
             weight: Tensor | None = None) -> Tensor:
    reduction = legacy_reduction(size_average, reduce, reduction)
    shape = getattr(input, "shape", None)
    input, target = _broadcast_pair("mse_loss", input, target)
    d = ops.sub(input, target)
    if weight is not None:
        return _weighted_loss("mse_loss", ops.mul(d, d), weight, shape, reduction, True)
    return _reduce("mse_loss", ops.mul(d, d), reduction)


def _weighted_loss(op: str, loss: Tensor, weight: Tensor, shape: Any, reduction: str,
                   by_weight: bool) -> Tensor:
    """PyTorch's ``weight=`` of ``mse_loss``, ``l1_loss`` and ``huber_loss``: the
    elementwise loss times ``weight``, which must have the input's shape; ``"mean"``
    divides the weighted sum by the weights' sum (``by_weight``: ``mse_loss`` and
    ``l1_loss``) or averages the weighted losses (``huber_loss``), as PyTorch's."""
    if not isinstance(weight, Tensor) or weight.shape != shape:
        raise ValueError(f"{op}: Weights and input must have the same size (weight "
                         f"{getattr(weight, 'shape', type(weight).__name__)}, input {shape}).")
    loss = ops.mul(loss, weight)
    if reduction == "mean" and by_weight:
        return ops.div(ops.sum(loss), ops.sum(weight))
    return _reduce(op, loss, reduction)


def _check_pair(op: str, input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Both tensors of a pointwise loss, checked, and raised to float32 under autocast
    (PyTorch's losses run in float32 there)."""
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{op}: input and target must be Tensors")
    if input.shape != target.shape:
        raise ValueError(f"{op}: input {input.shape} and target {target.shape} must have "
                         "the same shape")
    return full_precision(input), full_precision(target)


def _broadcast_pair(op: str, input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Like ``_check_pair`` for the losses that PyTorch lets broadcast (``mse_loss``,
    ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``): a target of another shape warns, as
    PyTorch does (a (N, 1) prediction against a (N,) target gives an (N, N) loss, rarely
    what was meant), then broadcasts; shapes that do not broadcast are an error."""
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{op}: input and target must be Tensors")
    if input.shape != target.shape:
        pairs = zip(reversed(input.shape), reversed(target.shape))
        if not all(a == b or a == 1 or b == 1 for a, b in pairs):
            raise ValueError(f"{op}: input {input.shape} and target {target.shape} must have "
                             "the same shape (or, as PyTorch allows with a warning, shapes "
                             "that broadcast together)")
        # PyTorch's text, so filters written for it (they match its start) still apply
        warnings.warn(f"Using a target size {target.shape} that is different to the input "
                      f"size {input.shape}. This will likely lead to incorrect results due "
                      f"to broadcasting. Please ensure they have the same size. (in {op})",
                      UserWarning, stacklevel=3)
    return full_precision(input), full_precision(target)


def _check_known_targets(op: str, input: Tensor, target: Tensor, ignore_index: int) -> None:
    """IndexError at the user's line, as PyTorch's ``Target 3 is out of bounds.``, for a
    class index already on the host (a label tensor made from Python data or numpy)
    outside ``[0, C)`` that is not ``ignore_index`` -- a vocabulary smaller than the
    labels, the usual case. Computed targets are checked by the gather when the step
    runs (its message names ``nova.gather``)."""
    if not isinstance(input, Tensor) or input.ndim < 1 or not isinstance(target, Tensor) \
            or target.dtype not in _INDEX_TARGET_DTYPES:
        return                  # _class_targets reports these
    values = ops.known_index_values(target)
    if values is None or values.size == 0:
        return
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    bad = ((values < 0) | (values >= classes)) & (values != ignore_index)
    if bad.any():
        raise IndexError(f"{op}: Target {values[bad].flat[0]} is out of bounds: input "
                         f"{tuple(input.shape)} has {classes} classes (valid targets are "
                         f"[0, {classes}) and ignore_index={ignore_index})")


# class-index target dtypes: PyTorch's Long and Byte, and Nova's int32 indices
_INDEX_TARGET_DTYPES = (dt.int64, dt.int32, dt.uint8)


def _class_targets(op: str, input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """(input, target) as (N, C, ...) and (N, ...): a 1-D input is one sample."""
    if input.ndim < 1 or not input.dtype.is_floating_point:
        raise ValueError(f"{op}: input must be a floating-point tensor of shape (C,) or "
                         f"(N, C, ...), got {input.dtype.name} of shape {input.shape}")
    if target.dtype not in _INDEX_TARGET_DTYPES:
        raise DTypeError(f"{op}: target must hold class indices (int64, int32 or uint8), "
                         f"got {target.dtype.name}")
    if target.dtype == dt.uint8:                # PyTorch's other index type here (Byte)
        target = ops.cast(target, dt.int32)
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
             ignore_index: int = -100, reduction: str = "mean", *,
             size_average: bool | None = None, reduce: bool | None = None) -> Tensor:
    """Negative log-likelihood of class ``target`` under log-probabilities ``input``
    (N, C) or (N, C, d1, ...). With ``weight``, each sample counts ``weight[target]``
    and the mean divides by their sum; ``ignore_index`` targets count 0."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    single = input.ndim == 1
    _check_known_targets("nll_loss", input, target, ignore_index)
    input, target = _class_targets("nll_loss", full_precision(input), target)
    valid = ops.ne(target, ignore_index)
    safe = ops.where(valid, target, 0)
    picked = ops.neg(ops.gather(input, 1, safe.unsqueeze(1)).squeeze(1))
    w = ops.cast(valid, input.dtype)
    if weight is not None:
        _class_weights("nll_loss", weight, input.shape[1], input.ndim)
        w = ops.mul(w, weight[safe])
    loss = _reduce("nll_loss", ops.mul(picked, w), reduction,
                   ops.sum(w) if reduction == "mean" else None)
    return loss.reshape(()) if single and reduction == "none" else loss


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean", *,
            size_average: bool | None = None, reduce: bool | None = None,
            weight: Tensor | None = None) -> Tensor:
    reduction = legacy_reduction(size_average, reduce, reduction)
    shape = getattr(input, "shape", None)
    input, target = _broadcast_pair("l1_loss", input, target)
    if weight is not None:
        return _weighted_loss("l1_loss", ops.abs(ops.sub(input, target)), weight, shape,
                              reduction, True)
    return _reduce("l1_loss", ops.abs(ops.sub(input, target)), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0, *, size_average: bool | None = None,
                   reduce: bool | None = None) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: L1). The square
    is of d, not |d|: the same values, but |d|'s slope is 0 at d = 0, where the second
    derivative (``create_graph``) is 1 / beta, as PyTorch's."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    input, target = _broadcast_pair("smooth_l1_loss", input, target)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    diff = ops.sub(input, target)
    d = ops.abs(diff)
    if beta == 0:
        return _reduce("smooth_l1_loss", d, reduction)
    loss = ops.where(ops.lt(d, beta), ops.mul(ops.mul(diff, diff), 0.5 / beta),
                     ops.sub(d, 0.5 * beta))
    return _reduce("smooth_l1_loss", loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0, weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); times ``weight`` if
    given (``_weighted_loss``). The square is of d, not |d| (the second derivative at
    d = 0 is 1, as in ``smooth_l1_loss``)."""
    shape = getattr(input, "shape", None)
    input, target = _broadcast_pair("huber_loss", input, target)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    diff = ops.sub(input, target)
    d = ops.abs(diff)
    loss = ops.where(ops.lt(d, delta), ops.mul(ops.mul(diff, diff), 0.5),
                     ops.mul(ops.sub(d, 0.5 * delta), delta))
    if weight is not None:
        return _weighted_loss("huber_loss", loss, weight, shape, reduction, False)
    return _reduce("huber_loss", loss, reduction)


class _BinaryCrossEntropy(Function):
    """PyTorch's elementwise binary cross entropy of probabilities ``p`` and targets
    ``y``, with its gradient rule rather than the derivative of its forward: each log is
    clamped at -100 (a finite loss at p = 0 or 1), and the gradient for ``p`` is
    ``(p - y) / max(p (1 - p), 1e-12)``: finite everywhere (0 for a saturated correct
    prediction, +-1e12 for a saturated wrong one) where the clamped logs' derivative
    is 0 * inf = NaN at p = 0 or 1, and exact for a soft target near ``p``, where
    that derivative's ``-y / p + (1 - y) / (1 - p)`` cancels (p = 0.3, y = 0.3000001
    in float32: 30% off). The gradient for ``y`` is the forward's, ``log(1 - p) -
    log(p)`` with the clamped logs. A half-precision gradient is computed in float32
    and rounded once (float16 cannot hold the 1e-12: PyTorch's float16 kernel gives
    NaN for p = y = 1). The backward is a formula of saved tensors (``pure_backward``),
    so ``nv.compile`` replays a step that runs it."""

    pure_backward = True

    @staticmethod
    def forward(ctx: Any, input: Tensor, target: Tensor) -> Tensor:
        ctx.save_for_backward(input, target)
        log_p, log_q = _clamped_logs(input)
        return ops.neg(ops.add(ops.mul(target, log_p), ops.mul(ops.sub(1.0, target), log_q)))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        input, target = ctx.saved_tensors
        if input.dtype in (dt.float16, dt.bfloat16):
            input, target, grad = (ops.cast(t, dt.float32) for t in (input, target, grad))
        grad_input = grad_target = None
        if ctx.needs_input_grad[0]:
            grad_input = _BinaryCrossEntropyGrad.apply(grad, input, target)
        if ctx.needs_input_grad[1]:
            log_p, log_q = _clamped_logs(input)
            grad_target = ops.mul(grad, ops.sub(log_q, log_p))
        return grad_input, grad_target


class _BinaryCrossEntropyGrad(Function):
    """``binary_cross_entropy``'s gradient for ``p``, ``g (p - y) / max(p (1 - p),
    1e-12)``, with PyTorch's second derivatives rather than that formula's: in ``p``,
    ``g (p^2 - 2 p y + y) / ((p + 1e-12)^2 (1 - p + 1e-12)^2)`` (``binary_cross_entropy
    _double_backward``), which stays bounded where the clamp holds -- the formula's own
    derivative there is ``g / 1e-12``, 1e12 for a saturated prediction, correct or
    not; in ``y``, ``-g / max(p (1 - p), 1e-12)``; in ``g``, the gradient's own
    factor."""

    pure_backward = True

    @staticmethod
    def forward(ctx: Any, grad: Tensor, input: Tensor, target: Tensor) -> Tensor:
        ctx.save_for_backward(grad, input, target)
        return ops.div(ops.mul(grad, ops.sub(input, target)), _bce_spread(input))

    @staticmethod
    def backward(ctx: Any, gg: Tensor) -> tuple[Tensor | None, ...]:
        grad, input, target = ctx.saved_tensors
        spread = _bce_spread(input)
        d_grad = ops.div(ops.mul(gg, ops.sub(input, target)), spread) \
            if ctx.needs_input_grad[0] else None
        d_input = None
        if ctx.needs_input_grad[1]:
            num = ops.add(ops.sub(ops.mul(input, input), ops.mul(ops.mul(input, target), 2.0)),
                          target)
            den = ops.mul(ops.square(ops.add(input, 1e-12)),
                          ops.square(ops.add(ops.sub(1.0, input), 1e-12)))
            d_input = ops.mul(ops.mul(gg, grad), ops.div(num, den))
        d_target = ops.neg(ops.div(ops.mul(gg, grad), spread)) \
            if ctx.needs_input_grad[2] else None
        return d_grad, d_input, d_target


def _bce_spread(p: Tensor) -> Tensor:
    """``max(p (1 - p), 1e-12)``, PyTorch's clamped denominator."""
    return ops.maximum(ops.mul(p, ops.sub(1.0, p)), 1e-12)


def _clamped_logs(p: Tensor) -> tuple[Tensor, Tensor]:
    """``log(p)`` and ``log(1 - p)``, each at least -100 (PyTorch's clamp)."""
    return ops.maximum(ops.log(p), -100.0), ops.maximum(ops.log1p(ops.neg(p)), -100.0)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean", *, size_average: bool | None = None,
                         reduce: bool | None = None) -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) for probabilities ``input``, with PyTorch's
    clamp of each log at -100 and its gradient ``(p - y) / max(p (1 - p), 1e-12)``
    (finite at p = 0 and 1; see ``_BinaryCrossEntropy``). ``log(1 - p)`` is
    ``log1p(-p)``: for p below float32's epsilon PyTorch's ``log(1 - p)`` is 0. A
    ``weight`` (PyTorch refuses to differentiate it) gets the unweighted loss as its
    gradient. Nova does not read ``input`` on the host, so a value outside [0, 1] gives
    NaN instead of PyTorch's error."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    input, target = _check_pair("binary_cross_entropy", input, target)
    loss = _BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = ops.mul(loss, weight)
    return _reduce("binary_cross_entropy", loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None, *,
                                     size_average: bool | None = None,
                                     reduce: bool | None = None) -> Tensor:
    """The binary cross entropy of sigmoid(``input``), computed stably from the logits:
    (1 - y) x + (1 + (pw - 1) y) softplus(-x), with softplus split as in
    ``_softplus_parts``; ``pos_weight`` (broadcast along the last dim) weighs the
    positives. The linear terms are summed first: they cancel exactly for a confident
    correct prediction (x = -30, y = 0), which leaves the small log1p term all its
    digits (added last, as PyTorch does not, it lost 1.3% at x = -30 in float64)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    input, target = _check_pair("binary_cross_entropy_with_logits", input, target)
    scale = 1.0 if pos_weight is None else ops.add(ops.mul(ops.sub(pos_weight, 1.0), target),
                                                   1.0)
    ramp, tail = _softplus_parts(ops.neg(input))
    linear = ops.add(ops.mul(ops.sub(1.0, target), input), ops.mul(scale, ramp))
    loss = ops.add(linear, ops.mul(scale, tail))
    if weight is not None:
        loss = ops.mul(loss, weight)
    return _reduce("binary_cross_entropy_with_logits", loss, reduction)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return inplace_result("leaky_relu", input,
                          ops.where(ops.gt(input, 0), input, ops.mul(input, negative_slope)),
                          inplace)


def elu_form(x: Tensor, alpha: float, scale: float = 1.0, input_scale: float = 1.0) -> Tensor:
    """PyTorch's ELU family kernel: ``scale * x`` where ``x > 0``, else ``alpha * scale *
    expm1(x * input_scale)`` (one constant factor, as PyTorch rounds it). The negative
    branch is taken at 0 too, so the gradient there is ``alpha * scale * input_scale``,
    as PyTorch's; the exponent reads ``x`` only where ``x <= 0``, so a large ``x``
    never overflows it. NaN takes the ``scale * x`` side, as in PyTorch's kernel (its
    test is ``x <= 0``): the value is NaN either way, the gradient ``scale * g``."""
    positive = ops.logical_not(ops.le(x, 0))
    negative = ops.where(positive, 0.0, x)
    if input_scale != 1.0:
        negative = ops.mul(negative, input_scale)
    tail = ops.mul(ops.expm1(negative), alpha * scale)
    return ops.where(positive, x if scale == 1.0 else ops.mul(x, scale), tail)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x if x > 0 else alpha * (exp(x) - 1)``."""
    return inplace_result("elu", input, elu_form(ops._as_float("elu", input), alpha), inplace)


def _softplus_parts(x: Tensor) -> tuple[Tensor, Tensor]:
    """``log(1 + exp(x))`` as ``max(x, 0)`` and ``log1p(exp(-|x|))``, to full precision
    for every ``x``, written so the sum's derivative is ``sigmoid(x)`` at 0 too: the
    usual ``relu(x) + log1p(exp(-abs(x)))`` has gradient 0 + 0 there (both kinks
    differentiate to 0 at 0), half the true 0.5. Both pieces branch on the same
    ``x > 0``, so the one at 0 takes the ``-x`` side of ``|x|``: 0 + sigmoid(0).
    Every branch's derivative is finite (``exp`` only sees ``-|x| <= 0``), so the
    unselected side of each ``where`` contributes an exact 0."""
    positive = ops.gt(x, 0)
    ramp = ops.where(positive, x, 0.0)
    return ramp, ops.log1p(ops.exp(ops.neg(ops.where(positive, x, ops.neg(x)))))


def log1p_exp(x: Tensor) -> Tensor:
    """``log(1 + exp(x))`` to full precision for every ``x`` with derivative
    ``sigmoid(x)`` everywhere (no threshold switch, unlike ``softplus``): the one
    definition of a stable softplus that ``softplus``, ``logsigmoid``, the losses built
    on them and ``nova.distributions`` share."""
    ramp, tail = _softplus_parts(x)
    return ops.add(ramp, tail)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > ``threshold`` (PyTorch);
    the gradient is sigmoid(beta x) (1 where thresholded), 0.5 at 0."""
    bx = ops.mul(input, beta)
    return ops.where(ops.gt(bx, threshold), input, ops.div(log1p_exp(bx), beta))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    return inplace_result("mish", input, ops.mul(input, ops.tanh(softplus(input))), inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = 0 - log(1 + exp(-x)), without ``softplus``'s threshold (as
    PyTorch: past -20 it is x - exp(x), not x, in float64); gradient sigmoid(-x). (0 -,
    not a negation: where the log underflows, x = inf, the result is +0 as PyTorch's.)"""
    return ops.sub(0.0, log1p_exp(ops.neg(input)))


@stamped
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v over the last two dims (batch dims broadcast).
    ``enable_gqa``: grouped-query attention, as PyTorch's: key and value with fewer heads
    (dim -3) than the query, a divisor of its count, each serve that many query heads in
    turn (``repeat_interleave`` along the heads)."""
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk != hv or hq % hk:
            raise ValueError(f"scaled_dot_product_attention: enable_gqa needs key and value "
                             f"with the same number of heads dividing the query's, got "
                             f"query {query.shape}, key {key.shape}, value {value.shape}")
        key = key.repeat_interleave(hq // hk, -3)
        value = value.repeat_interleave(hq // hk, -3)
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
    seen = None
    if attn_mask is not None:
        # A query that sees no key gets zero weights, as PyTorch's: the softmax of a
        # row of -inf is NaN, which would reach every gradient through 0 * NaN, so such
        # a row is softmaxed as zeros and its weights then zeroed. (A mask tensor keeps
        # the composite out of the fused kernel anyway: nova/compiler/passes/attention.py.)
        seen = ops.gt(ops.amax(scores, -1, keepdim=True), -math.inf)
        scores = ops.where(seen, scores, 0.0)
    att = ops.softmax(scores, -1)
    if seen is not None:
        att = ops.where(seen, att, 0.0)
    if dropout_p > 0.0:
        att = dropout(att, dropout_p, True)
    return ops.matmul(att, value)


# np.pad's name for each of PyTorch's index-mapping modes
_PAD_INDEX_MODES = {"replicate": "edge", "reflect": "reflect", "circular": "wrap"}


def _pad_complex(input: ComplexTensor, pads: Any, mode: str,
                 value: complex | float | None) -> ComplexTensor:
    """PyTorch pads complex tensors (an FNO zero-pads its kept Fourier modes back to
    ``n // 2 + 1``). A complex tensor is a pair of real ones: each part is padded the
    same way, a constant fill with the constant's real or imaginary part."""
    fill = complex(0 if value is None else value)
    re_fill, im_fill = (fill.real, fill.imag) if mode == "constant" else (value, value)
    return ComplexTensor(pad(input.real, pads, mode, re_fill),
                         pad(input.imag, pads, mode, im_fill))


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """``torch.nn.functional.pad``: ``pad`` = (left, right) of the last dim, then of the
    one before it, and so on; a negative pad crops. ``constant`` fills with ``value``
    (0); ``replicate``, ``reflect`` and ``circular`` map each new position to a source
    one, as PyTorch does (``_pad_index``), and take PyTorch's shapes: 2 pads for a 2-D
    or 3-D input, 4 for 3-D or 4-D, 6 for 4-D or 5-D."""
    if isinstance(input, ComplexTensor):
        return _pad_complex(input, pad, mode, value)
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
    if mode != "constant" and input.ndim not in (len(pads) // 2 + 1, len(pads) // 2 + 2):
        raise NotImplementedError(
            f"pad: padding size {len(pads)} is not supported for {input.ndim}D input tensor "
            f"(shape {input.shape}) in mode {mode!r}; supported combinations for "
            "non-constant padding: 2D or 3D input with padding size 2 (pads the last dim), "
            "3D or 4D with 4 (the last 2 dims), 4D or 5D with 6 (the last 3 dims)")
    widths = [(0, 0)] * input.ndim
    for k in range(len(pads) // 2):
        widths[input.ndim - 1 - k] = (pads[2 * k], pads[2 * k + 1])
    if mode == "constant":
        out = _pad_constant(input, widths, 0.0 if value is None else value)
    elif (kernel := f"{_PAD_KERNELS.get(mode)}{len(pads) // 2}d") in POLICIES:
        # autocast: PyTorch's reflection_pad1d/2d and replication_pad1d/2d/3d are float32 ops
        out = autocast_op(kernel)(_pad_index)(input, widths, mode)
    else:
        out = _pad_index(input, widths, mode)
    # a new tensor, as PyTorch's, where nothing was added: padding by zeros gave the input
    # itself and a crop a view of it, so a write into the result changed the input
    return out.clone() if out is input or out._view is not None else out


# PyTorch's kernel names of the index modes (for their autocast policies)
_PAD_KERNELS = {"reflect": "reflection_pad", "replicate": "replication_pad"}


def _pad_sources(mode: str, n: int, lo: int, hi: int, d: int) -> np.ndarray:
    """The source index of each position along a dim of size ``n`` padded by ``(lo, hi)``
    in an index mode, as PyTorch's kernels: ``reflect`` and ``replicate`` pad by the
    positive parts, then crop by the negative ones (reflect needs each pad < ``n``);
    ``circular`` crops first and wraps what is left (each pad <= ``n``, and a pad may
    not wrap the cropped dim more than once: PyTorch reads outside it there)."""
    size = n + lo + hi
    where = f"pad: {mode} padding ({lo}, {hi}) of dim {d} (size {n})"
    if n == 0:
        raise ArgumentError(f"{where}: cannot pad an empty dim")
    if mode == "reflect" and max(lo, hi) > n - 1:
        raise ArgumentError(f"{where} must be less than the dim's size")
    if mode == "circular":
        if max(lo, hi) > n:
            raise ArgumentError(f"{where} wraps around more than once: each pad must be at "
                                f"most {n}")
        if n + min(lo, 0) + min(hi, 0) < 0:
            raise ArgumentError(f"{where}: the negative pads crop more than the dim holds")
        kept = np.arange(n)[max(-lo, 0):n - max(-hi, 0)]
        if max(lo, hi, 0) > kept.size:
            raise ArgumentError(f"{where} wraps the {kept.size} elements left after cropping "
                                f"around more than once")
        return np.pad(kept, (max(lo, 0), max(hi, 0)), mode="wrap")
    if size < 1:
        raise ArgumentError(f"{where}: the input is too small, the output size would be {size}")
    padded = np.pad(np.arange(n), (max(lo, 0), max(hi, 0)), mode=_PAD_INDEX_MODES[mode])
    return padded[max(-lo, 0):padded.size - max(-hi, 0)]


def _pad_index(input: Tensor, widths: list[tuple[int, int]], mode: str) -> Tensor:
    """Pad by mapping each new position to a source one (``pad``'s index modes)."""
    out = input
    for d, (lo, hi) in enumerate(widths):
        if lo == hi == 0:
            continue
        source = _pad_sources(mode, input.shape[d], lo, hi, d)
        shape = [1] * out.ndim
        shape[d] = source.size
        index = constant(source.reshape(shape), device=out.device)
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


class _ScaleGradByFreq(Function):
    """The looked-up rows unchanged (the same value, bit for bit), their gradient
    divided by ``counts``: each position's number of occurrences of its index in the
    mini-batch (``scale_grad_by_freq``). The backward is a formula of the saved counts
    (``pure_backward``), so ``nv.compile`` replays a step that runs it."""

    pure_backward = True

    @staticmethod
    def forward(ctx: Any, rows: Tensor, counts: Tensor) -> Tensor:
        ctx.save_for_backward(counts)
        return rows

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (counts,) = ctx.saved_tensors
        return ops.div(grad, counts), None


def _wrapped_indices(input: Tensor, n: int) -> Tensor:
    """``input`` flattened, a negative index counted from the end as ``weight[input]``
    counts it."""
    flat = input.reshape(-1)
    return ops.where(ops.lt(flat, 0), ops.add(flat, n), flat)


def _index_counts(input: Tensor, n: int, dtype: Any) -> Tensor:
    """For every position of ``input``, how often its index occurs in ``input``, shaped
    ``input.shape + (1,)`` to divide the rows' gradient (counted in float32 at least:
    float16 holds integers exactly only up to 2048)."""
    flat = _wrapped_indices(input, n)
    dtype = dtype if dtype.itemsize >= 4 else dt.float32
    counts = ops.scatter_add(ops.full_const(0.0, (n,), dtype), 0, flat,
                             ops.full_const(1.0, flat.shape, dtype))
    return ops.gather(counts, 0, flat).reshape(input.shape + (1,))


def _renorm_looked_up_(weight: Tensor, input: Tensor, max_norm: float,
                       norm_type: float) -> None:
    """PyTorch's ``embedding_renorm_``: each row of ``weight`` that ``input`` looks up
    and whose ``norm_type``-norm exceeds ``max_norm`` is scaled in place by ``max_norm /
    (norm + 1e-7)``. The norm and the scale are taken in float64, the scale rounded
    once to the weight's dtype. The write goes through ``weight.detach()``: outside
    autograd, as PyTorch's ``no_grad`` update, so a leaf stays a leaf (and a non-leaf
    keeps its history) and the lookup's gradient reaches the renormed rows."""
    from nova.tensor.grad_mode import no_grad
    from nova.tensor.numeric import vector_norm
    n, d = weight.shape
    with no_grad():
        flat = _wrapped_indices(input, n)
        where = flat.unsqueeze(1).expand(flat.shape[0], d)
        rows = ops.gather(weight, 0, where)
        norms = vector_norm(ops.cast(rows, dt.float64), norm_type, 1, keepdim=True)
        scale = ops.where(ops.gt(norms, max_norm), ops.div(max_norm, ops.add(norms, 1e-7)),
                          1.0)
        renormed = ops.mul(rows, ops.cast(scale, weight.dtype))
        weight.detach().copy_(ops.scatter(weight, 0, where, renormed))


def _embedding_rows(weight: Tensor, input: Tensor) -> Tensor:
    """``weight``'s rows at ``input``. PyTorch's embedding refuses a negative index
    (``index out of range in self``) where ``weight[input]`` would wrap it to a row from
    the end: known values are checked here, at the user's line, and a 2-D table is read
    through a gather along dim 0, whose kernel rejects computed values outside ``[0, n)``."""
    ops.check_index_values("embedding", input, 0, tuple(weight.shape), negative=False)
    if weight.ndim != 2:
        return weight[input]
    d = weight.shape[1]
    flat = input.reshape(-1, 1)
    rows = ops.gather(weight, 0, flat.expand(flat.shape[0], d))
    return rows.reshape(tuple(input.shape) + (d,))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at ``input`` (``torch.nn.functional.embedding``); positions
    holding ``padding_idx`` contribute no gradient to its row. With ``max_norm`` the
    rows looked up are first renormed in place to a ``norm_type``-norm of at most
    ``max_norm`` (``weight`` itself changes, as in PyTorch; see ``_renorm_looked_up_``).
    ``scale_grad_by_freq`` divides each row's gradient by the number of times its index
    occurs in ``input`` (the values are unchanged). ``sparse`` is accepted (Nova's
    gradients are dense, and so the same values)."""
    if input.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"embedding: indices must be int32 or int64, got {input.dtype.name}")
    n = weight.shape[0]
    if padding_idx is not None and not -n <= padding_idx < n:
        raise ValueError(f"embedding: padding_idx {padding_idx} must be within "
                         f"num_embeddings {n}")
    if max_norm is not None:
        if weight.ndim != 2:
            raise ValueError(f"embedding: max_norm needs a 2-D weight, got shape "
                             f"{tuple(weight.shape)}")
        _renorm_looked_up_(weight, input, max_norm, norm_type)
    rows = _embedding_rows(weight, input)
    if scale_grad_by_freq:
        rows = _ScaleGradByFreq.apply(rows, _index_counts(input, n, rows.dtype))
    if padding_idx is None:
        return rows
    pad = ops.eq(input, padding_idx % n).unsqueeze(-1)
    return ops.where(pad, unaliased_detach(rows), rows)


def one_hot(x: Tensor, num_classes: int = -1) -> Tensor:
    return ops.one_hot(x, num_classes)


from nova.nn.convolution import (  # noqa: E402  (they import pad from here)
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d,
    adaptive_max_pool2d, adaptive_max_pool3d, avg_pool1d, avg_pool2d,
    avg_pool3d, conv1d, conv2d, conv3d, max_pool1d, max_pool2d, max_pool3d,
)
from nova.nn.conv_transpose import (  # noqa: E402
    conv_transpose1d, conv_transpose2d, conv_transpose3d,
)
from nova.nn.interpolate import interpolate, upsample  # noqa: E402
from nova.nn.normalization import (  # noqa: E402
    batch_norm, group_norm, instance_norm, local_response_norm, normalize,
)
from nova.nn.activation import (  # noqa: E402  (they import inplace_result from here)
    adaptive_max_pool1d_with_indices, adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices, celu, celu_, elu_, glu, gumbel_softmax, hardshrink,
    hardsigmoid, hardswish, hardtanh, hardtanh_, implicit_softmax_dim, leaky_relu_,
    max_pool1d_with_indices, max_pool2d_with_indices, max_pool3d_with_indices, prelu,
    relu_, relu6, rrelu, rrelu_, selu, selu_, softmin, softshrink, softsign, tanhshrink,
    threshold, threshold_, upsample_bilinear, upsample_nearest,
)
from nova.nn.distance import cosine_similarity, pairwise_distance, pdist  # noqa: E402
from nova.nn.fold import fold, unfold  # noqa: E402
from nova.nn.shuffle import channel_shuffle, pixel_shuffle, pixel_unshuffle  # noqa: E402
from nova.nn.transformer import multi_head_attention_forward  # noqa: E402
from nova.nn.loss_functions import (  # noqa: E402  (they import _reduce from here)
    cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss, kl_div, legacy_reduction,
    margin_ranking_loss, multi_margin_loss, multilabel_soft_margin_loss, poisson_nll_loss,
    soft_margin_loss, triplet_margin_loss,
)
from nova.nn.sampling import affine_grid, grid_sample  # noqa: E402
from nova.nn.unpool import (  # noqa: E402
    lp_pool1d, lp_pool2d, lp_pool3d, max_unpool1d, max_unpool2d, max_unpool3d,
)
from nova.nn.embedding_bag import embedding_bag  # noqa: E402
from nova.nn.more_losses import (  # noqa: E402
    multilabel_margin_loss, triplet_margin_with_distance_loss,
)
from nova.nn.ctc import ctc_loss  # noqa: E402
from nova.nn.fractional_pool import (  # noqa: E402
    fractional_max_pool2d, fractional_max_pool2d_with_indices, fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)

__all__ = ["linear", "dropout", "pad", "layer_norm", "rms_norm", "cross_entropy", "mse_loss",
           "ctc_loss", "relu_", "leaky_relu_", "elu_", "selu_", "celu_", "hardtanh_",
           "threshold_", "rrelu_", "upsample_nearest", "upsample_bilinear",
           "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices",
           "nll_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "leaky_relu", "elu", "softplus", "mish",
           "logsigmoid",
           "scaled_dot_product_attention", "embedding", "one_hot", "relu", "gelu", "silu",
           "softmax", "log_softmax", "sigmoid", "tanh", "conv1d", "conv2d", "conv3d",
           "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "batch_norm",
           "group_norm", "normalize", "interpolate", "upsample", "dropout1d", "dropout2d",
           "dropout3d", "alpha_dropout", "feature_alpha_dropout", "bilinear", "instance_norm",
           "local_response_norm", "hardtanh", "relu6", "hardsigmoid", "hardswish", "selu",
           "celu", "glu", "prelu", "rrelu", "softsign", "softshrink", "hardshrink",
           "tanhshrink", "threshold", "softmin", "gumbel_softmax", "cosine_similarity",
           "pairwise_distance", "pdist", "fold", "unfold", "pixel_shuffle", "pixel_unshuffle",
           "channel_shuffle", "kl_div", "cosine_embedding_loss", "margin_ranking_loss",
           "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "multi_margin_loss", "triplet_margin_loss", "poisson_nll_loss",
           "gaussian_nll_loss", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "multi_head_attention_forward", "affine_grid", "grid_sample", "max_unpool1d",
           "max_unpool2d", "max_unpool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d",
           "embedding_bag", "triplet_margin_with_distance_loss", "multilabel_margin_loss",
           "fractional_max_pool2d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]
