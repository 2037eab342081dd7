"""CUDA C for kernel plans: the CUDA backend's last stage.

``generate(plan, spec)`` turns one ``KernelPlan`` (the same plans the CPU backend
compiles) into a self-contained CUDA C module for NVRTC. The kernel is
``extern "C" __global__ void <name>(in0, ..., out[, scratch])``: pointers to the inputs,
the output and (for column reductions) the scratch buffer, in the CPU backend's order.
Launch geometry comes from ``cuda_configurator.configure`` and travels with the source.

Kernel bodies, by strategy:
- ``grid_stride`` (elementwise): each thread computes ``vec`` consecutive outputs per
  grid-stride step; every value is evaluated through ``CEmitter`` (index arithmetic for
  movement ops, no copies).
- ``warp_per_row`` / ``block_per_row`` (softmax, log_softmax, layer_norm,
  cross_entropy, suffix reductions): per row, one pass per reduction combining in
  registers, then a butterfly of ``__shfl_xor_sync`` (and a shared-memory exchange of
  per-warp partials for block rows), so every thread holds the row's total; then a
  pass writing the row's outputs. Accumulators follow ``accumulator_dtype`` (float sums
  in double), as the CPU backend.
- ``column`` (reductions keeping an inner axis): 32 x 8 blocks, partials met in shared
  memory.
- ``lines`` (scatter_add): a warp per output line along the scatter dim; the lanes copy
  the line, then lane 0 adds the updates in index order: deterministic, no atomics.
- ``mma_tf32`` (float32/float16/bfloat16 matmul): block tile BM x BN x BK in a
  ``stages``-deep shared-memory ring; warps own MI x NI tiles of
  ``mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32``; operands that are strided views of a
  buffer with 16-byte aligned 4-element chunks (plain, transposed, batch-broadcast,
  reshaped) arrive by ``cp.async`` (zero-filled at the edges), others (computed values,
  misaligned views, half types) by plain loads through the emitter into the same ring;
  the accumulators go through shared memory to a rolled, coalesced epilogue loop.
- ``simt`` (float64/integer matmul): 16 x 16 shared-memory tiles, one output per thread.

Index errors (gather, scatter_add) and integer division by zero set the module global
``nova_error_flag`` (see ``cuda_prelude``); indices are clamped so no access strays.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace

from xdsl.ir import BlockArgument, Operation, SSAValue

from nova.compiler.codegen.cuda_emit import (
    COMPUTE,
    STORAGE,
    CEmitter,
    mlir_of,
    prod,
    shape_of,
)
from nova.compiler.codegen.cuda_prelude import PRELUDE
from nova.compiler.cuda_configurator import A_PAD, B_PAD, C_PAD, LaunchConfig, configure
from nova.compiler.cuda_device import CudaSpec
from nova.compiler.lowering.plan import (
    KernelPlan,
    accumulator_dtype,
    contraction,
    reductions,
)

CUDA_FORMAT_VERSION = 1   # bump when generated CUDA code changes meaning


@dataclass(frozen=True)
class CudaKernel:
    """A generated kernel: source, entry point and launch geometry."""

    name: str
    source: str
    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int          # dynamic shared memory per block
    arg_order: tuple[str, ...]  # "in0", ..., "out"[, "scratch"]
    config: LaunchConfig

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()


# ---------------------------------------------------------------- reductions

def _reduce_init(acc_mlir: str, is_sum: bool) -> str:
    if acc_mlir == "i1":
        return "false"
    if is_sum:
        return "0" if acc_mlir in ("i32", "i64") else ("0.0" if acc_mlir == "f64" else "0.0f")
    if acc_mlir == "i32":
        return "(-2147483647 - 1)"
    if acc_mlir == "i64":
        return "(-9223372036854775807LL - 1)"
    return "-__longlong_as_double(0x7ff0000000000000LL)" if acc_mlir == "f64" else \
        "-__int_as_float(0x7f800000)"


def _combine(acc_mlir: str, is_sum: bool, a: str, b: str) -> str:
    if acc_mlir == "i1":
        return f"({a} || {b})"
    return f"({a} + {b})" if is_sum else f"nv_max({a}, {b})"


def _shuffle(acc_mlir: str, v: str, offset: str) -> str:
    if acc_mlir == "i1":
        return f"(__shfl_xor_sync(0xffffffffu, (int){v}, {offset}) != 0)"
    return f"__shfl_xor_sync(0xffffffffu, {v}, {offset})"


class _Reduction:
    """One reduction's accumulator: type, identity and combine."""

    def __init__(self, red: Operation):
        self.op = red
        self.is_sum = red.name == "nova.reduce_sum"
        self.acc = accumulator_dtype(red).mlir
        self.ctype = COMPUTE[self.acc]
        self.x = red.operands[0]

    def combine(self, a: str, b: str) -> str:
        return _combine(self.acc, self.is_sum, a, b)


