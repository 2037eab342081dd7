"""``nn.SyncBatchNorm``: batch normalization whose training statistics are those of the
global batch, every rank's share of it together (``torch.nn.SyncBatchNorm``).

Each rank sums its share per channel and the sums (with the element counts, so ranks
may hold different batch sizes, or none) are all-reduced; then the squared deviations
from the global mean are summed and all-reduced the same way. Two passes, as
``batch_norm``'s own, rather than one exchange of sums of squares, whose difference
``E[x^2] - E[x]^2`` loses the variance of channels far from zero in float32. The
exchanges are ``nova.distributed.nn.functional.all_reduce``: autograd differentiates
through them, so the input gradient on every rank is that of the global batch's loss
(its backward all-reduces the gradients of the statistics), as PyTorch's hand-written
backward computes. The weight and bias gradients are each rank's own share, as in
PyTorch: ``DistributedDataParallel`` averages them with the others.

As in PyTorch, the statistics are synchronized only in training, only when the
default process group is initialized and the group has more than one rank; otherwise
the layer is ``batch_norm`` exactly (in evaluation: the running statistics, or the
local batch's without them). Unlike PyTorch, CPU tensors synchronize too (the mpi
backend reduces them), where PyTorch raises that the input must be on a GPU.
"""
from __future__ import annotations

from typing import Any

from nova import distributed as dist
from nova.core.errors import DTypeError
from nova.distributed.nn.functional import all_reduce
from nova.nn.module import Module
from nova.nn.normalization import (
    _BatchNorm, _channel_shape, _scale_shift, _widened, batch_norm,
)
from nova.tensor import movement, ops
from nova.tensor.autocast_state import full_precision
from nova.tensor.grad_mode import no_grad
from nova.tensor.tensor import Tensor


def _sync_batch_norm(input: Tensor, running_mean: Tensor | None,
                     running_var: Tensor | None, weight: Tensor | None,
                     bias: Tensor | None, momentum: Any, eps: float,
                     group: dist.ProcessGroup | None) -> Tensor:
    """``batch_norm`` in training with the statistics of every rank's ``input`` of
    ``group`` together; the running statistics (when given) are updated with the
    global mean and unbiased variance, the same on every rank."""
    if not input.dtype.is_floating_point:
        raise DTypeError(f"SyncBatchNorm: expected floating point input, got "
                         f"{input.dtype.name} of shape {input.shape}")
    x, narrow = _widened(full_precision(input, cuda_only=True))
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ValueError(f"SyncBatchNorm: {name} must have shape ({c},) for input "
                             f"{input.shape}, got {t.shape}")
    shape = _channel_shape(x)
    axes = (0,) + tuple(range(2, x.ndim))
    local = ops.full_const(float(x.numel() // c), (1,), x.dtype)
    totals = all_reduce(movement.cat([ops.sum(x, axes), local], 0), group=group)
    count = movement.narrow(totals, 0, c, 1).detach()          # the global batch's size
    mean = ops.div(movement.narrow(totals, 0, 0, c), count)
    centered = ops.sub(x, mean.reshape(shape))
    squares = all_reduce(ops.sum(ops.mul(centered, centered), axes), group=group)
    var = ops.div(squares, count)
    if running_mean is not None or running_var is not None:
        _update_running(running_mean, running_var, mean, var, count, momentum)
    out = ops.mul(centered, ops.rsqrt(ops.add(var.reshape(shape), eps)))
    return narrow(_scale_shift(out, weight, bias, shape))


def _update_running(running_mean: Tensor | None, running_var: Tensor | None, mean: Tensor,
                    var: Tensor, count: Tensor, momentum: Any) -> None:
    """``running = (1 - momentum) * running + momentum * batch`` with the global mean
    and the global *unbiased* variance (``count`` is a tensor: the ranks' sizes are
    known only after the exchange)."""
    with no_grad():
        if running_mean is not None:
            running_mean.mul_(1.0 - momentum).add_(ops.mul(mean.detach(), momentum))
        if running_var is not None:
            unbiased = ops.mul(var.detach(), ops.div(count, ops.sub(count, 1.0)))
            running_var.mul_(1.0 - momentum).add_(ops.mul(unbiased, momentum))


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over ``(N, C, *)`` input with statistics over the whole
    batch of ``process_group`` (default: every rank) in training; see the module
    docstring. ``convert_sync_batchnorm`` turns a model's ``BatchNorm*d`` into these."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: dist.ProcessGroup | None = None, device: Any = None,
                 dtype: Any = None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         dtype=dtype)
        if affine and not bias:
            self.register_parameter("bias", None)
        if device is not None:
            self.to(device)
        self.process_group = process_group

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"SyncBatchNorm: expected a Tensor, got {type(input).__name__}")
        if input.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D "
                             f"input of shape {input.shape})")
        if input.shape[1] == 0:
            raise ValueError(f"SyncBatchNorm number of input channels should be non-zero "
                             f"(input of shape {input.shape})")
        momentum: Any = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:        # cumulative average: 1 / batches seen so far
                momentum = ops.div(1.0, self.num_batches_tracked.to(input.dtype))
        # batch statistics in training, and in evaluation without running ones
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        tracked = not self.training or self.track_running_stats
        running_mean = self.running_mean if tracked else None
        running_var = self.running_var if tracked else None
        group = self._sync_group() if self.training else None
        if group is None:
            return batch_norm(input, running_mean, running_var, self.weight, self.bias,
                              bn_training, momentum, self.eps)
        return _sync_batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                momentum, self.eps, group)

    def _sync_group(self) -> dist.ProcessGroup | None:
        """The group to synchronize over, or None where there is nothing to synchronize
        with (no initialized default group, or a group of one rank): PyTorch's fallback
        to plain batch normalization."""
        if not dist.is_initialized():
            return None
        group = self.process_group or dist._group(None, "SyncBatchNorm")
        return group if dist.get_world_size(group) > 1 else None

    @classmethod
    def convert_sync_batchnorm(cls, module: Module,
                               process_group: dist.ProcessGroup | None = None) -> Module:
        """``module`` with every ``BatchNorm*d`` in it (itself included) replaced by a
        ``SyncBatchNorm`` that holds the same parameter and buffer tensors and training
        flag; a ``BatchNorm*d`` ``module`` itself is returned as a new layer."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group,
                      bias=module.bias is not None)
            if module.affine:
                with no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


__all__ = ["SyncBatchNorm"]
