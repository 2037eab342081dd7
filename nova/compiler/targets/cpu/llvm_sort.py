"""The ``sort`` kernel body (``nova.argsort``): a stable bottom-up merge sort per row.

Each thread takes whole rows (``[start, end)`` of the plan's ``(rows, N)`` loops). A row's
keys are computed once into a heap buffer of the call (the kernel's fused producers run
N times, not N log N), then the indices are merged in ``ceil(log2 N)`` passes of doubling width,
alternating between the output row and a spare index buffer; the first pass starts in
whichever of the two makes the last one end in the output. Every pass is emitted with
its width as a constant. A merge takes from the right run only when its key goes
strictly before the left one's, which keeps equal keys in their order (stable).

Order: numbers compare as numbers (-0.0 equals 0.0); NaN goes after every number
ascending and before every number descending (PyTorch's and numpy's placement), NaNs
among themselves keep their order. N log N comparisons a row: a 50,304-wide vocabulary
row takes 16 passes.
"""
from __future__ import annotations

from llvmlite import ir

from nova.compiler.lowering.plan import contraction
from nova.compiler.codegen.values import element_of
from nova.compiler.targets.cpu.llvm_emit import _COMPUTE, I64, PTR, Emitter, c64
from nova.compiler.targets.cpu.llvm_gemm import _declared


def merge_passes(n: int) -> int:
    """How many merge passes sort ``n`` elements from runs of one: ceil(log2 n)."""
    return (n - 1).bit_length() if n > 1 else 0


def _goes_before(e: Emitter, a: ir.Value, b: ir.Value, descending: bool) -> ir.Value:
    """Whether key ``a`` sorts strictly before key ``b``."""
    bld = e.b
    if isinstance(a.type, ir.IntType):
        return bld.icmp_signed(">" if descending else "<", a, b)
    strict = bld.fcmp_ordered(">" if descending else "<", a, b)
    a_nan = bld.fcmp_unordered("uno", a, a)
    b_nan = bld.fcmp_unordered("uno", b, b)
    nan_first = bld.and_(a_nan, bld.not_(b_nan)) if descending else \
        bld.and_(b_nan, bld.not_(a_nan))
    return bld.or_(strict, nan_first)


def argsort(e: Emitter) -> None:
    """The ``sort`` strategy (module docstring)."""
    b = e.b
    op = contraction(e.fusion)
    x = op.operands[0]
    descending = bool(op.descending.value.data)
    x_shape = tuple(x.type.get_shape())
    n = x_shape[-1]
    if n == 0:
        return
    lead = x_shape[:-1]
    start, end = e.fn.args[1], e.fn.args[2]

    # keys are kept in the type the emitter computes the input in (f32 for the half types)
    key_ty = _COMPUTE[element_of(x)]

    aligned_alloc = _declared(e.module, "aligned_alloc", ir.FunctionType(PTR, [I64, I64]))
    free = _declared(e.module, "free", ir.FunctionType(ir.VoidType(), [PTR]))

    def heap(ty: ir.Type) -> ir.Value:
        """A buffer of N 8-byte slots for this call's rows, freed on return."""
        raw = b.call(aligned_alloc, [c64(64), c64(-(-n * 8 // 64) * 64)])
        e.cleanup.append(lambda: e.b.call(free, [raw]))
        return b.bitcast(raw, ty.as_pointer())

    spare = heap(I64)
    keys = heap(key_ty)
    passes = merge_passes(n)
    i_slot, j_slot = e.entry_alloca(I64), e.entry_alloca(I64)

    def per_row(r: ir.Value) -> None:
        row_out = b.gep(e.out_ptr, [b.mul(r, c64(n))])
        pre = e.delinearize(r, lead) if lead else []

        def load_key(j: ir.Value) -> None:
            e.cache = {}
            b.store(e.emit(x, pre + [j]), b.gep(keys, [j]))
        e.loops.range(c64(0), c64(n), load_key, "key")

        # the buffer the first pass reads: the last pass must write the output row
        first = row_out if passes % 2 == 0 else spare
        e.loops.range(c64(0), c64(n), lambda j: b.store(j, b.gep(first, [j])), "iota")
        src, dst = first, (spare if first is row_out else row_out)
        for p in range(passes):
            width = 1 << p
            merges = -(-n // (2 * width))

            def merge(t: ir.Value, src=src, dst=dst, width=width) -> None:
                lo = b.mul(t, c64(2 * width))
                mid = _smin(b, b.add(lo, c64(width)), c64(n))
                hi = _smin(b, b.add(lo, c64(2 * width)), c64(n))
                b.store(lo, i_slot)
                b.store(mid, j_slot)

                def step(k: ir.Value) -> None:
                    i, j = b.load(i_slot), b.load(j_slot)
                    left_done = b.icmp_signed(">=", i, mid)
                    right_left = b.icmp_signed("<", j, hi)
                    # clamped to the run, so a finished run's slot is never read past it
                    left = b.load(b.gep(src, [b.select(left_done, lo, i)]))
                    right = b.load(b.gep(src, [b.select(right_left, j, lo)]))
                    before = _goes_before(e, b.load(b.gep(keys, [right])),
                                          b.load(b.gep(keys, [left])), descending)
                    take_right = b.and_(right_left, b.or_(left_done, before))
                    b.store(b.select(take_right, right, left), b.gep(dst, [k]))
                    b.store(b.select(take_right, i, b.add(i, c64(1))), i_slot)
                    b.store(b.select(take_right, b.add(j, c64(1)), j), j_slot)
                e.loops.range(lo, hi, step, f"merge{p}")
            e.loops.range(c64(0), c64(merges), merge, f"pass{p}")
            src, dst = dst, src
        assert src is row_out

    e.loops.range(start, end, per_row, "row")


def _smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


__all__ = ["argsort", "merge_passes"]
