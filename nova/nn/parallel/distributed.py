"""``DistributedDataParallel``: every rank trains a replica on its share of the batch,
and the gradients are averaged over the ranks inside the compiled step.

At wrap time the parameters and buffers are broadcast from rank 0, so every replica
starts equal. A forward with grad enabled (outside ``no_sync``) arranges for the next
``backward`` that reaches its parameters to reduce the gradients
(``nova.autograd.engine.after_backward_reaching``):
the parameters are cut into buckets (in reverse registration order, roughly the order
the backward completes their gradients; the first bucket of at most 1 MiB, the rest of
``bucket_cap_mb``, as PyTorch's defaults), each bucket's gradients are flattened into
one vector, all-reduced (``nova.distributed.reduced``: a start/wait pair of the step
function, which the schedule issues as soon as the bucket's gradients are complete and
waits for as late as it can, overlapping the rest of the backward), divided by the world
size, and each parameter's ``.grad`` becomes its slice of the result. The optimizer
update then reads the averaged gradients in the same step. Since every rank applies the
same update to the same parameters from the same averaged gradients, the replicas stay
bit-identical.

Deviations from PyTorch: buffers are broadcast from rank 0 at wrap time only
(PyTorch's ``broadcast_buffers=True`` repeats it before every forward, which here would
realize them every step: BatchNorm running statistics stay each rank's own); a
parameter whose gradient is None on this rank (unused in this forward) contributes
zeros and then gets the averaged gradient, so bucket layouts never differ between
ranks (PyTorch needs ``find_unused_parameters=True`` for that case); ``device_ids``, ``output_device``, ``gradient_as_bucket_view`` and
``static_graph`` are accepted and change nothing (one device per rank; gradients are
always slices of the reduced bucket). A model on ``cuda`` reduces through MPI too, each
bucket staged through host memory (``collectives.DeviceCollective``); NCCL is not
available yet.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from nova import distributed as dist
from nova.autograd import grad_mode
from nova.autograd.engine import after_backward_reaching
from nova.nn.module import Module
from nova.tensor import movement, ops
from nova.tensor.creation import zeros_like
from nova.tensor.tensor import Tensor

FIRST_BUCKET_BYTES = 1 << 20


def _buckets(params: list, cap_bytes: int, first_bytes: int) -> list[list]:
    """Consecutive runs of ``params`` (one dtype each) of at most ``cap_bytes`` (the
    first at most ``first_bytes``); a parameter larger than the cap is a bucket alone."""
    buckets: list[list] = []
    current: list = []
    size = 0
    for p in params:
        limit = first_bytes if not buckets else cap_bytes
        nbytes = p.numel() * p.dtype.itemsize
        if current and (size + nbytes > limit or p.dtype != current[0].dtype):
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training over ``process_group`` (the default
    group when None); ``ddp.module`` is the wrapped model."""

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, process_group: Any = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, **kwargs: Any):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module, got "
                            f"{type(module).__name__}")
        if dim != 0:
            raise ValueError(f"DistributedDataParallel: dim must be 0 (the batch dim), got {dim}")
        self.module = module
        group = dist._group(process_group, "DistributedDataParallel")
        object.__setattr__(self, "process_group", group)
        object.__setattr__(self, "require_backward_grad_sync", True)
        self.broadcast_buffers = broadcast_buffers
        cap = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        if not cap > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {cap}")
        params = [p for p in module.parameters() if p.requires_grad]
        object.__setattr__(self, "_params", params)
        cap_bytes = int(cap * 2**20)
        object.__setattr__(self, "_buckets", _buckets(
            list(reversed(params)), cap_bytes, min(FIRST_BUCKET_BYTES, cap_bytes)))
        self._sync_from_rank0()

    def _sync_from_rank0(self) -> None:
        """Every rank's parameters and buffers := rank 0's."""
        if self.process_group.size() == 1:
            return
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            dist.broadcast(t, 0, self.process_group)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = self.module(*args, **kwargs)
        if grad_mode.is_grad_enabled() and self.require_backward_grad_sync:
            # after the forward: one that raised leads to no backward
            after_backward_reaching(id(self), self._params, self._reduce_gradients)
        return out

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Forwards inside accumulate gradients locally; the first backward after a
        forward outside reduces everything accumulated (gradient accumulation)."""
        old = self.require_backward_grad_sync
        object.__setattr__(self, "require_backward_grad_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "require_backward_grad_sync", old)

    def _reduce_gradients(self) -> None:
        """Average every parameter's gradient over the ranks, one all-reduce per bucket."""
        size = self.process_group.size()
        with grad_mode.no_grad():
            for bucket in self._buckets:
                flat = movement.cat([
                    (p.grad if p.grad is not None else zeros_like(p)).reshape(-1)
                    for p in bucket])
                total = dist.reduced(flat, dist.ReduceOp.SUM, self.process_group)
                if size > 1:
                    total = ops.mul(total, 1.0 / size)
                at = 0
                for p in bucket:
                    n = p.numel()
                    mean = total[at:at + n].reshape(p.shape)
                    if p.grad is None:
                        p.grad = mean
                    else:       # the same tensor, as PyTorch's DDP: a held p.grad follows
                        p.grad.copy_(mean)
                    at += n

    def extra_repr(self) -> str:
        return f"world_size={self.process_group.size()}, buckets={len(self._buckets)}"
