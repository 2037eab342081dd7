"""``nova.distributed.nn.functional``: differentiable collectives, as
``torch.distributed.nn.functional``.

``all_reduce`` returns a new tensor (it does not rebind its argument, unlike
``nova.distributed.all_reduce``) that autograd differentiates through: rank r's output
is ``sum over ranks s of x_s``, so the gradient reaching rank r's ``x`` is the sum over
ranks of the gradients their outputs received -- the backward of a sum all-reduce is a
sum all-reduce of the gradient (``ReduceOp.AVG``: an average all-reduce). It is recorded
into the backward pass like any op and runs inside the compiled backward step, so
every rank must run the same backward, as every rank must record the same collectives.

Deviation from PyTorch: PyTorch's backward all-reduces the gradient with the forward's
op whatever it is, which is not the gradient of MAX, MIN or PRODUCT; Nova raises a
``RuntimeError`` when a backward reaches one of those instead of returning it.
"""
from __future__ import annotations

from typing import Any

from nova import distributed as dist
from nova.autograd.function import Function, FunctionCtx
from nova.tensor.tensor import Tensor

_DIFFERENTIABLE = (dist.ReduceOp.SUM, dist.ReduceOp.AVG)


class _AllReduce(Function):
    """``dist.reduced`` with the gradient of a sum (or average) over the ranks."""

    # the backward only records ops from ``ctx``'s op and group: a replay of an
    # ``nv.compile`` step, whose compiled backward holds the collective, computes it
    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, tensor: Tensor, op: str, group: Any) -> Tensor:
        ctx.op, ctx.group = op, group
        return dist.reduced(tensor, op, group)

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: Tensor) -> tuple[Tensor, None, None]:
        if ctx.op not in _DIFFERENTIABLE:
            raise RuntimeError(
                f"all_reduce: backward through an all_reduce with op {ctx.op!r} is not "
                "supported: only ReduceOp.SUM and ReduceOp.AVG have the gradient an "
                "all_reduce of the gradient computes (reduce with SUM or AVG, or detach "
                "the input)")
        return _AllReduce.apply(grad_output, ctx.op, ctx.group), None, None


def all_reduce(tensor: Tensor, op: str = dist.ReduceOp.SUM,
               group: dist.ProcessGroup | None = None) -> Tensor:
    """``tensor`` combined elementwise over the ranks of ``group`` (default: the world)
    by ``op``, as a new tensor that autograd differentiates through (SUM and AVG)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"all_reduce: expected a Tensor, got {type(tensor).__name__}")
    return _AllReduce.apply(tensor, op, group)


__all__ = ["all_reduce"]
