"""Operand views: where a fused kernel's operand, read through movement ops only, finds
its elements in an argument buffer.

Both code generators use this to load a transposed, sliced, reshaped or broadcast
argument in place (vector loads on the CPU, ``cp.async`` on the GPU) instead of element
by element through the emitter: element ``idx`` of the view sits at
``offset + sum(idx * strides)`` of the buffer, in elements.
"""
from __future__ import annotations

from xdsl.ir import BlockArgument, Operation, SSAValue

from nova.compiler import dialect as nd
from nova.core.shapes import numel


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def view_strides(old_shape: tuple[int, ...], old_strides: tuple[int, ...],
                 new_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides of a row-major reshape of a strided view, or None when the reshape
    merges dims that are not contiguous with each other (the rule of torch's ``view``)."""
    if not old_shape:
        return tuple(0 for _ in new_shape)
    new = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    base = old_strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[d]
        if d == 0 or (old_shape[d - 1] != 1 and old_strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new[view_d] = view_numel * base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base = old_strides[d - 1]
                tensor_numel = view_numel = 1
    return tuple(new) if view_d == -1 else None


def operand_view(v: SSAValue) -> tuple[int, tuple[int, ...], int] | None:
    """``(block argument index, strides, offset)`` when ``v`` reads a block argument
    through movement ops only and element ``idx`` sits at ``offset + sum(idx * strides)``
    of that buffer; None when the index map is not affine (a reshape across strides,
    computed values)."""
    chain: list[Operation] = []
    while not isinstance(v, BlockArgument):
        owner = v.owner
        if not isinstance(owner, Operation) or not owner.has_trait(nd.Movement):
            return None
        chain.append(owner)
        v = owner.operands[0]
    arg = v.index
    shape = _shape(v)
    strides = tuple(numel(shape[d + 1:]) for d in range(len(shape)))
    offset = 0
    for op in reversed(chain):
        src = _shape(op.operands[0])
        dst = _shape(op.results[0])
        if isinstance(op, nd.TransposeOp):
            strides = tuple(strides[p] for p in op.perm.get_values())
        elif isinstance(op, nd.BroadcastInDimOp):
            out = [0] * len(dst)
            for i, d in enumerate(op.dims.get_values()):
                out[d] = 0 if src[i] == 1 else strides[i]
            strides = tuple(out)
        elif isinstance(op, nd.SliceOp):
            starts, steps = op.start.get_values(), op.stride.get_values()
            offset += sum(a * st for a, st in zip(starts, strides))
            strides = tuple(st * k for st, k in zip(strides, steps))
        elif isinstance(op, nd.ReshapeOp):
            new = view_strides(src, strides, dst)
            if new is None:
                return None
            strides = new
        else:   # a movement op whose index map this function does not know
            return None
    return arg, strides, offset


__all__ = ["operand_view", "view_strides"]
