"""Operand views: where a fused kernel's operand, read through movement ops only, finds
its elements in an argument buffer.

Both code generators use this to load a transposed, sliced, reshaped or broadcast
argument in place (vector loads on the CPU, ``cp.async`` on the GPU) instead of element
by element through the emitter: element ``idx`` of the view sits at
``offset + sum(idx * strides)`` of the buffer, in elements.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from xdsl.ir import BlockArgument, Operation, SSAValue

from nova.compiler import dialect as nd
from nova.core.shapes import numel, reshape_groups


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides, in elements, of a contiguous row-major buffer of ``shape``."""
    return tuple(numel(shape[d + 1:]) for d in range(len(shape)))


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
    found = _affine_view(v, None)
    return None if found is None else (found[0].index, found[1], found[2])


def _affine_view(v: SSAValue, stored: Callable[[SSAValue], bool] | None
                 ) -> tuple[SSAValue, tuple[int, ...], int] | None:
    """``operand_view`` as ``(source, strides, offset)``, the source a block argument
    or, with ``stored``, the first value ``stored`` accepts (fusion asks before the
    step's values are block arguments of kernels)."""
    chain: list[Operation] = []
    while not (isinstance(v, BlockArgument) if stored is None else stored(v)):
        owner = v.owner
        if not isinstance(owner, Operation) or not owner.has_trait(nd.Movement):
            return None
        chain.append(owner)
        v = owner.operands[0]
    source = v
    shape = _shape(v)
    strides = row_major_strides(shape)
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
    return source, strides, offset


# A table dim's offsets are kept in the kernel's code: at most this many per dim.
MAX_TABLE = 1 << 16


class TableView(NamedTuple):
    """A view whose index map is a sum of one term per dim, each a stride times the
    index or an offset looked up in a table: element ``idx`` sits at
    ``sum(term_d(idx[d]))`` of argument ``arg`` -- ``term_d(i) = i * dims[d]`` for an
    int, ``dims[d][i]`` for a table. A stack of shifted windows of one argument (a
    convolution's im2col, its pieces concatenated) is one: the stacking dim looks its
    window's start up, and the dims merged with it (channels x kernel offsets) are a
    table of their sums; so a GEMM can pack such an operand straight from the argument
    instead of reading a stored copy 9x (25x) its size."""

    arg: int
    dims: tuple[int | tuple[int, ...], ...]

    def packs_directly(self, rank: int) -> bool:
        """Whether a GEMM operand ``(batch..., K, N)`` with ``rank`` batch dims and this
        view is packed from its argument without going element by element: strided
        batch dims, and unit stride along N (each packed line one contiguous load) or
        along K (lines built by register transposes) -- what the CPU's table packing
        takes (``targets.cpu.llvm_gemm.TiledKernel.table_pack_function``), asked by
        fusion before it puts the stack into the product and by the kernel after."""
        batch, (k_term, n_term) = self.dims[:rank], self.dims[rank:]
        return all(isinstance(t, int) for t in batch) and 1 in (k_term, n_term)


def table_view(v: SSAValue, stored: Callable[[SSAValue], bool] | None = None
               ) -> TableView | None:
    """``v``'s ``TableView`` when it reads one argument through movement ops and at most
    one concat of windows (each a movement chain of that argument, one element thick
    along the concat's dim); None otherwise, or when a table would exceed
    ``MAX_TABLE``. With ``stored`` (fusion, on the step function): the source is the
    value ``stored`` accepts, and ``arg`` is -1."""
    chain: list[Operation] = []
    while isinstance(v.owner, Operation) and v.owner.has_trait(nd.Movement) and \
            not (stored is not None and stored(v)):
        chain.append(v.owner)
        v = v.owner.operands[0]
    if isinstance(v.owner, nd.ConcatOp):
        found = _stacked_windows(v.owner, stored)
        if found is None:
            return None
        arg, terms = found
    else:
        view = _affine_view(v, stored)
        if view is None:
            return None
        terms: list[int | tuple[int, ...]] = list(view[1])
        arg = view[0].index if stored is None else -1
    for op in reversed(chain):
        src, dst = _shape(op.operands[0]), _shape(op.results[0])
        if isinstance(op, nd.TransposeOp):
            terms = [terms[p] for p in op.perm.get_values()]
        elif isinstance(op, nd.ReshapeOp):
            terms = _reshaped_terms(src, terms, dst)
            if terms is None:
                return None
        else:      # (slices and broadcasts after the stack: not needed by any caller)
            return None
    if any(isinstance(t, tuple) and len(t) > MAX_TABLE for t in terms):
        return None
    return TableView(arg, tuple(terms))


def _stacked_windows(concat: Operation, stored: Callable[[SSAValue], bool] | None
                     ) -> tuple[int, list] | None:
    """``(arg, terms)`` of a concat whose inputs are windows of one argument with equal
    strides, each one element thick along the concat's dim: that dim's term is the
    table of the windows' offsets."""
    d = concat.dim.value.data
    views = [_affine_view(p, stored) for p in concat.operands]
    if any(w is None or _shape(p)[d] != 1 for w, p in zip(views, concat.operands)):
        return None
    if len({id(w[0]) for w in views}) != 1 or len({w[1] for w in views}) != 1:
        return None
    terms: list[int | tuple[int, ...]] = list(views[0][1])
    terms[d] = tuple(w[2] for w in views)
    return (views[0][0].index if stored is None else -1), terms


def _reshaped_terms(src: tuple[int, ...], terms: list, dst: tuple[int, ...]) -> list | None:
    """The terms of a row-major reshape from ``src`` to ``dst``: strides where the
    merged or split dims allow it (``view_strides``), else a table for a group of source
    dims merged into one (their sums, enumerated); None where a table would be split."""
    out: list[int | tuple[int, ...]] = []
    groups, _, i = reshape_groups(src, dst)
    for j0, j1, i0, i1 in groups:
        s_sizes, s_terms, d_sizes = src[j0:j1], terms[j0:j1], dst[i0:i1]
        if all(isinstance(t, int) for t in s_terms):
            strides = view_strides(s_sizes, tuple(s_terms), d_sizes)
            if strides is not None:
                out.extend(strides)
                continue
        wide = [k for k, n in enumerate(d_sizes) if n != 1]
        if len(wide) > 1 or numel(s_sizes) > MAX_TABLE:
            return None
        table = np.zeros((), np.int64)
        for n, t in zip(s_sizes, s_terms):
            term = np.arange(n, dtype=np.int64) * t if isinstance(t, int) else np.array(t)
            table = table[..., None] + term
        merged = tuple(int(x) for x in table.reshape(-1))
        out.extend(merged if k in wide else 0 for k in range(len(d_sizes)))
    out.extend(0 for _ in dst[i:])                # trailing unit dims of the result
    return out


__all__ = ["MAX_TABLE", "TableView", "operand_view", "row_major_strides", "table_view",
           "view_strides"]
