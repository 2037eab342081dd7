"""Batch and group normalization and ``F.normalize``, PyTorch's semantics.

``batch_norm`` in training normalizes by the batch's biased variance over every dim
but the channels (dim 1) and, when given running statistics, updates them in place
with the *unbiased* variance, ``running = (1 - momentum) * running + momentum * batch``,
as PyTorch does. The update is recorded like any in-place op (the buffers are rebound
to pending values), so it lands with the training step, and ``nv.compile`` replays it
as it replays an optimizer's moments. In evaluation it normalizes by the running
statistics.
"""
from __future__ import annotations

from typing import Any

from nova.core import dtypes as dt
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor import ops
from nova.tensor.autocast_state import full_precision
from nova.tensor.creation import ones, tensor, zeros
from nova.tensor.grad_mode import no_grad
from nova.tensor.tensor import Tensor


def _channel_shape(x: Tensor) -> tuple[int, ...]:
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """``torch.nn.functional.batch_norm`` on ``(N, C, *)`` input."""
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise ValueError(f"batch_norm: expected an (N, C, ...) input of at least 2 dims, got "
                         f"{getattr(input, 'shape', type(input).__name__)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"batch_norm: expected floating point input, got {input.dtype.name}")
    input = full_precision(input, cuda_only=True)
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ValueError(f"batch_norm: {name} must have shape ({c},) for input "
                             f"{input.shape}, got {t.shape}")
    shape = _channel_shape(input)
    axes = (0,) + tuple(range(2, input.ndim))
    if training:
        count = input.numel() // c if c else 0
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input of shape {input.shape}")
        mean = ops.mean(input, axes, keepdim=True)
        centered = ops.sub(input, mean)
        var = ops.mean(ops.mul(centered, centered), axes, keepdim=True)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1.0 - momentum).add_(
                        ops.mul(mean.detach().reshape(c), momentum))
                if running_var is not None:
                    unbiased = ops.mul(var.detach().reshape(c), count / (count - 1))
                    running_var.mul_(1.0 - momentum).add_(ops.mul(unbiased, momentum))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when "
                             "training=False")
        mean = running_mean.reshape(shape)
        centered = ops.sub(input, mean)
        var = running_var.reshape(shape)
    out = ops.mul(centered, ops.rsqrt(ops.add(var, eps)))
    if weight is not None:
        out = ops.mul(out, weight.reshape(shape))
    if bias is not None:
        out = ops.add(out, bias.reshape(shape))
    return out


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """``torch.nn.functional.group_norm``: statistics per sample over each group of
    ``C / num_groups`` channels (and all spatial positions)."""
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise ValueError(f"group_norm: expected an (N, C, ...) input, got "
                         f"{getattr(input, 'shape', type(input).__name__)}")
    n, c = input.shape[:2]
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise ValueError(f"group_norm: {c} channels of input {input.shape} are not "
                         f"divisible into num_groups={num_groups!r}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ValueError(f"group_norm: {name} must have shape ({c},), got {t.shape}")
    grouped = full_precision(input, cuda_only=True).reshape(n, num_groups, -1)
    mean = ops.mean(grouped, 2, keepdim=True)
    centered = ops.sub(grouped, mean)
    var = ops.mean(ops.mul(centered, centered), 2, keepdim=True)
    out = ops.mul(centered, ops.rsqrt(ops.add(var, eps))).reshape(input.shape)
    shape = _channel_shape(input)
    if weight is not None:
        out = ops.mul(out, weight.reshape(shape))
    if bias is not None:
        out = ops.add(out, bias.reshape(shape))
    return out


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``torch.nn.functional.normalize``: ``input / max(||input||_p along dim, eps)``."""
    from nova.linalg import vector_norm
    norm = vector_norm(input, p, dim, keepdim=True)
    return ops.div(input, ops.clamp(norm, min=eps))


class _BatchNorm(Module):
    """Shared by ``BatchNorm1d/2d/3d``: affine parameters, running statistics as
    buffers (``running_mean``, ``running_var``, ``num_batches_tracked``), and
    ``momentum=None`` for a cumulative average, as in PyTorch."""

    _dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, dtype: Any = None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype))
            self.bias = Parameter(zeros(num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dt.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.ndim not in self._dims:
            raise ValueError(f"{type(self).__name__}: expected a "
                             f"{' or '.join(f'{d}-D' for d in self._dims)} input, got "
                             f"{getattr(x, 'shape', type(x).__name__)}")
        momentum = self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if momentum is None:        # cumulative average: 1 / batches seen so far
                momentum = ops.div(1.0, self.num_batches_tracked.to(x.dtype))
        # untracked statistics are None buffers: batch statistics, even in eval
        return batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          self.training or not self.track_running_stats,
                          0.0 if momentum is None else momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over ``(N, C)`` or ``(N, C, L)`` input."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over ``(N, C, H, W)`` input."""
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Over ``(N, C, D, H, W)`` input."""
    _dims = (5,)


class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, dtype: Any = None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible "
                             f"by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = \
            num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(ones(num_channels, dtype=dtype))
            self.bias = Parameter(zeros(num_channels, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


__all__ = ["batch_norm", "group_norm", "normalize", "BatchNorm1d", "BatchNorm2d",
           "BatchNorm3d", "GroupNorm"]