def _warp_allreduce(e: CEmitter, r: _Reduction, acc: str) -> None:
    e.line(f"for (int o = 16; o > 0; o >>= 1) {acc} = "
           f"{r.combine(acc, _shuffle(r.acc, acc, 'o'))};")


def _block_allreduce(e: CEmitter, r: _Reduction, acc: str) -> None:
    """Warp butterflies, then every thread combines the per-warp partials in order (the
    same order in every thread, so all get the identical total)."""
    _warp_allreduce(e, r, acc)
    part = f"reinterpret_cast<{r.ctype}*>(nv_smem)"
    e.line(f"if ((threadIdx.x & 31) == 0) {part}[threadIdx.x >> 5] = {acc};")
    e.line("__syncthreads();")
    e.line(f"{acc} = {part}[0];")
    e.line(f"for (int w = 1; w < (int)(blockDim.x >> 5); ++w) {acc} = "
           f"{r.combine(acc, f'{part}[w]')};")
    e.line("__syncthreads();")


def _rows(e: CEmitter, cfg: LaunchConfig) -> None:
    """Warp- or block-per-row kernels: reductions over a suffix of axes, each pass
    reading earlier reductions as row scalars, then the row's outputs."""
    plan = e.plan
    reds = [_Reduction(r) for r in (reductions(e.fusion) if plan.kind == "rows"
                                    else [contraction(e.fusion)])]
    x_shape = shape_of(reds[0].x)
    n_kept = len(x_shape) - len(plan.schedule.reduced)
    kept_shape, row_shape = x_shape[:n_kept], x_shape[n_kept:]
    rows, length = prod(kept_shape), prod(row_shape)
    warp = cfg.strategy == "warp_per_row"
    if warp:
        e.line("const int lane = threadIdx.x & 31;")
        start, step = "(((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5)", \
            "((i64)gridDim.x * (blockDim.x >> 5))"
        j0, js = "lane", "32"
    else:
        start, step = "(i64)blockIdx.x", "(i64)gridDim.x"
        j0, js = "threadIdx.x", "blockDim.x"
    per_row_output = prod(shape_of(e.root)) == rows
    with e.scope(f"for (i64 row = {start}; row < {rows}LL; row += {step})"):
        kidx = e.delinearize("row", kept_shape)
        for k, r in enumerate(reds):
            acc = f"acc{k}"
            e.line(f"{r.ctype} {acc} = {_reduce_init(r.acc, r.is_sum)};")
            with e.scope(f"for (i64 j = {j0}; j < {length}LL; j += {js})"):
                ridx = e.delinearize("j", row_shape)
                v = e.emit(r.x, kidx + ridx)
                if mlir_of(r.x) != r.acc:
                    v = e.cast(v, mlir_of(r.x), r.acc)
                e.line(f"{acc} = {r.combine(acc, v)};")
            (_warp_allreduce if warp else _block_allreduce)(e, r, acc)
            total = e.fresh(COMPUTE[mlir_of(r.op.results[0])],
                            e.cast(acc, r.acc, mlir_of(r.op.results[0])), "red")
            e.override[id(r.op.results[0])] = total
        if per_row_output:
            with e.scope("if (lane == 0)" if warp else "if (threadIdx.x == 0)"):
                e.store_root("row")
        else:
            with e.scope(f"for (i64 j = {j0}; j < {length}LL; j += {js})"):
                e.store_root(f"row * {length}LL + j")
        for r in reds:
            del e.override[id(r.op.results[0])]


