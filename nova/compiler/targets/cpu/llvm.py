"""LLVM IR for kernel plans, built with ``llvmlite.ir``.

Every kernel becomes ``i32 <name>(i8** buffers, i64 start, i64 end)``: ``buffers`` holds
the kernel's inputs, its output and (for some reductions) a scratch buffer; the kernel
computes the part ``[start, end)`` of its parallel dimension, so the runtime can split it
across threads. It returns 0, or 1 if an index (gather, scatter, wrap_index) was out of range
or an integer division by zero occurred — checked, never undefined behaviour.

This module holds the kernel bodies other than matmul (elementwise loops, row, column
and rows reductions, scatters) and ``module_for``; the GEMMs are in ``targets.cpu.llvm_gemm``.
Values inside a body come from ``targets.cpu.llvm_emit.Emitter.emit(value, index)``: the value
of an SSA value of the fused region at a multi-index, recursing through its producers
(``codegen.scalar`` has the rules both targets share).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir
from xdsl.ir import Operation, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.targets.cpu.llvm_emit import I1, I64, Emitter, _COMPUTE, _numel, c64
from nova.compiler.targets.cpu.llvm_attention import attention_backward, attention_forward
from nova.compiler.targets.cpu.llvm_gemm import (driver_module, driver_name, matmul_rows,
                                                matmul_tiled)
from nova.compiler.targets.cpu import llvm_trig
from nova.compiler.targets.cpu.llvm_scan import scan
from nova.compiler.targets.cpu.llvm_sort import argsort
from nova.compiler.codegen.values import element_of, shape_of
from nova.compiler.lowering.flat import flat_plan
from nova.compiler.lowering.plan import KernelPlan, accumulator_dtype, contraction, reductions
from nova.core import dtypes as dt
from nova.core.shapes import numel

# ---------------------------------------------------------------- kernel bodies

def _reaches_root_pointwise(e: Emitter, op: Operation) -> bool:
    """Whether every path from ``op``'s result to the kernel's root goes through
    elementwise ops only, so the root reads it at the root's own index."""
    frontier = [u.operation for u in op.results[0].uses]
    seen: set[int] = set()
    while frontier:
        c = frontier.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        if isinstance(c, nd.YieldOp):
            continue
        if not c.has_trait(nd.Elementwise):
            return False
        frontier += [u.operation for u in c.results[0].uses]
    return True


# At most this many loops per row for a region-split innermost dimension: 19 for the
# input gradient of a 3x3 convolution's shifted windows (nine shifted copies along the
# flattened padded image, each starting and ending at a cut;
# ``nn.convolution.MAX_SHIFTED_OFFSETS``).
MAX_REGIONS = 24


def _regions(e: Emitter) -> list[tuple[int, int, dict]] | None:
    """The innermost dimension of an elementwise kernel cut where a pad (without
    interior padding) or a last-axis concat of the output's shape changes which operand
    it reads, with per piece the value each such op takes there:
    ``[(lo, hi, {id(result): rule})]``, or None when no op cuts it. Evaluating a pad or a
    concat selects among all its sources at every element (each a load through its
    index arithmetic); inside a piece only the one that is there is evaluated -- the
    transposing kernel that assembles a qkv gradient from three pads reads one source
    per element instead of three. A pad that also pads outer dims is cut the same way:
    whether an outer index is inside is fixed along the row, so a piece reads its
    source with one contiguous (vector) load and one select on a row-invariant flag --
    a convolution's input gradient, the sum of its window gradients padded by every
    kernel offset on both spatial dims, ran at a quarter of the copy bandwidth with a
    per-element gather instead."""
    shape = e.plan.out[0]
    if len(shape) < 2:
        return None
    n = shape[-1]
    rank = len(shape)
    spans: list[tuple[Operation, list[tuple[int, int, object]]]] = []
    for op in e.fusion.body.block.ops:
        if not op.results or tuple(op.results[0].type.get_shape()) != shape:
            continue
        if isinstance(op, nd.PadOp):
            low, high, inner = (tuple(a.get_values()) for a in (op.low, op.high, op.interior))
            if any(inner):
                continue
            pieces = [(low[-1], n - high[-1], op.operands[0])]
        elif isinstance(op, nd.ConcatOp) and op.dim.value.data == rank - 1:
            pieces, at = [], 0
            for v in op.operands:
                width = v.type.get_shape()[-1]
                pieces.append((at, at + width, v))
                at += width
        else:
            continue
        if _reaches_root_pointwise(e, op):
            spans.append((op, pieces))
    if not spans:
        return None
    cuts = sorted({0, n} | {c for _, pieces in spans for lo, hi, _ in pieces
                           for c in (lo, hi) if 0 < c < n})
    if len(cuts) - 1 > MAX_REGIONS or len(cuts) < 3:
        return None
    out = []
    for lo, hi in zip(cuts, cuts[1:]):
        rules = {}
        for op, pieces in spans:
            inside = next((p for p in pieces if p[0] <= lo and hi <= p[1]), None)
            rules[id(op.results[0])] = _region_rule(e, op, inside)
        out.append((lo, hi, rules))
    return out


