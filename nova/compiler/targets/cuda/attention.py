"""CUDA C for the fused attention kernels (``nova.attention``, ``nova.attention_grad``).

The same algorithms as the CPU's (``targets.cpu.llvm_attention``), laid out for a GPU:
a block of threads takes one block of B queries (or keys) of one batch index, a warp 16
rows of it; the ``L x S`` scores only ever exist as the warps' ``16 x B`` pieces of one
``B x B`` score block, in registers and in one shared tile. Every block product runs
on the TF32 tensor cores (``mma.sync.m16n8k8``, fragments as the PTX ISA lays them out,
as the GEMM's: ``targets.cuda.gemm``), reading tiles that the block's threads loaded
through the emitter (so transposed or reshaped views of the arguments cost no copy),
zero-padded to whole blocks and to the k-step of 8. B and the tiles' places come from
``configurator.attention_config``.

Forward (flash attention): per key block the query block can see (with ``causal``, key
blocks past its own are skipped), S = Q K^T in the warp's accumulators; per row (a row's
values sit in the four lanes of a quad, combined by two shuffles) the online softmax --
the running maximum m, the running sum l, ``P = exp(S * scale - m)``, the accumulated
output rescaled by ``exp(m_old - m)`` -- then P goes through the warp's rows of the
shared P tile (the accumulator layout is not the A operand's) into O += P V. The output
is O / l, and each row's log-sum-exp m + log(l) is stored after it. A hidden pair's
score is -inf, so a row that sees nothing has l = 0 and gives NaN, as the composite's
softmax does.

Backward (FlashAttention-2's recurrence, split so that every output has one writer and
no atomics are needed: deterministic). Grid x holds the key blocks, then the query
blocks. A key block keeps K and V, and over the query blocks that see it recomputes
P^T = exp(S^T * scale - lse) from K Q^T, then dV += P^T dO, dP^T = V dO^T,
dS^T = P^T (dP^T - D) scale, dK += dS^T Q; a query block recomputes P and dP the same
way and accumulates dQ += dS K. D = rowsum(dO * O) per query row, from the forward's
output; the log-sum-exp is read from the forward's result.

With dropout, the forward multiplies each P by its dropout factor after adding it to the
row's sum and before O += P V; the backward uses the dropped P for dV and
dS = (dP dropped(P) - P D) scale. The factor of a position is the Philox draw the
composite's ``rng_uniform`` makes there, recomputed where needed, never stored.

Each part of a kernel's packed result (output and log-sum-exp; dq, dk and dv) is stored
through its placement (``lowering.placement``), where it is packed or where an assembly
of the parts that fusion gave the kernel puts it.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from nova.compiler import dialect as nd
from nova.compiler.lowering.placement import attention_kernel
from nova.compiler.lowering.plan import contraction
from nova.compiler.targets.cuda.configurator import LaunchConfig
from nova.compiler.targets.cuda.emit import CEmitter, float_literal
from nova.core.shapes import numel

NEG_INF = "__int_as_float(0xff800000)"
# m16n8k8 .tf32 fragments (PTX ISA): A's four registers at (row, k) offsets from
# (group, thread-in-group); the accumulator's four at (row, col) = (group + 8 (r >> 1),
# 2 thread-in-group + (r & 1)).
A_FRAGMENT = ((0, 0), (8, 0), (0, 4), (8, 4))


class _Attention:
    """What both kernels share: shapes, tiles, loads, the warp product, dropout and
    stores."""

    def __init__(self, e: CEmitter, cfg: LaunchConfig):
        self.e, self.cfg, self.a = e, cfg, cfg.attention
        (self.op, self.places, self.q, self.k, self.v, self.batch_shape, self.L, self.E,
         self.S, self.Ev) = attention_kernel(contraction(e.fusion), e.root)
        self.batch = numel(self.batch_shape)
        self.B = self.a.block
        self.nq, self.nk = -(-self.L // self.B), -(-self.S // self.B)
        self.threads = cfg.threads
        self.scale = float_literal(float(self.op.scale.value.data), "f32")
        self.causal = bool(self.op.causal.value.data)
        self.dropout = nd.attention_keep_scale(self.op)

    # ------------------------------------------------------------ pieces of text

    def start(self) -> None:
        """Lane/warp names, the tiles' pointers, and the dropout key (read once)."""
        e = self.e
        e.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;")
        e.line("const int gid = lane >> 2, tig = lane & 3, w16 = warp * 16;")
        for name, off, _ in self.a.layout[:-1]:
            e.line(f"float* const s{name} = nv_smem + {off};")
        if self.dropout is not None:
            key = self.op.rng[0]
            self.seed = e.bind(e.emit(key, [e.index(0)]), "i64", "seed")
            self.offset = e.bind(e.emit(key, [e.index(1)]), "i64", "offset")

    def at(self, tile: str, row: str, col: str) -> str:
        """Element (row, col) of a shared tile."""
        return f"s{tile}[({row}) * {self.a.tile(tile)[1]} + ({col})]"

    def load(self, tile: str, value, pre: list[str], r0: str, rows: int, cols: int,
             padded: int) -> None:
        """Rows ``r0 ..`` of ``value`` (``rows x cols`` per batch index) into the tile:
        B rows of ``padded`` columns, zero past the value's rows and columns."""
        e = self.e
        e.line("#pragma unroll 1")
        with e.scope(f"for (int c = threadIdx.x; c < {self.B * padded}; c += {self.threads})"):
            e.line(f"const int r = c / {padded}, cc = c % {padded};")
            e.line(f"const int gr = {r0} + r;")
            e.line(f"const bool ok = gr < {rows} && cc < {cols};")
            v = e.emit(value, pre + [f"(i64)(gr < {rows} ? gr : {rows - 1})",
                                     f"(i64)(cc < {cols} ? cc : {cols - 1})"])
            e.line(f"{self.at(tile, 'r', 'cc')} = ok ? (float){v} : 0.0f;")

    def product(self, acc: str, tiles: int, depth: int, a, b) -> None:
        """``acc[j][0..3] += A B`` for the warp: A its 16 rows x ``depth``, B ``depth``
        x ``8 tiles``, ``a(row, k)`` / ``b(k, col)`` the C text of their elements (row
        relative to the warp's first)."""
        e = self.e
        e.line("#pragma unroll 1")
        with e.scope(f"for (int kk = 0; kk < {depth}; kk += 8)"):
            e.line("unsigned af[4];")
            for q, (dr, dk) in enumerate(A_FRAGMENT):
                e.line(f"af[{q}] = nv_tf32({a(f'gid + {dr}', f'kk + tig + {dk}')});")
            e.line("#pragma unroll")
            with e.scope(f"for (int j = 0; j < {tiles}; ++j)"):
                e.line("unsigned bf[2];")
                e.line(f"bf[0] = nv_tf32({b('kk + tig', 'j * 8 + gid')});")
                e.line(f"bf[1] = nv_tf32({b('kk + tig + 4', 'j * 8 + gid')});")
                e.line(f"nv_mma_tf32({acc}[j], af, bf);")

    def zeros(self, acc: str, tiles: int) -> None:
        self.e.line(f"float {acc}[{tiles}][4];")
        self.e.line(f"for (int j = 0; j < {tiles}; ++j) {acc}[j][0] = {acc}[j][1] = "
                    f"{acc}[j][2] = {acc}[j][3] = 0.0f;")

    @contextmanager
    def fragments(self, tiles: int) -> Iterator[None]:
        """Inside the loops over the warp's accumulator elements (j, r), with the
        element's row in the block named ``fr`` and its column ``fc``."""
        e = self.e
        e.line("#pragma unroll")
        with e.scope(f"for (int j = 0; j < {tiles}; ++j)"):
            e.line("#pragma unroll")
            with e.scope("for (int r = 0; r < 4; ++r)"):
                e.line("const int fr = w16 + gid + (r >> 1) * 8, fc = j * 8 + tig * 2 + "
                       "(r & 1);")
                yield

    def park(self, acc: str, tiles: int) -> None:
        """The warp's accumulators ``acc`` into its rows of the P tile (the layout the
        next product reads as its A operand), between warp barriers: every lane has read
        the tile before it is overwritten, and sees the whole of it after."""
        e = self.e
        e.line("__syncwarp();")
        with self.fragments(tiles):
            e.line(f"{self.at('P', 'fr', 'fc')} = {acc}[j][r];")
        e.line("__syncwarp();")

    def visible(self, i: str, j: str) -> str:
        """Whether query ``i`` sees key ``j`` (int positions): inside L and S, and
        with ``causal`` not past the query."""
        cond = f"{i} < {self.L} && {j} < {self.S}"
        return cond + (f" && {j} <= {i}" if self.causal else "")

    def keep(self, i: str, j: str) -> str:
        """The dropout factor of query ``i``, key ``j`` of batch ``bz`` (module
        docstring)."""
        e = self.e
        rate, scale = self.dropout
        lin = f"(((i64)bz * {self.L}LL + {i}) * {self.S}LL + {j})"
        u = e.uniform_at(lin, self.seed, self.offset, "f32")
        return e.fresh("float", f"({u} >= {float_literal(rate, 'f32')} ? "
                                f"{float_literal(scale, 'f32')} : 0.0f)", "keep")

    def drop(self, rows_are_keys: bool) -> None:
        """Multiply the warp's 16 rows of the P tile by their dropout factors, in a
        rolled loop over its elements (an unrolled one would hold a Philox state per
        element in registers): a row is a query and a column a key, or the reverse."""
        e, B = self.e, self.B
        e.line("__syncwarp();")
        e.line("#pragma unroll 1")
        with e.scope(f"for (int c = lane; c < {16 * B}; c += 32)"):
            e.line(f"const int dr = w16 + c / {B}, dc = c % {B};")
            i, j = ("(q0 + dc)", "(k0 + dr)") if rows_are_keys else ("(q0 + dr)", "(k0 + dc)")
            e.line(f"{self.at('P', 'dr', 'dc')} *= {self.keep(i, j)};")
        e.line("__syncwarp();")

    def quad(self, v: str, combine: str) -> None:
        """Combine ``v`` over the four lanes of a quad (the lanes of one row)."""
        for o in (1, 2):
            self.e.line(f"{v} = {combine.format(v, f'__shfl_xor_sync(0xffffffffu, {v}, {o})')};")

    def store(self, part: int, pre: list[str], row: str, col: str, value: str) -> None:
        """Element (row, col) of part ``part`` of batch ``pre`` through its placement
        (nothing when the kernel's output does not use the part)."""
        place = self.places[part]
        if place is None:
            return
        *outer, sr, sc = place.strides
        terms = [f"{place.offset}LL"] + [f"(i64)({p}) * {s}LL" for p, s in zip(pre, outer) if s]
        terms += [f"(i64)({row}) * {sr}LL", f"(i64)({col}) * {sc}LL"]
        self.e.line(f"out[{' + '.join(terms)}] = {value};")

    def batches(self):
        """The loop over batch indices (grid y, grid-stride)."""
        return self.e.scope(f"for (i64 bz = blockIdx.y; bz < {self.batch}LL; bz += gridDim.y)")


