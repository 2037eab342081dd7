"""LLVM IR for matmul kernels: the packed, register-tiled float32 GEMM and the row GEMM.

The ``tiled`` strategy (float32, BLIS-blocked: packed A and B panels, an MR x NR tile of
C in vector registers) is two pieces: ``GemmDriver``, the blocked product itself, one
function per register tile shared by every tiled kernel of the process (its own module,
``driver_module``, compiled once and kept as runtime support code); and ``TiledKernel``,
a kernel's entry that passes its shapes and views to the driver (``GEMM_PARAMS``) and
defines what only it has -- the fused epilogue, the packing of computed operands -- as
callbacks. ``RowGemm`` emits ``ikj`` and ``dot``: one row of C per iteration of the
kernel's parallel range, accumulated in a row buffer, for the products the tiled GEMM
does not take (float64, integers, half types, small shapes). The kernel classes have the
shape of ``targets.cuda.gemm.Gemm``: the constructor reads the contraction and the
schedule, ``body()`` writes the kernel through the ``Emitter``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from llvmlite import ir
from xdsl.ir import SSAValue

from nova.compiler.targets.cpu.llvm_emit import (_COMPUTE, F32, F64, I32, I64, PTR, Emitter, Frame,
                                                c64)
from nova.compiler.targets.cpu.pool import X86, emit_barrier, emit_pause
from nova.compiler.codegen.values import element_of, shape_of
from nova.compiler.lowering.plan import (
    KernelPlan,
    TEAM_ARRIVED,
    TEAM_CLOSED,
    TEAM_JOIN_SPINS,
    TEAM_MEMBERS,
    TEAM_WORDS,
    contraction,
)
from nova.compiler.lowering.views import TableView, operand_view, table_view


def transpose_lanes(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """Transpose ``lanes`` vectors of ``lanes`` floats (``lanes = len(rows)``, a power
    of two): log2(lanes) butterfly stages, stage b exchanging bit b of the row and
    column index with two two-source shuffles per pair of rows (vunpck/vpermt2 on
    x86)."""
    lanes = len(rows)
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


def _declared(module: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    """The module's function ``name``, declared with type ``ty`` on first use."""
    return module.globals.get(name) or ir.Function(module, ty, name=name)


def _store_with_product(e: Emitter, product: SSAValue, value: ir.Value, flat: ir.Value,
                        at: list[ir.Value] | None = None) -> None:
    """Run the fused epilogue at output offset ``flat`` with the product's element there
    being ``value`` (the accumulated sum), and store the kernel's root; ``at``: that
    offset's multi-index in the output's shape, where the caller has it (no
    delinearizing of ``flat``)."""
    e.override[id(product)] = lambda _idx: value
    if at is None:
        e.store_root(flat)
    else:
        e.store_root_at(at, e.plan.out[0])
    del e.override[id(product)]


class RowGemm:
    """The row GEMM: C row by row, ``[start, end)`` ranging over the rows of all batches.

    Each row accumulates in an N-element buffer (the accumulation type: float64 for
    float64, float32 for the other floats, the operand's compute type for integers:
    int32 for int8/uint8/int16, wrapped once at the end, the same sum modulo 2^bits),
    by k then j (``ikj``: a saxpy per k, vectorizable along the row) or by j then k
    (``dot``: a dot product per element, for B read along K), then the fused epilogue
    runs per element.
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
        value = e.fit(raw, self.mlir) if self.integer else \
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


def b_table(plan: KernelPlan, value: SSAValue, rank: int) -> TableView | None:
    """The ``TableView`` of a float32 GEMM operand ``(batch..., K, N)`` of ``plan`` that
    the table packing (``TiledKernel.table_pack_function``) reads
    (``TableView.packs_directly``); None otherwise."""
    view = table_view(value)
    if view is None or plan.arg_types[view.arg][1].mlir != "f32" or \
            not view.packs_directly(rank):
        return None
    return view


def reads_in_place(view: TableView, rank: int) -> bool:
    """Whether the driver reads a table-view B ``(batch..., K, N)`` where it is
    (``GemmDriver.micro_in_place``): unit stride along N and a table of row starts
    along K -- each micro-panel line one contiguous run of the argument."""
    k_term, n_term = view.dims[rank:]
    return n_term == 1 and isinstance(k_term, tuple)


def address_view(e: Emitter, value: SSAValue) -> _View | None:
    """``value``'s view when it is one (see ``_View``), else None (computed values,
    non-affine index maps, other dtypes: packed through the emitter)."""
    view = operand_view(value)
    if view is None or e.plan.arg_types[view[0]][1].mlir != "f32":
        return None
    arg, strides, offset = view
    return _View(arg, offset, tuple(strides))


# ---------------------------------------------------------------- the tiled GEMM's ABI

# The words of a tiled GEMM call's parameter block (i64 each; pointers as integers): what
# the kernel (``TiledKernel``) tells the shared driver (``GemmDriver``). Shapes, cache
# blocks, the thread split, the call's range of micro-panels, C, the scratch buffer of a
# shared-B team, the kernel's buffer table (passed to its callbacks), the epilogue
# callback (0: C is the product itself), the batch shape (rank, i64 array), and per
# operand its view (float pointer, element offset, strides along the outer axis -- M or
# N -- and K, an i64 array of batch strides) or its packing callback (non-zero: the
# operand is computed, and the kernel packs it). ``b_rows`` (non-zero: B is read in
# place): an i64 array of the element offsets of B's rows, K of them, each row
# unit-stride along N from ``b_ptr`` plus the batch's offset (a shifted-window stack;
# ``GemmDriver.micro_in_place``).
GEMM_PARAMS = ("m", "n", "k", "kc", "mc", "nc", "split_n", "shared_b", "start", "end",
               "out", "scratch", "bufs", "epilogue", "batch_rank", "batch_shape",
               "a_ptr", "a_offset", "a_outer", "a_k", "a_batch", "a_pack",
               "b_ptr", "b_offset", "b_outer", "b_k", "b_batch", "b_pack", "b_rows")
_WORD = {name: i for i, name in enumerate(GEMM_PARAMS)}

# ``i32 (i8** bufs, float* tile_or_dst, i64 batch, i64, i64, i64, i64)``, both callbacks:
#   epilogue(bufs, tile, batch, ti, tj, rows, cols): C[i:i+rows, j:j+cols] of batch
#     ``batch``, i = ti MR and j = tj NR, through the fused epilogue, the tile (MR x NR,
#     row-major) holding the finished sums;
#   pack(bufs, dst, batch, panel0, kblock, depth, outer_len): the micro-panels of the
#     operand's outer indices [outer0, outer0 + outer_len), outer0 = panel0 x width,
#     over k in [k0, k0 + depth), k0 = kblock x KC, as ``GemmDriver.pack`` lays them
#     out.
# Positions go as multiples of the register tile and the K block (every tile and panel
# starts at one: MC and NC are multiples of MR and NR) so the callback's index
# arithmetic knows it: a computed operand's division by a head size of 32 then folds
# into vector loads, as it did when the kernel held the whole loop nest (0.65 ms of a
# small GPT step when passed as plain offsets).
TILE_CALLBACK = ir.FunctionType(I32, [PTR.as_pointer(), F32.as_pointer(), I64, I64, I64, I64,
                                      I64])
DRIVER_TYPE = ir.FunctionType(I32, [I64.as_pointer()])


def driver_name(mr: int, nr: int) -> str:
    """The symbol of the shared tiled-GEMM driver for an MR x NR register tile."""
    return f"nova_sgemm_{mr}x{nr}"


def driver_module(mr: int, nr: int, triple: str, data_layout: str) -> ir.Module:
    """The LLVM module defining the shared driver (``GemmDriver``) for MR x NR."""
    module = ir.Module(name=driver_name(mr, nr))
    module.triple = triple
    module.data_layout = data_layout
    GemmDriver(module, mr, nr).body()
    return module


@dataclass(frozen=True)
class _Operand:
    """One operand as the driver sees it: A packed into MR-tall, B into NR-wide
    micro-panels, read at (outer, k) -- A at (row, k), B at (k, col) -- after the batch
    index. ``width``: MR or NR; ``extent``: M or N (zero past it). Element (outer, k) of
    batch offset ``base`` is ``ptr[base + outer * outer_stride + k * k_stride]`` unless
    ``computed``, when the kernel's ``pack`` callback packs it."""

    is_a: bool
    width: int
    extent: ir.Value
    ptr: ir.Value
    offset: ir.Value
    outer_stride: ir.Value
    k_stride: ir.Value
    batch_strides: ir.Value
    pack: ir.Value
    computed: ir.Value


