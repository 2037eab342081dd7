"""CUDA C for kernel plans: the CUDA backend's last stage.

``generate(plan, spec)`` turns one ``KernelPlan`` (the target-neutral plan, which the
CUDA target leaves as it is: ``nova.compiler.targets.cuda``) into a self-contained CUDA C
module for NVRTC. Its name and header comment hold the plan and the launch geometry for
``spec``, nothing of the host CPU that compiles it, so the same kernel has the same
source on every host. The kernel is
``extern "C" __global__ void <name>(in0, ..., out[, scratch])``: pointers to the inputs,
the output and (for column reductions) the scratch buffer, in the CPU backend's order.
Launch geometry comes from ``targets.cuda.configurator.configure`` and travels with the source.

Kernel bodies, by strategy:
- ``grid_stride`` (elementwise): each thread computes ``vec`` consecutive outputs per
  grid-stride step, with 16-byte vector loads of output-shaped inputs and a vector
  store; every value is evaluated through ``CEmitter`` (index arithmetic for movement
  ops, no copies).
- ``warp_per_row`` / ``block_per_row`` (softmax, log_softmax, layer_norm,
  cross_entropy, suffix reductions): per row, one pass per reduction combining in
  registers, then a butterfly of ``__shfl_xor_sync`` (and a shared-memory exchange of
  per-warp partials for block rows), so every thread holds the row's total; then a
  pass writing the row's outputs. Accumulators follow ``accumulator_dtype`` (float sums
  in double), as the CPU backend.
- ``column`` (reductions keeping an inner axis): 32 x 8 blocks (32 x 32 for long
  reductions), partials met in shared memory in a fixed order.
- ``lines`` (scatter_add, scatter): a warp per output line along the scatter dim; the
  lanes copy the line, then lane 0 applies the updates in index order (adds them, or
  stores them so the last wins): deterministic, no atomics.
- ``mma_tf32`` (float32/float16/bfloat16 matmul): block tile BM x BN x BK in a
  ``stages``-deep shared-memory ring; warps own MI x NI tiles of
  ``mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32``; operands that are strided views of a
  buffer with 16-byte aligned 4-element chunks (plain, transposed, batch-broadcast,
  reshaped) arrive by ``cp.async`` (zero-filled at the edges), others (computed values,
  misaligned views, half types) by plain loads through the emitter into the same ring;
  the accumulators go through shared memory to a rolled, coalesced epilogue loop
  (``targets.cuda.gemm``).
- ``simt`` (float64/integer matmul): 16 x 16 shared-memory tiles, one output per thread.
- ``block_sort`` (argsort): a block per row, a stable merge sort whose passes place every
  element by binary search (``_argsort``).
- ``thread_scan`` (cumsum, cumprod): a thread per row carrying the running value
  (``_scan``).
- ``attention`` / ``attention_grad`` (fused attention): a block per B queries (or keys)
  of a batch index, a warp per 16 rows, block products on the tensor cores, online
  softmax; the backward split into key blocks (dK, dV) and query blocks (dQ)
  (``targets.cuda.attention``).

Index errors (gather, scatter, wrap_index) and integer division by zero set the module global
``nova_error_flag`` (see ``targets.cuda.prelude``); indices are clamped so no access strays.

Launch contract for the runtime: every buffer 16-byte aligned (CuPy's pool gives 256;
arena offsets must keep it), dynamic shared memory ``shared_bytes`` (above 48 KiB set
the function's ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` first),
``nova_error_flag`` zeroed before a step and read after it.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace

from xdsl.ir import Operation

from nova.compiler import dialect as nd
from nova.compiler.codegen.scalar import FLOATS
from nova.compiler.targets.cuda.attention import attention_backward, attention_forward
from nova.compiler.targets.cuda.emit import COMPUTE, NARROW, STORAGE, CEmitter
from nova.compiler.codegen.values import element_of, shape_of
from nova.compiler.targets.cuda.gemm import Gemm, matmul_simt
from nova.compiler.targets.cuda.prelude import PRELUDE
from nova.compiler.targets.cuda.configurator import LaunchConfig, configure
from nova.compiler.targets.cuda.device import CudaSpec
from nova.core import dtypes as dt
from nova.core.shapes import numel
from nova.compiler.lowering.plan import (
    KernelPlan,
    accumulator_dtype,
    contraction,
    reductions,
)

CUDA_FORMAT_VERSION = 2   # bump when generated CUDA code changes meaning


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
        return "0" if acc_mlir not in FLOATS else ("0.0" if acc_mlir == "f64" else "0.0f")
    if acc_mlir in NARROW:           # (held in int: the type's smallest value)
        return str(dt.int_bounds(dt.from_mlir(acc_mlir))[0])
    if acc_mlir == "i32":
        return "(-2147483647 - 1)"
    if acc_mlir == "i64":
        return "(-9223372036854775807LL - 1)"
    return "-__longlong_as_double(0x7ff0000000000000LL)" if acc_mlir == "f64" else \
        "-__int_as_float(0x7f800000)"


def _combine(acc_mlir: str, is_sum: bool, a: str, b: str) -> str:
    # bool: ``|``, never ``||``: ``b`` may be a warp shuffle, which every lane must
    # execute (a short-circuit skipped it in the lanes already true -- undefined with
    # a full mask; the emulator deadlocked)
    if acc_mlir == "i1":
        return f"({a} | {b})"
    return f"({a} + {b})" if is_sum else f"nv_max({a}, {b})"


def _shuffle(acc_mlir: str, v: str, offset: str) -> str:
    if acc_mlir == "i1":
        return f"(__shfl_xor_sync(0xffffffffu, (int){v}, {offset}) != 0)"
    return f"__shfl_xor_sync(0xffffffffu, {v}, {offset})"


class _Reduction:
    """One reduction's accumulator: type, identity and combine."""

    def __init__(self, red: Operation):
        self.op = red
        self.is_sum = isinstance(red, nd.ReduceSumOp)
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
    rows, length = numel(kept_shape), numel(row_shape)
    warp = cfg.strategy == "warp_per_row"
    if warp:
        e.line("const int lane = threadIdx.x & 31;")
        start, step = "(((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5)", \
            "((i64)gridDim.x * (blockDim.x >> 5))"
        j0, js = "lane", "32"
    else:
        start, step = "(i64)blockIdx.x", "(i64)gridDim.x"
        j0, js = "threadIdx.x", "blockDim.x"
    per_row_output = numel(shape_of(e.root)) == rows
    with e.scope(f"for (i64 row = {start}; row < {rows}LL; row += {step})"):
        kidx = e.delinearize("row", kept_shape)
        for k, r in enumerate(reds):
            acc = f"acc{k}"
            e.line(f"{r.ctype} {acc} = {_reduce_init(r.acc, r.is_sum)};")
            with e.scope(f"for (i64 j = {j0}; j < {length}LL; j += {js})"):
                ridx = e.delinearize("j", row_shape)
                v = e.emit(r.x, kidx + ridx)
                if element_of(r.x) != r.acc:
                    v = e.cast(v, element_of(r.x), r.acc)
                e.line(f"{acc} = {r.combine(acc, v)};")
            (_warp_allreduce if warp else _block_allreduce)(e, r, acc)
            total = e.fresh(COMPUTE[element_of(r.op.results[0])],
                            e.cast(acc, r.acc, element_of(r.op.results[0])), "red")
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
    outputs, length = numel(kept_shape), numel(red_shape)
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
            if element_of(r.x) != r.acc:
                v = e.cast(v, element_of(r.x), r.acc)
            e.line(f"acc = {r.combine('acc', v)};")
    part = f"reinterpret_cast<{r.ctype}*>(nv_smem)"
    e.line(f"{part}[threadIdx.y * {bx} + threadIdx.x] = acc;")
    e.line("__syncthreads();")
    with e.scope(f"if (threadIdx.y == 0 && oi < {outputs}LL)"):
        e.line(f"for (int y = 1; y < {by}; ++y) acc = "
               f"{r.combine('acc', f'{part}[y * {bx} + threadIdx.x]')};")
        res = element_of(r.op.results[0])
        total = e.fresh(COMPUTE[res], e.cast("acc", r.acc, res), "red")
        e.override[id(r.op.results[0])] = total
        e.store_root("oi")
        del e.override[id(r.op.results[0])]