def _region_rule(e: Emitter, op: Operation, inside) -> Callable[[list[ir.Value]], ir.Value]:
    """What ``op`` is inside one piece: the source (a pad's input, a concat operand)
    that covers it, shifted by where it starts; a pad's padding value outside it."""
    if inside is None:                         # a pad's padding
        return lambda idx: e.emit(op.operands[1], [])
    start, _, source = inside
    shift = c64(start)
    if not isinstance(op, nd.PadOp):
        return lambda idx: e.emit(source, idx[:-1] + [e.b.sub(idx[-1], shift)])
    low, high = (tuple(a.get_values()) for a in (op.low, op.high))
    extents = shape_of(source)

    def padded(idx: list[ir.Value]) -> ir.Value:
        """The source where every outer index is inside it, else the padding value; an
        outer index outside reads element 0 of its dim, never past the buffer."""
        b = e.b
        inside_all, sub = None, []
        for i, n in enumerate(extents[:-1]):
            if low[i] == 0 and high[i] == 0:
                sub.append(idx[i])
                continue
            t = b.sub(idx[i], c64(low[i]))
            ok = b.and_(b.icmp_signed(">=", t, c64(0)), b.icmp_signed("<", t, c64(n)))
            inside_all = ok if inside_all is None else b.and_(inside_all, ok)
            sub.append(b.select(ok, t, c64(0)))
        value = e.emit(source, sub + [b.sub(idx[-1], shift)])
        if inside_all is None:
            return value
        return b.select(inside_all, value, e.emit(op.operands[1], []))
    return padded


# At most this many copies of the loop body for a concat along an outer dimension.
MAX_SEGMENTS = 64


def _outer_concat(e: Emitter) -> tuple[int, list[tuple[int, int, SSAValue]], Operation] | None:
    """A concat along a dimension other than the last, of the output's shape and read
    by the root at its own index: ``(dim, [(lo, hi, source)], op)``, or None. Each
    segment then gets a loop nest of its own in which the concat is its one source (a
    stack of convolution windows is 9 to 49 of them: evaluated per element, every
    element would select among all)."""
    shape = e.plan.out[0]
    for op in e.fusion.body.block.ops:
        if not isinstance(op, nd.ConcatOp) or tuple(op.results[0].type.get_shape()) != shape:
            continue
        d = op.dim.value.data
        if d == len(shape) - 1 or not 1 < len(op.operands) <= MAX_SEGMENTS or \
                not _reaches_root_pointwise(e, op):
            continue
        pieces, at = [], 0
        for v in op.operands:
            width = v.type.get_shape()[d]
            pieces.append((at, at + width, v))
            at += width
        return d, pieces, op
    return None


