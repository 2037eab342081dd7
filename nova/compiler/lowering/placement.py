"""Output placements: where a kernel whose result packs several parts stores each part
when the kernel's output is an assembly of those parts.

The fused attention ops pack their results per batch index into one row (``nova.attention``:
the output, then each query's log-sum-exp; ``nova.attention_grad``: dq, dk, dv). What a
step then does with the packed row is movement: in a GPT the three gradients are each
split back into heads, transposed to ``(batch, T, heads, E)``, merged and zero-padded to
their columns of the fused QKV projection's gradient, and summed -- one elementwise
kernel that reads and writes the whole ``(batch, T, 3 C)`` gradient again (2.5 ms of a
15 ms backward layer on the medium GPT). A placement lets the attention kernel store
each part straight where that assembly would have put it: element ``(batch..., r, c)``
of part ``p`` goes to ``offset + sum(idx * strides)`` of the kernel's output.

``placements`` derives them by walking the assembly from the kernel's root down to the
packed result: an ``add`` of terms, each a zero ``pad`` (or the whole output) of a chain
of reshapes and transposes starting at one part's slice. The terms' regions must
partition the output, so every output element is stored exactly once: the sum's other
terms are zero there, and ``x + 0`` is ``x`` (save the sign of a zero: ``-0 + 0`` is
``+0``, where the placement stores ``-0``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from xdsl.ir import Operation, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.lowering.views import row_major_strides, view_strides
from nova.core.shapes import numel


class Part(NamedTuple):
    """A part of a packed row: its first column in the row, and its shape as the
    kernel computes it, ``rows x cols`` per batch index."""
    start: int
    rows: int
    cols: int


class Placement(NamedTuple):
    """Element ``(batch..., r, c)`` of a part sits at ``offset + sum(idx * strides)`` of
    the kernel's output buffer, in elements."""
    offset: int
    strides: tuple[int, ...]


def packed_parts(op: Operation) -> list[Part]:
    """The parts a fused attention op packs into each row of its result."""
    q, k, v = (nd.shape_of(x) for x in op.operands[:3])
    if isinstance(op, nd.AttentionOp):
        n_out, _ = nd.attention_parts(q, v)
        return [Part(0, q[-2], v[-1]), Part(n_out, q[-2], 1)]
    if isinstance(op, nd.AttentionGradOp):
        dq, dk, _ = nd.attention_grad_parts(q, k, v)
        return [Part(0, q[-2], q[-1]), Part(dq, k[-2], k[-1]), Part(dq + dk, v[-2], v[-1])]
    raise TypeError(f"packed_parts: {op.name} packs no parts")


class AttentionKernel(NamedTuple):
    """What every target's fused attention kernel reads off its fusion: the op, where
    each part of its packed result goes (``placements``), the operands and their
    extents (batch dims, L queries and S keys, head dims E and Ev)."""
    op: Operation
    places: list[Placement | None]
    q: SSAValue
    k: SSAValue
    v: SSAValue
    batch_shape: tuple[int, ...]
    L: int
    E: int
    S: int
    Ev: int


def attention_kernel(op: Operation, root: SSAValue) -> AttentionKernel:
    """``op`` (a fused ``nova.attention(_grad)``) in a kernel whose output is ``root``:
    its packed result itself, or an assembly of its parts that fusion admitted."""
    places = placements(root, op.results[0], packed_parts(op))
    assert places is not None, "fusion admits only an assembly of the parts"
    q, k, v = op.operands[:3]
    qs, ks, vs = nd.shape_of(q), nd.shape_of(k), nd.shape_of(v)
    return AttentionKernel(op, places, q, k, v, qs[:-2], qs[-2], qs[-1], ks[-2], vs[-1])