# ---------------------------------------------------------------- elementwise, scatter

_WIDE = {2: "unsigned short", 4: "unsigned", 8: "uint2", 16: "uint4"}


def _elementwise(e: CEmitter, cfg: LaunchConfig) -> None:
    """Each thread takes ``vec`` consecutive outputs per grid-stride step. Inputs of the
    output's shape read at the output's own index (the common case: no broadcast or
    transpose on the way) arrive as one wide load per thread (16 bytes for float32 x 4),
    and the outputs leave as one wide store; everything else is loaded per element.
    Wide accesses need 16-byte aligned buffers, which cp.async needs as well."""
    shape, dtype = e.plan.out
    total = max(numel(shape), 1)
    vec = cfg.vec
    out_bytes = vec * dtype.itemsize
    wide_out = vec > 1 and out_bytes in _WIDE
    e.vector_args = {i for i, (s, d) in enumerate(e.plan.arg_types[:-1])
                     if vec > 1 and s == shape and vec * d.itemsize in _WIDE}
    with e.scope(f"for (i64 base = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * {vec}; "
                 f"base < {total}LL; base += (i64)gridDim.x * blockDim.x * {vec})"):
        at = len(e.lines)
        if wide_out:
            e.line(f"__align__(16) {STORAGE[dtype.mlir]} vo[{vec}];")
        e.line("#pragma unroll")
        with e.scope(f"for (int u = 0; u < {vec}; ++u)"):
            flat = e.fresh("i64", "base + u", "e")
            idx = e.delinearize(flat, shape)
            e.vector_idx = tuple(idx)
            value = e.emit(e.root, idx)
            e.vector_idx = None
            if wide_out:
                e.line(f"vo[u] = {e.narrow(value, dtype.mlir)};")
            else:
                e.store(value, "out", flat, dtype.mlir)
        if wide_out:
            wide = _WIDE[out_bytes]
            e.line(f"*reinterpret_cast<{wide}*>(out + base) = *reinterpret_cast<{wide}*>(vo);")
        pad = "  " * e.depth
        loads = []
        for i in sorted(e.vector_loads):
            d = e.plan.arg_types[i][1]
            wide = _WIDE[vec * d.itemsize]
            loads.append(f"{pad}__align__(16) {STORAGE[d.mlir]} va{i}[{vec}];")
            loads.append(f"{pad}*reinterpret_cast<{wide}*>(va{i}) = "
                         f"*reinterpret_cast<const {wide}*>(in{i} + base);")
        e.lines[at:at] = loads