def attention_forward(e: CEmitter, cfg: LaunchConfig) -> None:
    """The forward kernel (module docstring)."""
    t = _Attention(e, cfg)
    a, B = t.a, t.B
    nt, nev = B // 8, a.ev_pad // 8
    t.start()
    with t.batches():
        pre = e.delinearize("bz", t.batch_shape)
        e.line("const int qb = blockIdx.x;")
        e.line(f"const int q0 = qb * {B};")
        e.line("__syncthreads();")
        t.load("Q", t.q, pre, "q0", t.L, t.E, a.e_pad)
        t.zeros("o", nev)
        e.line(f"float m[2] = {{{NEG_INF}, {NEG_INF}}}, l[2] = {{0.0f, 0.0f}};")
        last = f"min(qb, {t.nk - 1})" if t.causal else f"{t.nk - 1}"
        e.line("#pragma unroll 1")
        with e.scope(f"for (int kb = 0; kb <= {last}; ++kb)"):
            e.line(f"const int k0 = kb * {B};")
            e.line("__syncthreads();")
            t.load("K", t.k, pre, "k0", t.S, t.E, a.e_pad)
            t.load("V", t.v, pre, "k0", t.S, t.Ev, a.ev_pad)
            e.line("__syncthreads();")
            t.zeros("s", nt)
            t.product("s", nt, a.e_pad, lambda r, k: t.at("Q", f"w16 + {r}", k),
                      lambda k, c: t.at("K", c, k))
            # scale and mask, and the block's row maxima
            e.line(f"float bm[2] = {{{NEG_INF}, {NEG_INF}}};")
            with t.fragments(nt):
                e.line(f"const bool vis = {t.visible('(q0 + fr)', '(k0 + fc)')};")
                e.line(f"s[j][r] = vis ? s[j][r] * {t.scale} : {NEG_INF};")
                e.line("bm[r >> 1] = nv_max(bm[r >> 1], s[j][r]);")
            e.line("float corr[2], rs[2] = {0.0f, 0.0f};")
            with e.scope("for (int h = 0; h < 2; ++h)"):
                t.quad("bm[h]", "nv_max({}, {})")
                e.line("const float mn = nv_max(m[h], bm[h]);")
                e.line("corr[h] = expf(m[h] - mn);")
                e.line("m[h] = mn;")
                e.line("l[h] *= corr[h];")
            with t.fragments(nev):
                e.line("o[j][r] *= corr[r >> 1];")
            with t.fragments(nt):
                e.line("float p = expf(s[j][r] - m[r >> 1]);")
                e.line("rs[r >> 1] += p;")
                e.line(f"{t.at('P', 'fr', 'fc')} = p;")
            with e.scope("for (int h = 0; h < 2; ++h)"):
                t.quad("rs[h]", "({} + {})")
                e.line("l[h] += rs[h];")
            if t.dropout is not None:
                t.drop(rows_are_keys=False)
            e.line("__syncwarp();")
            t.product("o", nev, B, lambda r, k: t.at("P", f"w16 + {r}", k),
                      lambda k, c: t.at("V", k, c))
        with t.fragments(nev):
            e.line("const int gi = q0 + fr;")
            with e.scope(f"if (gi < {t.L} && fc < {t.Ev})"):
                t.store(0, pre, "gi", "fc", "o[j][r] / l[r >> 1]")
        with e.scope("if (tig == 0)"), e.scope("for (int h = 0; h < 2; ++h)"):
            e.line("const int gi = q0 + w16 + gid + h * 8;")
            with e.scope(f"if (gi < {t.L})"):
                t.store(1, pre, "gi", "0", "m[h] + logf(l[h])")


