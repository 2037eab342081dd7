"""Folding an eval-mode BatchNorm into the convolution or linear layer before it
(``torch.nn.utils.fusion``): ``bn(conv(x)) == fused(x)`` with

    scale = bn_w / sqrt(running_var + eps)
    W' = W * scale (per output channel),  b' = (b - running_mean) * scale + bn_b

The new weights are computed in float64 and rounded once to the layer's dtypes.
"""
from __future__ import annotations

import copy
from typing import TypeVar

from nova.autograd.grad_mode import no_grad
from nova.core import dtypes as dt
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor import ops
from nova.tensor.creation import ones_like, zeros_like
from nova.tensor.tensor import Tensor

ModuleT = TypeVar("ModuleT", bound=Module)


def _check_eval(op: str, layer: Module, bn: Module) -> None:
    if layer.training or bn.training:
        raise AssertionError(f"{op}: fusion only for eval! Call .eval() on both "
                             f"{type(layer).__name__} and {type(bn).__name__} first")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError(f"{op}: bn.running_mean and bn.running_var must not be None "
                             "(the BatchNorm must track running stats)")


def _bn_scale(bn_rv: Tensor, bn_eps: float, bn_w: Tensor) -> Tensor:
    """``bn_w / sqrt(bn_rv + eps)`` in float64."""
    return ops.mul(ops.cast(bn_w, dt.float64),
                   ops.rsqrt(ops.add(ops.cast(bn_rv, dt.float64), bn_eps)))


def _fused_bias(bias: Tensor, bn_rm: Tensor, scale: Tensor, bn_b: Tensor,
                dtype: dt.DType) -> Tensor:
    """``(bias - bn_rm) * scale + bn_b``, in float64 and rounded once to ``dtype``."""
    f64 = [ops.cast(t, dt.float64) for t in (bias, bn_rm, bn_b)]
    return ops.cast(ops.add(ops.mul(ops.sub(f64[0], f64[1]), scale), f64[2]), dtype)


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor,
                         bn_rv: Tensor, bn_eps: float, bn_w: Tensor | None,
                         bn_b: Tensor | None,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The fused convolution's ``(weight, bias)`` as Parameters: a missing conv bias
    counts as 0, a missing BatchNorm affine as weight 1 and bias 0. ``transpose``: the
    weight is a transposed convolution's ``(C_in, C_out / groups, ...)``. The weight
    requires grad as ``conv_w`` does, the bias as ``conv_b`` does (not at all when
    ``conv_b`` is None), as in PyTorch."""
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    bias_requires_grad = conv_b is not None and conv_b.requires_grad
    with no_grad():
        conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
        bn_w = ones_like(bn_rm) if bn_w is None else bn_w
        bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
        scale = _bn_scale(bn_rv, bn_eps, bn_w)
        shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
        weight = ops.cast(ops.mul(ops.cast(conv_w, dt.float64), scale.reshape(shape)),
                          weight_dtype)
        bias = _fused_bias(conv_b, bn_rm, scale, bn_b, bias_dtype)
    return Parameter(weight, conv_w.requires_grad), Parameter(bias, bias_requires_grad)


def fuse_conv_bn_eval(conv: ModuleT, bn: Module, transpose: bool = False) -> ModuleT:
    """A new convolution (a deep copy of ``conv``) computing ``bn(conv(x))`` with the
    BatchNorm's running statistics; both must be in eval mode."""
    _check_eval("fuse_conv_bn_eval", conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight,
        bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor,
                           bn_rv: Tensor, bn_eps: float, bn_w: Tensor,
                           bn_b: Tensor) -> tuple[Parameter, Parameter]:
    """The fused linear layer's ``(weight, bias)`` as Parameters (a missing linear bias
    counts as 0); the BatchNorm's features broadcast over the linear's outputs."""
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    bias_requires_grad = linear_b is not None and linear_b.requires_grad
    with no_grad():
        linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
        scale = _bn_scale(bn_rv, bn_eps, bn_w)
        weight = ops.cast(ops.mul(ops.cast(linear_w, dt.float64), scale.unsqueeze(-1)),
                          weight_dtype)
        bias = _fused_bias(linear_b, bn_rm, scale, bn_b, bias_dtype)
    return Parameter(weight, linear_w.requires_grad), Parameter(bias, bias_requires_grad)


def fuse_linear_bn_eval(linear: ModuleT, bn: Module) -> ModuleT:
    """A new Linear (a deep copy of ``linear``) computing ``bn(linear(x))`` with the
    BatchNorm's running statistics; both in eval mode, and ``bn.num_features`` equal
    to ``linear.out_features`` or 1."""
    _check_eval("fuse_linear_bn_eval", linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(f"fuse_linear_bn_eval: to fuse, linear.out_features == "
                             f"bn.num_features or bn.num_features == 1, got "
                             f"linear.out_features={linear.out_features} and "
                             f"bn.num_features={bn.num_features}")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight,
        bn.bias)
    return fused


__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]