def _column(e: CEmitter, cfg: LaunchConfig) -> None:
    """Column reduction: thread (x, y) sums positions y, y + 8, ... of the reduced axes
    for output blockIdx.x * 32 + x; the 8 partials meet in shared memory."""
    plan = e.plan
    r = _Reduction(contraction(e.fusion))
    x_shape = shape_of(r.x)
    axes = plan.schedule.reduced
    kept = [d for d in range(len(x_shape)) if d not in axes]
    kept_shape = tuple(x_shape[d] for d in kept)
    red_shape = tuple(x_shape[d] for d in axes)
    outputs, length = prod(kept_shape), prod(red_shape)
    bx, by = cfg.block[0], cfg.block[1]
    e.line(f"const i64 oi = (i64)blockIdx.x * {bx} + threadIdx.x;")
    e.line(f"{r.ctype} acc = {_reduce_init(r.acc, r.is_sum)};")
    with e.scope(f"if (oi < {outputs}LL)"):
        kidx = e.delinearize("oi", kept_shape)
        with e.scope(f"for (i64 t = threadIdx.y; t < {length}LL; t += {by})"):
            ridx = e.delinearize("t", red_shape)
            idx = [""] * len(x_shape)
            for d, v in zip(kept, kidx):
                idx[d] = v
            for d, v in zip(axes, ridx):
                idx[d] = v
            v = e.emit(r.x, idx)
            if mlir_of(r.x) != r.acc:
                v = e.cast(v, mlir_of(r.x), r.acc)
            e.line(f"acc = {r.combine('acc', v)};")
    part = f"reinterpret_cast<{r.ctype}*>(nv_smem)"
    e.line(f"{part}[threadIdx.y * {bx} + threadIdx.x] = acc;")
    e.line("__syncthreads();")
    with e.scope(f"if (threadIdx.y == 0 && oi < {outputs}LL)"):
        e.line(f"for (int y = 1; y < {by}; ++y) acc = "
               f"{r.combine('acc', f'{part}[y * {bx} + threadIdx.x]')};")
        res = mlir_of(r.op.results[0])
        total = e.fresh(COMPUTE[res], e.cast("acc", r.acc, res), "red")
        e.override[id(r.op.results[0])] = total
        e.store_root("oi")
        del e.override[id(r.op.results[0])]


# ---------------------------------------------------------------- elementwise, scatter

def _elementwise(e: CEmitter, cfg: LaunchConfig) -> None:
    shape, dtype = e.plan.out
    numel = max(prod(shape), 1)
    vec = cfg.vec
    with e.scope(f"for (i64 base = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * {vec}; "
                 f"base < {numel}LL; base += (i64)gridDim.x * blockDim.x * {vec})"):
        e.line("#pragma unroll")
        with e.scope(f"for (int u = 0; u < {vec}; ++u)"):
            flat = e.fresh("i64", "base + u", "e")
            e.store(e.emit(e.root, e.delinearize(flat, shape)), "out", flat, dtype.mlir)


def _scatter(e: CEmitter, cfg: LaunchConfig) -> None:
    """A warp per output line along the scatter dim: the 32 lanes copy the line, then
    lane 0 adds the line's updates in index order (duplicates in the index hit the same
    element one after another: deterministic, no atomics)."""
    sc = contraction(e.fusion)
    base, index, src = sc.operands
    d = sc.dim.value.data
    out_shape, out_dtype = e.plan.out
    mlir = out_dtype.mlir
    ishape = shape_of(index)
    other = [k for k in range(len(out_shape)) if k != d]
    other_shape = tuple(out_shape[k] for k in other)
    lines = max(prod(other_shape), 1)
    e.line("const int lane = threadIdx.x & 31;")
    with e.scope(f"for (i64 line = (((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5); "
                 f"line < {lines}LL; line += ((i64)gridDim.x * (blockDim.x >> 5)))"):
        coords = e.delinearize("line", other_shape)

        def full(t: str) -> list[str]:
            idx = [""] * len(out_shape)
            for k, c in zip(other, coords):
                idx[k] = c
            idx[d] = t
            return idx

        with e.scope(f"for (i64 t = lane; t < {out_shape[d]}LL; t += 32)"):
            idx = full("t")
            e.store(e.emit(base, idx), "out", e.linear(idx, out_shape), mlir)
        e.line("__syncwarp();")
        inside = " && ".join(f"{c} < {ishape[k]}LL" for k, c in zip(other, coords)) or "true"
        with e.scope(f"if (lane == 0 && {inside})"), \
                e.scope(f"for (i64 t = 0; t < {ishape[d]}LL; ++t)"):
            idx = full("t")
            raw = e.emit(index, idx)
            j = e.fresh("i64", f"(i64){raw}", "j")
            e.line(f"if ({j} < 0 || {j} >= {out_shape[d]}LL) {{ nv_fail(); continue; }}")
            target = full(j)
            off = e.fresh("i64", e.linear(target, out_shape), "o")
            old = e.fresh(COMPUTE[mlir], e.widen(f"out[{off}]", mlir), "old")
            value = e.emit(src, idx)
            new = f"({old} || {value})" if mlir == "i1" else \
                e.round_half(f"({old} + {value})", mlir)
            e.store(new, "out", off, mlir)
        e.line("__syncwarp();")
    assert e.root is sc.results[0], "scatter kernels have no epilogue (fusion never adds one)"