def _scatter(e: CEmitter, cfg: LaunchConfig) -> None:
    """A warp per output line along the scatter dim: the 32 lanes copy the line, then
    lane 0 applies the line's updates in index order (duplicates in the index hit the
    same element one after another: deterministic, no atomics). ``scatter_add`` adds
    them; ``scatter`` stores them, so the last update of an element wins."""
    sc = contraction(e.fusion)
    base, index, src = sc.operands
    d = sc.dim.value.data
    out_shape, out_dtype = e.plan.out
    mlir = out_dtype.mlir
    ishape = shape_of(index)
    other = [k for k in range(len(out_shape)) if k != d]
    other_shape = tuple(out_shape[k] for k in other)
    lines = max(numel(other_shape), 1)
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
            value = e.emit(src, idx)
            if isinstance(sc, nd.ScatterOp):
                new = value
            else:
                old = e.fresh(COMPUTE[mlir], e.widen(f"out[{off}]", mlir), "old")
                new = f"({old} || {value})" if mlir == "i1" else \
                    e.fit(f"({old} + {value})", mlir)
            e.store(new, "out", off, mlir)
        e.line("__syncwarp();")
    assert e.root is sc.results[0], "scatter kernels have no epilogue (fusion never adds one)"


def _argsort(e: CEmitter, cfg: LaunchConfig) -> None:
    """A block per row: the row's keys into the block's scratch part, the identity permutation
    into whichever buffer makes the last pass end in the output, then ceil(log2 N)
    merge passes of doubling width. In a pass each thread places its elements
    directly: an element of a left run goes to its offset in the run plus the number of
    the right run's keys strictly before it, one of a right run after every left key
    that is not after it (binary searches), so equal keys keep their order (stable).
    NaN sorts after every number ascending, before every number descending."""
    op = contraction(e.fusion)
    x = op.operands[0]
    descending = bool(op.descending.value.data)
    x_shape = shape_of(x)
    rows, n = e.plan.schedule.loops
    if n == 0:
        e.line("// empty rows: nothing to sort")
        return
    key = COMPUTE[element_of(x)]
    first_in_out = (n - 1).bit_length() % 2 == 0    # ceil(log2 N) passes
    if key in ("float", "double"):
        cmp = ">" if descending else "<"
        nan_first = "isnan(a) && !isnan(b)" if descending else "isnan(b) && !isnan(a)"
        before = f"((a {cmp} b) || ({nan_first}))"
    else:
        before = f"(a {'>' if descending else '<'} b)"
    e.line(f"auto before = [](const {key} a, const {key} b) -> bool {{ return {before}; }};")
    with e.scope(f"for (i64 row = blockIdx.x; row < {rows}LL; row += gridDim.x)"):
        e.line(f"i64* spare = scratch + (i64)blockIdx.x * {2 * n}LL;")
        e.line(f"{key}* keys = reinterpret_cast<{key}*>(spare + {n}LL);")
        e.line(f"i64* orow = out + row * {n}LL;")
        e.line(f"i64* src = {'orow' if first_in_out else 'spare'};")
        e.line(f"i64* dst = {'spare' if first_in_out else 'orow'};")
        pre = e.delinearize("row", x_shape[:-1]) if len(x_shape) > 1 else []
        with e.scope(f"for (i64 t = threadIdx.x; t < {n}LL; t += blockDim.x)"):
            e.line(f"keys[t] = {e.emit(x, pre + ['t'])};")
            e.line("src[t] = t;")
        e.line("__syncthreads();")
        with e.scope(f"for (i64 w = 1; w < {n}LL; w <<= 1)"):
            with e.scope(f"for (i64 t = threadIdx.x; t < {n}LL; t += blockDim.x)"):
                e.line("const i64 lo = t / (2 * w) * (2 * w);")
                e.line(f"const i64 mid = min(lo + w, {n}LL), hi = min(lo + 2 * w, {n}LL);")
                e.line("const i64 id = src[t];")
                e.line(f"const {key} k = keys[id];")
                e.line("i64 a, b;")
                with e.scope("if (t < mid)"):       # left run: right keys strictly before
                    e.line("a = mid; b = hi;")
                    e.line("while (a < b) { const i64 m = (a + b) >> 1; "
                           "if (before(keys[src[m]], k)) a = m + 1; else b = m; }")
                    e.line("dst[t + (a - mid)] = id;")
                with e.scope("else"):               # right run: left keys not after it
                    e.line("a = lo; b = mid;")
                    e.line("while (a < b) { const i64 m = (a + b) >> 1; "
                           "if (!before(k, keys[src[m]])) a = m + 1; else b = m; }")
                    e.line("dst[lo + (t - mid) + (a - lo)] = id;")
            e.line("__syncthreads();")
            e.line("i64* swap = src; src = dst; dst = swap;")
    assert e.root is op.results[0], "sort kernels have no epilogue (fusion never adds one)"


