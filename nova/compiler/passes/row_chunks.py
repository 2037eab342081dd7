"""Row chunking: compute a region of wide ``(N, V)`` values a block of rows at a time,
so that no wide value is ever whole.

The case it is for is a language model's head and its loss: ``logits = x @ W^T`` is
``(B*T, vocab)`` (412 MB for a 50k vocabulary at batch 2 x 1024), ``cross_entropy``'s
log-softmax, and the backward's ``softmax - onehot``, which the autograd rules record as
more values of that shape. Every row of them depends on the same row of ``x`` and the
targets only, so the step can compute rows ``r0 .. r1-1`` of all of them, use those
rows (their loss terms, their rows of ``dx``, their share of ``dW``), and move on: the
wide values of one chunk are alive at a time, instead of two or three whole ones.

The pass works on the differentiated, optimized step (after CSE and fused attention,
before rematerialization) and changes no op definition:

1. **Region.** Seeds are rank-2 matmuls whose result is at least twice the chunk size.
   From a seed the region grows through its wide values (those of the seed's shape):
   every op that reads one or defines one joins, and so do the ops on any path from the
   region back into it (a row statistic such as the row max, which is reduced from wide
   values and broadcast back). Every op in the region must be *row-local*: each row of
   its result depends only on the same row of its row operands (and on whole operands
   that do not come from the region), by the rule of its op class in ``_RULES``; or
   a *row sum* (a ``reduce_sum`` over axis 0, a matmul that contracts the rows), whose
   result is the sum of the chunks' partial results. A region with any other op is
   left as it is. A wide value read outside the region (the step returns the logits)
   stays whole, with what it is computed from; the rest of the region reads its rows.
2. **Chunks.** ``k = ceil(wide bytes / NOVA_ROW_CHUNK_MB)`` chunks of equal rows
   (rounded up to a multiple of 8; the last may be shorter). For each chunk, every
   region op is rebuilt on that chunk's rows: operands from outside the region are
   sliced (a ``nova.slice``, which fusion reads in place), region operands are the
   chunk's own values.
3. **Outputs.** A row value read outside the region is the ``concat`` of its chunks; a
   row sum is the chunks' partials added in chunk order (the add folds into the next
   chunk's matmul as its epilogue).
4. **Order.** The chunks are placed right after the last value they read is defined,
   one after another; any op that reads their outputs and stood before that point
   (the forward's loss terms, which now come from chunks that also need the backward's
   row weights) moves after them, in its old order. The region's closure guarantees no
   such op feeds a chunk.

What changes: the sums over rows of a row sum are grouped by chunk (float rounding
only); nothing else is reordered. Chunk size: ``NOVA_ROW_CHUNK_MB`` (64 by default: a
region runs chunked from two chunks up, so only vocabulary-sized heads, never the small
presets' steps; 0 turns the pass off). What makes it pay is downstream: fusion makes
each partial-sum add the epilogue of the product it adds (``fusion._roots_own_epilogue``)
and the memory plan writes each accumulator over the previous one (in place), so one
partial is alive at a time; ``transposes`` computes the partials in the weight's own
layout. A returned wide value is computed once, into its result, and the chunks read
its rows through a reshape of it (``_through_returned_view``). Measured on the
``gpt-42m`` step (batch 2, 7 chunks of 296 rows): the plan's peak 2,025 -> 1,458 MiB
with the logits returned (941 MiB under ``nv.compile``, which does not return them),
the same losses, and ~30 more kernels to compile (the chunks' slice offsets differ).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.transforms.dead_code_elimination import dce

from nova import config
from nova.compiler import dialect as nd
from nova.compiler.passes.checks import verified_after_pass
from nova.compiler.passes.remat import value_nbytes

ROWS = "rows"     # a result (or operand) indexed by the region's rows along an axis
SUM = "sum"       # a result summed over the rows: the chunks' partials add up to it
ROW_ALIGN = 8     # chunk rows are a multiple of this (whole micro-tiles of the GEMMs)


@dataclass(frozen=True)
class Access:
    """How a region op reads its operands and what its result is: per operand the axis
    that carries the rows (sliced per chunk) or None (read whole), and ROWS or SUM."""

    axes: tuple[int | None, ...]
    result: str


def _leading(v: SSAValue, n: int) -> bool:
    s = nd.shape_of(v)
    return len(s) >= 1 and s[0] == n


# ------------------------------------------------------------------ the rules
# One per op class: given the op, the row count and which operands are region values,
# how the op reads its operands per chunk, or None if it cannot be split by rows.

Rule = Callable[[Operation, int, tuple[bool, ...]], Access | None]


def _pointwise(op: Operation, n: int, inside: tuple[bool, ...]) -> Access | None:
    if not _leading(op.results[0], n):
        return None
    return Access((0,) * len(op.operands), ROWS)


def _generator(op: Operation, n: int, inside: tuple[bool, ...]) -> Access | None:
    if not _leading(op.results[0], n):
        return None
    if isinstance(op, nd.IotaOp) and op.dim.value.data == 0:
        return None            # its values are the row numbers themselves
    return Access((), ROWS)


def _broadcast(op: nd.BroadcastInDimOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    if not _leading(op.result, n):
        return None
    dims = tuple(op.dims.get_values())
    src = nd.shape_of(op.input)
    if 0 in dims and src[dims.index(0)] == n:
        return Access((dims.index(0),), ROWS)
    if inside[0]:
        return None            # a region value that is not read by rows
    return Access((None,), ROWS)   # repeated along the rows: read whole


def _reshape(op: nd.ReshapeOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    # Row-major with the leading size kept: each row keeps its elements.
    if _leading(op.input, n) and _leading(op.result, n):
        return Access((0,), ROWS)
    return None


def _transpose(op: nd.TransposeOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    if tuple(op.perm.get_values())[:1] == (0,) and _leading(op.input, n):
        return Access((0,), ROWS)
    return None


def _reduce(op: nd.ReduceOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    if not _leading(op.input, n):
        return None
    axes = tuple(op.axes.get_values())
    if 0 not in axes:
        return Access((0,), ROWS)
    return Access((0,), SUM) if isinstance(op, nd.ReduceSumOp) else None


def _matmul(op: nd.MatmulOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    a, b = nd.shape_of(op.lhs), nd.shape_of(op.rhs)
    if len(a) != 2 or inside == (True, True):
        return None
    if a[0] == n and not inside[1]:
        return Access((0, None), ROWS)        # rows of lhs -> rows of the product
    if inside[1] and b[0] == n and a[1] == n:
        return Access((1, 0), SUM)            # contracts the rows: a sum over chunks
    return None


def _gather(op: nd.GatherOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    if op.dim.value.data != 0 and _leading(op.input, n) and _leading(op.index, n):
        return Access((0, 0), ROWS)
    return None


def _scatter(op: nd.ScatterAddOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    if op.dim.value.data != 0 and all(_leading(v, n) for v in op.operands):
        return Access((0, 0, 0), ROWS)
    return None


def _slice(op: nd.SliceOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    whole_rows = (op.start.get_values()[0], op.limit.get_values()[0],
                  op.stride.get_values()[0]) == (0, n, 1)
    if _leading(op.input, n) and whole_rows:
        return Access((0,), ROWS)
    return None


def _concat(op: nd.ConcatOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    if op.dim.value.data != 0 and all(_leading(v, n) for v in op.operands):
        return Access((0,) * len(op.operands), ROWS)
    return None


def _pad(op: nd.PadOp, n: int, inside: tuple[bool, ...]) -> Access | None:
    if _leading(op.input, n) and _leading(op.result, n) and not inside[1]:
        return Access((0, None), ROWS)
    return None


_RULES: dict[type[Operation], Rule] = {
    **{cls: _pointwise for cls in (*nd.UNARY_OPS, *nd.BINARY_OPS, nd.NotOp, nd.CastOp,
                                   nd.BitcastOp, nd.CompareOp, nd.WhereOp)},
    nd.ConstantOp: _generator,
    nd.IotaOp: _generator,
    nd.BroadcastInDimOp: _broadcast,
    nd.ReshapeOp: _reshape,
    nd.TransposeOp: _transpose,
    nd.ReduceSumOp: _reduce,
    nd.ReduceMaxOp: _reduce,
    nd.MatmulOp: _matmul,
    nd.GatherOp: _gather,
    nd.ScatterAddOp: _scatter,
    nd.ScatterOp: _scatter,
    nd.SliceOp: _slice,
    nd.ConcatOp: _concat,
    nd.PadOp: _pad,
}


def access(op: Operation, n: int, inside: tuple[bool, ...]) -> Access | None:
    """How ``op`` splits into chunks of its ``n`` rows, given which of its operands are
    region values; None if it does not."""
    rule = _RULES.get(type(op))
    return rule(op, n, inside) if rule is not None else None


# ------------------------------------------------------------------ the region

@dataclass
class Region:
    rows: int
    ops: list[Operation]                 # in program order
    access: dict[Operation, Access]
    wide_bytes: int                      # one whole wide value


def _owner(v: SSAValue) -> Operation | None:
    return v.owner if isinstance(v.owner, Operation) else None


def _fold_round_trips(v: SSAValue) -> None:
    """Readers of ``v`` that reshape it away from its rows and straight back (``view``
    to (B, T, V) and ``view(-1, V)``, as a model and its loss record) read ``v``."""
    for use in list(v.uses):
        r = use.operation
        if not isinstance(r, nd.ReshapeOp):
            continue
        for back in [u.operation for u in r.result.uses]:
            if isinstance(back, nd.ReshapeOp) and back.result.type == v.type:
                back.result.replace_all_uses_with(v)
                back.detach()
                back.erase()
        if not r.result.uses:
            r.detach()
            r.erase()


def find_region(seed: nd.MatmulOp, block: Block) -> Region | None:
    """The row-local region grown from ``seed`` (module docstring, step 1), or None."""
    shape = nd.shape_of(seed.result)
    n = shape[0]
    members: set[Operation] = set()

    def wide(v: SSAValue) -> bool:
        return nd.shape_of(v) == shape

    def inside(op: Operation) -> tuple[bool, ...]:
        return tuple(_owner(v) in members for v in op.operands)

    def grow(todo: list[Operation]) -> None:
        while todo:
            op = todo.pop()
            if op in members or op is block.last_op:
                continue
            members.add(op)
            for res in op.results:
                if wide(res):
                    _fold_round_trips(res)
                    # a reader that cannot be split reads the value whole (see below)
                    todo += [u.operation for u in res.uses
                             if access(u.operation, n, inside(u.operation)) is not None]
            todo += [o for v in op.operands if wide(v) and (o := _owner(v)) is not None]

    grow([seed])
    position = {op: i for i, op in enumerate(block.ops)}
    while True:   # close over paths that leave the region and come back
        below = _reach(members, lambda op: [u.operation for r in op.results for u in r.uses])
        above = _reach(members, lambda op: [o for v in op.operands
                                            if (o := _owner(v)) is not None])
        between = {op for op in below & above if op is not block.last_op}
        if not between:
            break
        grow(list(between))
    # A wide value read outside the region (the logits, when the step returns them) is
    # needed whole, so it and what it is computed from stay whole; the rest of the
    # region reads their rows.
    whole = _reach_within({op for op in members if wide(op.results[0]) and any(
        u.operation not in members for u in op.results[0].uses)}, members)
    members -= whole
    if not any(wide(op.results[0]) for op in members):
        return None
    ops = sorted(members, key=position.__getitem__)
    values = {op.results[0] for op in ops}
    rules = {}
    for op in ops:
        a = access(op, n, tuple(v in values for v in op.operands))
        if a is None:
            return None
        if any(ax is None and v in values for ax, v in zip(a.axes, op.operands)):
            return None       # a region value read whole
        if any(ax is not None and v not in values and nd.shape_of(v)[ax] != n
               for ax, v in zip(a.axes, op.operands)):
            return None
        rules[op] = a
    return Region(n, ops, rules, value_nbytes(seed.result))


def _reach_within(start: set[Operation], members: set[Operation]) -> set[Operation]:
    """``start`` and the ops of ``members`` it is computed from."""
    seen = set(start)
    todo = list(start)
    while todo:
        op = todo.pop()
        for v in op.operands:
            o = _owner(v)
            if o in members and o not in seen:
                seen.add(o)
                todo.append(o)
    return seen


def _reach(start: set[Operation], step: Callable[[Operation], list[Operation]]
           ) -> set[Operation]:
    """Ops outside ``start`` reachable from it by ``step``."""
    seen: set[Operation] = set()
    todo = [o for op in start for o in step(op) if o not in start]
    while todo:
        op = todo.pop()
        if op in seen or op in start:
            continue
        seen.add(op)
        todo += step(op)
    return seen


# ------------------------------------------------------------------ the rewrite

def chunk_bounds(rows: int, wide_bytes: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """[r0, r1) of each chunk: as few as keep a chunk of a wide value under
    ``chunk_bytes``, equal and a multiple of ``ROW_ALIGN`` rows but the last."""
    k = max(1, math.ceil(wide_bytes / chunk_bytes))
    size = math.ceil(rows / k)
    if rows >= ROW_ALIGN:
        size = math.ceil(size / ROW_ALIGN) * ROW_ALIGN
    return [(r, min(r + size, rows)) for r in range(0, rows, size)]


def _chunk_type(v: SSAValue, axis: int, count: int):
    shape = list(nd.shape_of(v))
    shape[axis] = count
    return nd.tensor_type(shape, nd.element_name(v.type.get_element_type()))


def _rows_of(v: SSAValue, axis: int, r0: int, r1: int, attributes: dict) -> nd.SliceOp:
    shape = nd.shape_of(v)
    start = [0] * len(shape)
    limit = list(shape)
    start[axis], limit[axis] = r0, r1
    return nd.SliceOp.create(operands=[v], result_types=[_chunk_type(v, axis, r1 - r0)],
                             properties={"start": nd.i64_array(start),
                                         "limit": nd.i64_array(limit),
                                         "stride": nd.i64_array([1] * len(shape))},
                             attributes=dict(attributes))


def _rebuilt(op: Operation, operands: list[SSAValue], a: Access, count: int) -> Operation:
    """``op`` on one chunk's operands; a ROWS result has ``count`` rows."""
    result = op.results[0]
    rtype = _chunk_type(result, 0, count) if a.result == ROWS else result.type
    props = dict(op.properties)
    if isinstance(op, nd.SliceOp):
        limit = list(op.limit.get_values())
        limit[0] = count
        props["limit"] = nd.i64_array(limit)
    return type(op).create(operands=operands, result_types=[rtype], properties=props,
                           attributes=dict(op.attributes))