# ---------------------------------------------------------------- matmul

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
        if not isinstance(owner, Operation) or owner.name not in (
                "nova.transpose", "nova.broadcast_in_dim", "nova.reshape", "nova.slice"):
            return None
        chain.append(owner)
        v = owner.operands[0]
    arg = v.index
    shape = shape_of(v)
    strides = tuple(prod(shape[d + 1:]) for d in range(len(shape)))
    offset = 0
    for op in reversed(chain):
        src = shape_of(op.operands[0])
        dst = shape_of(op.results[0])
        if op.name == "nova.transpose":
            strides = tuple(strides[p] for p in op.perm.get_values())
        elif op.name == "nova.broadcast_in_dim":
            out = [0] * len(dst)
            for i, d in enumerate(op.dims.get_values()):
                out[d] = 0 if src[i] == 1 else strides[i]
            strides = tuple(out)
        elif op.name == "nova.slice":
            starts, steps = op.start.get_values(), op.stride.get_values()
            offset += sum(a * st for a, st in zip(starts, strides))
            strides = tuple(st * k for st, k in zip(strides, steps))
        else:
            new = view_strides(src, strides, dst)
            if new is None:
                return None
            strides = new
    return arg, strides, offset


@dataclass(frozen=True)
class _Operand:
    """How the GEMM reads one operand. ``mode``: ``row`` (contiguous along its last
    axis), ``col`` (contiguous along its second-to-last axis) — both copied by 16-byte
    ``cp.async`` — or ``gen`` (any other view or computed value: element loads through
    the emitter)."""

    mode: str
    arg: int | None = None
    strides: tuple[int, ...] = ()
    offset: int = 0


def _operand(v: SSAValue, rows: int, cols: int) -> _Operand:
    """cp.async needs float32, a unit stride along the copied axis, that axis a multiple
    of 4 long, and every other stride and the offset multiples of 4 (16-byte alignment of
    each 4-element chunk, given 16-byte aligned buffers)."""
    view = operand_view(v) if mlir_of(v) == "f32" else None
    if view is None:
        return _Operand("gen")
    arg, strides, offset = view
    batch, sr, sc = strides[:-2], strides[-2], strides[-1]
    aligned = offset % 4 == 0 and all(b % 4 == 0 for b in batch)
    if aligned and sc == 1 and cols % 4 == 0 and sr % 4 == 0:
        return _Operand("row", arg, strides, offset)
    if aligned and sr == 1 and rows % 4 == 0 and sc % 4 == 0:
        return _Operand("col", arg, strides, offset)
    return _Operand("gen")