def _segmented(e: Emitter, body: Callable[[list[ir.Value]], None], d: int,
               pieces: list[tuple[int, int, SSAValue]], op: Operation) -> None:
    """The loop nest of ``_elementwise`` split at dim ``d`` into one nest per segment of
    the concat ``op`` (``_outer_concat``); dim 0's range stays this call's [start, end)."""
    b, shape = e.b, e.plan.out[0]
    start, end = e.fn.args[1], e.fn.args[2]
    md = e.interleave(e.plan.schedule.unroll, trip=shape[-1])
    key = id(op.results[0])

    def segments(outer: list[ir.Value]) -> None:
        for lo, hi, source in pieces:
            def rule(idx, lo=lo, source=source):
                return e.emit(source, idx[:d] + [b.sub(idx[d], c64(lo))] + idx[d + 1:])
            e.override[key] = rule
            if d == 0:           # the parallel dim: this segment's part of [start, end)
                a = b.select(b.icmp_signed(">", start, c64(lo)), start, c64(lo))
                z = b.select(b.icmp_signed("<", end, c64(hi)), end, c64(hi))
            else:
                a, z = c64(lo), c64(hi)

            def inner(j: ir.Value, outer=outer) -> None:
                if d + 1 < len(shape):
                    e.loops.nest(shape[d + 1:], lambda rest: body(outer + [j] + rest),
                                 innermost_md=md, outer_md=e.not_unrolled())
                else:
                    body(outer + [j])
            e.loops.range(a, z, inner, "seg", md=e.not_unrolled())
            del e.override[key]
    if d == 0:
        segments([])
    else:
        e.loops.nest(shape[:d], segments, first=(start, end))


def _elementwise(e: Emitter) -> None:
    plan = e.plan
    shape, dtype = plan.out
    e.parallel_accesses()

    def body(idx: list[ir.Value]) -> None:
        e.cache = {}
        e.store(e.emit(e.root, idx), e.out_ptr, e.linear(idx, shape), dtype.mlir)

    if not shape:
        body([])
        return
    regions = _regions(e)
    outer = _outer_concat(e) if regions is None else None
    if outer is not None:
        _segmented(e, body, *outer)
        return
    if regions is None:
        # a flat kernel's one loop is the launch range: its length never reaches the code
        trip = None if plan.schedule.flat else shape[-1]
        e.loops.nest(shape, body, first=(e.fn.args[1], e.fn.args[2]),
                     innermost_md=e.interleave(plan.schedule.unroll, trip=trip))
        return

    def row(outer: list[ir.Value]) -> None:
        for lo, hi, rules in regions:
            e.override.update(rules)
            e.loops.range(c64(lo), c64(hi), lambda j: body(outer + [j]), "seg",
                          md=e.interleave(plan.schedule.unroll, trip=hi - lo))
            for key in rules:
                del e.override[key]
    e.loops.nest(shape[:-1], row, first=(e.fn.args[1], e.fn.args[2]))


def _reduce_init(mlir: str, is_sum: bool, ty: ir.Type) -> ir.Constant:
    """A reduction's identity in the accumulator's compute type ``ty``: a maximum starts
    at the smallest value of the element type ``mlir`` itself (0 for uint8, -128 for
    int8: an accumulator kept in a narrow scratch buffer is wrapped to it)."""
    if is_sum:
        return ir.Constant(ty, 0.0 if not isinstance(ty, ir.IntType) else 0)
    if isinstance(ty, ir.IntType):
        return ir.Constant(ty, 0 if mlir == "i1" else dt.int_bounds(dt.from_mlir(mlir))[0])
    return ir.Constant(ty, float("-inf"))


def _combine(e: Emitter, acc: ir.Value, v: ir.Value, is_sum: bool) -> ir.Value:
    b = e.b
    if isinstance(acc.type, ir.IntType):
        if acc.type == I1:
            return b.or_(acc, v)
        return b.add(acc, v) if is_sum else b.select(b.icmp_signed(">", v, acc), v, acc)
    if is_sum:
        return b.fadd(acc, v, flags=("reassoc", "contract"))
    return b.call(e.intrinsic("maximum", acc.type, 2), [acc, v])