def split_region(region: Region, block: Block, bounds: list[tuple[int, int]]) -> None:
    """Replace ``region`` by its chunks (module docstring, steps 2-4), in place; the
    old region ops are left dead."""
    members = set(region.ops)
    values = {op.results[0]: op for op in region.ops}
    leaving = [v for v in values if any(u.operation not in members for u in v.uses)]
    new_ops: list[Operation] = []
    slices: dict[tuple[SSAValue, int, int], SSAValue] = {}
    parts: dict[SSAValue, list[SSAValue]] = {v: [] for v in leaving}
    returned_views: dict[SSAValue, SSAValue] = {}
    for r0, r1 in bounds:
        mine: dict[SSAValue, SSAValue] = {}
        for op in region.ops:
            a = region.access[op]
            operands = []
            for v, axis in zip(op.operands, a.axes):
                if axis is None:
                    operands.append(v)
                elif v in values:
                    operands.append(mine[v])
                else:
                    key = (v, axis, r0)
                    if key not in slices:
                        src = _through_returned_view(v, block, new_ops, returned_views)
                        s = _rows_of(src, axis, r0, r1, op.attributes)
                        new_ops.append(s)
                        slices[key] = s.result
                    operands.append(slices[key])
            new = _rebuilt(op, operands, a, r1 - r0)
            new_ops.append(new)
            mine[op.results[0]] = new.results[0]
        for v in leaving:
            part = mine[v]
            if region.access[values[v]].result == SUM and parts[v]:
                # added as soon as it is made: the epilogue of the product making it
                add = nd.AddOp.create(operands=[part, parts[v][0]], result_types=[v.type],
                                      attributes=dict(values[v].attributes))
                new_ops.append(add)
                parts[v] = [add.result]
            else:
                parts[v].append(part)
    replaced: list[tuple[SSAValue, SSAValue]] = []
    for v in leaving:
        if region.access[values[v]].result == SUM:
            replaced.append((v, parts[v][0]))
            continue
        out = nd.ConcatOp.create(operands=parts[v], result_types=[v.type],
                                 properties={"dim": IntegerAttr(0, i64)},
                                 attributes=dict(values[v].attributes))
        new_ops.append(out)
        replaced.append((v, out.result))
    _place(block, region, new_ops)
    for old, new in replaced:
        for use in list(old.uses):
            if use.operation not in members:
                use.operation.operands[use.index] = new