class _Gemm:
    """The TF32 tensor-core GEMM generator (see the module docstring)."""

    def __init__(self, e: CEmitter, cfg: LaunchConfig):
        self.e, self.cfg, self.g = e, cfg, cfg.gemm
        mm = contraction(e.fusion)
        self.mm = mm
        self.a, self.b = mm.operands
        a_shape = shape_of(self.a)
        self.batch_shape = a_shape[:-2]
        self.m, self.k = a_shape[-2], a_shape[-1]
        self.n = shape_of(self.b)[-1]
        self.batch = prod(self.batch_shape)
        self.aop = _operand(self.a, self.m, self.k)
        self.bop = _operand(self.b, self.k, self.n)
        am, bm = self.amode, self.bmode = self.aop.mode, self.bop.mode
        g = self.g
        self.a_ld = g.bm + B_PAD if am == "col" else g.bk + A_PAD
        self.b_ld = g.bk + A_PAD if bm == "col" else g.bn + B_PAD
        self.a_elems = max(g.bm * (g.bk + A_PAD), g.bk * (g.bm + B_PAD))
        self.stage_elems = g.stage_bytes // 4

    def a_at(self, base: str, m: str, k: str) -> str:
        return f"{base}[({k}) * {self.a_ld} + ({m})]" if self.amode == "col" else \
            f"{base}[({m}) * {self.a_ld} + ({k})]"

    def b_at(self, base: str, k: str, n: str) -> str:
        return f"{base}[({n}) * {self.b_ld} + ({k})]" if self.bmode == "col" else \
            f"{base}[({k}) * {self.b_ld} + ({n})]"

    def _copy(self, op: _Operand, smem: str, ld: int, rows: tuple[str, int, str, int],
              cols: tuple[str, int, str, int], pre: list[str]) -> None:
        """cp.async a tile whose smem rows/cols are (global origin, tile extent, logical
        axis name, axis length); cols are the operand's unit-stride axis."""
        e, t = self.e, self.g.threads
        (r0, nr, rname, rlen), (c0, nc, cname, clen) = rows, cols
        strides = dict(zip(("batch", "r", "c"), (op.strides[:-2], *op.strides[-2:])))
        # the unit-stride axis is the operand's last (row mode) or second-to-last (col)
        r_stride = strides["r"] if op.mode == "row" else strides["c"]
        batch = " + ".join(f"{p} * {st}LL" for p, st in zip(pre, strides["batch"]) if st)
        base = f"{op.offset}LL" + (f" + {batch}" if batch else "")
        per = nc // 4
        e.line("#pragma unroll 1")
        with e.scope(f"for (int c = threadIdx.x; c < {nr * per}; c += {t})"):
            e.line(f"const int r = c / {per}, cc = (c % {per}) * 4;")
            e.line(f"const i64 g{rname} = {r0} + r, g{cname} = {c0} + cc;")
            e.line(f"const bool ok = g{rname} < {rlen}LL && g{cname} < {clen}LL;")
            e.line(f"const float* src = in{op.arg} + (ok ? {base} + g{rname} * {r_stride}LL + "
                   f"g{cname} : 0LL);")
            e.line(f"nv_cp_async16({smem} + r * {ld} + cc, src, ok ? 16 : 0);")

    def load_tile(self, stage: str, tile: str, pre: list[str]) -> None:
        """Fill ring slot ``stage`` with K-tile ``tile`` of A and B."""
        e, g = self.e, self.g
        t = g.threads
        e.line(f"float* const sA = nv_smem + ({stage}) * {self.stage_elems};")
        e.line(f"float* const sB = sA + {self.a_elems};")
        e.line(f"const i64 k0 = (i64)({tile}) * {g.bk};")
        m, n, k = self.m, self.n, self.k
        if self.amode == "row":
            self._copy(self.aop, "sA", self.a_ld, ("m0", g.bm, "m", m), ("k0", g.bk, "k", k), pre)
        elif self.amode == "col":
            self._copy(self.aop, "sA", self.a_ld, ("k0", g.bk, "k", k), ("m0", g.bm, "m", m), pre)
        else:
            e.line("#pragma unroll 1")
            with e.scope(f"for (int c = threadIdx.x; c < {g.bm * g.bk}; c += {t})"):
                e.line(f"const int r = c / {g.bk}, kc = c % {g.bk};")
                e.line("const i64 gm = m0 + r, gk = k0 + kc;")
                e.line(f"const bool ok = gm < {m}LL && gk < {k}LL;")
                v = e.emit(self.a, pre + [f"(gm < {m}LL ? gm : {m - 1}LL)",
                                          f"(gk < {k}LL ? gk : {k - 1}LL)"])
                e.line(f"{self.a_at('sA', 'r', 'kc')} = ok ? (float){v} : 0.0f;")
        if self.bmode == "row":
            self._copy(self.bop, "sB", self.b_ld, ("k0", g.bk, "k", k), ("n0", g.bn, "n", n), pre)
        elif self.bmode == "col":
            self._copy(self.bop, "sB", self.b_ld, ("n0", g.bn, "n", n), ("k0", g.bk, "k", k), pre)
        else:
            e.line("#pragma unroll 1")
            with e.scope(f"for (int c = threadIdx.x; c < {g.bk * g.bn}; c += {t})"):
                e.line(f"const int r = c / {g.bn}, nc = c % {g.bn};")
                e.line("const i64 gk = k0 + r, gn = n0 + nc;")
                e.line(f"const bool ok = gn < {n}LL && gk < {k}LL;")
                v = e.emit(self.b, pre + [f"(gk < {k}LL ? gk : {k - 1}LL)",
                                          f"(gn < {n}LL ? gn : {n - 1}LL)"])
                e.line(f"{self.b_at('sB', 'r', 'nc')} = ok ? (float){v} : 0.0f;")

    def body(self) -> None:
        e, g = self.e, self.g
        stages = g.stages
        wm_tile, wn_tile = g.warp_m, g.warp_n
        e.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;")
        e.line(f"const int wm = warp / {g.warps_n}, wn = warp % {g.warps_n};")
        e.line("const int gid = lane >> 2, tig = lane & 3;")
        e.line(f"const i64 m0 = (i64)blockIdx.y * {g.bm}, n0 = (i64)blockIdx.x * {g.bn};")
        e.line(f"const int KT = {-(-self.k // g.bk)};")
        with e.scope(f"for (i64 bz = blockIdx.z; bz < {self.batch}LL; bz += gridDim.z)"):
            pre = e.delinearize("bz", self.batch_shape)
            e.line(f"float acc[{g.mi}][{g.ni}][4];")
            e.line("#pragma unroll")
            e.line(f"for (int i = 0; i < {g.mi}; ++i)")
            e.line("#pragma unroll")
            e.line(f"  for (int j = 0; j < {g.ni}; ++j)")
            e.line("#pragma unroll")
            e.line("    for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;")
            with e.scope(f"for (int s = 0; s < {stages - 1}; ++s)"):
                with e.scope("if (s < KT)"):
                    self.load_tile("s", "s", pre)
                e.line("nv_cp_async_commit();")
            with e.scope("for (int kt = 0; kt < KT; ++kt)"):
                e.line(f"nv_cp_async_wait<{stages - 2}>();")
                e.line("__syncthreads();")
                with e.scope(f"if (kt + {stages - 1} < KT)"):
                    self.load_tile(f"(kt + {stages - 1}) % {stages}", f"kt + {stages - 1}", pre)
                e.line("nv_cp_async_commit();")
                e.line(f"const float* const tA = nv_smem + (kt % {stages}) * {self.stage_elems};")
                e.line(f"const float* const tB = tA + {self.a_elems};")
                e.line("#pragma unroll")
                with e.scope(f"for (int kk = 0; kk < {g.bk}; kk += 8)"):
                    e.line(f"unsigned af[{g.mi}][4], bf[{g.ni}][2];")
                    e.line("#pragma unroll")
                    with e.scope(f"for (int i = 0; i < {g.mi}; ++i)"):
                        e.line(f"const int r = wm * {wm_tile} + i * 16 + gid;")
                        # PTX ISA m16n8k8 .tf32 A fragment: a0 (g, t), a1 (g+8, t),
                        # a2 (g, t+4), a3 (g+8, t+4); g = lane >> 2, t = lane % 4.
                        for q, (dr, dk) in enumerate(((0, 0), (8, 0), (0, 4), (8, 4))):
                            e.line(f"af[i][{q}] = nv_tf32("
                                   f"{self.a_at('tA', f'r + {dr}', f'kk + tig + {dk}')});")
                    e.line("#pragma unroll")
                    with e.scope(f"for (int j = 0; j < {g.ni}; ++j)"):
                        e.line(f"const int c = wn * {wn_tile} + j * 8 + gid;")
                        # B fragment (col-major 8x8): b0 (k = t, n = g), b1 (k = t+4, n = g).
                        e.line(f"bf[j][0] = nv_tf32({self.b_at('tB', 'kk + tig', 'c')});")
                        e.line(f"bf[j][1] = nv_tf32({self.b_at('tB', 'kk + tig + 4', 'c')});")
                    e.line("#pragma unroll")
                    e.line(f"for (int i = 0; i < {g.mi}; ++i)")
                    e.line("#pragma unroll")
                    e.line(f"  for (int j = 0; j < {g.ni}; ++j) nv_mma_tf32(acc[i][j], af[i], "
                           "bf[j]);")
            e.line("nv_cp_async_wait<0>();")
            e.line("__syncthreads();")
            self.epilogue(pre)

    def epilogue(self, pre: list[str]) -> None:
        """Accumulators -> shared memory -> epilogue -> global memory.

        Each thread parks its C fragments (PTX ISA m16n8k8: c0 (g, 2t), c1 (g, 2t+1),
        c2 (g+8, 2t), c3 (g+8, 2t+1)) in the drained pipeline ring as a BM x (BN + 4)
        tile; then the block walks the tile row-major, so the fused epilogue is emitted
        once in a rolled loop (few registers, however long the epilogue) and the stores
        to C are coalesced along N.
        """
        e, g = self.e, self.g
        mm_shape = shape_of(self.mm.results[0])
        mlir = mlir_of(self.mm.results[0])
        ld = g.bn + C_PAD
        e.line("float* const sC = nv_smem;")
        e.line("#pragma unroll")
        e.line(f"for (int i = 0; i < {g.mi}; ++i)")
        e.line("#pragma unroll")
        e.line(f"  for (int j = 0; j < {g.ni}; ++j)")
        e.line("#pragma unroll")
        e.line("    for (int r = 0; r < 4; ++r)")
        e.line(f"      sC[(wm * {g.warp_m} + i * 16 + gid + (r >> 1) * 8) * {ld} + "
               f"wn * {g.warp_n} + j * 8 + tig * 2 + (r & 1)] = acc[i][j][r];")
        e.line("__syncthreads();")
        e.line("#pragma unroll 2")
        with e.scope(f"for (int c = threadIdx.x; c < {g.bm * g.bn}; c += {g.threads})"):
            e.line(f"const int r = c / {g.bn}, cc = c % {g.bn};")
            e.line("const i64 gm = m0 + r, gn = n0 + cc;")
            with e.scope(f"if (gm < {self.m}LL && gn < {self.n}LL)"):
                value = e.fresh(COMPUTE[mlir], e.cast(f"sC[r * {ld} + cc]", "f32", mlir), "mm")
                e.override[id(self.mm.results[0])] = value
                e.store_root(e.linear(pre + ["gm", "gn"], mm_shape))
                del e.override[id(self.mm.results[0])]
        e.line("__syncthreads();")


