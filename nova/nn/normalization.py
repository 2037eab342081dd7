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

import warnings
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
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
        raise DTypeError(f"batch_norm: expected floating point input, got {input.dtype.name}")
    input, narrow = _widened(full_precision(input, cuda_only=True))
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
    return narrow(_scale_shift(ops.mul(centered, ops.rsqrt(ops.add(var, eps))), weight, bias,
                               shape))


def _widened(x: Tensor) -> tuple[Tensor, Any]:
    """``x`` in float32 when it is float16/bfloat16, and the function that rounds a
    result back to ``x``'s dtype: the norms accumulate their statistics in float32, as
    PyTorch's kernels do (in float16 the squares of a variance overflow past 256)."""
    if x.dtype not in (dt.float16, dt.bfloat16):
        return x, lambda out: out
    return ops.cast(x, dt.float32), lambda out: ops.cast(out, x.dtype)


def _scale_shift(out: Tensor, weight: Tensor | None, bias: Tensor | None,
                 shape: tuple) -> Tensor:
    """``out * weight + bias`` with the per-channel affine parameters reshaped to
    ``shape`` (either may be None)."""
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
    x, narrow = _widened(full_precision(input, cuda_only=True))
    grouped = x.reshape(n, num_groups, -1)
    mean = ops.mean(grouped, 2, keepdim=True)
    centered = ops.sub(grouped, mean)
    var = ops.mean(ops.mul(centered, centered), 2, keepdim=True)
    out = ops.mul(centered, ops.rsqrt(ops.add(var, eps))).reshape(input.shape)
    return narrow(_scale_shift(out, weight, bias, _channel_shape(input)))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``torch.nn.functional.normalize``: ``input / max(||input||_p along dim, eps)``."""
    from nova.linalg import vector_norm
    norm = vector_norm(input, p, dim, keepdim=True)
    return ops.div(input, ops.clamp(norm, min=eps))


class _NormBase(Module):
    """What batch and instance normalization share (PyTorch's ``_NormBase``, which
    ported code tests with ``isinstance`` to freeze or skip norm layers): the affine
    ``weight``/``bias`` (``affine``; ``bias=False`` drops the bias), the running
    statistics as buffers (``running_mean``, ``running_var``, ``num_batches_tracked``;
    None without ``track_running_stats``), state-dict version 2 and the loading of
    older checkpoints."""

    # state_dict layout version 2: ``num_batches_tracked`` is saved (PyTorch 0.4.1 on)
    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, dtype: Any = None,
                 *, bias: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.register_parameter("weight", Parameter(ones(num_features, dtype=dtype))
                                if affine else None)
        self.register_parameter("bias", Parameter(zeros(num_features, dtype=dtype))
                                if affine and bias else None)
        tracked = track_running_stats
        self.register_buffer("running_mean", zeros(num_features, dtype=dtype) if tracked else None)
        self.register_buffer("running_var", ones(num_features, dtype=dtype) if tracked else None)
        self.register_buffer("num_batches_tracked",
                             tensor(0, dtype=dt.int64) if tracked else None)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              local_metadata: dict[str, Any], strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """A checkpoint older than version 2 (or without ``_metadata``: converted or
        hand-made) may lack ``num_batches_tracked``: the module keeps its own (0 for
        a fresh one), rather than reporting it missing, as PyTorch's ``_NormBase``."""
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and \
                key not in state_dict:
            state_dict[key] = self.num_batches_tracked \
                if self.num_batches_tracked is not None else tensor(0, dtype=dt.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """Shared by ``BatchNorm1d/2d/3d``: ``_NormBase``'s parameters and buffers, and
    ``momentum=None`` for a cumulative average, as in PyTorch."""

    _dims: tuple[int, ...] = ()

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor) or input.ndim not in self._dims:
            raise ValueError(f"{type(self).__name__}: expected a "
                             f"{' or '.join(f'{d}-D' for d in self._dims)} input, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        momentum = self.momentum
        if self.training and self.track_running_stats and \
                self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if momentum is None:        # cumulative average: 1 / batches seen so far
                momentum = ops.div(1.0, self.num_batches_tracked.to(input.dtype))
        # As PyTorch's: batch statistics in training, and in evaluation only where there
        # are no running ones (buffers None) -- ``track_running_stats`` turned off after
        # construction leaves the buffers, which evaluation still uses; in training
        # without tracking the running statistics are neither read nor updated.
        bn_training = self.training or (self.running_mean is None and
                                        self.running_var is None)
        tracked = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if tracked else None,
                          self.running_var if tracked else None, self.weight, self.bias,
                          bn_training, 0.0 if momentum is None else momentum, self.eps)


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
                 affine: bool = True, dtype: Any = None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible "
                             f"by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = \
            num_groups, num_channels, eps, affine
        self.register_parameter("weight", Parameter(ones(num_channels, dtype=dtype))
                                if affine else None)
        # ``bias=False`` keeps the scale only (PyTorch's keyword)
        self.register_parameter("bias", Parameter(zeros(num_channels, dtype=dtype))
                                if affine and bias else None)

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """``torch.nn.functional.instance_norm`` on ``(N, C, *spatial)`` input: each
    (sample, channel) normalized by its own mean and biased variance over the spatial
    dims. Given running statistics, they are updated in place, as PyTorch does, with
    the batch's average of the per-instance means and *unbiased* variances; with
    ``use_input_stats=False`` the running statistics normalize instead."""
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise ValueError(f"instance_norm: expected an (N, C, ...) input, got "
                         f"{getattr(input, 'shape', type(input).__name__)}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"instance_norm: expected floating point input, got "
                         f"{input.dtype.name}")
    n, c = input.shape[:2]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ValueError(f"instance_norm: {name} must have shape ({c},) for input "
                             f"{input.shape}, got {t.shape}")
    x, narrow = _widened(full_precision(input, cuda_only=True))
    shape = _channel_shape(x)
    if use_input_stats:
        count = x.numel() // (n * c) if n * c else 0
        if count <= 1:
            raise ValueError(f"instance_norm: expected more than 1 spatial element when "
                             f"training, got input of shape {input.shape}")
        axes = tuple(range(2, x.ndim))
        mean = ops.mean(x, axes, keepdim=True)
        centered = ops.sub(x, mean)
        var = ops.mean(ops.mul(centered, centered), axes, keepdim=True)
        with no_grad():
            if running_mean is not None:
                batch_mean = ops.mean(mean.detach().reshape(n, c), 0)
                running_mean.mul_(1.0 - momentum).add_(ops.mul(batch_mean, momentum))
            if running_var is not None:
                unbiased = ops.mul(ops.mean(var.detach().reshape(n, c), 0), count / (count - 1))
                running_var.mul_(1.0 - momentum).add_(ops.mul(unbiased, momentum))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: running_mean and running_var are needed when "
                             "use_input_stats=False")
        centered = ops.sub(x, running_mean.reshape(shape))
        var = running_var.reshape(shape)
    return narrow(_scale_shift(ops.mul(centered, ops.rsqrt(ops.add(var, eps))), weight, bias,
                               shape))