class _LoopReduction:
    """A loop-carried reduction in an entry-block slot, in a form LLVM's loop vectorizer
    recognizes.

    Sums and integer reductions combine as usual. A float maximum as a chain of
    ``llvm.maximum`` (NaN-propagating) stays scalar in LLVM 22's vectorizer (measured:
    the attention softmax's max pass ran at ~1 ns per element); so it accumulates with
    ``llvm.maxnum`` (a vectorizable FMax reduction that skips NaNs) next to an OR of
    "saw a NaN" (vectorizable too), and the result is NaN when any input was: the value
    of the ``llvm.maximum`` chain (up to the sign of a zero maximum)."""

    def __init__(self, e: Emitter, acc_ty: ir.Type, acc_mlir: str, is_sum: bool):
        self.e, self.ty, self.mlir, self.is_sum = e, acc_ty, acc_mlir, is_sum
        self.split_nan = not is_sum and not isinstance(acc_ty, ir.IntType)
        self.acc = e.entry_alloca(acc_ty)
        self.nan = e.entry_alloca(I1) if self.split_nan else None

    def init(self) -> None:
        b = self.e.b
        b.store(_reduce_init(self.mlir, self.is_sum, self.ty), self.acc)
        if self.nan is not None:
            b.store(ir.Constant(I1, 0), self.nan)

    def add(self, v: ir.Value) -> None:
        e, b = self.e, self.e.b
        if not self.split_nan:
            b.store(_combine(e, b.load(self.acc), v, self.is_sum), self.acc)
            return
        b.store(b.call(e.intrinsic("maxnum", self.ty, 2), [b.load(self.acc), v],
                       fastmath=("nnan", "nsz")), self.acc)
        b.store(b.or_(b.load(self.nan), b.fcmp_unordered("uno", v, v)), self.nan)

    def result(self) -> ir.Value:
        b = self.e.b
        total = b.load(self.acc)
        if self.nan is not None:
            total = b.select(b.load(self.nan), ir.Constant(self.ty, float("nan")), total)
        return total


def _acc_type(red: Operation) -> tuple[ir.Type, str]:
    mlir = accumulator_dtype(red).mlir
    return _COMPUTE[mlir], mlir


def _reduce_row(e: Emitter) -> None:
    plan = e.plan
    red = contraction(e.fusion)
    x = red.operands[0]
    x_shape = shape_of(x)
    n_kept = len(x_shape) - len(plan.schedule.reduced)
    kept_shape = x_shape[:n_kept]
    is_sum = isinstance(red, nd.ReduceSumOp)
    acc_ty, acc_mlir = _acc_type(red)
    red_mlir = element_of(red.results[0])

    acc = _LoopReduction(e, acc_ty, acc_mlir, is_sum)
    loop_md = e.interleave(plan.schedule.unroll,
                           trip=x_shape[-1] if len(x_shape) > n_kept else None)

    def per_output(kidx: list[ir.Value]) -> None:
        acc.init()

        def inner(ridx: list[ir.Value]) -> None:
            e.cache = {}
            v = e.emit(x, kidx + ridx)
            v = e.cast(v, element_of(x), acc_mlir) if v.type != acc_ty else v
            acc.add(v)

        reduced_shape = x_shape[n_kept:]
        if reduced_shape:
            e.loops.nest(reduced_shape, inner, innermost_md=loop_md)
        else:
            inner([])
        e.cache = {}
        total = e.cast(acc.result(), acc_mlir, red_mlir)
        e.override[id(red.results[0])] = lambda _idx: total
        e.store_root_at(kidx, kept_shape)
        del e.override[id(red.results[0])]

    if kept_shape:
        e.loops.nest(kept_shape, per_output, first=(e.fn.args[1], e.fn.args[2]))
    else:
        per_output([])


def _rows(e: Emitter) -> None:
    """Per row: each reduction in order (a pass over the row, earlier reductions read as
    row scalars), then a pass storing the element-level output.

    The passes' accesses are declared independent (``parallel_accesses``), as an
    elementwise kernel's: the store pass writes element i of the row and reads the
    inputs the output may overlay at i only, after the row's reductions have read it.
    Without that the vectorizer wanted run-time overlap checks and left the store pass
    scalar: a 4096 x 4096 softmax took ~320 ms."""
    plan = e.plan
    reds = reductions(e.fusion)
    x_shape = shape_of(reds[0].operands[0])
    n_kept = len(x_shape) - len(plan.schedule.reduced)
    kept_shape, row_shape = x_shape[:n_kept], x_shape[n_kept:]
    accs = {id(r): _LoopReduction(e, *_acc_type(r), isinstance(r, nd.ReduceSumOp))
            for r in reds}
    e.parallel_accesses()
    loop_md = e.interleave(plan.schedule.unroll, trip=row_shape[-1] if row_shape else None)

    def per_row(kidx: list[ir.Value]) -> None:
        for red in reds:
            acc = accs[id(red)]
            acc.init()

            def inner(ridx: list[ir.Value], red=red, acc=acc) -> None:
                e.cache = {}
                x = red.operands[0]
                v = e.emit(x, kidx + ridx)
                v = e.cast(v, element_of(x), acc.mlir) if v.type != acc.ty else v
                acc.add(v)
            e.loops.nest(row_shape, inner, innermost_md=loop_md)
            e.cache = {}
            total = e.cast(acc.result(), acc.mlir, element_of(red.results[0]))
            e.override[id(red.results[0])] = lambda _idx, total=total: total

        if _numel(e.root) == numel(kept_shape):   # one value per row
            e.cache = {}
            e.store_root_at(kidx, kept_shape)
        else:
            def store(ridx: list[ir.Value]) -> None:
                e.cache = {}
                e.store_root_at(kidx + ridx, x_shape)
            e.loops.nest(row_shape, store, innermost_md=loop_md)
        for red in reds:
            del e.override[id(red.results[0])]

    if kept_shape:
        e.loops.nest(kept_shape, per_row, first=(e.fn.args[1], e.fn.args[2]))
    else:
        per_row([])


