"""CUDA C for matmul kernels: the TF32 tensor-core GEMM and the SIMT fallback.

``Gemm`` emits the ``mma_tf32`` strategy: a BM x BN block tile, a ``stages``-deep ring
of BK-deep shared-memory tiles filled by ``cp.async`` (operands that are strided views of
a buffer with 16-byte aligned 4-element chunks) or by element loads through the emitter
(anything else), warps owning MI x NI tiles of ``mma.sync.m16n8k8`` fed with fragments
laid out as the PTX ISA specifies, and an epilogue that stages the accumulators in
shared memory and runs the fused ops in one rolled, coalesced loop.
``matmul_simt`` emits float64/integer GEMMs on CUDA cores.
"""
from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from nova.compiler.targets.cuda.emit import COMPUTE, CEmitter
from nova.compiler.codegen.values import element_of, shape_of
from nova.compiler.targets.cuda.configurator import A_PAD, B_PAD, C_PAD, LaunchConfig
from nova.compiler.lowering.plan import contraction
from nova.compiler.lowering.views import operand_view
from nova.core.shapes import numel


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
    view = operand_view(v) if element_of(v) == "f32" else None
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


class Gemm:
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
        self.batch = numel(self.batch_shape)
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
        mlir = element_of(self.mm.results[0])
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


def matmul_simt(e: CEmitter, cfg: LaunchConfig) -> None:
    """float64/integer matmul: 16 x 16 tiles of A and B in shared memory, one output
    per thread, accumulating in the operand type (as the CPU backend)."""
    mm = contraction(e.fusion)
    a, b = mm.operands
    a_shape = shape_of(a)
    batch_shape, m, k = a_shape[:-2], a_shape[-2], a_shape[-1]
    n = shape_of(b)[-1]
    t = cfg.block[0]
    mlir = element_of(mm.results[0])
    ctype = COMPUTE[mlir]
    mm_shape = shape_of(mm.results[0])
    e.line(f"__shared__ {ctype} sA[{t}][{t + 1}], sB[{t}][{t + 1}];")
    e.line("const int tx = threadIdx.x, ty = threadIdx.y;")
    e.line(f"const i64 gm = (i64)blockIdx.y * {t} + ty, gn = (i64)blockIdx.x * {t} + tx;")
    with e.scope(f"for (i64 bz = blockIdx.z; bz < {numel(batch_shape)}LL; bz += gridDim.z)"):
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
            # (int8/uint8/int16 accumulate in int: the sum modulo 2^bits, wrapped once)
            e.override[id(mm.results[0])] = e.bind(e.fit("acc", mlir), mlir, "mm")
            e.store_root(e.linear(pre + ["gm", "gn"], mm_shape))
            del e.override[id(mm.results[0])]