def _matmul_simt(e: CEmitter, cfg: LaunchConfig) -> None:
    """float64/integer matmul: 16 x 16 tiles of A and B in shared memory, one output
    per thread, accumulating in the operand type (as the CPU backend)."""
    mm = contraction(e.fusion)
    a, b = mm.operands
    a_shape = shape_of(a)
    batch_shape, m, k = a_shape[:-2], a_shape[-2], a_shape[-1]
    n = shape_of(b)[-1]
    t = cfg.block[0]
    mlir = mlir_of(mm.results[0])
    ctype = COMPUTE[mlir]
    mm_shape = shape_of(mm.results[0])
    e.line(f"__shared__ {ctype} sA[{t}][{t + 1}], sB[{t}][{t + 1}];")
    e.line("const int tx = threadIdx.x, ty = threadIdx.y;")
    e.line(f"const i64 gm = (i64)blockIdx.y * {t} + ty, gn = (i64)blockIdx.x * {t} + tx;")
    with e.scope(f"for (i64 bz = blockIdx.z; bz < {prod(batch_shape)}LL; bz += gridDim.z)"):
        pre = e.delinearize("bz", batch_shape)
        e.line(f"{ctype} acc = 0;")
        with e.scope(f"for (i64 k0 = 0; k0 < {k}LL; k0 += {t})"):
            with e.scope():
                e.line("const i64 gk = k0 + tx;")
                v = e.emit(a, pre + [f"(gm < {m}LL ? gm : {m - 1}LL)",
                                     f"(gk < {k}LL ? gk : {k - 1}LL)"])
                e.line(f"sA[ty][tx] = (gm < {m}LL && gk < {k}LL) ? {v} : ({ctype})0;")
            with e.scope():
                e.line("const i64 gk = k0 + ty;")
                v = e.emit(b, pre + [f"(gk < {k}LL ? gk : {k - 1}LL)",
                                     f"(gn < {n}LL ? gn : {n - 1}LL)"])
                e.line(f"sB[ty][tx] = (gk < {k}LL && gn < {n}LL) ? {v} : ({ctype})0;")
            e.line("__syncthreads();")
            e.line("#pragma unroll")
            e.line(f"for (int kk = 0; kk < {t}; ++kk) acc += sA[ty][kk] * sB[kk][tx];")
            e.line("__syncthreads();")
        with e.scope(f"if (gm < {m}LL && gn < {n}LL)"):
            e.override[id(mm.results[0])] = "acc"
            e.store_root(e.linear(pre + ["gm", "gn"], mm_shape))
            del e.override[id(mm.results[0])]