@dataclass(frozen=True)
class _KBlock:
    """One K block of one batch's product: ``batch`` its linear index, ``bases`` the
    element offsets of the batch in A's and B's views, ``index`` the block's number, k
    in ``[k0, k0 + depth)``; ``first``/``last``: whether it is the first/last K block
    (i1)."""

    batch: ir.Value
    bases: tuple[ir.Value, ir.Value]
    index: ir.Value
    k0: ir.Value
    depth: ir.Value
    first: ir.Value
    last: ir.Value

    def base(self, op: _Operand) -> ir.Value:
        return self.bases[0] if op.is_a else self.bases[1]


class GemmDriver:
    """C = A @ B (float32) for every tiled GEMM of the process, blocked as in the BLIS
    model (``configurator`` module docstring): one function per register tile
    (``driver_name``), compiled once and shared; a kernel passes its shapes, cache
    blocks, views and callbacks in a parameter block (``GEMM_PARAMS``) and keeps only
    what is its own -- the fused epilogue and the packing of computed operands
    (``TiledKernel``). Compiling the whole blocked GEMM into every kernel made the 16
    products of a small GPT step 60% of its cold compile (~0.2 s each).

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
    (``copy_block``); when unit-stride along K, transposed in registers
    (``pack_transposing``); else element by element -- so transposes cost no copy in
    the graph. The micro-kernel keeps 2 x MR vector accumulators across the K block:
    per k it loads the 2 vectors of the B micro-panel and broadcasts MR consecutive
    elements of the A micro-panel; before it, the C tile's lines are prefetched.

    Partial sums over K blocks accumulate in the (float32) output: the first block
    stores, later ones load-add-store, with full vectors for interior tiles and element
    by element for edge tiles (rows past ``r1`` and columns past ``c1`` are computed on
    zero padding and not stored). On the last K block of a product with an epilogue,
    the finished sums go to the MR x NR ``tile`` buffer and the kernel's epilogue
    callback stores them.

    Everything shape-dependent is a run-time value here; the register tile (MR, NR:
    the device's) is what the code is specialized on.
    """

    def __init__(self, module: ir.Module, mr: int, nr: int):
        self.f = Frame(module, DRIVER_TYPE, driver_name(mr, nr), ["params"])
        self.b, self.loops = self.f.b, self.f.loops
        self.mr, self.nr = mr, nr
        self.lanes = nr // 2
        self.nvec = nr // self.lanes          # vectors per row of the C tile
        lanes = self.lanes
        self.vec = ir.VectorType(F32, lanes)
        self.vptr = self.vec.as_pointer()
        self.zero_vec = ir.Constant(self.vec, [0.0] * lanes)
        self.zero = ir.Constant(F32, 0.0)
        self.splat_mask = ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)
        self.undef = ir.Constant(self.vec, ir.Undefined)
        self.aligned_alloc = _declared(module, "aligned_alloc", ir.FunctionType(PTR, [I64, I64]))
        self.free = _declared(module, "free", ir.FunctionType(ir.VoidType(), [PTR]))
        self.fma = _declared(module, f"llvm.fma.v{lanes}f32",
                             ir.FunctionType(self.vec, [self.vec, self.vec, self.vec]))
        self.prefetch = _declared(module, "llvm.prefetch.p0i8",
                                  ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]))
        self.module = module
        self.read_params()

    def word(self, name: str) -> ir.Value:
        """Parameter word ``name`` (``GEMM_PARAMS``)."""
        b = self.b
        return b.load(b.gep(self.f.fn.args[0], [c64(_WORD[name])]), name=name)

    def read_params(self) -> None:
        """The call's shapes, blocks, pointers and operands, read once at entry."""
        b, word = self.b, self.word
        self.m, self.n, self.k = word("m"), word("n"), word("k")
        self.kc, self.mc, self.nc = word("kc"), word("mc"), word("nc")
        self.split_n = b.icmp_signed("!=", word("split_n"), c64(0))
        self.shared_b = b.icmp_signed("!=", word("shared_b"), c64(0))
        self.start, self.end = word("start"), word("end")
        self.out = b.inttoptr(word("out"), F32.as_pointer())
        self.scratch = b.inttoptr(word("scratch"), F32.as_pointer())
        self.team = b.bitcast(self.scratch, I64.as_pointer())     # a shared-B team's header
        self.bufs = b.inttoptr(word("bufs"), PTR.as_pointer())
        epilogue = word("epilogue")
        self.direct = b.icmp_signed("==", epilogue, c64(0))
        self.epilogue = b.inttoptr(epilogue, TILE_CALLBACK.as_pointer())
        self.batch_rank = word("batch_rank")
        self.batch_shape = b.inttoptr(word("batch_shape"), I64.as_pointer())
        self.a_op = self.operand("a", True, self.mr, self.m)
        self.b_op = self.operand("b", False, self.nr, self.n)
        rows = word("b_rows")
        self.b_in_place = b.icmp_signed("!=", rows, c64(0))
        self.b_rows = b.inttoptr(rows, I64.as_pointer())
        self.k_blocks = self.smax(c64(1), self.ceil_div(self.k, self.kc))
        # micro-panels of the split dimension per batch: the unit of [start, end)
        self.per_batch = self.smax(c64(1), b.select(self.split_n,
                                                    self.ceil_div(self.n, self.nr),
                                                    self.ceil_div(self.m, self.mr)))
        self.error = self.f.entry_alloca(I32)
        b.store(ir.Constant(I32, 0), self.error)

    def operand(self, prefix: str, is_a: bool, width: int, extent: ir.Value) -> _Operand:
        b, word = self.b, self.word
        pack = word(f"{prefix}_pack")
        return _Operand(is_a, width, extent, b.inttoptr(word(f"{prefix}_ptr"), F32.as_pointer()),
                        word(f"{prefix}_offset"), word(f"{prefix}_outer"), word(f"{prefix}_k"),
                        b.inttoptr(word(f"{prefix}_batch"), I64.as_pointer()),
                        b.inttoptr(pack, TILE_CALLBACK.as_pointer()),
                        b.icmp_signed("!=", pack, c64(0)))

    def note_error(self, flag: ir.Value) -> None:
        """OR a callback's error flag into the call's."""
        b = self.b
        b.store(b.or_(b.load(self.error), flag), self.error)

    # ------------------------------------------------------------ the call

    def body(self) -> None:
        """The function: allocate the workspace, then the products of the batches the
        call's ``[start, end)`` of micro-panels touches (nothing for an empty range)."""
        self.allocate_workspace()
        b = self.b
        per = self.per_batch
        with b.if_then(b.icmp_signed("<", self.start, self.end)):
            self.loops.range(b.udiv(self.start, per),
                             b.add(b.udiv(b.sub(self.end, c64(1)), per), c64(1)),
                             self.batch_range, "bat")
        self.f.finish(b.load(self.error))

    def allocate_workspace(self) -> None:
        """The packed A block, the B panel (this call's own, or the team's shared pair:
        ``join_team``), the MR x NR accumulator vectors and the tile buffer."""
        f, b = self.f, self.b
        kc = self.kc
        # + the overflow of a transposing pack's last store
        self.a_panel = self.buffer(b.add(b.mul(self.mc, kc), c64(self.lanes)))
        own = f.entry_alloca(PTR)           # this call's own B panel(s), or null
        b.store(ir.Constant(PTR, None), own)
        f.cleanup.append(lambda: self.b.call(self.free, [self.b.load(own)]))  # free(NULL): no-op
        self.member_slot, self.size_slot = f.entry_alloca(I64), f.entry_alloca(I64)
        self.panels_slot = f.entry_alloca(F32.as_pointer())
        self.spins = f.entry_alloca(I64)
        b.store(c64(0), self.spins)
        b.store(c64(0), self.member_slot)
        b.store(c64(1), self.size_slot)
        with b.if_else(self.shared_b) as (then, otherwise):
            with then:
                b.store(b.gep(self.scratch, [c64(2 * TEAM_WORDS)]), self.panels_slot)
                self.join_team(own)
            with otherwise:
                raw = self.allocate(b.add(b.mul(kc, self.nc), c64(self.lanes)))
                b.store(raw, own)
                b.store(b.bitcast(raw, F32.as_pointer()), self.panels_slot)
        self.member, self.members = b.load(self.member_slot), b.load(self.size_slot)
        self.panels = b.load(self.panels_slot)
        self.accs = [[f.entry_alloca(self.vec) for _ in range(self.nvec)]
                     for _ in range(self.mr)]
        self.tile = f.entry_alloca(F32, self.mr * self.nr)
        self.panel_slot = f.entry_alloca(F32.as_pointer())
        b.store(self.panels, self.panel_slot)
        # what the A block holds (``pack_a``): batch offset, k0, depth, i0, rows; none yet
        self.a_key = [f.entry_alloca(I64) for _ in range(5)]
        for slot in self.a_key:
            b.store(c64(-1), slot)
        # one micro-panel: an edge of a B read in place, packed (zero past N)
        self.edge_panel = self.buffer(b.add(b.mul(kc, c64(self.nr)), c64(self.lanes)))

    def buffer(self, floats: ir.Value) -> ir.Value:
        """A 64-byte aligned heap buffer of at least ``floats`` floats, freed on return."""
        raw = self.allocate(floats)
        self.f.cleanup.append(lambda: self.b.call(self.free, [raw]))
        return self.b.bitcast(raw, F32.as_pointer())

    def allocate(self, floats: ir.Value) -> ir.Value:
        """``aligned_alloc`` of at least ``floats`` floats on 64 bytes (an ``i8*``; the
        caller frees it)."""
        b = self.b
        size = b.mul(self.ceil_div(b.mul(floats, c64(4)), 64), c64(64))
        return b.call(self.aligned_alloc, [c64(64), size])

    def join_team(self, own: ir.Value) -> None:
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
        panels in a buffer of its own (``own``, freed on return), as a team of one. So
        a member that never comes holds the others for at most the join wait, once per
        call."""
        b, f = self.b, self.f
        fn = f.fn
        arrived_ptr = b.gep(self.team, [c64(TEAM_ARRIVED)])
        expected = b.load(b.gep(self.team, [c64(TEAM_MEMBERS)]))
        member, size = self.member_slot, self.size_slot
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
        waited = f.entry_alloca(I64)
        b.store(c64(0), waited)
        b.branch(blk["tpoll"])
        b.position_at_end(blk["tpoll"])
        now = b.load_atomic(arrived_ptr, "acquire", 8)
        ready = b.or_(b.icmp_unsigned(">=", now, c64(TEAM_CLOSED)),
                      b.icmp_signed(">=", now, expected))
        b.cbranch(ready, blk["tready"], blk["tclose"])
        b.position_at_end(blk["tclose"])
        emit_pause(f.module, b, f.module.triple.startswith(X86), self.spins)
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
        raw = self.allocate(b.add(b.mul(c64(2), b.mul(self.kc, self.nc)), c64(self.lanes)))
        b.store(raw, own)
        b.store(b.bitcast(raw, F32.as_pointer()), self.panels_slot)
        b.store(c64(0), member)
        b.store(c64(1), size)
        b.branch(blk["tdone"])

        b.position_at_end(blk["tdone"])

    def batch_range(self, batch: ir.Value) -> None:
        """The part of batch ``batch``'s product inside ``[start, end)``: rows (split
        "m") or columns (split "n") of the micro-panels there."""
        b = self.b
        per = self.per_batch
        base = b.mul(batch, per)
        lo = b.sub(self.smax(self.start, base), base)
        hi = b.sub(self.smin(self.end, b.add(base, per)), base)
        split_n = self.split_n
        r0 = b.select(split_n, c64(0), b.mul(lo, c64(self.mr)))
        r1 = b.select(split_n, self.m, self.smin(b.mul(hi, c64(self.mr)), self.m))
        c0 = b.select(split_n, b.mul(lo, c64(self.nr)), c64(0))
        c1 = b.select(split_n, self.smin(b.mul(hi, c64(self.nr)), self.n), self.n)
        self.product_block(batch, self.batch_offsets(batch), r0, r1, c0, c1)

    def batch_offsets(self, batch: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The element offsets of batch ``batch`` (linear, row-major over the batch
        shape) in A's and B's views: the views' offsets plus the batch index times
        their batch strides."""
        f, b = self.f, self.b
        rest, a_off, b_off = (f.entry_alloca(I64) for _ in range(3))
        b.store(batch, rest)
        b.store(self.a_op.offset, a_off)
        b.store(self.b_op.offset, b_off)

        def per_dim(t: ir.Value) -> None:        # dimension rank - 1 - t: innermost first
            d = b.sub(b.sub(self.batch_rank, c64(1)), t)
            extent = b.load(b.gep(self.batch_shape, [d]))
            left = b.load(rest)
            i = b.urem(left, extent)
            b.store(b.udiv(left, extent), rest)
            for op, slot in ((self.a_op, a_off), (self.b_op, b_off)):
                stride = b.load(b.gep(op.batch_strides, [d]))
                b.store(b.add(b.load(slot), b.mul(i, stride)), slot)
        self.loops.range(c64(0), self.batch_rank, per_dim, "bd")
        return b.load(a_off), b.load(b_off)

    def product_block(self, batch: ir.Value, bases: tuple[ir.Value, ir.Value], r0: ir.Value,
                      r1: ir.Value, c0: ir.Value, c1: ir.Value) -> None:
        """C[r0:r1, c0:c1] of batch ``batch`` through the BLIS loops: NC-wide column
        panels (jc), K blocks (pc: B packed once per panel and block, unless read in
        place), MC-tall row blocks (ic: A packed once per block), NR-wide (jr) and
        MR-tall (ir) micro-tiles."""
        b, loops = self.b, self.loops
        mr, nr, mc, nc, kc = self.mr, self.nr, self.mc, self.nc, self.kc

        def per_panel(jcb: ir.Value) -> None:
            jc = b.add(c0, b.mul(jcb, nc))
            ncur = self.smin(nc, b.sub(c1, jc))

            def per_kblock(pcb: ir.Value) -> None:
                k0 = b.mul(pcb, kc)
                blk = _KBlock(batch, bases, pcb, k0, self.smin(kc, b.sub(self.k, k0)),
                              b.icmp_signed("==", pcb, c64(0)),
                              b.icmp_signed("==", pcb, b.sub(self.k_blocks, c64(1))))
                with b.if_then(b.not_(self.b_in_place)):
                    self.pack_b(blk, jcb, pcb, jc, ncur)
                bp = b.load(self.panel_slot)

                def per_mblock(icb: ir.Value) -> None:
                    i0 = b.add(r0, b.mul(icb, mc))
                    mcur = self.smin(mc, b.sub(r1, i0))
                    self.pack_a(blk, i0, mcur)

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
            loops.range(c64(0), self.k_blocks, per_kblock, "pc")
        loops.range(c64(0), self.ceil_div(b.sub(c1, c0), nc), per_panel, "jc")

    def pack_a(self, blk: _KBlock, i0: ir.Value, mcur: ir.Value) -> None:
        """Pack A's rows ``[i0, i0 + mcur)`` over K block ``blk`` into the A block --
        unless the block already holds them: a view of A read at the same batch offset,
        K block and rows as the last pack (a weight shared by every image of a batched
        product, B's column panels after the first). A computed A is packed every time
        (its callback's values depend on the batch index, not on an offset)."""
        b = self.b
        key = (blk.base(self.a_op), blk.k0, blk.depth, i0, mcur)
        same = b.not_(self.a_op.computed)
        for slot, value in zip(self.a_key, key):
            same = b.and_(same, b.icmp_signed("==", b.load(slot), value))
        with b.if_then(b.not_(same)):
            self.pack(self.a_op, blk, self.a_panel, i0, mcur)
            for slot, value in zip(self.a_key, key):
                b.store(value, slot)

    def micro_tile(self, blk: _KBlock, bp: ir.Value, p: ir.Value, q: ir.Value, i: ir.Value,
                   j: ir.Value, rows: ir.Value, cols: ir.Value) -> None:
        """The micro-tile C[i:i+rows, j:j+cols] over one K block, from micro-panel ``p``
        of the packed A block and ``q`` of the B panel ``bp`` -- or, for a B read in
        place, from B's rows themselves (``micro_in_place``; an edge micro-panel, past
        N, is packed on its own first)."""
        b = self.b
        self.prefetch_c(blk.batch, i, j)
        a_off = b.mul(p, b.mul(blk.depth, c64(self.mr)))
        in_place = b.and_(self.b_in_place, b.icmp_signed("==", cols, c64(self.nr)))
        with b.if_else(in_place) as (then, otherwise):
            with then:
                self.micro_in_place(blk, a_off, j)
            with otherwise:
                with b.if_then(self.b_in_place):
                    self.pack(self.b_op, blk, self.edge_panel, j, cols)
                src = b.select(self.b_in_place, self.edge_panel, bp)
                b_off = b.select(self.b_in_place, c64(0),
                                 b.mul(q, b.mul(blk.depth, c64(self.nr))))
                self.micro(src, a_off, b_off, blk.depth)
        self.store_tile(blk, i, j, rows, cols)

    # ------------------------------------------------------------ index arithmetic

    def smin(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """Signed minimum."""
        b = self.b
        return b.select(b.icmp_signed("<", x, y), x, y)

    def smax(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """Signed maximum."""
        b = self.b
        return b.select(b.icmp_signed(">", x, y), x, y)

    def ceil_div(self, x: ir.Value, d: int | ir.Value) -> ir.Value:
        """ceil(x / d) for x >= 0, d > 0."""
        b = self.b
        d = c64(d) if isinstance(d, int) else d
        return b.udiv(b.add(x, b.sub(d, c64(1))), d)

    # ------------------------------------------------------------ packing

    def pack_b(self, blk: _KBlock, jcb: ir.Value, pcb: ir.Value, jc: ir.Value,
               ncur: ir.Value) -> ir.Value:
        """Pack B's columns ``[jc, jc + ncur)`` over K block ``blk``; returns the panel:
        the team's shared one, or this call's own."""
        b = self.b
        with b.if_else(b.and_(self.shared_b, b.icmp_signed(">", self.members, c64(1)))) \
                as (then, otherwise):
            with then:
                b.store(self.pack_shared_b(blk, jcb, pcb, jc, ncur), self.panel_slot)
            with otherwise:
                self.pack(self.b_op, blk, self.panels, jc, ncur)
                b.store(self.panels, self.panel_slot)
        return b.load(self.panel_slot)

    def pack_shared_b(self, blk: _KBlock, jcb: ir.Value, pcb: ir.Value, jc: ir.Value,
                      ncur: ir.Value) -> ir.Value:
        """Pack this member's share of B panel (jcb, pcb) into the shared buffer of its
        parity, then wait at the team's barrier until every member packed its share;
        returns the panel. Round r = jcb x k_blocks + pcb is the same in every member
        (all walk every panel and K block of the whole N), so the barrier target is
        members x (r + 1)."""
        b, nr, members = self.b, self.nr, self.members
        rnd = b.add(b.mul(jcb, self.k_blocks), pcb)
        panel = b.gep(self.panels, [b.mul(b.and_(rnd, c64(1)), b.mul(self.kc, self.nc))])
        total = self.ceil_div(ncur, nr)
        share = b.udiv(b.add(total, b.sub(members, c64(1))), members)
        q0 = self.smin(total, b.mul(self.member, share))
        q1 = self.smin(total, b.add(q0, share))
        cols = self.smax(c64(0), b.sub(self.smin(ncur, b.mul(q1, c64(nr))), b.mul(q0, c64(nr))))
        self.pack(self.b_op, blk, b.gep(panel, [b.mul(q0, b.mul(blk.depth, c64(nr)))]),
                  b.add(jc, b.mul(q0, c64(nr))), cols)
        emit_barrier(self.f.module, b, self.team, b.mul(members, b.add(rnd, c64(1))),
                     self.spins)
        return panel

    def pack(self, op: _Operand, blk: _KBlock, dst: ir.Value, outer0: ir.Value,
             outer_len: ir.Value) -> None:
        """dst[(q * depth + kk) * width + u] = op at (outer0 + q * width + u, k0 + kk)
        for micro-panels q < ceil(outer_len / width), zero past the operand's extent: by
        the kernel's callback for a computed operand, else from its view
        (``pack_view``)."""
        b = self.b
        with b.if_else(op.computed) as (then, otherwise):
            with then:
                panel0 = b.udiv(outer0, c64(op.width))     # exact (see TILE_CALLBACK)
                self.note_error(b.call(op.pack, [self.bufs, dst, blk.batch, panel0,
                                                 blk.index, blk.depth, outer_len]))
            with otherwise:
                self.pack_view(op, blk, dst, outer0, outer_len)

    def pack_view(self, op: _Operand, blk: _KBlock, dst: ir.Value, outer0: ir.Value,
                  outer_len: ir.Value) -> None:
        """``pack`` from a view. Per kk the ``width`` elements are gathered into one
        ``<width x float>`` and stored contiguously: a vector copy when the source is
        unit-stride along the width (``copy_block``), a register transpose when it is
        unit-stride along K (``pack_transposing``), else one strided load per element,
        each source line reused by the next kk. Building the vector explicitly keeps
        LLVM's loop vectorizer off the kk loop, which would otherwise turn it into
        gathers and scatters (microcoded, ~10x slower on AMD). Panels entirely inside
        the operand skip the bounds selects."""
        b, width = self.b, op.width
        panels = self.ceil_div(outer_len, width)
        full = self.smax(c64(0), self.smin(panels, b.sdiv(b.sub(op.extent, outer0),
                                                          c64(width))))
        base = blk.base(op)
        loops = self.loops

        def row(q: ir.Value) -> tuple[ir.Value, ir.Value]:
            return b.add(outer0, b.mul(q, c64(width))), b.mul(q, blk.depth)

        def transposed(q: ir.Value) -> None:
            o0, first_row = row(q)
            kfull = self.pack_transposing(op, base, blk, dst, o0, first_row)
            self.gather_loop(op, base, blk, dst, o0, first_row, kfull, False)

        def strided(q: ir.Value) -> None:
            self.gather_lines(op, base, blk, dst, *row(q))

        with b.if_else(b.icmp_signed("==", op.outer_stride, c64(1))) as (then, otherwise):
            with then:
                self.copy_block(op, base, blk, dst, outer0, full)
            with otherwise, b.if_else(b.icmp_signed("==", op.k_stride, c64(1))) \
                    as (then2, otherwise2):
                with then2:
                    loops.range(c64(0), full, transposed, "pq")
                with otherwise2:
                    loops.range(c64(0), full, strided, "pq")
        loops.range(full, panels,
                    lambda q: self.gather_loop(op, base, blk, dst, *row(q), c64(0), True), "pe")

    def copy_block(self, op: _Operand, base: ir.Value, blk: _KBlock, dst: ir.Value,
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
        start = b.add(base, outer0)

        def per_k(kk: ir.Value) -> None:
            src = b.add(start, b.mul(b.add(blk.k0, kk), op.k_stride))

            def per_panel(q: ir.Value) -> None:
                off = b.add(src, b.mul(q, c64(width)))
                slot = b.mul(b.add(b.mul(q, blk.depth), kk), c64(width))
                self.copy_line(b.gep(op.ptr, [off]), b.gep(dst, [slot]), width)
            self.loops.range(c64(0), full, per_panel, "pq")
        self.loops.range(c64(0), blk.depth, per_k, "pk")

    def copy_line(self, src: ir.Value, dst: ir.Value, width: int) -> None:
        """Copy ``width`` floats. A width that is not a whole number of vectors (MR =
        14 on AVX-512) is a ``<14 x float>`` that LLVM splits into 8 + 4 + 2-lane loads
        and stores; with 512-bit vectors the remainder is one masked load and store
        instead (AVX-512's mask registers make them single instructions; AVX2's
        ``vmaskmov`` stores are slow on AMD, so narrower vectors keep the split).
        Measured on the 2-core AVX-512 VM, one thread: a weight gradient ``dY^T X``
        (1024 x 4096 x 256), whose transposed A is packed here, ran at 96 GFLOP/s
        against 103 for the same product with A row-major."""
        b, lanes = self.b, self.lanes
        whole, rest = divmod(width, lanes)
        if lanes < 16 or not rest:
            line_ptr = ir.VectorType(F32, width).as_pointer()
            b.store(b.load(b.bitcast(src, line_ptr), align=4), b.bitcast(dst, line_ptr),
                    align=4)
            return
        for v in range(whole):
            at = c64(v * lanes)
            b.store(b.load(b.bitcast(b.gep(src, [at]), self.vptr), align=4),
                    b.bitcast(b.gep(dst, [at]), self.vptr), align=4)
        mask_ty = ir.VectorType(ir.IntType(1), lanes)
        masked_load = _declared(self.module, f"llvm.masked.load.v{lanes}f32.p0v{lanes}f32",
                                ir.FunctionType(self.vec, [self.vptr, I32, mask_ty, self.vec]))
        masked_store = _declared(self.module, f"llvm.masked.store.v{lanes}f32.p0v{lanes}f32",
                                 ir.FunctionType(ir.VoidType(), [self.vec, self.vptr, I32,
                                                                 mask_ty]))
        mask = ir.Constant(mask_ty, [u < rest for u in range(lanes)])
        at = c64(whole * lanes)
        align = ir.Constant(I32, 4)
        line = b.call(masked_load, [b.bitcast(b.gep(src, [at]), self.vptr), align, mask,
                                    self.undef])
        b.call(masked_store, [line, b.bitcast(b.gep(dst, [at]), self.vptr), align, mask])

    def element(self, op: _Operand, base: ir.Value, o: ir.Value, k: ir.Value,
                checked: bool) -> ir.Value:
        """The operand at (outer ``o``, ``k``) from its view; ``checked``: zero past its
        extent (read at outer index 0 there, so no load goes out of bounds)."""
        b = self.b
        if checked:
            inside = b.icmp_signed("<", o, op.extent)
            o = b.select(inside, o, c64(0))
        off = b.add(base, b.add(b.mul(o, op.outer_stride), b.mul(k, op.k_stride)))
        val = b.load(b.gep(op.ptr, [off]))
        return b.select(inside, val, self.zero) if checked else val

    def gather_lines(self, op: _Operand, base: ir.Value, blk: _KBlock, dst: ir.Value,
                     o0: ir.Value, first_row: ir.Value) -> None:
        """Pack a whole micro-panel element by element, each k's ``width`` elements
        built into one vector (a view strided along both the width and K)."""
        b, width = self.b, op.width
        line_ty = ir.VectorType(F32, width)
        undef = ir.Constant(line_ty, ir.Undefined)

        def per_k(kk: ir.Value) -> None:
            kidx = b.add(blk.k0, kk)
            line = undef
            for u in range(width):
                val = self.element(op, base, b.add(o0, c64(u)), kidx, False)
                line = b.insert_element(line, val, ir.Constant(I32, u))
            slot = b.mul(b.add(first_row, kk), c64(width))
            b.store(line, b.bitcast(b.gep(dst, [slot]), line_ty.as_pointer()), align=4)
        self.loops.range(c64(0), blk.depth, per_k, "pk")

    def gather_loop(self, op: _Operand, base: ir.Value, blk: _KBlock, dst: ir.Value,
                    o0: ir.Value, first_row: ir.Value, kfrom: ir.Value, checked: bool) -> None:
        """Pack k in ``[kfrom, depth)`` of a micro-panel as two loops (k, then the
        width), one element per inner iteration, neither unrolled nor vectorized (a
        vectorized width loop would gather strided sources; see ``pack_view``): the
        edge panel (``checked``) and the last few k of a transposing pack."""
        b, width = self.b, op.width
        md = self.f.not_unrolled(vectorize=False)

        def per_k(kk: ir.Value) -> None:
            kidx = b.add(blk.k0, kk)
            slot = b.mul(b.add(first_row, kk), c64(width))

            def per_u(u: ir.Value) -> None:
                val = self.element(op, base, b.add(o0, u), kidx, checked)
                b.store(val, b.gep(dst, [b.add(slot, u)]))
            self.loops.range(c64(0), c64(width), per_u, "pu", md)
        self.loops.range(kfrom, blk.depth, per_k, "pk", self.f.not_unrolled(vectorize=False))

    def pack_transposing(self, op: _Operand, base: ir.Value, blk: _KBlock, dst: ir.Value,
                         o0: ir.Value, first_row: ir.Value) -> ir.Value:
        """Pack a panel whose source is unit-stride along K (A row-major, B = W^T): per
        ``lanes`` values of k, load one vector per source row (``width`` rows, padded
        with zeros to a multiple of ``lanes``), transpose each lanes x lanes block in
        registers, and store ``lanes`` packed lines; about 0.5 instructions per element
        instead of a strided load and an insert each. Returns where the remainder
        (fewer than ``lanes`` values of k, packed element-wise) starts."""
        b, lanes = self.b, self.lanes
        assert -(-op.width // lanes) <= 2, "MR <= NR = 2 vectors"
        chunks = b.udiv(blk.depth, c64(lanes))
        self.loops.range(c64(0), chunks,
                         lambda c: self.transpose_chunk(op, base, dst, blk.k0, o0, first_row,
                                                        c), "pt")
        return b.mul(chunks, c64(lanes))

    def transpose_chunk(self, op: _Operand, base: ir.Value, dst: ir.Value, k0: ir.Value,
                        o0: ir.Value, first_row: ir.Value, c: ir.Value) -> None:
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
            off = b.add(kbase, b.mul(b.add(o0, c64(u)), op.outer_stride))
            loaded.append(b.load(b.bitcast(b.gep(op.ptr, [off]), self.vptr), align=4))
        cols = [transpose_lanes(b, loaded[g * lanes:(g + 1) * lanes]) for g in range(groups)]
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
            slot = b.mul(b.add(first_row, b.add(kk0, c64(t))), c64(width))
            b.store(line, b.bitcast(b.gep(dst, [slot]), line.type.as_pointer()), align=4)

    # ------------------------------------------------------------ the micro-kernel

    def micro(self, bp: ir.Value, a_off: ir.Value, b_off: ir.Value, kcur: ir.Value) -> None:
        """The MR x NR tile over one K block into ``accs``: zero them, then one rank-1
        update per k (``bp``: the B panel; ``a_off``/``b_off``: the micro-panels'
        offsets in the packed A block and B panel)."""
        b = self.b
        for r in range(self.mr):
            for v in range(self.nvec):
                b.store(self.zero_vec, self.accs[r][v])
        self.loops.range(c64(0), kcur, lambda kk: self.rank1_update(bp, a_off, b_off, kk), "k")

    def micro_in_place(self, blk: _KBlock, a_off: ir.Value, j: ir.Value) -> None:
        """``micro`` for a B read in place: line ``kk`` of the micro-panel is the NR
        floats at column ``j`` of B's row ``k0 + kk``, ``b_ptr[base + rows[k0 + kk] +
        j]``. A shifted-window stack's rows are ranges of one padded image a float or a
        row apart, so consecutive lines share cache lines and the image stays in L2:
        reading them where they are costs the micro-kernel little, while packing them
        copied K x N floats per product (the convolutions' B operands; ~8% of a 5x5's
        forward and backward)."""
        b = self.b
        for r in range(self.mr):
            for v in range(self.nvec):
                b.store(self.zero_vec, self.accs[r][v])
        start = b.add(blk.base(self.b_op), j)
        rows = b.gep(self.b_rows, [blk.k0])

        def update(kk: ir.Value) -> None:
            at = b.add(start, b.load(b.gep(rows, [kk])))
            self.rank1_update(self.b_op.ptr, a_off, at, kk, step=0)
        self.loops.range(c64(0), blk.depth, update, "k")

    def rank1_update(self, bp: ir.Value, a_off: ir.Value, b_off: ir.Value,
                     kk: ir.Value, step: int | None = None) -> None:
        """accs += A[:, kk] B[kk, :]: load the NR-wide line of B (of the packed
        micro-panel: at ``b_off + kk NR``; in place, ``step=0``: at ``b_off``) as
        vectors, broadcast each of the MR elements of the A micro-panel's line, FMA."""
        b, mr, nr, lanes = self.b, self.mr, self.nr, self.lanes
        bbase = b.add(b_off, b.mul(kk, c64(nr if step is None else step)))
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
        last_row = b.sub(m, c64(1))
        for r in range(self.mr):
            row = self.smin(b.add(i, c64(r)), last_row)
            off = b.add(b.mul(b.add(b.mul(batch, m), row), n), j)
            for v in range(0, self.nr, 16):
                ptr = b.bitcast(b.gep(self.out, [b.add(off, c64(v))]), PTR)
                b.call(self.prefetch, [ptr, ir.Constant(I32, 1), ir.Constant(I32, 3),
                                       ir.Constant(I32, 1)])

    # ------------------------------------------------------------ storing C

    def store_tile(self, blk: _KBlock, i: ir.Value, j: ir.Value, rows: ir.Value,
                   cols: ir.Value) -> None:
        """Add the accumulators to C[i:i+rows, j:j+cols] (or store them on the first
        K block); on the last K block of a product with an epilogue, hand the finished
        sums to the kernel's epilogue instead. Full tiles take vectors, edge tiles
        element by element."""
        b, mr, nr = self.b, self.mr, self.nr
        row0 = b.mul(b.add(b.mul(blk.batch, self.m), i), self.n)   # offset of C[i, 0]
        full = b.and_(b.icmp_signed("==", rows, c64(mr)), b.icmp_signed("==", cols, c64(nr)))
        plain = b.or_(self.direct, b.not_(blk.last))
        with b.if_else(plain) as (then, otherwise):
            with then, b.if_else(full) as (then2, otherwise2):
                with then2:
                    self.add_vectors(row0, j, blk.first)
                with otherwise2:
                    self.add_elements(row0, j, blk.first, rows, cols)
            with otherwise:
                self.finish_tile(blk, row0, i, j, rows, cols, full)

    def line(self, row0: ir.Value, j: ir.Value, r: int, v: int) -> ir.Value:
        """The address of vector ``v`` of row ``r`` of the full tile at C[i, j]."""
        b = self.b
        off = b.add(b.add(row0, b.mul(c64(r), self.n)), b.add(j, c64(v * self.lanes)))
        return b.bitcast(b.gep(self.out, [off]), self.vptr)

    def add_vectors(self, row0: ir.Value, j: ir.Value, first: ir.Value) -> None:
        """A full tile: C's MR x NR lines = the accumulators (the first K block), else
        += them, one vector each."""
        b = self.b
        with b.if_else(first) as (then, otherwise):
            with then:
                for r in range(self.mr):
                    for v in range(self.nvec):
                        b.store(b.load(self.accs[r][v]), self.line(row0, j, r, v), align=4)
            with otherwise:
                for r in range(self.mr):
                    for v in range(self.nvec):
                        ptr = self.line(row0, j, r, v)
                        old = b.load(ptr, align=4)
                        b.store(b.fadd(b.load(self.accs[r][v]), old), ptr, align=4)

    def spill_accumulators(self) -> None:
        """The accumulator vectors into the MR x NR ``tile`` buffer, to be read by index."""
        b, nr, lanes = self.b, self.nr, self.lanes
        for r in range(self.mr):
            for v in range(self.nvec):
                b.store(b.load(self.accs[r][v]), b.bitcast(
                    b.gep(self.tile, [c64(r * nr + v * lanes)]), self.vptr), align=4)

    def edge_loops(self, n_rows: ir.Value, n_cols: ir.Value,
                   body: Callable[[ir.Value, ir.Value], None]) -> None:
        """``body(r, jj)`` over an edge tile's rows and columns: scalar loops, neither
        unrolled nor vectorized (``Frame.not_unrolled``)."""
        loops, f = self.loops, self.f
        loops.range(c64(0), n_rows,
                    lambda r: loops.range(c64(0), n_cols, lambda jj: body(r, jj), "ej",
                                          f.not_unrolled(vectorize=False)),
                    "er", f.not_unrolled(vectorize=False))

    def add_elements(self, row0: ir.Value, j: ir.Value, first: ir.Value, n_rows: ir.Value,
                     n_cols: ir.Value) -> None:
        """An edge tile: C[i:i+n_rows, j:j+n_cols] (+)= the accumulators, element by
        element."""
        b, n, nr = self.b, self.n, self.nr
        self.spill_accumulators()

        def per_element(r: ir.Value, jj: ir.Value) -> None:
            ptr = b.gep(self.out, [b.add(b.add(row0, b.mul(r, n)), b.add(j, jj))])
            value = b.load(b.gep(self.tile, [b.add(b.mul(r, c64(nr)), jj)]))
            b.store(b.select(first, value, b.fadd(value, b.load(ptr))), ptr)
        self.edge_loops(n_rows, n_cols, per_element)

    def finish_tile(self, blk: _KBlock, row0: ir.Value, i: ir.Value, j: ir.Value,
                    rows: ir.Value, cols: ir.Value, full: ir.Value) -> None:
        """The last K block of a product with an epilogue: the finished sums -- the
        accumulators plus, past the first K block, the partial sums in C -- into the
        ``tile`` buffer, then the kernel's epilogue stores them."""
        b, n, nr = self.b, self.n, self.nr
        with b.if_else(full) as (then, otherwise):
            with then:
                with b.if_then(b.not_(blk.first)):
                    for r in range(self.mr):
                        for v in range(self.nvec):
                            acc = self.accs[r][v]
                            old = b.load(self.line(row0, j, r, v), align=4)
                            b.store(b.fadd(b.load(acc), old), acc)
                self.spill_accumulators()
            with otherwise:
                self.spill_accumulators()

                def add_partial(r: ir.Value, jj: ir.Value) -> None:
                    slot = b.gep(self.tile, [b.add(b.mul(r, c64(nr)), jj)])
                    old = b.load(b.gep(self.out, [b.add(b.add(row0, b.mul(r, n)),
                                                        b.add(j, jj))]))
                    b.store(b.fadd(b.load(slot), old), slot)
                with b.if_then(b.not_(blk.first)):
                    self.edge_loops(rows, cols, add_partial)
        self.note_error(b.call(self.epilogue, [self.bufs, self.tile, blk.batch,
                                               b.udiv(i, c64(self.mr)),
                                               b.udiv(j, c64(self.nr)), rows, cols]))


class TiledKernel:
    """A ``tiled`` kernel: its entry fills the driver's parameter block (``GEMM_PARAMS``)
    and calls the shared driver (``GemmDriver``); what is its own are two kinds of
    internal functions the driver calls back: the fused epilogue (unless C is the
    product itself) and the packing of an operand that is computed rather than read
    through a view."""

    def __init__(self, e: Emitter):
        self.e, self.b = e, e.b
        self.plan = e.plan
        s = e.plan.schedule
        mm = contraction(e.fusion)
        self.product = mm.results[0]
        out_shape = shape_of(self.product)
        self.batch_shape = out_shape[:-2]
        self.a_value, self.b_value = mm.operands
        self.m, self.k = shape_of(self.a_value)[-2:]
        self.n = out_shape[-1]
        self.schedule = s
        self.mr, self.nr, nc = s.tile
        # MC and NC are multiples of MR and NR (``configurator``), so every tile and
        # panel starts at a multiple of the register tile (``TILE_CALLBACK``)
        self.kc = max(s.kc, 1)
        self.mc = max(s.mc // self.mr * self.mr, self.mr)
        self.nc = max(nc // self.nr * self.nr, self.nr)

    def body(self) -> None:
        """The entry: the parameter block, then the driver's call (its error flag is
        the kernel's)."""
        e, b = self.e, self.b
        params = e.entry_alloca(I64, len(GEMM_PARAMS))

        def put(name: str, value: int | ir.Value) -> None:
            v = c64(value) if isinstance(value, int) else value
            b.store(v, b.gep(params, [c64(_WORD[name])]))

        def address(ptr: ir.Value) -> ir.Value:
            return b.ptrtoint(ptr, I64)

        s = self.schedule
        for name, value in (("m", self.m), ("n", self.n), ("k", self.k), ("kc", self.kc),
                            ("mc", self.mc), ("nc", self.nc),
                            ("split_n", int(s.split == "n")), ("shared_b", int(s.shared_b)),
                            ("start", e.fn.args[1]), ("end", e.fn.args[2]),
                            ("out", address(e.out_ptr)),
                            ("scratch", address(e.ptrs[-1]) if self.plan.scratch else 0),
                            ("bufs", address(e.fn.args[0])),
                            ("batch_rank", len(self.batch_shape)),
                            ("batch_shape", self.int_array(self.batch_shape))):
            put(name, value)
        put("epilogue", 0 if e.root is self.product else address(self.epilogue_function()))
        rank = len(self.batch_shape)
        put("b_rows", 0)
        for prefix, value, is_a in (("a", self.a_value, True), ("b", self.b_value, False)):
            view = address_view(e, value)
            if view is None:     # (batch strides all 0: the driver reads them regardless)
                table = None if is_a else b_table(e.plan, value, rank)
                pack = (self.table_pack_function(prefix, table) if table is not None
                        else self.pack_function(prefix, value, is_a))
                put(f"{prefix}_pack", address(pack))
                for word in ("ptr", "offset", "outer", "k"):
                    put(f"{prefix}_{word}", 0)
                put(f"{prefix}_batch", self.int_array((0,) * rank))
                if table is not None and s.b_in_place:
                    if not reads_in_place(table, rank):
                        raise AssertionError(f"{self.plan.name}: scheduled to read B in "
                                             "place, which is not unit-stride table rows")
                    # B's rows read where they are (``GemmDriver.micro_in_place``); the
                    # table packing stays for edge micro-panels
                    put("b_ptr", address(e.ptrs[table.arg]))
                    put("b_outer", 1)
                    put("b_batch", self.int_array(table.dims[:rank]))
                    put("b_rows", address(self.table_global(prefix, "k", table.dims[rank])))
                continue
            outer_dim, k_dim = (rank, rank + 1) if is_a else (rank + 1, rank)
            put(f"{prefix}_pack", 0)
            put(f"{prefix}_ptr", address(e.ptrs[view.arg]))
            put(f"{prefix}_offset", view.offset)
            put(f"{prefix}_outer", view.strides[outer_dim])
            put(f"{prefix}_k", view.strides[k_dim])
            put(f"{prefix}_batch", self.int_array(view.strides[:rank]))
        driver = _declared(e.module, driver_name(self.mr, self.nr), DRIVER_TYPE)
        flag = b.call(driver, [params])
        b.store(b.or_(b.load(e.error), flag), e.error)

    def int_array(self, values: Sequence[int]) -> int | ir.Value:
        """The address of an i64 array holding ``values`` (in the entry's frame: the
        driver runs inside the call), or 0 for none."""
        if not values:
            return 0
        e, b = self.e, self.b
        array = e.entry_alloca(I64, len(values))
        for i, v in enumerate(values):
            b.store(c64(v), b.gep(array, [c64(i)]))
        return b.ptrtoint(array, I64)

    def epilogue_function(self) -> ir.Function:
        """The internal function storing a tile of C through the fused epilogue
        (``TILE_CALLBACK``), element by element: a full tile's loops have constant trip
        counts and no branches, so LLVM vectorizes the fused epilogue along the row; an
        edge tile's stay scalar. Neither is unrolled (``Frame.not_unrolled``)."""
        e = Emitter(self.e.module, self.plan, name=f"{self.plan.name}.epilogue",
                    params=(("tile", F32.as_pointer()), ("batch", I64), ("ti", I64),
                            ("tj", I64), ("rows", I64), ("cols", I64)))
        b = e.b
        tile, batch, ti, tj, rows, cols = e.fn.args[1:]
        tile.add_attribute("noalias")      # the driver's own buffer: no input is behind it
        m, n, mr, nr = self.m, self.n, self.mr, self.nr
        i, j = b.mul(ti, c64(mr)), b.mul(tj, c64(nr))
        row0 = b.mul(b.add(b.mul(batch, c64(m)), i), c64(n))   # offset of C[i, 0]
        full = b.and_(b.icmp_signed("==", rows, c64(mr)), b.icmp_signed("==", cols, c64(nr)))

        out_shape = tuple(self.plan.out[0])
        # The output's leading index per row, when the epilogue's reshapes only regroup
        # the rows (a (B*T, N) product stored as (B, T, N)): delinearized once per row,
        # not from each element's offset (a udiv/urem by T*N and T per element kept the
        # write-back scalar: a bias epilogue cost a 2048 x 384 x 128 product 30%).
        by_row = len(out_shape) >= 1 and out_shape[-1] == n

        def write(n_rows: ir.Value, n_cols: ir.Value, full: bool) -> None:
            def per_row(r: ir.Value) -> None:
                lead = (e.delinearize(b.add(b.mul(batch, c64(m)), b.add(i, r)), out_shape[:-1])
                        if by_row else None)

                def per_col(jj: ir.Value) -> None:
                    e.cache = {}
                    off = b.add(b.add(row0, b.mul(r, c64(n))), b.add(j, jj))
                    value = e.tagged(b.load(b.gep(tile, [b.add(b.mul(r, c64(nr)), jj)])))
                    _store_with_product(e, self.product, value, off,
                                        lead + [b.add(j, jj)] if by_row else None)
                e.loops.range(c64(0), n_cols, per_col, "ej", e.not_unrolled(full))
            e.loops.range(c64(0), n_rows, per_row, "er", e.not_unrolled(full))

        with b.if_else(full) as (then, otherwise):
            # Iteration (r, jj) writes C[r, jj] and reads an input overlaid by C
            # (``step_memory.pointwise_inputs``) only there, so the loops are declared
            # independent: otherwise the vectorizer's run-time overlap check fails for
            # a product written over its epilogue's input (a residual, a saved
            # activation) and every tile's write-back runs its scalar loop (measured:
            # the GELU backward as the epilogue of a 4096 x 256 x 1024 product, 35.7 ms
            # a call, 11.7 ms with the loops declared independent; the product alone
            # 8.1 ms).
            with then, e.independent_iterations():
                write(c64(mr), c64(nr), True)
            with otherwise:
                write(rows, cols, False)
        e.finish_kernel()
        return e.fn

    def pack_function(self, prefix: str, value: SSAValue, is_a: bool) -> ir.Function:
        """The internal function packing a computed operand (``TILE_CALLBACK``) as the
        driver packs a view (``GemmDriver.pack``), evaluating it through the emitter:
        the panels inside the operand with each k's ``width`` elements built into one
        vector, the edge panel (past M or N) with a bounds-checked loop."""
        e = Emitter(self.e.module, self.plan, name=f"{self.plan.name}.pack_{prefix}",
                    params=(("dst", F32.as_pointer()), ("batch", I64), ("panel0", I64),
                            ("kblock", I64), ("depth", I64), ("outer_len", I64)))
        b = e.b
        dst, batch, panel0, kblock, depth, outer_len = e.fn.args[1:]
        dst.add_attribute("noalias")       # the driver's packed block, written only here
        width, extent = (self.mr, self.m) if is_a else (self.nr, self.n)
        outer0 = b.mul(panel0, c64(width))
        k0 = b.mul(kblock, c64(self.kc))
        pre = e.delinearize(batch, self.batch_shape) if self.batch_shape else []
        line_ty = ir.VectorType(F32, width)

        def at(o: ir.Value, k: ir.Value, checked: bool) -> ir.Value:
            if checked:
                inside = b.icmp_signed("<", o, c64(extent))
                o = b.select(inside, o, c64(0))
            val = e.emit(value, pre + ([o, k] if is_a else [k, o]))
            return b.select(inside, val, ir.Constant(F32, 0.0)) if checked else val

        def panel_lines(q: ir.Value) -> None:
            o0 = b.add(outer0, b.mul(q, c64(width)))

            def per_k(kk: ir.Value) -> None:
                e.cache = {}
                kidx = b.add(k0, kk)
                line = ir.Constant(line_ty, ir.Undefined)
                for u in range(width):
                    line = b.insert_element(line, at(b.add(o0, c64(u)), kidx, False),
                                            ir.Constant(I32, u))
                slot = b.mul(b.add(b.mul(q, depth), kk), c64(width))
                b.store(line, b.bitcast(b.gep(dst, [slot]), line_ty.as_pointer()), align=4)
            e.loops.range(c64(0), depth, per_k, "pk")

        def edge_panel(q: ir.Value) -> None:
            o0 = b.add(outer0, b.mul(q, c64(width)))

            def per_k(kk: ir.Value) -> None:
                kidx = b.add(k0, kk)
                slot = b.mul(b.add(b.mul(q, depth), kk), c64(width))

                def per_u(u: ir.Value) -> None:
                    e.cache = {}
                    b.store(at(b.add(o0, u), kidx, True), b.gep(dst, [b.add(slot, u)]))
                e.loops.range(c64(0), c64(width), per_u, "pu", e.not_unrolled(vectorize=False))
                e.cache = {}    # values of the width loop do not dominate what follows
            e.loops.range(c64(0), depth, per_k, "pk", e.not_unrolled(vectorize=False))

        panels = b.udiv(b.add(outer_len, c64(width - 1)), c64(width))
        inside = b.sdiv(b.sub(c64(extent), outer0), c64(width))
        full = b.select(b.icmp_signed("<", panels, inside), panels, inside)
        full = b.select(b.icmp_signed(">", full, c64(0)), full, c64(0))
        e.loops.range(c64(0), full, panel_lines, "pq")
        e.loops.range(full, panels, edge_panel, "pe")
        e.finish_kernel()
        return e.fn


    def table_global(self, prefix: str, which: str, values: tuple[int, ...]) -> ir.GlobalVariable:
        """The kernel module's constant i64 array ``values`` (a table view's offsets
        along one dim), made once per name."""
        module = self.e.module
        name = f"{self.plan.name}.{prefix}_{which}"
        if name in module.globals:
            return module.globals[name]
        g = ir.GlobalVariable(module, ir.ArrayType(I64, len(values)), name=name)
        g.initializer = ir.Constant(ir.ArrayType(I64, len(values)), list(values))
        g.global_constant = True
        g.linkage = "internal"
        return g

    def table_pack_function(self, prefix: str, view: TableView) -> ir.Function:
        """The packing callback (``TILE_CALLBACK``) of a B operand read through a table
        (``b_table``), element ``(k, n)`` at ``term_K(k) + term_N(n)`` of its
        argument (plus the batch's offset): a window stack (im2col) packed straight
        from the padded input. Unit stride along N: each packed line is one contiguous
        ``NR``-float load at the line's row start (the forward's windows). Unit stride
        along K: the ``NR`` columns' starts are looked up once per panel, then per
        ``lanes`` values of k one vector per column, transposed in registers as the
        driver's ``pack_transposing`` does (the weight gradient's, whose B is the
        stack transposed). Edge panels (past N) go element by element, bounds-checked.
        The tables are constants of the kernel's module."""
        e = Emitter(self.e.module, self.plan, name=f"{self.plan.name}.pack_{prefix}",
                    params=(("dst", F32.as_pointer()), ("batch", I64), ("panel0", I64),
                            ("kblock", I64), ("depth", I64), ("outer_len", I64)))
        b = e.b
        dst, batch, panel0, kblock, depth, outer_len = e.fn.args[1:]
        dst.add_attribute("noalias")
        nr, n = self.nr, self.n
        lanes = nr // 2
        rank = len(self.batch_shape)
        src = e.ptrs[view.arg]
        k_term, n_term = view.dims[rank:]
        base = c64(0)
        if rank:
            for i, term in zip(e.delinearize(batch, self.batch_shape), view.dims[:rank]):
                base = b.add(base, b.mul(i, c64(term)))
        outer0 = b.mul(panel0, c64(nr))
        k0 = b.mul(kblock, c64(self.kc))
        vec = ir.VectorType(F32, lanes)
        line_ty = ir.VectorType(F32, nr)

        def lookup(which: str, t: int | tuple[int, ...], i: ir.Value) -> ir.Value:
            if isinstance(t, int):
                return b.mul(i, c64(t))
            g = self.table_global(prefix, which, t)
            return b.load(b.gep(g, [ir.Constant(I32, 0), i]))

        def k_offset(k: ir.Value) -> ir.Value:
            return lookup("k", k_term, k)

        def n_offset(o: ir.Value) -> ir.Value:
            return lookup("n", n_term, o)

        def slot(q: ir.Value, kk: ir.Value) -> ir.Value:
            return b.mul(b.add(b.mul(q, depth), kk), c64(nr))

        def rows(q: ir.Value) -> None:          # unit stride along N
            o0 = b.add(outer0, b.mul(q, c64(nr)))

            def per_k(kk: ir.Value) -> None:
                at = b.add(base, b.add(k_offset(b.add(k0, kk)), o0))
                line = b.load(b.bitcast(b.gep(src, [at]), line_ty.as_pointer()), align=4)
                b.store(line, b.bitcast(b.gep(dst, [slot(q, kk)]), line_ty.as_pointer()),
                        align=4)
            e.loops.range(c64(0), depth, per_k, "pk", e.not_unrolled(vectorize=False))

        def columns(q: ir.Value) -> None:       # unit stride along K
            o0 = b.add(outer0, b.mul(q, c64(nr)))
            starts = [b.add(base, b.add(n_offset(b.add(o0, c64(u))), k0)) for u in range(nr)]
            chunks = b.udiv(depth, c64(lanes))

            def chunk(c: ir.Value) -> None:
                kk0 = b.mul(c, c64(lanes))
                loaded = [b.load(b.bitcast(b.gep(src, [b.add(st, kk0)]), vec.as_pointer()),
                                 align=4) for st in starts]
                halves = [transpose_lanes(b, loaded[h * lanes:(h + 1) * lanes])
                          for h in range(2)]
                join = ir.Constant(ir.VectorType(I32, nr), list(range(nr)))
                for t in range(lanes):
                    line = b.shuffle_vector(halves[0][t], halves[1][t], join)
                    b.store(line, b.bitcast(b.gep(dst, [slot(q, b.add(kk0, c64(t)))]),
                                            line_ty.as_pointer()), align=4)
            e.loops.range(c64(0), chunks, chunk, "pt", e.not_unrolled(vectorize=False))

            def rest(kk: ir.Value) -> None:
                for u, st in enumerate(starts):
                    v = b.load(b.gep(src, [b.add(st, kk)]))
                    b.store(v, b.gep(dst, [b.add(slot(q, kk), c64(u))]))
            e.loops.range(b.mul(chunks, c64(lanes)), depth, rest, "pr",
                          e.not_unrolled(vectorize=False))

        def edge(q: ir.Value) -> None:
            o0 = b.add(outer0, b.mul(q, c64(nr)))

            def per_k(kk: ir.Value) -> None:
                row = b.add(base, k_offset(b.add(k0, kk)))

                def per_u(u: ir.Value) -> None:
                    o = b.add(o0, u)
                    inside = b.icmp_signed("<", o, c64(n))
                    at = b.add(row, n_offset(b.select(inside, o, c64(0))))
                    v = b.select(inside, b.load(b.gep(src, [at])), ir.Constant(F32, 0.0))
                    b.store(v, b.gep(dst, [b.add(slot(q, kk), u)]))
                e.loops.range(c64(0), c64(nr), per_u, "pu", e.not_unrolled(vectorize=False))
            e.loops.range(c64(0), depth, per_k, "pk", e.not_unrolled(vectorize=False))

        panels = b.udiv(b.add(outer_len, c64(nr - 1)), c64(nr))
        inside = b.sdiv(b.sub(c64(n), outer0), c64(nr))
        full = b.select(b.icmp_signed("<", panels, inside), panels, inside)
        full = b.select(b.icmp_signed(">", full, c64(0)), full, c64(0))
        e.loops.range(c64(0), full, rows if n_term == 1 else columns, "pq")
        e.loops.range(full, panels, edge, "pe")
        e.finish_kernel()
        return e.fn


def matmul_rows(e: Emitter) -> None:
    """The ``ikj`` and ``dot`` strategies (``RowGemm``)."""
    RowGemm(e).body()


def matmul_tiled(e: Emitter) -> None:
    """The ``tiled`` strategy (``TiledKernel``, calling ``GemmDriver``)."""
    TiledKernel(e).body()


__all__ = ["GEMM_PARAMS", "GemmDriver", "RowGemm", "TiledKernel", "driver_module",
           "driver_name", "matmul_rows", "matmul_tiled"]