class _InstanceNorm(_NormBase):
    """Shared by ``InstanceNorm1d/2d/3d``: PyTorch's defaults (no affine parameters, no
    running statistics); with ``track_running_stats`` the buffers are those of
    ``BatchNorm`` (``num_batches_tracked`` included, which PyTorch keeps but never
    advances here either), used in evaluation."""

    _spatial = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, dtype: Any = None,
                 *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype,
                         bias=bias)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              local_metadata: dict[str, Any], strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """PyTorch's ``_InstanceNorm`` and ``_NormBase`` steps for old checkpoints: one
        without a version (saved before PyTorch 0.4.0, or with its ``_metadata`` lost)
        that holds ``running_mean``/``running_var`` for a module not tracking them is
        an error, with PyTorch's explanation, and those keys are dropped; then
        ``_NormBase``'s step."""
        version = local_metadata.get("version", None)
        if version is None and not self.track_running_stats:
            stats = [prefix + name for name in ("running_mean", "running_var")
                     if prefix + name in state_dict]
            if stats:
                error_msgs.append(_untracked_stats_message(type(self).__name__, stats))
                for key in stats:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def forward(self, input: Tensor) -> Tensor:
        nd = self._spatial
        if not isinstance(input, Tensor) or input.ndim not in (nd + 1, nd + 2):
            raise ValueError(f"{type(self).__name__}: expected a {nd + 1}-D (unbatched) or "
                             f"{nd + 2}-D input, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        channels = input.shape[-nd - 1]
        if channels != self.num_features:
            if self.affine or self.track_running_stats:
                raise ValueError(f"{type(self).__name__}: expected input's size at dim "
                                 f"{input.ndim - nd - 1} to match num_features "
                                 f"({self.num_features}), got input {input.shape}")
            warnings.warn(f"{type(self).__name__}: input's size at dim {input.ndim - nd - 1} "
                          f"({channels}) does not match num_features ({self.num_features}), "
                          "which is not used because affine=False", stacklevel=2)
        unbatched = input.ndim == nd + 1
        out = instance_norm(input.unsqueeze(0) if unbatched else input, self.running_mean,
                            self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


def _untracked_stats_message(klass: str, keys: list[str]) -> str:
    """PyTorch's words for running statistics in an unversioned checkpoint of an
    instance norm that does not track them."""
    names = " and ".join(f'"{k}"' for k in keys)
    return (f"Unexpected running stats buffer(s) {names} for {klass} with "
            "track_running_stats=False. If state_dict is a checkpoint saved before 0.4.0, "
            f"this may be expected because {klass} does not track running stats by "
            "default since 0.4.0. Please remove these keys from state_dict. If the running "
            f"stats are actually needed, instead set track_running_stats=True in {klass} "
            f"to enable them. See the documentation of {klass} for details.")


class InstanceNorm1d(_InstanceNorm):
    """Over ``(N, C, L)`` or unbatched ``(C, L)`` input."""
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Over ``(N, C, H, W)`` or unbatched ``(C, H, W)`` input."""
    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Over ``(N, C, D, H, W)`` or unbatched ``(C, D, H, W)`` input."""
    _spatial = 3


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """``torch.nn.functional.local_response_norm``: ``x / (k + alpha * a)^beta`` with
    ``a`` the mean of ``x^2`` over a window of ``size`` channels (dim 1) around each
    channel, zero-padded by ``size // 2`` before and ``(size - 1) // 2`` after (so the
    mean always divides by ``size``)."""
    if not isinstance(input, Tensor) or input.ndim < 3:
        raise ValueError(f"local_response_norm: expected an input of 3 or more dims "
                         f"(N, C, *), got {getattr(input, 'shape', type(input).__name__)}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"local_response_norm: size must be a positive int, got {size!r}")
    from nova.nn.functional import pad
    x = full_precision(input, cuda_only=True)
    c = x.shape[1]
    sq = ops.mul(x, x)
    widths = [0, 0] * (x.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = pad(sq, widths)
    window = padded[:, 0:c]
    for j in range(1, size):
        window = ops.add(window, padded[:, j:j + c])
    div = ops.pow(ops.add(ops.mul(ops.div(window, size), alpha), k), beta)
    return ops.div(x, div)


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ = ["batch_norm", "group_norm", "normalize", "instance_norm", "local_response_norm",
           "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm"]