def attention_backward(e: CEmitter, cfg: LaunchConfig) -> None:
    """The backward kernel (module docstring): blocks ``x < ceil(S / B)`` accumulate a
    key block's dK and dV, the others a query block's dQ."""
    t = _Attention(e, cfg)
    a, B = t.a, t.B
    nt, ne, nev = B // 8, a.e_pad // 8, a.ev_pad // 8
    out, grad = t.op.operands[3], t.op.operands[4]
    t.start()

    def query_block(pre: list[str]) -> None:
        """Q, dO, D and the log-sum-exp of the query block at ``q0``."""
        t.load("Q", t.q, pre, "q0", t.L, t.E, a.e_pad)
        t.load("dO", grad, pre, "q0", t.L, t.Ev, a.ev_pad)
        e.line("__syncthreads();")
        with e.scope(f"for (int r = threadIdx.x; r < {B}; r += {t.threads})"):
            e.line("const int gi = q0 + r;")
            e.line("float d = 0.0f, lse = 0.0f;")
            with e.scope(f"if (gi < {t.L})"):
                with e.scope(f"for (int c = 0; c < {t.Ev}; ++c)"):
                    o = e.emit(out, pre + [f"(i64)gi * {t.Ev}LL + c"])
                    e.line(f"d += {t.at('dO', 'r', 'c')} * {o};")
                e.line(f"lse = {e.emit(out, pre + [f'{t.L * t.Ev}LL + gi'])};")
            e.line("sD[r] = d; slse[r] = lse;")
        e.line("__syncthreads();")

    def key_block(pre: list[str]) -> None:
        t.load("K", t.k, pre, "k0", t.S, t.E, a.e_pad)
        t.load("V", t.v, pre, "k0", t.S, t.Ev, a.ev_pad)

    with t.batches():
        pre = e.delinearize("bz", t.batch_shape)
        with e.scope(f"if (blockIdx.x < {t.nk})"):
            # ---- a key block: dK and dV over the query blocks that see it
            e.line("const int kb = blockIdx.x;")
            e.line(f"const int k0 = kb * {B};")
            e.line("__syncthreads();")
            key_block(pre)
            t.zeros("dk", ne)
            t.zeros("dv", nev)
            e.line("#pragma unroll 1")
            with e.scope(f"for (int qb = {'kb' if t.causal else '0'}; qb < {t.nq}; ++qb)"):
                e.line(f"const int q0 = qb * {B};")
                e.line("__syncthreads();")
                query_block(pre)
                t.zeros("st", nt)        # S^T: the warp's 16 keys x the block's queries
                t.product("st", nt, a.e_pad, lambda r, k: t.at("K", f"w16 + {r}", k),
                          lambda k, c: t.at("Q", c, k))
                with t.fragments(nt):    # fr: a key, fc: a query
                    e.line(f"const bool vis = {t.visible('(q0 + fc)', '(k0 + fr)')};")
                    e.line(f"const float p = vis ? expf(st[j][r] * {t.scale} - slse[fc]) "
                           ": 0.0f;")
                    e.line("st[j][r] = p;")
                    e.line(f"{t.at('P', 'fr', 'fc')} = p;")
                if t.dropout is not None:
                    t.drop(rows_are_keys=True)
                e.line("__syncwarp();")
                t.product("dv", nev, B, lambda r, k: t.at("P", f"w16 + {r}", k),
                          lambda k, c: t.at("dO", k, c))
                t.zeros("dpt", nt)      # dP^T = V dO^T
                t.product("dpt", nt, a.ev_pad, lambda r, k: t.at("V", f"w16 + {r}", k),
                          lambda k, c: t.at("dO", c, k))
                with t.fragments(nt):
                    e.line(f"const bool vis = {t.visible('(q0 + fc)', '(k0 + fr)')};")
                    e.line(f"dpt[j][r] = vis ? (dpt[j][r] * {t.at('P', 'fr', 'fc')} - "
                           f"st[j][r] * sD[fc]) * {t.scale} : 0.0f;")
                t.park("dpt", nt)
                t.product("dk", ne, B, lambda r, k: t.at("P", f"w16 + {r}", k),
                          lambda k, c: t.at("Q", k, c))
            with t.fragments(ne):
                e.line("const int gj = k0 + fr;")
                with e.scope(f"if (gj < {t.S} && fc < {t.E})"):
                    t.store(1, pre, "gj", "fc", "dk[j][r]")
            with t.fragments(nev):
                e.line("const int gj = k0 + fr;")
                with e.scope(f"if (gj < {t.S} && fc < {t.Ev})"):
                    t.store(2, pre, "gj", "fc", "dv[j][r]")
        with e.scope("else"):
            # ---- a query block: dQ over the key blocks it sees
            e.line(f"const int qb = blockIdx.x - {t.nk};")
            e.line(f"const int q0 = qb * {B};")
            e.line("__syncthreads();")
            query_block(pre)
            t.zeros("dq", ne)
            last = f"min(qb, {t.nk - 1})" if t.causal else f"{t.nk - 1}"
            e.line("#pragma unroll 1")
            with e.scope(f"for (int kb = 0; kb <= {last}; ++kb)"):
                e.line(f"const int k0 = kb * {B};")
                e.line("__syncthreads();")
                key_block(pre)
                e.line("__syncthreads();")
                t.zeros("s", nt)
                t.product("s", nt, a.e_pad, lambda r, k: t.at("Q", f"w16 + {r}", k),
                          lambda k, c: t.at("K", c, k))
                t.zeros("dp", nt)       # dP = dO V^T
                t.product("dp", nt, a.ev_pad, lambda r, k: t.at("dO", f"w16 + {r}", k),
                          lambda k, c: t.at("V", c, k))
                dp = "dp[j][r]"
                if t.dropout is not None:       # dP times the dropout factors, in the tile
                    with t.fragments(nt):
                        e.line(f"{t.at('P', 'fr', 'fc')} = dp[j][r];")
                    t.drop(rows_are_keys=False)
                    dp = t.at("P", "fr", "fc")
                with t.fragments(nt):    # fr: a query, fc: a key
                    e.line(f"const bool vis = {t.visible('(q0 + fr)', '(k0 + fc)')};")
                    e.line(f"const float p = expf(s[j][r] * {t.scale} - slse[fr]);")
                    e.line(f"dp[j][r] = vis ? p * ({dp} - sD[fr]) * {t.scale} : 0.0f;")
                t.park("dp", nt)
                t.product("dq", ne, B, lambda r, k: t.at("P", f"w16 + {r}", k),
                          lambda k, c: t.at("K", k, c))
            with t.fragments(ne):
                e.line("const int gi = q0 + fr;")
                with e.scope(f"if (gi < {t.L} && fc < {t.E})"):
                    t.store(0, pre, "gi", "fc", "dq[j][r]")


__all__ = ["attention_backward", "attention_forward"]