def _reduce_column(e: Emitter) -> None:
    plan = e.plan
    red = contraction(e.fusion)
    x = red.operands[0]
    x_shape = shape_of(x)
    axes = plan.schedule.reduced
    kept = [d for d in range(len(x_shape)) if d not in axes]
    kept_shape = tuple(x_shape[d] for d in kept)
    is_sum = isinstance(red, nd.ReduceSumOp)
    acc_ty, acc_mlir = _acc_type(red)
    scratch = e.ptrs[-1]
    scratch_mlir = plan.scratch[1].mlir
    red_mlir = element_of(red.results[0])
    p = plan.schedule.parallel_dim
    b = e.b
    start, end = e.fn.args[1], e.fn.args[2]
    # Loop order: the parallel (kept) dim outermost, then the others in input order --
    # unless the parallel dim is the innermost (unit-stride) one, as for a bias gradient:
    # then it stays innermost, so each thread streams whole rows of its column range into
    # an L1-resident accumulator row (vectorized), instead of walking one column at a
    # time down a strided matrix.
    innermost = p == len(x_shape) - 1
    order = ([d for d in range(len(x_shape)) if d != p] + [p] if innermost
             else [p] + [d for d in range(len(x_shape)) if d != p])
    kp = kept.index(p)
    k_order = [kp] + [k for k in range(len(kept)) if k != kp]

    def over_outputs(body: Callable[[list[ir.Value]], None]) -> None:
        def reorder(ordered: list[ir.Value]) -> None:
            idx: list[ir.Value] = [c64(0)] * len(kept)
            for k, v in zip(k_order, ordered):
                idx[k] = v
            body(idx)
        e.loops.nest([kept_shape[k] for k in k_order], reorder, first=(start, end))

    # (the scratch holds its storage type: a bool accumulator is stored as a byte)
    def init(kidx: list[ir.Value]) -> None:
        e.store(_reduce_init(acc_mlir, is_sum, acc_ty), scratch, e.linear(kidx, kept_shape),
                scratch_mlir)

    over_outputs(init)

    def accumulate(ordered: list[ir.Value]) -> None:
        e.cache = {}
        idx: list[ir.Value] = [c64(0)] * len(x_shape)
        for d, v in zip(order, ordered):
            idx[d] = v
        v = e.emit(x, idx)
        v = e.cast(v, element_of(x), acc_mlir) if v.type != acc_ty else v
        at = e.linear([idx[d] for d in kept], kept_shape)
        e.store(_combine(e, e.load(scratch, at, scratch_mlir), v, is_sum), scratch, at,
                scratch_mlir)

    e.loops.nest([x_shape[d] for d in order], accumulate, first=(start, end),
                 at=len(order) - 1 if innermost else 0)

    def finish(kidx: list[ir.Value]) -> None:
        e.cache = {}
        flat = e.linear(kidx, kept_shape)
        total = e.cast(e.load(scratch, flat, scratch_mlir), scratch_mlir, red_mlir)
        e.override[id(red.results[0])] = lambda _idx: total
        e.store_root(flat)
        del e.override[id(red.results[0])]

    over_outputs(finish)


