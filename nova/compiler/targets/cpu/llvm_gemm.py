"""LLVM IR for matmul kernels: the packed, register-tiled float32 GEMM and the row GEMM.

``Gemm`` emits the ``tiled`` strategy (float32, BLIS-blocked: packed A and B panels, an
MR x NR tile of C in vector registers; see its docstring). ``RowGemm`` emits ``ikj`` and
``dot``: one row of C per iteration of the kernel's parallel range, accumulated in a row
buffer, for the products the tiled GEMM does not take (float64, integers, half types,
small shapes). Both have the shape of ``targets.cuda.gemm.Gemm``: the constructor reads the
contraction and the schedule, ``body()`` writes the kernel through the ``Emitter``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from llvmlite import ir
from xdsl.ir import SSAValue

from nova.compiler.targets.cpu.llvm_emit import _COMPUTE, F32, F64, I32, I64, PTR, Emitter, c64
from nova.compiler.targets.cpu.pool import X86, emit_barrier, emit_pause
from nova.compiler.codegen.values import element_of, shape_of
from nova.compiler.lowering.plan import (
    TEAM_ARRIVED,
    TEAM_CLOSED,
    TEAM_JOIN_SPINS,
    TEAM_MEMBERS,
    TEAM_WORDS,
    contraction,
)
from nova.compiler.lowering.views import operand_view


def _declared(module: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    """The module's function ``name``, declared with type ``ty`` on first use."""
    return module.globals.get(name) or ir.Function(module, ty, name=name)


def _store_with_product(e: Emitter, product: SSAValue, value: ir.Value, flat: ir.Value) -> None:
    """Run the fused epilogue at output offset ``flat`` with the product's element there
    being ``value`` (the accumulated sum), and store the kernel's root."""
    e.override[id(product)] = lambda _idx: value
    e.store_root(flat)
    del e.override[id(product)]