def _scan(e: CEmitter, cfg: LaunchConfig) -> None:
    """A thread per row: the running value (double for floats; integers in their own
    width, wrapping through unsigned arithmetic) carried along the row, each prefix
    stored rounded to the result type, as the CPU body does."""
    op = contraction(e.fusion)
    x = op.operands[0]
    reverse = bool(op.reverse.value.data)
    is_sum = isinstance(op, nd.CumsumOp)
    x_shape = shape_of(x)
    rows, n = e.plan.schedule.loops
    in_mlir, out_mlir = element_of(x), element_of(op.results[0])
    floating = out_mlir in ("f16", "bf16", "f32", "f64")
    acc_mlir = "f64" if floating else out_mlir
    acc = COMPUTE[acc_mlir]
    if n == 0:
        e.line("// empty rows: nothing to scan")
        return
    start = "1.0" if floating else "1"
    with e.scope(f"for (i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x; "
                 f"row < {rows}LL; row += (i64)gridDim.x * blockDim.x)"):
        e.line(f"{acc} acc = {'0' if is_sum else start};")
        pre = e.delinearize("row", x_shape[:-1]) if len(x_shape) > 1 else []
        with e.scope(f"for (i64 k = 0; k < {n}LL; ++k)"):
            e.line(f"const i64 j = {f'{n - 1}LL - k' if reverse else 'k'};")
            v = e.cast(e.emit(x, pre + ["j"]), in_mlir, acc_mlir)
            sign = "+" if is_sum else "*"
            if floating:
                e.line(f"acc = acc {sign} {v};")
            else:
                u = "unsigned long long" if acc == "i64" else "unsigned"
                e.line(f"acc = ({acc})(({u})acc {sign} ({u}){v});")
            e.store(e.cast("acc", acc_mlir, out_mlir), "out", f"row * {n}LL + j", out_mlir)
    assert e.root is op.results[0], "scan kernels have no epilogue (fusion never adds one)"


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
              "column": _column, "lines": _scatter, "block_sort": _argsort,
              "thread_scan": _scan, "attention": attention_forward,
              "attention_grad": attention_backward, "simt": matmul_simt}
    shared = cfg.shared_bytes
    modes = ""
    if numel(plan.out[0]) == 0:
        # Nothing to write; a body would clamp indices to -1 on empty operands.
        e.line("// empty output: nothing to compute")
        cfg = replace(cfg, grid=(1, 1, 1))
        shared = 0
    elif cfg.strategy == "mma_tf32":
        gemm = Gemm(e, cfg)
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