def _scatter(e: Emitter) -> None:
    """Copy the input, then apply the updates in index order on one thread (the plan
    never splits a scatter): ``scatter_add`` adds them (or on i1), ``scatter`` stores
    them, so the last update of an element wins."""
    plan = e.plan
    sc = contraction(e.fusion)
    base, index, src = sc.operands
    d = sc.dim.value.data
    out_shape, out_dtype = plan.out
    mlir = out_dtype.mlir
    overwrite = isinstance(sc, nd.ScatterOp)
    b = e.b

    def copy(idx: list[ir.Value]) -> None:
        e.cache = {}
        e.store(e.emit(base, idx), e.out_ptr, e.linear(idx, out_shape), mlir)

    if out_shape:
        e.loops.nest(out_shape, copy)
    else:
        copy([])

    def add(idx: list[ir.Value]) -> None:
        e.cache = {}
        raw = e.emit(index, idx)
        j = b.sext(raw, I64) if raw.type != I64 else raw
        bad = b.or_(b.icmp_signed("<", j, c64(0)), b.icmp_signed(">=", j, c64(out_shape[d])))
        e.fail_if(bad)
        target = list(idx)
        target[d] = b.select(bad, c64(0), j)
        off = e.linear(target, out_shape)
        value = e.emit(src, idx)
        old = e.load(e.out_ptr, off, mlir)
        if overwrite:
            new = value
        elif mlir == "i1":
            new = b.or_(old, value)
        else:
            new = b.fadd(old, value) if not isinstance(old.type, ir.IntType) else b.add(old, value)
        new = b.select(bad, old, e.fit(new, mlir))
        e.store(new, e.out_ptr, off, mlir)

    ishape = shape_of(index)
    if ishape:
        e.loops.nest(ishape, add)
    else:
        add([])
    # The root may apply an epilogue on top of the scatter result: not produced by fusion.
    assert e.root is sc.results[0]


# The GEMMs build on this module's Emitter, so they are imported once it is defined.

_BODIES = {"elementwise": _elementwise, "row": _reduce_row, "column": _reduce_column,
           "rows": _rows,
           "ikj": matmul_rows, "dot": matmul_rows, "tiled": matmul_tiled, "scatter": _scatter,
           "attention": attention_forward, "attention_grad": attention_backward,
           "sort": argsort, "scan": scan}


def emit_kernel(module: ir.Module, plan: KernelPlan) -> ir.Function:
    """Add ``plan``'s kernel function to ``module``."""
    e = Emitter(module, plan)
    _BODIES[plan.schedule.strategy](e)
    e.finish_kernel()
    llvm_trig.keep_vector_variants(module)
    return e.fn


@dataclass(frozen=True)
class SupportModule:
    """Code that kernels call but do not contain: compiled once per process (and cached
    on disk), loaded before the kernels that call it, its ``symbols`` resolvable by
    every kernel loaded after (the tiled GEMMs' shared driver)."""

    name: str
    symbols: tuple[str, ...]
    build: Callable[[str, str], ir.Module]     # (triple, data layout) -> the module
    vectorize: bool = True                     # LLVM's vectorizers (``optimize``)

    def identity(self, triple: str, data_layout: str) -> str:
        """What the module's object is made from besides Nova's source (which the
        kernel cache's host key fingerprints): its disk-cache key, known without
        building the module. The name carries the builder's parameters (the GEMM
        driver's register tile)."""
        return f"{self.name}|{triple}|{data_layout}|vectorize={self.vectorize}"


def support_for(plan: KernelPlan) -> tuple[SupportModule, ...]:
    """The support modules ``plan``'s kernel calls."""
    if plan.schedule.strategy != "tiled":
        return ()
    return (gemm_support(*plan.schedule.tile[:2]),)


def gemm_support(mr: int, nr: int) -> SupportModule:
    """The GEMM driver of the ``mr`` x ``nr`` register tile, as a support module."""
    name = driver_name(mr, nr)
    # The driver's vectors are all explicit: LLVM's vectorizers leave its object byte
    # for byte the same and took a quarter of its compile time (0.15-0.2 of 0.75 s).
    return SupportModule(name, (name,),
                         lambda triple, layout: driver_module(mr, nr, triple, layout),
                         vectorize=False)


def module_for(plan: KernelPlan, triple: str, data_layout: str) -> ir.Module:
    """The LLVM module of ``plan``'s kernel (a flat kernel's from its flat form)."""
    module = ir.Module(name=plan.name)
    module.triple = triple
    module.data_layout = data_layout
    emit_kernel(module, flat_plan(plan))
    return module


__all__ = ["SupportModule", "emit_kernel", "gemm_support", "module_for", "support_for"]