class RowGemm:
    """The row GEMM: C row by row, ``[start, end)`` ranging over the rows of all batches.

    Each row accumulates in an N-element buffer (the accumulation type: float64 for
    float64, float32 for the other floats, the operand type for integers), by k then j
    (``ikj``: a saxpy per k, vectorizable along the row) or by j then k (``dot``: a dot
    product per element, for B read along K), then the fused epilogue runs per element.
    A class, like ``Gemm``, so the two loop orders are named methods sharing the row's
    state instead of branches of one nested closure.
    """

    def __init__(self, e: Emitter):
        self.e, self.b = e, e.b
        mm = contraction(e.fusion)
        self.product = mm.results[0]
        self.a_operand, self.b_operand = mm.operands
        a_shape = shape_of(self.a_operand)
        self.batch_shape = a_shape[:-2]
        self.m, self.k = a_shape[-2], a_shape[-1]
        self.n = shape_of(self.b_operand)[-1]
        self.out_shape = shape_of(self.product)
        self.mlir = element_of(self.product)
        ty = _COMPUTE[self.mlir]
        self.integer = isinstance(ty, ir.IntType)
        self.acc_ty = F64 if self.mlir == "f64" else (ty if self.integer else F32)
        self.zero = ir.Constant(self.acc_ty, 0 if self.integer else 0.0)
        self.dot = e.plan.schedule.strategy == "dot"

    def body(self) -> None:
        """The kernel: rows ``[start, end)`` of C (over batch and M)."""
        e = self.e
        self.row = e.entry_alloca(self.acc_ty, max(self.n, 1))   # the row's N sums
        self.acc = e.entry_alloca(self.acc_ty)                    # one dot product's sum
        e.loops.range(e.fn.args[1], e.fn.args[2], self.emit_row, "r")

    def emit_row(self, r: ir.Value) -> None:
        """Row ``r`` of C: accumulate it, then store it through the epilogue."""
        index = self.row_index(r)
        pre, i = index[:-1], index[-1]
        if self.dot:
            self.accumulate_dot(pre, i)
        else:
            self.accumulate_ikj(pre, i)
        self.e.loops.range(c64(0), c64(self.n), lambda j: self.store_element(pre, i, j), "e")

    def row_index(self, r: ir.Value) -> list[ir.Value]:
        """Row number (over batch and M) -> (batch..., i)."""
        b = self.b
        idx = []
        rest = r
        for extent in reversed(self.batch_shape + (self.m,)):
            idx.append(b.urem(rest, c64(extent)))
            rest = b.udiv(rest, c64(extent))
        return list(reversed(idx))

    def multiply_add(self, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        """acc + x y in the accumulation type (float operands widened to it); float sums
        may be reassociated and contracted into FMAs."""
        b, acc_ty = self.b, self.acc_ty
        if self.integer:
            return b.add(acc, b.mul(x, y))
        if x.type != acc_ty:
            x, y = b.fpext(x, acc_ty), b.fpext(y, acc_ty)
        return b.fadd(acc, b.fmul(x, y, flags=("contract",)), flags=("reassoc", "contract"))

    def accumulate_dot(self, pre: list[ir.Value], i: ir.Value) -> None:
        """``dot``: row[j] = sum over k of A[i, k] B[k, j], one j at a time."""
        b, e = self.b, self.e

        def per_col(j: ir.Value) -> None:
            b.store(self.zero, self.acc)

            def per_k(kk: ir.Value) -> None:
                e.cache = {}
                x = e.emit(self.a_operand, pre + [i, kk])
                y = e.emit(self.b_operand, pre + [kk, j])
                b.store(self.multiply_add(b.load(self.acc), x, y), self.acc)
            e.loops.range(c64(0), c64(self.k), per_k, "k")
            b.store(b.load(self.acc), b.gep(self.row, [j]))
        e.loops.range(c64(0), c64(self.n), per_col, "j")

    def accumulate_ikj(self, pre: list[ir.Value], i: ir.Value) -> None:
        """``ikj``: row = 0, then row += A[i, k] B[k, :] for each k."""
        b, e = self.b, self.e
        e.loops.range(c64(0), c64(self.n), lambda j: b.store(self.zero, b.gep(self.row, [j])),
                      "z")

        def per_k(kk: ir.Value) -> None:
            e.cache = {}
            x = e.emit(self.a_operand, pre + [i, kk])

            def per_col(j: ir.Value) -> None:
                y = e.emit(self.b_operand, pre + [kk, j])
                slot = b.gep(self.row, [j])
                b.store(self.multiply_add(b.load(slot), x, y), slot)
            e.loops.range(c64(0), c64(self.n), per_col, "j")
        e.loops.range(c64(0), c64(self.k), per_k, "k")

    def store_element(self, pre: list[ir.Value], i: ir.Value, j: ir.Value) -> None:
        """C[i, j] from the row buffer, cast to the product's type, through the epilogue."""
        e = self.e
        e.cache = {}
        raw = self.b.load(self.b.gep(self.row, [j]))
        value = raw if self.integer else \
            e.cast(raw, "f64" if self.acc_ty == F64 else "f32", self.mlir)
        _store_with_product(e, self.product, value, e.linear(pre + [i, j], self.out_shape))


class _View(NamedTuple):
    """A float32 kernel argument seen through movement ops that need no copy
    (``operand_view``): element ``idx`` of the operand is
    ``ptrs[arg][offset + sum(idx * strides)]``, so a run of elements with stride 1 can
    be loaded as one vector."""

    arg: int
    offset: int
    strides: tuple[int, ...]


def address_view(e: Emitter, value: SSAValue) -> _View | None:
    """``value``'s view when it is one (see ``_View``), else None (computed values,
    non-affine index maps, other dtypes: packed through the emitter)."""
    view = operand_view(value)
    if view is None or e.plan.arg_types[view[0]][1].mlir != "f32":
        return None
    arg, strides, offset = view
    return _View(arg, offset, tuple(strides))


@dataclass(frozen=True)
class _Operand:
    """How one operand is packed: A into MR-tall, B into NR-wide micro-panels.

    The operand is read at (outer, k) -- A at (row, k), B at (k, col) -- after the batch
    index; ``outer_dim``/``k_dim`` are those axes, ``width`` the micro-panel's width
    (MR or NR), ``extent`` the outer axis' length (M or N: zero past it), ``view`` its
    address view when it has one."""

    value: SSAValue
    is_a: bool
    width: int
    extent: int
    outer_dim: int
    k_dim: int
    view: _View | None

    def at(self, pre: list[ir.Value], outer: ir.Value, k: ir.Value) -> list[ir.Value]:
        """The operand's multi-index of (outer, k) in batch ``pre``."""
        return pre + ([outer, k] if self.is_a else [k, outer])


@dataclass(frozen=True)
class _KBlock:
    """One K block of one batch's product: ``pre`` the batch's multi-index, ``batch``
    its linear index, k in ``[k0, k0 + depth)``; ``first``/``last``: whether it is the
    first/last K block (an i1, or the constant True when there is only one)."""

    pre: list[ir.Value]
    batch: ir.Value
    k0: ir.Value
    depth: ir.Value
    first: ir.Value | bool
    last: ir.Value | bool


class Gemm:
    """C = A @ B (float32), blocked as in the BLIS model (``configurator`` module docstring).

    The call's ``[start, end)`` is a range of MR-row (split "m") or NR-column (split "n")
    micro-panels of C over all batches; per batch it covers rows ``[r0, r1)`` and columns
    ``[c0, c1)``. Each call allocates its MC x KC A block and, unless the threads share
    B panels, a KC x NC B panel (64-byte aligned, freed on return; sized by the caches,
    not the shapes). For each NC panel and K block, B is packed once into NR-wide
    micro-panels (KC x NR, contiguous, zero past N) -- with ``shared_b``, each of the
    call's concurrent chunks packs its share of the micro-panels into one of the two
    panels in the plan's scratch buffer and waits for the others at a barrier
    (``pack_shared_b``) -- then for each MC block of rows A is packed once into
    MR-tall micro-panels (KC x MR, contiguous, zero past M) and reused by every
    micro-tile of the panel. Packing reads a view of an argument (transposed, broadcast)
    by address -- when the view is unit-stride along the micro-panels' width, k by k
    with one vector load per panel, so each k reads one contiguous run of the source
    (``copy_block``); else through the emitter -- so transposes cost no copy in the
    graph. The micro-kernel keeps 2 x MR vector accumulators across the K block: per k it
    loads the 2 vectors of the B micro-panel and broadcasts MR consecutive elements of
    the A micro-panel; before it, the C tile's lines are prefetched.

    Partial sums over K blocks accumulate in the (float32) output: the first block
    stores, later ones load-add-store, with full vectors for interior tiles and element
    by element for edge tiles (rows past ``r1`` and columns past ``c1`` are computed on
    zero padding and not stored). The last K block applies the fused epilogue element by
    element, or, when the root is the product itself, stores like the others.

    The constructor reads the contraction and the schedule and declares the runtime
    functions; ``body()`` allocates the workspace (``allocate_workspace``) and writes
    the kernel.
    """

    def __init__(self, e: Emitter):
        self.e, self.b = e, e.b
        s = e.plan.schedule
        mm = contraction(e.fusion)
        self.product = mm.results[0]
        out_shape = shape_of(self.product)
        self.batch_shape = out_shape[:-2]
        a, bv = mm.operands
        self.m, self.k = shape_of(a)[-2:]
        self.n = out_shape[-1]
        self.direct = e.root is self.product
        self.split, self.shared_b = s.split, s.shared_b
        self.mr, self.nr, self.nc = s.tile
        self.kc, self.mc = max(s.kc, 1), max(s.mc, self.mr)
        self.lanes = self.nr // 2
        self.nvec = self.nr // self.lanes          # vectors per row of the C tile
        self.k_blocks = max(1, -(-self.k // self.kc))
        # micro-panels of the split dimension per batch: the unit of [start, end)
        self.per_batch = max(1, -(-self.m // self.mr) if self.split == "m"
                             else -(-self.n // self.nr))
        rank = len(self.batch_shape)
        self.a_op = _Operand(a, True, self.mr, self.m, rank, rank + 1, address_view(e, a))
        self.b_op = _Operand(bv, False, self.nr, self.n, rank + 1, rank, address_view(e, bv))

        lanes = self.lanes
        self.vec = ir.VectorType(F32, lanes)
        self.vptr = self.vec.as_pointer()
        self.zero_vec = ir.Constant(self.vec, [0.0] * lanes)
        self.zero = ir.Constant(F32, 0.0)
        self.splat_mask = ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)
        self.undef = ir.Constant(self.vec, ir.Undefined)

        module = e.module
        self.aligned_alloc = _declared(module, "aligned_alloc", ir.FunctionType(PTR, [I64, I64]))
        self.free = _declared(module, "free", ir.FunctionType(ir.VoidType(), [PTR]))
        self.fma = _declared(module, f"llvm.fma.v{lanes}f32",
                             ir.FunctionType(self.vec, [self.vec, self.vec, self.vec]))
        self.prefetch = _declared(module, "llvm.prefetch.p0i8",
                                  ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]))

    # ------------------------------------------------------------ the kernel

    def body(self) -> None:
        """The kernel: allocate the workspace, then the products of the batches the
        call's ``[start, end)`` of micro-panels touches (nothing for an empty range)."""
        self.allocate_workspace()
        b = self.b
        start, end = self.e.fn.args[1], self.e.fn.args[2]
        per = c64(self.per_batch)
        with b.if_then(b.icmp_signed("<", start, end)):
            self.e.loops.range(b.udiv(start, per),
                               b.add(b.udiv(b.sub(end, c64(1)), per), c64(1)),
                               self.batch_range, "bat")

    def allocate_workspace(self) -> None:
        """The packed A block, the B panel (this call's own, or the team's shared pair:
        ``join_team``), the MR x NR accumulator vectors and the edge-tile spill buffer."""
        e = self.e
        mr, nr, kc = self.mr, self.nr, self.kc
        # + the overflow of a transposing pack's last store
        self.a_panel = self.buffer(self.mc * kc + self.lanes)
        if self.shared_b:
            self.b_panel = None
            self.join_team()
        else:
            self.b_panel = self.buffer(kc * self.nc + self.lanes)
        self.accs = [[e.entry_alloca(self.vec) for _ in range(self.nvec)] for _ in range(mr)]
        self.tile = e.entry_alloca(F32, mr * nr)

    def buffer(self, floats: int) -> ir.Value:
        """A 64-byte aligned heap buffer of at least ``floats`` floats, freed on return."""
        e = self.e
        raw = self.allocate(floats)
        e.cleanup.append(lambda: e.b.call(self.free, [raw]))
        return self.b.bitcast(raw, F32.as_pointer())

    def allocate(self, floats: int) -> ir.Value:
        """``aligned_alloc`` of at least ``floats`` floats on 64 bytes (an ``i8*``; the
        caller frees it)."""
        return self.b.call(self.aligned_alloc, [c64(64), c64(-(-floats * 4 // 64) * 64)])

    def join_team(self) -> None:
        """``shared_b``: join the team whose header starts the scratch buffer (two
        alternating shared B panels follow it), or work alone.

        The launcher writes how many chunks run at once (``TEAM_MEMBERS``; 1: one after
        another, then the chunk is member 0 of a team of one). A chunk joins by
        incrementing the count in ``TEAM_ARRIVED`` (a compare-and-swap that refuses once
        the team is full or ``TEAM_CLOSED``) and waits until the team is full; a member
        that waited ``TEAM_JOIN_SPINS`` pause steps closes it as it is. The team's size
        is then the count that joined, which every member reads after the close: its
        shares of each panel and its barrier targets. A chunk that finds the team
        closed -- its thread came late (descheduled, or a worker that never arrived,
        whose chunk the caller claimed after finishing its own) -- packs its own
        panels in a buffer of its own, as a team of one. So a member that never comes
        holds the others for at most the join wait, once per kernel."""
        b, e = self.b, self.e
        fn = e.fn
        self.team = b.bitcast(e.ptrs[-1], I64.as_pointer())
        arrived_ptr = b.gep(self.team, [c64(TEAM_ARRIVED)])
        expected = b.load(b.gep(self.team, [c64(TEAM_MEMBERS)]))
        self.spins = e.entry_alloca(I64)
        b.store(c64(0), self.spins)
        member, size = e.entry_alloca(I64), e.entry_alloca(I64)
        panels = e.entry_alloca(F32.as_pointer())
        own = e.entry_alloca(PTR)
        b.store(c64(0), member)
        b.store(c64(1), size)
        b.store(b.gep(e.ptrs[-1], [c64(2 * TEAM_WORDS)]), panels)
        b.store(ir.Constant(PTR, None), own)
        e.cleanup.append(lambda: e.b.call(self.free, [e.b.load(own)]))   # free(NULL): no-op
        names = ("tjoin", "tcas", "twait", "tpoll", "tclose", "tready", "tsolo", "tdone")
        blk = {name: fn.append_basic_block(name) for name in names}
        b.cbranch(b.icmp_signed(">", expected, c64(1)), blk["tjoin"], blk["tdone"])

        b.position_at_end(blk["tjoin"])          # join unless full or closed
        word = b.load_atomic(arrived_ptr, "acquire", 8)
        count = b.and_(word, c64(TEAM_CLOSED - 1))
        shut = b.or_(b.icmp_unsigned(">=", word, c64(TEAM_CLOSED)),
                     b.icmp_signed(">=", count, expected))
        b.cbranch(shut, blk["tsolo"], blk["tcas"])
        b.position_at_end(blk["tcas"])
        swapped = b.cmpxchg(arrived_ptr, word, b.add(word, c64(1)), "seq_cst", "seq_cst")
        b.store(count, member)
        b.cbranch(b.extract_value(swapped, 1), blk["twait"], blk["tjoin"])

        b.position_at_end(blk["twait"])          # until full, or closed by a waiter
        waited = e.entry_alloca(I64)
        b.store(c64(0), waited)
        b.branch(blk["tpoll"])
        b.position_at_end(blk["tpoll"])
        now = b.load_atomic(arrived_ptr, "acquire", 8)
        ready = b.or_(b.icmp_unsigned(">=", now, c64(TEAM_CLOSED)),
                      b.icmp_signed(">=", now, expected))
        b.cbranch(ready, blk["tready"], blk["tclose"])
        b.position_at_end(blk["tclose"])
        emit_pause(e.module, b, e.module.triple.startswith(X86), self.spins)
        steps = b.add(b.load(waited), c64(1))
        b.store(steps, waited)
        with b.if_then(b.icmp_signed(">=", steps, c64(TEAM_JOIN_SPINS))):
            b.atomic_rmw("or", arrived_ptr, c64(TEAM_CLOSED), "seq_cst")
        b.branch(blk["tpoll"])
        b.position_at_end(blk["tready"])
        final = b.load_atomic(arrived_ptr, "acquire", 8)
        b.store(b.and_(final, c64(TEAM_CLOSED - 1)), size)
        b.branch(blk["tdone"])

        b.position_at_end(blk["tsolo"])          # late: a team of one, panels of its own
        raw = self.allocate(2 * self.kc * self.nc + self.lanes)
        b.store(raw, own)
        b.store(b.bitcast(raw, F32.as_pointer()), panels)
        b.store(c64(0), member)
        b.store(c64(1), size)
        b.branch(blk["tdone"])

        b.position_at_end(blk["tdone"])
        self.member, self.members = b.load(member), b.load(size)
        self.shared_panels = b.load(panels)

    def batch_range(self, batch: ir.Value) -> None:
        """The part of batch ``batch``'s product inside ``[start, end)``: rows (split
        "m") or columns (split "n") of the micro-panels there."""
        b, e = self.b, self.e
        start, end = e.fn.args[1], e.fn.args[2]
        base = b.mul(batch, c64(self.per_batch))
        lo = b.sub(self.smax(start, base), base)
        hi = b.sub(self.smin(end, b.add(base, c64(self.per_batch))), base)
        pre = e.delinearize(batch, self.batch_shape) if self.batch_shape else []
        if self.split == "m":
            self.product_block(pre, batch, b.mul(lo, c64(self.mr)),
                               self.smin(b.mul(hi, c64(self.mr)), c64(self.m)),
                               c64(0), c64(self.n))
        else:
            self.product_block(pre, batch, c64(0), c64(self.m), b.mul(lo, c64(self.nr)),
                               self.smin(b.mul(hi, c64(self.nr)), c64(self.n)))

    def product_block(self, pre: list[ir.Value], batch: ir.Value, r0: ir.Value, r1: ir.Value,
                      c0: ir.Value, c1: ir.Value) -> None:
        """C[r0:r1, c0:c1] of batch ``batch`` (``pre`` its multi-index), through the
        BLIS loops: NC-wide column panels (jc), K blocks (pc: B packed once per panel and
        block), MC-tall row blocks (ic: A packed once per block), NR-wide (jr) and
        MR-tall (ir) micro-tiles."""
        b, loops = self.b, self.e.loops
        mr, nr, mc, nc, kc = self.mr, self.nr, self.mc, self.nc, self.kc

        def per_panel(jcb: ir.Value) -> None:
            jc = b.add(c0, b.mul(jcb, c64(nc)))
            ncur = self.smin(c64(nc), b.sub(c1, jc))

            def per_kblock(pcb: ir.Value) -> None:
                k0 = b.mul(pcb, c64(kc))
                blk = _KBlock(pre, batch, k0, self.smin(c64(kc), b.sub(c64(self.k), k0)),
                              self.is_block(pcb, 0), self.is_block(pcb, self.k_blocks - 1))
                bp = self.pack_b(blk, jcb, pcb, jc, ncur)

                def per_mblock(icb: ir.Value) -> None:
                    i0 = b.add(r0, b.mul(icb, c64(mc)))
                    mcur = self.smin(c64(mc), b.sub(r1, i0))
                    self.pack(self.a_op, blk, self.a_panel, i0, mcur)

                    def per_jr(q: ir.Value) -> None:
                        j = b.add(jc, b.mul(q, c64(nr)))
                        cols = self.smin(c64(nr), b.sub(c1, j))

                        def per_ir(p: ir.Value) -> None:
                            i = b.add(i0, b.mul(p, c64(mr)))
                            rows = self.smin(c64(mr), b.sub(r1, i))
                            self.micro_tile(blk, bp, p, q, i, j, rows, cols)
                        loops.range(c64(0), self.ceil_div(mcur, mr), per_ir, "ir")
                    loops.range(c64(0), self.ceil_div(ncur, nr), per_jr, "jr")
                loops.range(c64(0), self.ceil_div(b.sub(r1, r0), mc), per_mblock, "ic")
            loops.range(c64(0), c64(self.k_blocks), per_kblock, "pc")
        loops.range(c64(0), self.ceil_div(b.sub(c1, c0), nc), per_panel, "jc")

    def is_block(self, pcb: ir.Value, which: int) -> ir.Value | bool:
        """Whether K block ``pcb`` is block ``which``: an i1, or True for a single block."""
        return self.b.icmp_signed("==", pcb, c64(which)) if self.k_blocks > 1 else True

    def micro_tile(self, blk: _KBlock, bp: ir.Value, p: ir.Value, q: ir.Value, i: ir.Value,
                   j: ir.Value, rows: ir.Value, cols: ir.Value) -> None:
        """The micro-tile C[i:i+rows, j:j+cols] over one K block, from micro-panel ``p``
        of the packed A block and ``q`` of the B panel ``bp``."""
        b = self.b
        self.prefetch_c(blk.batch, i, j)
        self.micro(bp, b.mul(p, b.mul(blk.depth, c64(self.mr))),
                   b.mul(q, b.mul(blk.depth, c64(self.nr))), blk.depth)
        self.store_tile(blk.batch, i, j, rows, cols, blk.first, blk.last)

    # ------------------------------------------------------------ index arithmetic

    def smin(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """Signed minimum."""
        b = self.b
        return b.select(b.icmp_signed("<", x, y), x, y)

    def smax(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """Signed maximum."""
        b = self.b
        return b.select(b.icmp_signed(">", x, y), x, y)

    def ceil_div(self, x: ir.Value, d: int) -> ir.Value:
        """ceil(x / d) for x >= 0."""
        b = self.b
        return b.udiv(b.add(x, c64(d - 1)), c64(d))

    # ------------------------------------------------------------ packing

    def pack_b(self, blk: _KBlock, jcb: ir.Value, pcb: ir.Value, jc: ir.Value,
               ncur: ir.Value) -> ir.Value:
        """Pack B's columns ``[jc, jc + ncur)`` over K block ``blk``; returns the panel."""
        if self.shared_b:
            return self.pack_shared_b(blk, jcb, pcb, jc, ncur)
        self.pack(self.b_op, blk, self.b_panel, jc, ncur)
        return self.b_panel

    def pack_shared_b(self, blk: _KBlock, jcb: ir.Value, pcb: ir.Value, jc: ir.Value,
                      ncur: ir.Value) -> ir.Value:
        """Pack this member's share of B panel (jcb, pcb) into the shared buffer of its
        parity, then wait at the team's barrier until every member packed its share;
        returns the panel. Round r = jcb x k_blocks + pcb is the same in every member
        (all walk every panel and K block of the whole N), so the barrier target is
        members x (r + 1); a lone member packs the whole panel and does not wait."""
        b, nr, members = self.b, self.nr, self.members
        rnd = b.add(b.mul(jcb, c64(self.k_blocks)), pcb)
        panel = b.gep(self.shared_panels, [b.mul(b.and_(rnd, c64(1)), c64(self.kc * self.nc))])
        total = self.ceil_div(ncur, nr)
        share = b.udiv(b.add(total, b.sub(members, c64(1))), members)
        q0 = self.smin(total, b.mul(self.member, share))
        q1 = self.smin(total, b.add(q0, share))
        cols = self.smax(c64(0), b.sub(self.smin(ncur, b.mul(q1, c64(nr))), b.mul(q0, c64(nr))))
        self.pack(self.b_op, blk, b.gep(panel, [b.mul(q0, b.mul(blk.depth, c64(nr)))]),
                  b.add(jc, b.mul(q0, c64(nr))), cols)
        with b.if_then(b.icmp_signed(">", members, c64(1))):
            emit_barrier(self.e.module, b, self.team, b.mul(members, b.add(rnd, c64(1))),
                         self.spins)
        return panel

    def pack(self, op: _Operand, blk: _KBlock, dst: ir.Value, outer0: ir.Value,
             outer_len: ir.Value) -> None:
        """dst[(q * depth + kk) * width + u] = op at (outer0 + q * width + u, k0 + kk)
        for micro-panels q < ceil(outer_len / width), zero past the operand's extent.
        Per kk the ``width`` elements are gathered into one ``<width x float>`` and
        stored contiguously: a vector copy when the source is unit-stride along the
        width (LLVM merges the consecutive loads), else one strided load per element,
        each source line reused by the next kk. Building the vector explicitly keeps
        LLVM's loop vectorizer off the kk loop, which would otherwise turn it into
        gathers and scatters (microcoded, ~10x slower on AMD). Panels entirely inside
        the operand skip the bounds selects."""
        b, width = self.b, op.width
        panels = self.ceil_div(outer_len, width)
        full = self.smax(c64(0), self.smin(panels, b.sdiv(b.sub(c64(op.extent), outer0),
                                                          c64(width))))
        if op.view is not None and op.view.strides[op.outer_dim] == 1:
            self.copy_block(op, op.view, blk, dst, outer0, full)
        else:
            self.e.loops.range(c64(0), full,
                               lambda q: self.pack_panel(op, blk, dst, outer0, q, False), "pq")
        self.e.loops.range(full, panels,
                           lambda q: self.pack_panel(op, blk, dst, outer0, q, True), "pe")

    def pack_panel(self, op: _Operand, blk: _KBlock, dst: ir.Value, outer0: ir.Value,
                   q: ir.Value, checked: bool) -> None:
        """Micro-panel ``q`` of an operand that is not unit-stride along the width (those
        are ``copy_block``'s): transposed in registers as far as it is unit-stride along
        K, and the rest gathered element by element (``checked``: the panel crosses the
        operand's extent, so it always goes through the bounds-checked gather)."""
        b = self.b
        o0 = b.add(outer0, b.mul(q, c64(op.width)))
        row = b.mul(q, blk.depth)
        view = op.view if not checked else None
        if view is not None and view.strides[op.k_dim] == 1:
            kfull = self.pack_transposing(op, view, blk, dst, o0, row)
            self.gather_lines(op, blk, dst, o0, row, kfull, False, unrolled=False)
        else:
            self.gather_lines(op, blk, dst, o0, row, c64(0), checked, unrolled=not checked)

    def batch_offset(self, view: _View, pre: list[ir.Value]) -> ir.Value:
        """The view's element offset of batch ``pre`` (index 0 in the matrix axes)."""
        b = self.b
        base = c64(view.offset)
        for d, iv in enumerate(pre):
            base = b.add(base, b.mul(iv, c64(view.strides[d])))
        return base

    def copy_block(self, op: _Operand, view: _View, blk: _KBlock, dst: ir.Value,
                   outer0: ir.Value, full: ir.Value) -> None:
        """Pack the ``full`` micro-panels of a block whose source is unit-stride along
        their width, k by k: per k, the panels' lines are one contiguous run of the
        source (``full x width`` elements), read in order. Panel by panel (k inner), a
        transposed A of ``MC`` rows -- a weight gradient ``dY^T X`` -- would be read as
        ``MC / MR`` passes over ``KC`` source rows each, every access a new page; the
        hardware prefetchers follow the run, not the stride (measured on the gpt-42m
        step: its tied-embedding gradient, ``(50304, 2048) x (2048, 512)``, took 551 ms
        with the panels walked one at a time)."""
        b, width = self.b, op.width
        line_ptr = ir.VectorType(F32, width).as_pointer()
        base = b.add(self.batch_offset(view, blk.pre), outer0)

        def per_k(kk: ir.Value) -> None:
            src = b.add(base, b.mul(b.add(blk.k0, kk), c64(view.strides[op.k_dim])))

            def per_panel(q: ir.Value) -> None:
                off = b.add(src, b.mul(q, c64(width)))
                line = b.load(b.bitcast(b.gep(self.e.ptrs[view.arg], [off]), line_ptr),
                              align=4)
                slot = b.mul(b.add(b.mul(q, blk.depth), kk), c64(width))
                b.store(line, b.bitcast(b.gep(dst, [slot]), line_ptr), align=4)
            self.e.loops.range(c64(0), full, per_panel, "pq")
        self.e.loops.range(c64(0), blk.depth, per_k, "pk")

    def gather_lines(self, op: _Operand, blk: _KBlock, dst: ir.Value, o0: ir.Value,
                     row: ir.Value, kfrom: ir.Value, checked: bool,
                     unrolled: bool = True) -> None:
        """Pack k in ``[kfrom, depth)`` of a micro-panel element by element through the
        emitter (any view or computed value); ``checked``: elements past the operand's
        extent are zeros (and read at index 0, so no load goes out of bounds).

        ``unrolled``: each k's ``width`` elements are built into one vector (the hot
        path: a whole micro-panel of an operand without a usable view); otherwise a
        loop over the width stores them one by one -- for the edge panel and the last
        few k of a transposing pack, a sliver of the packing, where the unrolled form
        was half of a tiled GEMM's IR (1,300 of its 2,800 lines) and of its compile
        time."""
        b, e, width = self.b, self.e, op.width
        line_ty = ir.VectorType(F32, width)
        undef = ir.Constant(line_ty, ir.Undefined)
        if not unrolled:
            self.gather_loop(op, blk, dst, o0, row, kfrom, checked)
            return

        def per_k(kk: ir.Value) -> None:
            e.cache = {}
            kidx = b.add(blk.k0, kk)
            line = undef
            for u in range(width):
                val = self.gather_element(op, blk, b.add(o0, c64(u)), kidx, checked)
                line = b.insert_element(line, val, ir.Constant(I32, u))
            slot = b.mul(b.add(row, kk), c64(width))
            b.store(line, b.bitcast(b.gep(dst, [slot]), line_ty.as_pointer()), align=4)
        e.loops.range(kfrom, blk.depth, per_k, "pk")

    def gather_element(self, op: _Operand, blk: _KBlock, o: ir.Value, kidx: ir.Value,
                       checked: bool) -> ir.Value:
        """The operand at (outer ``o``, ``kidx``) through the emitter; ``checked``: zero
        past its extent (read at index 0 there, so no load goes out of bounds)."""
        b = self.b
        if checked:
            inside = b.icmp_signed("<", o, c64(op.extent))
            o = b.select(inside, o, c64(0))
        val = self.e.emit(op.value, op.at(blk.pre, o, kidx))
        return b.select(inside, val, self.zero) if checked else val

    def gather_loop(self, op: _Operand, blk: _KBlock, dst: ir.Value, o0: ir.Value,
                    row: ir.Value, kfrom: ir.Value, checked: bool) -> None:
        """``gather_lines`` as two loops (k, then the width), one element per inner
        iteration, neither unrolled nor vectorized (a vectorized width loop would gather
        strided sources; see ``pack``)."""
        b, e, width = self.b, self.e, op.width
        md = e.not_unrolled(vectorize=False)

        def per_k(kk: ir.Value) -> None:
            kidx = b.add(blk.k0, kk)
            slot = b.mul(b.add(row, kk), c64(width))

            def per_u(u: ir.Value) -> None:
                e.cache = {}
                val = self.gather_element(op, blk, b.add(o0, u), kidx, checked)
                b.store(val, b.gep(dst, [b.add(slot, u)]))
            e.loops.range(c64(0), c64(width), per_u, "pu", md)
            e.cache = {}        # values of the width loop do not dominate what follows
        e.loops.range(kfrom, blk.depth, per_k, "pk", e.not_unrolled(vectorize=False))

    def pack_transposing(self, op: _Operand, view: _View, blk: _KBlock, dst: ir.Value,
                         o0: ir.Value, row: ir.Value) -> ir.Value:
        """Pack a panel whose source is unit-stride along K (A row-major, B = W^T): per
        ``lanes`` values of k, load one vector per source row (``width`` rows, padded
        with zeros to a multiple of ``lanes``), transpose each lanes x lanes block in
        registers, and store ``lanes`` packed lines; about 0.5 instructions per element
        instead of a strided load and an insert each. Returns where the remainder
        (fewer than ``lanes`` values of k, packed element-wise) starts."""
        b, lanes = self.b, self.lanes
        base = self.batch_offset(view, blk.pre)
        assert -(-op.width // lanes) <= 2, "MR <= NR = 2 vectors"
        chunks = b.udiv(blk.depth, c64(lanes))
        self.e.loops.range(c64(0), chunks,
                           lambda c: self.transpose_chunk(op, view, dst, base, blk.k0, o0, row,
                                                          c), "pt")
        return b.mul(chunks, c64(lanes))

    def transpose_chunk(self, op: _Operand, view: _View, dst: ir.Value, base: ir.Value,
                        k0: ir.Value, o0: ir.Value, row: ir.Value, c: ir.Value) -> None:
        """Chunk ``c`` of ``pack_transposing``: k in ``[c lanes, (c + 1) lanes)`` of
        the K block, all ``width`` source rows."""
        b, lanes, width = self.b, self.lanes, op.width
        groups = -(-width // lanes)
        kk0 = b.mul(c, c64(lanes))
        kbase = b.add(base, b.add(k0, kk0))
        loaded = []
        for u in range(groups * lanes):
            if u >= width:
                loaded.append(self.zero_vec)
                continue
            off = b.add(kbase, b.mul(b.add(o0, c64(u)), c64(view.strides[op.outer_dim])))
            loaded.append(b.load(b.bitcast(b.gep(self.e.ptrs[view.arg], [off]), self.vptr),
                                 align=4))
        cols = [self.transpose_block(loaded[g * lanes:(g + 1) * lanes]) for g in range(groups)]
        cat = ir.Constant(ir.VectorType(I32, 2 * lanes), list(range(2 * lanes)))
        for t in range(lanes):
            line = cols[0][t]
            if groups == 2:              # NR = 2 vectors: join the halves of line t
                line = b.shuffle_vector(line, cols[1][t], cat)
            # A full-vector store even when width < groups x lanes (MR = 14 of 16
            # lanes): the extra lanes land on the next packed line, which is written
            # after this one (the next t, the next chunk, the remainder loop or the
            # next panel) or on the buffer's slack of ``lanes`` floats; one store
            # instead of a split 8 + 4 + 2-lane store.
            slot = b.mul(b.add(row, b.add(kk0, c64(t))), c64(width))
            b.store(line, b.bitcast(b.gep(dst, [slot]), line.type.as_pointer()), align=4)

    def transpose_block(self, rows: list[ir.Value]) -> list[ir.Value]:
        """Transpose ``lanes`` vectors of ``lanes`` floats: log2(lanes) butterfly stages,
        stage b exchanging bit b of the row and column index with two two-source
        shuffles per pair of rows (vunpck/vpermt2 on x86)."""
        b, lanes = self.b, self.lanes
        rows = list(rows)
        step = 1
        while step < lanes:
            low = ir.Constant(ir.VectorType(I32, lanes), [
                j if j & step == 0 else lanes + j - step for j in range(lanes)])
            high = ir.Constant(ir.VectorType(I32, lanes), [
                j + step if j & step == 0 else lanes + j for j in range(lanes)])
            new = list(rows)
            for i in range(lanes):
                if i & step == 0:
                    new[i] = b.shuffle_vector(rows[i], rows[i + step], low)
                    new[i + step] = b.shuffle_vector(rows[i], rows[i + step], high)
            rows = new
            step *= 2
        return rows

    # ------------------------------------------------------------ the micro-kernel

    def micro(self, bp: ir.Value, a_off: ir.Value, b_off: ir.Value, kcur: ir.Value) -> None:
        """The MR x NR tile over one K block into ``accs``: zero them, then one rank-1
        update per k (``bp``: the B panel; ``a_off``/``b_off``: the micro-panels'
        offsets in the packed A block and B panel)."""
        b = self.b
        for r in range(self.mr):
            for v in range(self.nvec):
                b.store(self.zero_vec, self.accs[r][v])
        self.e.loops.range(c64(0), kcur, lambda kk: self.rank1_update(bp, a_off, b_off, kk),
                           "k")

    def rank1_update(self, bp: ir.Value, a_off: ir.Value, b_off: ir.Value,
                     kk: ir.Value) -> None:
        """accs += A[:, kk] B[kk, :]: load the NR-wide line of the B micro-panel as
        vectors, broadcast each of the MR elements of the A micro-panel's line, FMA."""
        b, mr, nr, lanes = self.b, self.mr, self.nr, self.lanes
        bbase = b.add(b_off, b.mul(kk, c64(nr)))
        bvecs = [b.load(b.bitcast(b.gep(bp, [b.add(bbase, c64(v * lanes))]), self.vptr),
                        align=4) for v in range(self.nvec)]
        abase = b.add(a_off, b.mul(kk, c64(mr)))
        for r in range(mr):
            x = b.load(b.gep(self.a_panel, [b.add(abase, c64(r))]))
            xs = b.shuffle_vector(b.insert_element(self.undef, x, ir.Constant(I32, 0)),
                                  self.undef, self.splat_mask)
            for v in range(self.nvec):
                acc = self.accs[r][v]
                b.store(b.call(self.fma, [xs, bvecs[v], b.load(acc)]), acc)

    def prefetch_c(self, batch: ir.Value, i: ir.Value, j: ir.Value) -> None:
        """Prefetch (for writing) the cache lines of the C tile the micro-kernel is about
        to update: they were last touched a whole K block ago and are usually out of
        L2 by now, and the ~KC x MR x 2 / 2 cycles of FMAs hide the fetch. Rows past M
        are clamped (a prefetch never faults, but its address must be computable)."""
        b, m, n = self.b, self.m, self.n
        for r in range(self.mr):
            row = self.smin(b.add(i, c64(r)), c64(m - 1))
            off = b.add(b.mul(b.add(b.mul(batch, c64(m)), row), c64(n)), j)
            for v in range(0, self.nr, 16):
                ptr = b.bitcast(b.gep(self.e.out_ptr, [b.add(off, c64(v))]), PTR)
                b.call(self.prefetch, [ptr, ir.Constant(I32, 1), ir.Constant(I32, 3),
                                       ir.Constant(I32, 1)])

    # ------------------------------------------------------------ storing C

    def store_tile(self, batch: ir.Value, i: ir.Value, j: ir.Value, rows: ir.Value,
                   cols: ir.Value, first: ir.Value | bool, last: ir.Value | bool) -> None:
        """Add the accumulators to C[i:i+rows, j:j+cols] (or store them on the first
        K block); on the last K block run the epilogue unless ``direct``. Full tiles
        take vectors, edge tiles element by element."""
        b, mr, nr = self.b, self.mr, self.nr
        row0 = b.mul(b.add(b.mul(batch, c64(self.m)), i), c64(self.n))   # offset of C[i, 0]
        full = b.and_(b.icmp_signed("==", rows, c64(mr)), b.icmp_signed("==", cols, c64(nr)))
        if self.direct:
            with b.if_else(full) as (then, otherwise):
                with then:
                    self.add_vectors(row0, j, first)
                with otherwise:
                    self.add_elements(row0, j, first, rows, cols, False)
            return
        if last is True:
            self.epilogue_tile(row0, j, first, rows, cols, full)
            return
        with b.if_else(last) as (then, otherwise):
            with then:
                self.epilogue_tile(row0, j, first, rows, cols, full)
            with otherwise, b.if_else(full) as (then2, otherwise2):
                with then2:
                    self.add_vectors(row0, j, first)
                with otherwise2:
                    self.add_elements(row0, j, first, rows, cols, False)

    def epilogue_tile(self, row0: ir.Value, j: ir.Value, first: ir.Value | bool,
                      rows: ir.Value, cols: ir.Value, full: ir.Value) -> None:
        """The last K block of a fused product: the epilogue element by element. A full
        tile's loops have constant trip counts and no branches, so LLVM vectorizes the
        fused epilogue along the row."""
        with self.b.if_else(full) as (then, otherwise):
            with then:
                self.add_elements(row0, j, first, c64(self.mr), c64(self.nr), True)
            with otherwise:
                self.add_elements(row0, j, first, rows, cols, True)

    def add_vectors(self, row0: ir.Value, j: ir.Value, first: ir.Value | bool) -> None:
        """A full tile: C's MR x NR lines (+)= the accumulators, one vector each."""
        b, n = self.b, self.n
        for r in range(self.mr):
            for v in range(self.nvec):
                off = b.add(b.add(row0, c64(r * n)), b.add(j, c64(v * self.lanes)))
                ptr = b.bitcast(b.gep(self.e.out_ptr, [off]), self.vptr)
                acc = b.load(self.accs[r][v])
                if first is not True:
                    old = b.load(ptr, align=4)
                    acc = b.select(first, acc, b.fadd(acc, old)) if first is not False \
                        else b.fadd(acc, old)
                b.store(acc, ptr, align=4)

    def spill_accumulators(self) -> None:
        """The accumulator vectors into the MR x NR ``tile`` buffer, to be read by index."""
        b, nr, lanes = self.b, self.nr, self.lanes
        for r in range(self.mr):
            for v in range(self.nvec):
                b.store(b.load(self.accs[r][v]), b.bitcast(
                    b.gep(self.tile, [c64(r * nr + v * lanes)]), self.vptr), align=4)

    def add_elements(self, row0: ir.Value, j: ir.Value, first: ir.Value | bool,
                     n_rows: ir.Value, n_cols: ir.Value, epilogue: bool) -> None:
        """C[i:i+n_rows, j:j+n_cols] (+)= the accumulators element by element, through
        the fused epilogue when ``epilogue``."""
        b, e, n, nr = self.b, self.e, self.n, self.nr
        out = e.out_ptr
        self.spill_accumulators()
        # LLVM vectorizes a full tile's row (constant trip counts); an edge tile's loops
        # stay scalar. Neither is unrolled (``Emitter.not_unrolled``).
        full = isinstance(n_rows, ir.Constant) and isinstance(n_cols, ir.Constant)

        def per_row(r: ir.Value) -> None:
            def per_col(jj: ir.Value) -> None:
                e.cache = {}
                off = b.add(b.add(row0, b.mul(r, c64(n))), b.add(j, jj))
                value = e.tagged(b.load(b.gep(self.tile, [b.add(b.mul(r, c64(nr)), jj)])))
                if first is not True:
                    old = e.tagged(b.load(b.gep(out, [off])))
                    summed = b.fadd(value, old)
                    value = summed if first is False else b.select(first, value, summed)
                if epilogue:
                    _store_with_product(e, self.product, value, off)
                else:
                    e.tagged(b.store(value, b.gep(out, [off])))
            e.loops.range(c64(0), n_cols, per_col, "ej", e.not_unrolled(full))
        # Iteration (r, jj) writes C[r, jj] and reads an input overlaid by C
        # (``step_memory.pointwise_inputs``) only there, so the loops are declared
        # independent: otherwise the vectorizer's run-time overlap check fails for a
        # product written over its epilogue's input (a residual, a saved activation)
        # and every tile's write-back runs its scalar loop (measured: the GELU backward
        # as the epilogue of a 4096 x 256 x 1024 product, 35.7 ms a call, 11.7 ms with
        # the loops declared independent; the product alone 8.1 ms).
        if full:
            with e.independent_iterations():
                e.loops.range(c64(0), n_rows, per_row, "er", e.not_unrolled(full))
        else:
            e.loops.range(c64(0), n_rows, per_row, "er", e.not_unrolled(full))


def matmul_rows(e: Emitter) -> None:
    """The ``ikj`` and ``dot`` strategies (``RowGemm``)."""
    RowGemm(e).body()


def matmul_tiled(e: Emitter) -> None:
    """The ``tiled`` strategy (``Gemm``)."""
    Gemm(e).body()


__all__ = ["Gemm", "RowGemm", "matmul_rows", "matmul_tiled"]