# ---------------------------------------------------------------- modules

def _signature(plan: KernelPlan) -> tuple[list[str], tuple[str, ...]]:
    params, names = [], []
    for i, (_, dtype) in enumerate(plan.arg_types[:-1]):
        params.append(f"const {STORAGE[dtype.mlir]}* in{i}")
        names.append(f"in{i}")
    params.append(f"{STORAGE[plan.out[1].mlir]}* out")
    names.append("out")
    if plan.scratch is not None:
        params.append(f"{STORAGE[plan.scratch[1].mlir]}* scratch")
        names.append("scratch")
    return params, tuple(names)


def generate(plan: KernelPlan, spec: CudaSpec) -> CudaKernel:
    """CUDA C for one kernel plan, with its launch geometry for ``spec``."""
    cfg = configure(plan, spec)
    e = CEmitter(plan)
    bodies = {"grid_stride": _elementwise, "warp_per_row": _rows, "block_per_row": _rows,
              "column": _column, "lines": _scatter, "simt": _matmul_simt}
    shared = cfg.shared_bytes
    modes = ""
    if prod(plan.out[0]) == 0:
        # Nothing to write; a body would clamp indices to -1 on empty operands.
        e.line("// empty output: nothing to compute")
        cfg = replace(cfg, grid=(1, 1, 1))
        shared = 0
    elif cfg.strategy == "mma_tf32":
        gemm = _Gemm(e, cfg)
        gemm.body()
        modes = f"A {gemm.amode}, B {gemm.bmode}"
    else:
        bodies[cfg.strategy](e, cfg)
    params, names = _signature(plan)
    threads = cfg.threads
    header = (f"// {plan.describe()}\n// cuda {spec.arch}: {cfg.strategy} grid={cfg.grid} "
              f"block={cfg.block} smem={shared}{' operands ' + modes if modes else ''}\n"
              f"// {cfg.derivation}\n")
    source = (f"{header}{PRELUDE}\n"
              f"extern \"C\" __global__ void __launch_bounds__({threads})\n"
              f"{plan.name}({', '.join(params)}) {{\n"
              f"  extern __shared__ __align__(16) float nv_smem[];\n"
              + "\n".join(e.lines) + "\n}\n")
    return CudaKernel(plan.name, source, plan.name, cfg.grid, cfg.block, shared, names, cfg)


def write_sources(plans: list[KernelPlan], spec: CudaSpec, directory: str) -> list[str]:
    """Write each plan's CUDA C (``<kernel>.cu``, its header comment holding the plan,
    the launch geometry and the configurator's derivation) into ``directory``, for
    reading or for compiling by hand with ``nvcc -cubin -arch=<spec.arch>``."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for plan in plans:
        path = os.path.join(directory, f"{plan.name}.{spec.arch}.cu")
        with open(path, "w") as f:
            f.write(generate(plan, spec).source)
        paths.append(path)
    return paths


__all__ = ["CUDA_FORMAT_VERSION", "CudaKernel", "generate", "write_sources"]
