"""LLVM IR for the fused attention kernels (``nova.attention``, ``nova.attention_grad``).

Both kernels take one batch index (all leading dims, flattened) per iteration of their
``[start, end)`` and keep everything of that batch in per-call buffers: the operands are
packed once per batch (read through the emitter, so transposed or reshaped views of the
arguments cost no copy in the graph), zero-padded to whole blocks, and the ``L x S``
scores only ever exist as one ``BR x BC`` block (``configurator.attention_blocks``).

Forward (flash attention): per block of BR queries, over the key blocks it can see (with
``causal``, key blocks past the query block's last row are skipped), S = Q K^T into the
block, then per row the online softmax -- the running maximum m, the running sum l,
``P = exp(S * scale - m)``, the accumulated output rescaled by ``exp(m_old - m)`` -- and
O += P V. The output is O / l. A masked score is -inf, so a row with nothing visible has
l = 0 and gives NaN, as the composite's softmax does.

The forward also stores each row's log-sum-exp, m + log(l), after the output.

Backward (the FlashAttention-2 recurrence, per batch): first D = rowsum(dO * O), with
each row's log-sum-exp read from the forward's result; then per key block, over the query blocks that can see it: P = exp(S * scale - lse),
dV += P^T dO, dP = dO V^T, dS = P (dP - D) scale, dK += dS^T Q, dQ += dS K. dK and dV
of the key block are stored when its query blocks are done, dQ at the end.

Each part of a kernel's packed result (output and log-sum-exp; dq, dk and dv) is stored
through its placement (``lowering.placement``): where it is packed, or, when the kernel
took over the elementwise assembly of those parts (a GPT's QKV gradient), where that
assembly puts it.

With dropout, the forward multiplies each P by its dropout factor after adding it to the
row's sum and before O += P V; the backward keeps P and the dropped P in two blocks
(dV += dropped(P)^T dO, dS = (dP dropped(P) - P D) scale). The factor of each position
is the Philox draw the composite's ``rng_uniform`` makes there (``keep_factor``),
recomputed where needed, never stored.

Every block product goes through ``_product``: an MR x NR register tile (NR = 2
vectors) over the whole depth, as in the GEMM's micro-kernel (``llvm_gemm.GemmDriver``),
on operands that are already packed, so no further packing is needed.
"""
from __future__ import annotations

from llvmlite import ir

from nova.compiler import dialect as nd
from nova.compiler.lowering.placement import attention_kernel
from nova.compiler.lowering.plan import contraction
from nova.compiler.targets.cpu.llvm_emit import F32, I1, I32, I64, PTR, Emitter, c64
from nova.compiler.targets.cpu.llvm_gemm import address_view, transpose_lanes


def _declared(module: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, ty, name=name)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