def _through_returned_view(v: SSAValue, block: Block, new_ops: list[Operation],
                           made: dict[SSAValue, SSAValue]) -> SSAValue:
    """What the chunks should slice to read the rows of ``v``, a value from outside the
    region: ``v`` itself, or, when the step returns a reshape ``R`` of ``v`` (the
    logits as ``(B, T, V)``, whose round trip ``find_region`` folded), ``reshape(R)``
    back to ``v``'s shape. Then ``R`` is ``v``'s only reader, so fusion computes ``v``
    straight into the returned buffer (the reshape an index map of the matmul's
    output) instead of storing it twice: once for the chunks, once as the result."""
    if v in made:
        return made[v]
    returned = set(block.last_op.operands)
    views = [u.operation for u in v.uses if isinstance(u.operation, nd.ReshapeOp)
             and u.operation.result in returned]
    if not views:
        made[v] = v
        return v
    back = nd.ReshapeOp.create(operands=[views[0].result], result_types=[v.type],
                               attributes=dict(views[0].attributes))
    new_ops.append(back)
    made[v] = back.result
    return back.result


def _place(block: Block, region: Region, new_ops: list[Operation]) -> None:
    """Insert ``new_ops`` after the last value they read from outside the region, and
    move the ops downstream of the region that stood before that point after them, in
    their order (step 4); none of them feeds the region (``find_region``'s closure)."""
    made = set(new_ops)
    position = {op: i for i, op in enumerate(block.ops)}
    last = -1
    for op in new_ops:
        for v in op.operands:
            o = _owner(v)
            if o is not None and o not in made:
                last = max(last, position[o])
    readers = _reach(set(region.ops),
                     lambda op: [u.operation for r in op.results for u in r.uses])
    moving = [op for op in block.ops if op in readers and position[op] <= last]
    ops = list(block.ops)
    anchor = ops[last] if last >= 0 else None
    for op in moving:
        op.detach()
    if anchor is None:
        first = block.first_op
        for op in new_ops + moving:
            block.insert_op_before(op, first)
    else:
        block.insert_ops_after(new_ops + moving, anchor)


def chunk_rows(module: ModuleOp, chunk_bytes: int | None = None) -> ModuleOp:
    """Split every row-local region whose wide values are at least twice
    ``chunk_bytes`` (default ``NOVA_ROW_CHUNK_MB``) into chunks of rows, in place;
    the module is re-verified."""
    if chunk_bytes is None:
        chunk_bytes = int(config.ROW_CHUNK_MB.get() * 2**20)
    if chunk_bytes <= 0:
        return module
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = fn.body.block
    changed = False
    for seed in [op for op in block.ops if isinstance(op, nd.MatmulOp)]:
        if seed.parent is None or not seed.result.uses or len(nd.shape_of(seed.result)) != 2 \
                or value_nbytes(seed.result) < 2 * chunk_bytes:
            continue
        region = find_region(seed, block)
        changed = True      # growing may have folded reshape round trips (dead now)
        if region is None:
            continue
        bounds = chunk_bounds(region.rows, region.wide_bytes, chunk_bytes)
        if len(bounds) < 2:
            continue
        split_region(region, block, bounds)
        dce(module)         # the old region, before the next seed is looked at
    if not changed:
        return module
    dce(module)
    return verified_after_pass(module)