def placements(root: SSAValue, packed: SSAValue, parts: Sequence[Part]
               ) -> list[Placement | None] | None:
    """Where each of ``parts`` of ``packed`` (shape ``batch + (row length,)``) lands in
    ``root`` (None for a part the root does not use), or None when ``root`` is not an
    assembly of them that stores each of its elements once (module docstring). When
    ``root`` is ``packed`` itself, each part sits where it is packed."""
    batch = nd.shape_of(packed)[:-1]
    if root is packed:
        outer = row_major_strides(nd.shape_of(packed))[:-1]
        return [Placement(p.start, outer + (p.cols, 1)) for p in parts]
    terms = _terms(root)
    shape = nd.shape_of(root)
    strides = row_major_strides(shape)
    out: list[Placement | None] = [None] * len(parts)
    boxes: list[tuple[tuple[int, int], ...]] = []
    for term in terms:
        if isinstance(term.owner, nd.PadOp):
            pad = term.owner
            low, high = pad.low.get_values(), pad.high.get_values()
            if not _zero(pad.padding_value) or any(pad.interior.get_values()) or \
                    min(low) < 0 or min(high) < 0:
                return None
            value = pad.input
            boxes.append(tuple((lo, lo + n) for lo, n in zip(low, nd.shape_of(value))))
            offset = sum(lo * s for lo, s in zip(low, strides))
        else:
            value, offset = term, 0
            boxes.append(tuple((0, n) for n in shape))
        found = _placed(value, strides, packed, batch, parts)
        if found is None or out[found[0]] is not None:
            return None
        index, part_strides, part_offset = found
        out[index] = Placement(offset + part_offset, part_strides)
    return out if _partition(boxes, shape) else None


def _terms(v: SSAValue) -> list[SSAValue]:
    """The summands of ``v`` through a tree of adds."""
    if isinstance(v.owner, nd.AddOp):
        return [t for x in v.owner.operands for t in _terms(x)]
    return [v]


def _zero(v: SSAValue) -> bool:
    owner = v.owner
    return isinstance(owner, nd.ConstantOp) and float(owner.value.value.data) == 0.0


def _placed(value: SSAValue, strides: tuple[int, ...], packed: SSAValue,
            batch: tuple[int, ...], parts: Sequence[Part]
            ) -> tuple[int, tuple[int, ...], int] | None:
    """``(part index, strides, offset)`` of the part that ``value`` (laid out with
    ``strides`` in the output) is a chain of reshapes and transposes of, the strides per
    dim of ``batch + (rows, cols)``; None when it is anything else."""
    while True:
        owner = value.owner
        if not isinstance(owner, Operation):
            return None
        source = owner.operands[0] if owner.operands else None
        if isinstance(owner, nd.ReshapeOp) and isinstance(source.owner, nd.SliceOp) and \
                source.owner.operands[0] is packed:
            index = _part_of(source.owner, batch, parts)
            if index is None:
                return None
            p = parts[index]
            split = view_strides(nd.shape_of(value), strides, batch + (p.rows, p.cols))
            return None if split is None else (index, split, 0)
        if isinstance(owner, nd.ReshapeOp):
            strides = view_strides(nd.shape_of(value), strides, nd.shape_of(source))
            if strides is None:
                return None
        elif isinstance(owner, nd.TransposeOp):
            inverse = [0] * len(strides)
            for d, p in enumerate(owner.perm.get_values()):
                inverse[p] = strides[d]
            strides = tuple(inverse)
        else:
            return None
        value = source


def _part_of(slice_op: nd.SliceOp, batch: tuple[int, ...], parts: Sequence[Part]) -> int | None:
    """Which part a slice of the packed result takes whole (None: not exactly one)."""
    start, limit = slice_op.start.get_values(), slice_op.limit.get_values()
    if any(s != 1 for s in slice_op.stride.get_values()) or any(start[:-1]) or \
            tuple(limit[:-1]) != batch:
        return None
    for i, p in enumerate(parts):
        if start[-1] == p.start and limit[-1] == p.start + p.rows * p.cols:
            return i
    return None


def _partition(boxes: list[tuple[tuple[int, int], ...]], shape: tuple[int, ...]) -> bool:
    """Whether the boxes (per dim ``[low, high)``) cover ``shape`` exactly once: they
    fit in it, no two overlap, and their volumes sum to its size."""
    if any(lo < 0 or hi > n for box in boxes for (lo, hi), n in zip(box, shape)):
        return False
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if all(lo_a < hi_b and lo_b < hi_a for (lo_a, hi_a), (lo_b, hi_b) in zip(a, b)):
                return False
    return sum(numel(tuple(hi - lo for lo, hi in box)) for box in boxes) == numel(shape)


__all__ = ["AttentionKernel", "Part", "Placement", "attention_kernel", "packed_parts",
           "placements"]