class Attention:
    """Shared state of both kernels: shapes, blocks, buffers and the block product."""

    def __init__(self, e: Emitter):
        self.e, self.b = e, e.b
        (self.op, self.places, self.q, self.k, self.v, self.batch_shape, self.L, self.E,
         self.S, self.Ev) = attention_kernel(contraction(e.fusion), e.root)
        self.scale = float(self.op.scale.value.data)
        self.causal = bool(self.op.causal.value.data)
        s = e.plan.schedule
        self.br, self.bc = s.blocks
        self.mr, self.nr = s.tile[0], s.tile[1]
        self.lanes = self.nr // 2
        self.Lp = _round_up(self.L, self.br)
        self.Sp = _round_up(self.S, self.bc)
        self.Ep = _round_up(self.E, self.nr)
        self.Evp = _round_up(self.Ev, self.nr)
        self.vec = ir.VectorType(F32, self.lanes)
        self.vptr = self.vec.as_pointer()
        module = e.module
        self.aligned_alloc = _declared(module, "aligned_alloc", ir.FunctionType(PTR, [I64, I64]))
        self.free = _declared(module, "free", ir.FunctionType(ir.VoidType(), [PTR]))
        self.memset = _declared(module, "llvm.memset.p0i8.i64", ir.FunctionType(
            ir.VoidType(), [PTR, ir.IntType(8), I64, I1]))
        self.fma = _declared(module, f"llvm.fma.v{self.lanes}f32",
                             ir.FunctionType(self.vec, [self.vec] * 3))
        self.vmax = _declared(module, f"llvm.maxnum.v{self.lanes}f32",
                              ir.FunctionType(self.vec, [self.vec] * 2))
        self.zero_vec = ir.Constant(self.vec, [0.0] * self.lanes)
        self.undef = ir.Constant(self.vec, ir.Undefined)
        self.splat_mask = ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes)
        self.accs = [[e.entry_alloca(self.vec) for _ in range(2)] for _ in range(self.mr)]
        self.dropout = nd.attention_keep_scale(self.op)
        self.key_words: list[ir.Value] = []

    # ------------------------------------------------------------ dropout

    def load_key(self) -> None:
        """Read the dropout's rng key (seed, offset) once per call."""
        if self.dropout is not None:
            self.e.cache = {}
            self.key_words = self.e.emit_vector_arg(self.op.rng[0])

    def keep_factor(self, bat: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
        """What dropout multiplies the probability of query ``i``, key ``j`` of batch
        ``bat`` by: the scale where the key's uniform draw at that position of the
        ``(..., L, S)`` probabilities is >= the rate, else 0 (the composite's
        ``where(rng_uniform >= rate, p * scale, 0)``, draw for draw). Positions past L
        or S draw too, harmlessly: their probability is 0."""
        b = self.b
        rate, scale = self.dropout
        lin = b.add(b.mul(b.add(b.mul(bat, c64(self.L)), i), c64(self.S)), j)
        u = self.e.philox_draw(self.key_words, lin, "f32")
        return b.select(b.fcmp_ordered(">=", u, self.f(rate)), self.f(scale), self.f(0.0))

    # ------------------------------------------------------------ buffers

    def buffer(self, floats: int) -> ir.Value:
        """A zeroed, 64-byte aligned heap buffer of ``floats`` floats, freed on return."""
        b, e = self.b, self.e
        nbytes = max(64, _round_up(floats * 4, 64))
        raw = b.call(self.aligned_alloc, [c64(64), c64(nbytes)])
        b.call(self.memset, [raw, ir.Constant(ir.IntType(8), 0), c64(nbytes),
                             ir.Constant(I1, 0)])
        e.cleanup.append(lambda: e.b.call(self.free, [raw]))
        return b.bitcast(raw, F32.as_pointer())

    def store_rows(self, part: int, pre: list[ir.Value], row: ir.Value, src: ir.Value,
                   src_off: ir.Value, cols: int, scale: ir.Value | None = None) -> None:
        """Row ``row`` of part ``part`` of batch ``pre``: its ``cols`` values read from
        ``src`` at ``src_off`` (times ``scale``), stored through the part's placement
        (nothing when the kernel's output does not use the part)."""
        place = self.places[part]
        if place is None:
            return
        b, e = self.b, self.e
        at = b.add(self.batch_offset(place.offset, place.strides, pre),
                   self.mul(row, place.strides[-2]))
        col_stride = place.strides[-1]

        def one(d: ir.Value) -> None:
            x = b.load(self.at(src, b.add(src_off, d)))
            b.store(x if scale is None else b.fmul(x, scale),
                    self.at(e.out_ptr, b.add(at, self.mul(d, col_stride))))
        e.loops.range(c64(0), c64(cols), one, "st")

    def batch_offset(self, offset: int, strides: tuple[int, ...], pre: list[ir.Value]
                     ) -> ir.Value:
        """``offset + sum(pre * strides)``: where batch ``pre``'s elements start in a
        buffer laid out with ``strides`` (its leading ones the batch dims')."""
        at = c64(offset)
        for iv, stride in zip(pre, strides):
            at = self.b.add(at, self.mul(iv, stride))
        return at

    def at(self, ptr: ir.Value, offset: ir.Value | int) -> ir.Value:
        return self.b.gep(ptr, [offset if isinstance(offset, ir.Value) else c64(offset)])

    def f(self, x: float) -> ir.Constant:
        return ir.Constant(F32, x)

    def add(self, x: ir.Value, n: int | ir.Value) -> ir.Value:
        return self.b.add(x, n if isinstance(n, ir.Value) else c64(n))

    def mul(self, x: ir.Value, n: int) -> ir.Value:
        return self.b.mul(x, c64(n))

    def smin(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)

    # ------------------------------------------------------------ packing

    def pack(self, value, pre: list[ir.Value], dst: ir.Value, rows: int, cols: int,
             ld: int, transposed: bool = False) -> None:
        """dst[r * ld + c] = value[pre, r, c] for r < rows, c < cols; with
        ``transposed``, dst[c * ld + r] instead (the pads stay as they are: zero).
        A view of an argument (``address_view``: transposes, slices, reshapes that
        keep strides) is read by address, which LLVM vectorizes along a unit-stride
        source line; anything else through the emitter."""
        e, b = self.e, self.b
        view = address_view(e, value)
        base = None
        if view is not None:
            base = self.batch_offset(view.offset, view.strides, pre)
            src = e.ptrs[view.arg]
            rs, cs = view.strides[-2], view.strides[-1]

        def body(idx: list[ir.Value]) -> None:
            r, c = idx
            if view is None:
                e.cache = {}
                x = e.emit(value, pre + [r, c])
            else:
                x = b.load(b.gep(src, [b.add(base, b.add(self.mul(r, rs), self.mul(c, cs)))]))
            off = self.add(self.mul(c, ld), r) if transposed else self.add(self.mul(r, ld), c)
            b.store(x, self.at(dst, off))
        lanes = self.lanes
        if not (transposed and view is not None and cs == 1 and rows >= lanes and
                cols >= lanes):
            e.loops.nest([rows, cols], body)
            return
        # Transposed from a view with unit stride along the columns: lanes x lanes
        # blocks as lanes row vectors, transposed in registers (``transpose_lanes``)
        # and stored as lanes column vectors; the rows and columns past the last whole
        # block element by element. (Element by element throughout, the K^T and V^T
        # packs were ~8% of the medium GPT's attention kernels.)
        whole_r, whole_c = rows // lanes * lanes, cols // lanes * lanes

        def block(idx: list[ir.Value]) -> None:
            r0, c0 = self.mul(idx[0], lanes), self.mul(idx[1], lanes)
            at = b.add(base, b.add(self.mul(r0, rs), c0))
            loaded = [b.load(b.bitcast(b.gep(src, [self.add(at, u * rs)]), self.vptr), align=4)
                      for u in range(lanes)]
            for t, line in enumerate(transpose_lanes(b, loaded)):
                out = self.add(self.mul(self.add(c0, t), ld), r0)
                b.store(line, b.bitcast(self.at(dst, out), self.vptr), align=4)
        e.loops.nest([rows // lanes, cols // lanes], block)
        if whole_c < cols:
            e.loops.nest([rows, cols], body, first=(c64(whole_c), c64(cols)), at=1)
        if whole_r < rows:
            e.loops.nest([rows, whole_c], body, first=(c64(whole_r), c64(rows)))

    def fold_lanes(self, vec: ir.Value, combine) -> ir.Value:
        """``vec``'s lanes combined into one: the upper half of the vector combined
        with the lower, ``log2(lanes)`` times (``combine(x, y)``: ``maxnum``, an add)."""
        b, lanes = self.b, self.lanes
        width = lanes
        while width > 1:
            width //= 2
            upper = b.shuffle_vector(vec, self.undef, ir.Constant(
                ir.VectorType(I32, lanes), [width + k if k < width else k for k in range(lanes)]))
            vec = combine(vec, upper)
        return b.extract_element(vec, ir.Constant(I32, 0))

    # ------------------------------------------------------------ the block product

    def product(self, c: ir.Value, ldc: int, a: ir.Value, ars: int, aks: int, bm: ir.Value,
                ldb: int, rows: int, cols: int, depth: int, accumulate: bool) -> None:
        """C[r, j] (+)= sum_k A[r * ars + k * aks] B[k * ldb + j] for r < rows, j < cols
        (a multiple of NR), k < depth: MR x NR register tiles (the last row tile shorter
        when MR does not divide ``rows``), each over the whole depth."""
        full, rest = divmod(rows, self.mr)
        for ct in range(cols // self.nr):
            col = ct * self.nr
            if full:
                self.e.loops.range(c64(0), c64(full), lambda t, col=col: self.tile(
                    c, ldc, a, ars, aks, bm, ldb, self.mul(t, self.mr), self.mr, col, depth,
                    accumulate), "rt")
            if rest:
                self.tile(c, ldc, a, ars, aks, bm, ldb, c64(full * self.mr), rest, col, depth,
                          accumulate)

    def tile(self, c: ir.Value, ldc: int, a: ir.Value, ars: int, aks: int, bm: ir.Value,
             ldb: int, r0: ir.Value, mr: int, col: int, depth: int, accumulate: bool) -> None:
        b = self.b
        for r in range(mr):
            for v in range(2):
                b.store(self.zero_vec, self.accs[r][v])
        a_rows = [self.mul(self.add(r0, r), ars) for r in range(mr)]

        def step(k: ir.Value) -> None:
            brow = self.add(self.mul(k, ldb), col)
            bv = [b.load(b.bitcast(self.at(bm, self.add(brow, v * self.lanes)), self.vptr),
                         align=4) for v in range(2)]
            ak = self.mul(k, aks)
            for r in range(mr):
                x = b.load(self.at(a, b.add(a_rows[r], ak)))
                xs = b.shuffle_vector(b.insert_element(self.undef, x, ir.Constant(I32, 0)),
                                      self.undef, self.splat_mask)
                for v in range(2):
                    acc = self.accs[r][v]
                    b.store(b.call(self.fma, [xs, bv[v], b.load(acc)]), acc)
        self.e.loops.range(c64(0), c64(depth), step, "k")
        for r in range(mr):
            row = self.mul(self.add(r0, r), ldc)
            for v in range(2):
                ptr = b.bitcast(self.at(c, self.add(row, col + v * self.lanes)), self.vptr)
                acc = b.load(self.accs[r][v])
                if accumulate:
                    acc = b.fadd(acc, b.load(ptr, align=4))
                b.store(acc, ptr, align=4)

    # ------------------------------------------------------------ rows of a score block

    def visible_columns(self, i: ir.Value, j0: ir.Value) -> ir.Value:
        """How many leading columns of a score block row query ``i`` sees in the key
        block starting at ``j0``: column ``c`` is visible when ``c`` < this (it may be
        negative or past the block). Computed once per row, so a row loop tests one
        compare against a loop-invariant bound: with the three compares of the mask
        (``i < L``, ``j < S``, ``j <= i``) inside the row max loop, LLVM 22's loop
        vectorizer failed an assertion ("VPlan cost model and legacy cost model
        disagreed") on some shapes (L = S = 31, E = 32)."""
        b = self.b
        end = c64(self.S)
        if self.causal:
            after_i = b.add(i, c64(1))
            end = b.select(b.icmp_signed("<", after_i, end), after_i, end)
        end = b.select(b.icmp_signed("<", i, c64(self.L)), end, c64(0))
        return b.sub(end, j0)

    def scaled(self, sb: ir.Value, r: ir.Value, seen: ir.Value, c: ir.Value) -> ir.Value:
        """The masked, scaled score of block row ``r``, column ``c`` (``seen``: the
        row's ``visible_columns``)."""
        b = self.b
        s = b.fmul(b.load(self.at(sb, self.add(self.mul(r, self.bc), c))), self.f(self.scale))
        return b.select(b.icmp_signed("<", c, seen), s, self.f(float("-inf")))

    def row_loop(self, body, name: str) -> None:
        self.e.loops.range(c64(0), c64(self.bc), body, name, md=self.e.interleave(2))

    def online_row(self, sb: ir.Value, r: ir.Value, i: ir.Value, j0: ir.Value,
                   m_slot: ir.Value, l_slot: ir.Value, bat: ir.Value) -> ir.Value:
        """One row of the online softmax over a score block: update the running maximum
        and sum, write P = exp(s - m) into the block (times its dropout factor, which
        the sum does not see); returns the factor exp(m_old - m_new) that rescales what
        was accumulated before."""
        b, e = self.b, self.e
        seen = self.visible_columns(i, j0)
        m_old = b.load(m_slot)
        m_new = b.call(e.intrinsic("maxnum", F32, 2), [m_old, self.row_max(sb, r, seen)])
        neg_inf = self.f(float("-inf"))
        shift = b.select(b.fcmp_ordered("==", m_new, neg_inf), self.f(0.0), m_new)
        total = e.entry_alloca(F32)
        b.store(self.f(0.0), total)

        def expo(c: ir.Value) -> None:
            p = e._exp_f32(b.fsub(self.scaled(sb, r, seen, c), shift))
            kept = p if self.dropout is None else b.fmul(p, self.keep_factor(bat, i, b.add(j0, c)))
            b.store(kept, self.at(sb, self.add(self.mul(r, self.bc), c)))
            b.store(b.fadd(b.load(total), p, flags=("reassoc", "contract")), total)
        self.row_loop(expo, "ex")
        alpha = e._exp_f32(b.fsub(m_old, shift))
        b.store(b.fadd(b.fmul(b.load(l_slot), alpha), b.load(total)), l_slot)
        b.store(m_new, m_slot)
        return alpha

    def row_max(self, sb: ir.Value, r: ir.Value, seen: ir.Value) -> ir.Value:
        """The largest masked, scaled score of block row ``r`` (``scaled``), -inf when
        none is visible: the row's BC / lanes vectors combined by ``maxnum``, then the
        lanes of the one left halved until one remains. Written out as vectors, not left
        to the loop vectorizer: without ``nnan``, LLVM lowers the end of a vectorized
        ``maxnum`` reduction as a chain of scalar steps, each fixing up NaN (~50
        instructions in a row; measured ~16% of the forward kernel's samples, 16 x 8
        heads x 256 x 32). ``maxnum`` ignores NaN in any order, and is otherwise exact,
        so the result is the loop's, bit for bit."""
        b, lanes = self.b, self.lanes
        i32 = ir.IntType(32)
        ivec = ir.VectorType(i32, lanes)
        bound = b.trunc(self.smin(b.select(b.icmp_signed("<", seen, c64(0)), c64(0), seen),
                                  c64(self.bc)), i32)
        bounds = b.shuffle_vector(b.insert_element(ir.Constant(ivec, ir.Undefined), bound,
                                                   ir.Constant(I32, 0)),
                                  ir.Constant(ivec, ir.Undefined), self.splat_mask)
        scale = ir.Constant(self.vec, [self.scale] * lanes)
        hidden = ir.Constant(self.vec, [float("-inf")] * lanes)
        row = self.mul(r, self.bc)
        peak = None
        for v in range(self.bc // lanes):
            ptr = b.bitcast(self.at(sb, self.add(row, v * lanes)), self.vptr)
            cols = ir.Constant(ivec, list(range(v * lanes, (v + 1) * lanes)))
            x = b.select(b.icmp_signed("<", cols, bounds), b.fmul(b.load(ptr, align=4), scale),
                         hidden)
            peak = x if peak is None else b.call(self.vmax, [peak, x])
        return self.fold_lanes(peak, lambda x, y: b.call(self.vmax, [x, y]))

    def key_blocks_for(self, i0: ir.Value) -> ir.Value:
        """How many key blocks the query block starting at row ``i0`` sees."""
        n = -(-self.S // self.bc)
        if not self.causal:
            return c64(n)
        last = self.smin(self.add(i0, self.br), c64(self.S))     # keys < last are visible
        return self.b.udiv(self.add(last, self.bc - 1), c64(self.bc))

    def batches(self, body) -> None:
        """``body(pre, batch)`` for every batch index in the call's ``[start, end)``."""
        e = self.e

        def one(bat: ir.Value) -> None:
            pre = e.delinearize(bat, self.batch_shape) if self.batch_shape else []
            body(pre, bat)
        e.loops.range(e.fn.args[1], e.fn.args[2], one, "bat")


def attention_forward(e: Emitter) -> None:
    """The ``attention`` strategy (module docstring)."""
    a = Attention(e)
    b = a.b
    L, S, E, Ev, br, bc = a.L, a.S, a.E, a.Ev, a.br, a.bc
    qp = a.buffer(a.Lp * E)            # Q, row-major, rows zero past L
    ktp = a.buffer(E * a.Sp)           # K^T, columns zero past S
    vp = a.buffer(a.Sp * a.Evp)        # V, zero past S and Ev
    sb = a.buffer(br * bc)             # the score block
    ob = a.buffer(br * a.Evp)          # the output accumulators of a query block
    m_slots = a.buffer(br)
    l_slots = a.buffer(br)
    lse_slot = e.entry_alloca(F32)

    def per_batch(pre: list[ir.Value], bat: ir.Value) -> None:
        a.load_key()
        a.pack(a.q, pre, qp, L, E, E)
        a.pack(a.k, pre, ktp, S, E, a.Sp, transposed=True)
        a.pack(a.v, pre, vp, S, Ev, a.Evp)

        def per_query_block(qb: ir.Value) -> None:
            i0 = a.mul(qb, br)

            def reset(r: ir.Value) -> None:
                b.store(a.f(float("-inf")), a.at(m_slots, r))
                b.store(a.f(0.0), a.at(l_slots, r))
                e.loops.range(c64(0), c64(a.Evp), lambda d: b.store(
                    a.f(0.0), a.at(ob, b.add(a.mul(r, a.Evp), d))), "z")
            e.loops.range(c64(0), c64(br), reset, "rs")

            def per_key_block(kb: ir.Value) -> None:
                j0 = a.mul(kb, bc)
                a.product(sb, bc, a.at(qp, a.mul(i0, E)), E, 1, a.at(ktp, j0), a.Sp,
                          br, bc, E, accumulate=False)

                def row(r: ir.Value) -> None:
                    alpha = a.online_row(sb, r, b.add(i0, r), j0, a.at(m_slots, r),
                                         a.at(l_slots, r), bat)
                    base = a.mul(r, a.Evp)
                    e.loops.range(c64(0), c64(a.Evp), lambda d: b.store(
                        b.fmul(b.load(a.at(ob, b.add(base, d))), alpha),
                        a.at(ob, b.add(base, d))), "sc")
                e.loops.range(c64(0), c64(br), row, "row")
                a.product(ob, a.Evp, sb, bc, 1, a.at(vp, a.mul(j0, a.Evp)), a.Evp,
                          br, a.Evp, bc, accumulate=True)
            e.loops.range(c64(0), a.key_blocks_for(i0), per_key_block, "kb")

            rows = a.smin(c64(br), b.sub(c64(L), i0))

            def store(r: ir.Value) -> None:
                i = b.add(i0, r)
                total = b.load(a.at(l_slots, r))
                inv = b.fdiv(a.f(1.0), total)
                a.store_rows(0, pre, i, ob, a.mul(r, a.Evp), Ev, inv)
                # the row's log-sum-exp for the backward: m + log(l), with the same
                # shift the row used (0 while it saw nothing)
                m = b.load(a.at(m_slots, r))
                shift = b.select(b.fcmp_ordered("==", m, a.f(float("-inf"))), a.f(0.0), m)
                b.store(b.fadd(shift, e._log_f32(total)), lse_slot)
                a.store_rows(1, pre, i, lse_slot, c64(0), 1)
            e.loops.range(c64(0), rows, store, "out")
        e.loops.range(c64(0), c64(a.Lp // br), per_query_block, "qb")
    a.batches(per_batch)


def attention_backward(e: Emitter) -> None:
    """The ``attention_grad`` strategy (module docstring)."""
    a = Attention(e)
    b = a.b
    L, S, E, Ev, br, bc = a.L, a.S, a.E, a.Ev, a.br, a.bc
    Ep, Evp, Sp, Lp = a.Ep, a.Evp, a.Sp, a.Lp
    o_value, g_value = a.op.operands[3], a.op.operands[4]
    # O is the forward's packed result, a kernel argument read where it is: its rows
    # by address, as vectors (through the emitter, element by element, D was ~7% of
    # the medium GPT's attention backward)
    o_view = address_view(e, o_value)
    assert o_view is not None and o_view.strides[-1] == 1, "O is a contiguous argument"
    o_src = e.ptrs[o_view.arg]
    qp = a.buffer(Lp * Ep)             # Q (row stride Ep): A of S, B of dK
    ktp = a.buffer(E * Sp)             # K^T: B of S
    kp = a.buffer(Sp * Ep)             # K: B of dQ
    vtp = a.buffer(Ev * Sp)            # V^T: B of dP
    gp = a.buffer(Lp * Evp)            # dO: A of dP, B of dV
    lse = a.buffer(Lp)                 # the forward's log-sum-exp of each row
    dsum = a.buffer(Lp)                # D = rowsum(dO * O)
    dq = a.buffer(Lp * Ep)
    dk = a.buffer(bc * Ep)
    dv = a.buffer(bc * Evp)
    sb = a.buffer(br * bc)             # S, then P
    pb = a.buffer(br * bc)             # dP, then dS
    zb = a.buffer(br * bc) if a.dropout is not None else sb   # P after dropout
    scale = a.f(a.scale)

    def zero(ptr: ir.Value, n: int) -> None:
        e.loops.range(c64(0), c64(n), lambda i: b.store(a.f(0.0), a.at(ptr, i)), "zero")

    def per_batch(pre: list[ir.Value], bat: ir.Value) -> None:
        a.load_key()
        a.pack(a.q, pre, qp, L, E, Ep)
        a.pack(a.k, pre, ktp, S, E, Sp, transposed=True)
        a.pack(a.k, pre, kp, S, E, Ep)
        a.pack(a.v, pre, vtp, S, Ev, Sp, transposed=True)
        a.pack(g_value, pre, gp, L, Ev, Evp)
        zero(dq, Lp * Ep)

        o_row = b.gep(o_src, [a.batch_offset(o_view.offset, o_view.strides, pre)])

        def d_row(i: ir.Value) -> None:       # D = rowsum(dO * O), and the forward's lse
            row, g_row = a.mul(i, Ev), a.mul(i, Evp)
            whole = Ev // a.lanes * a.lanes
            total = a.f(0.0)
            if whole:      # whole vectors of the row, one horizontal sum at the end
                acc = a.zero_vec
                for v in range(0, whole, a.lanes):
                    g = b.load(b.bitcast(a.at(gp, a.add(g_row, v)), a.vptr), align=4)
                    o = b.load(b.bitcast(a.at(o_row, a.add(row, v)), a.vptr), align=4)
                    acc = b.call(a.fma, [g, o, acc])
                total = a.fold_lanes(acc, b.fadd)
            acc_slot = e.entry_alloca(F32)
            b.store(total, acc_slot)

            def term(d: ir.Value) -> None:
                o = b.load(a.at(o_row, b.add(row, d)))
                g = b.load(a.at(gp, b.add(g_row, d)))
                b.store(b.fadd(b.load(acc_slot), b.fmul(g, o), flags=("reassoc", "contract")),
                        acc_slot)
            if whole < Ev:
                e.loops.range(c64(whole), c64(Ev), term, "dd")
            b.store(b.load(acc_slot), a.at(dsum, i))
            b.store(b.load(a.at(o_row, b.add(c64(L * Ev), i))), a.at(lse, i))
        e.loops.range(c64(0), c64(L), d_row, "drow")

        def per_key_block(kb: ir.Value) -> None:
            j0 = a.mul(kb, bc)
            zero(dk, bc * Ep)
            zero(dv, bc * Evp)
            first_qb = b.udiv(j0, c64(br)) if a.causal else c64(0)

            def per_query_block(qb: ir.Value) -> None:
                i0 = a.mul(qb, br)
                a.product(sb, bc, a.at(qp, a.mul(i0, Ep)), Ep, 1, a.at(ktp, j0), Sp,
                          br, bc, E, accumulate=False)

                def probabilities(r: ir.Value) -> None:
                    i = b.add(i0, r)
                    shift = b.load(a.at(lse, i))
                    seen = a.visible_columns(i, j0)

                    def one(c: ir.Value) -> None:
                        s = a.scaled(sb, r, seen, c)
                        p = e._exp_f32(b.fsub(s, shift))
                        p = b.select(b.icmp_signed("<", c, seen), p, a.f(0.0))
                        b.store(p, a.at(sb, b.add(a.mul(r, bc), c)))
                        if a.dropout is not None:
                            b.store(b.fmul(p, a.keep_factor(bat, i, b.add(j0, c))),
                                    a.at(zb, b.add(a.mul(r, bc), c)))
                    a.row_loop(one, "p")
                e.loops.range(c64(0), c64(br), probabilities, "prow")
                # dV += dropped(P)^T dO
                a.product(dv, Evp, zb, 1, bc, a.at(gp, a.mul(i0, Evp)), Evp,
                          bc, Evp, br, accumulate=True)
                # dP = dO V^T
                a.product(pb, bc, a.at(gp, a.mul(i0, Evp)), Evp, 1, a.at(vtp, j0), Sp,
                          br, bc, Ev, accumulate=False)

                def ds_row(r: ir.Value) -> None:
                    i = b.add(i0, r)
                    d_i = b.load(a.at(dsum, i))
                    seen = a.visible_columns(i, j0)

                    def one(c: ir.Value) -> None:
                        # a hidden score's gradient is exactly 0, as the composite's
                        # where makes it (even where D is NaN)
                        at = a.at(pb, b.add(a.mul(r, bc), c))
                        p = b.load(a.at(sb, b.add(a.mul(r, bc), c)))
                        if a.dropout is None:
                            ds = b.fmul(b.fmul(p, b.fsub(b.load(at), d_i)), scale)
                        else:      # P (dP z - D) = dP (P z) - P D, z the dropout factor
                            pz = b.load(a.at(zb, b.add(a.mul(r, bc), c)))
                            ds = b.fmul(b.fsub(b.fmul(b.load(at), pz), b.fmul(p, d_i)), scale)
                        b.store(b.select(b.icmp_signed("<", c, seen), ds, a.f(0.0)), at)
                    a.row_loop(one, "ds")
                e.loops.range(c64(0), c64(br), ds_row, "dsrow")
                # dK += dS^T Q; dQ += dS K
                a.product(dk, Ep, pb, 1, bc, a.at(qp, a.mul(i0, Ep)), Ep,
                          bc, Ep, br, accumulate=True)
                a.product(a.at(dq, a.mul(i0, Ep)), Ep, pb, bc, 1, a.at(kp, a.mul(j0, Ep)), Ep,
                          br, Ep, bc, accumulate=True)
            e.loops.range(first_qb, c64(Lp // br), per_query_block, "bqb")

            keys = a.smin(c64(bc), b.sub(c64(S), j0))

            def store(c: ir.Value) -> None:
                j = b.add(j0, c)
                a.store_rows(1, pre, j, dk, a.mul(c, Ep), E)
                a.store_rows(2, pre, j, dv, a.mul(c, Evp), Ev)
            e.loops.range(c64(0), keys, store, "skv")
        e.loops.range(c64(0), c64(Sp // bc), per_key_block, "bkb")
        e.loops.range(c64(0), c64(L), lambda i: a.store_rows(0, pre, i, dq, a.mul(i, Ep), E),
                      "sdq")
    a.batches(per_batch)


__all__ = ["attention_backward", "attention_forward"]
