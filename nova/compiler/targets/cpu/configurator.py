"""The analytic configurator: (kernel, CpuSpec) -> schedule, with no search.

Each function is pure and documents its formula; the chosen values and their
derivation appear in ``nv.debug.dump_ir(..., stage="fused")``.

GEMM follows the BLIS analytical model (Low et al., "Analytical modeling is enough for
high-performance BLIS", TOMS 2016): C += A B is computed as

    for jc in N step NC:            B panel KC x NC packed, lives in (a share of) L3
      for pc in K step KC:
        pack B[pc:pc+KC, jc:jc+NC]  as NR-wide micro-panels (KC x NR each, contiguous)
        for ic in M step MC:
          pack A[ic:ic+MC, pc:pc+KC] as MR-tall micro-panels (KC x MR each): lives in L2
          for jr in NC step NR:     the B micro-panel (in L1, or streaming from L2
            for ir in MC step MR:   when KC is past the L1 bound) meets every A
                                    micro-panel of the block, streaming from L2
              micro-kernel: an MR x NR tile of C in registers over KC rank-1 updates

- Register tile: NR = 2 vectors, MR = (registers - 3) // 2 (see ``gemm_tile``).
- KC: BLIS keeps the B micro-panel (KC x NR) in half the L1; Nova also bounds KC
  below so that reading and writing the C tile once per K block stays a small share of
  the tile's FMA time (see ``gemm_kc``), and balances the K blocks.
- MC: half the L2 holds the packed A block (MC x KC), the other half B micro-panels
  passing through and C: MC = (L2 / 2) / (KC x itemsize), a multiple of MR.
- NC: a thread's B panel takes half of its share of the L3 (``l3_share``: L3 / cores,
  at most 4 MiB): NC = (share / 2) / (KC x itemsize), a multiple of NR, at most N
  rounded up. The same width serves a shared panel: its two alternating buffers then
  take one core's share.
- Packing: both operands, always (the derivation says so). Packed A makes the MR
  elements broadcast per k contiguous (one cache line), whatever A's layout -- a
  transposed A (weight gradients X^T dY) is otherwise read with stride M, a new page
  per k; it is packed once per MC x KC block and reused by all NC / NR micro-tiles of
  the panel, one packed element per 2 NC FLOPs. Packed B turns any layout (W^T in the
  forward) into unit-stride vectors, one packed element per 2 x (the thread's rows)
  FLOPs.
- Threads: the kernel's parallel extent is the MR-row micro-panels of C (split "m") or
  its NR-column micro-panels (split "n"), over all batches; each thread blocks its own
  range by MC (or NC) as above. In a single (unbatched) product split "m", every
  thread walks the same NC panels and K blocks, so the threads can share one packed B
  panel (``shared_b``, as BLIS and OpenBLAS do): each packs 1/threads of its
  micro-panels and waits at a barrier until all are packed; two panels alternate, so
  one barrier per K block suffices (a thread packs panel t + 1 only after every
  thread passed barrier t, that is, finished computing on panel t - 1, which used the
  same buffer). Packing is then M K + K N elements in all, whatever the thread count,
  instead of M K + threads x K N; split "n" would pack threads x M K + K N. Sharing
  starts at ``SHARED_B_MIN_CORES``: the duplicated packing grows with the threads,
  while the barrier makes every K block wait for the slowest thread. Measured on the
  2-core bench VM (dW of the small GPT, 384 x 2048 x 128): B packing took ~5% of
  each thread's time, sharing saved about half of it, and the barrier waits cost as
  much (7% of samples), more when the host deschedules a vCPU. When sharing, an
  unbatched product is split "m" whenever its MR-row micro-panels are at least
  ``MIN_PANELS_PER_THREAD`` per core (the last chunk is at most 1/that short of the
  others); otherwise, and in batched products (whose chunks cover different batches
  and share nothing), the split goes along the larger of M and N, each thread packing
  the whole of the other operand for its range: the duplicated packing is then of the
  smaller operand.
- Partial sums across K blocks accumulate in the output (C += per block); when the
  output cannot hold float32 partials (an epilogue that casts), K is not blocked.

Parallel split: a kernel is split into n chunks only when its estimated time T is at
least n x ``DISPATCH_SECONDS``, the cost of handing a chunk to a spinning worker and
waiting for it (``nova.runtime.threads``; measured ~4 us with the launch and join
calls): n = min(threads, extent, floor(T / DISPATCH_SECONDS)), so a kernel is split in
two only when T / 2 + DISPATCH_SECONDS <= T. T (``estimated_seconds``): a tiled GEMM's
2 M N K FLOPs at one core's peak; any other kernel ~1 ns per iteration of its loop nest
(a vectorized float32 element streams 8-12 bytes at ~10 GB/s per core).

Classification: arithmetic intensity (FLOPs per byte moved) against the machine balance
(peak FLOP/s / bandwidth): below it a kernel is memory-bound and its schedule only needs
to stream (vectorize, split across cores); above it, compute-bound (register tiling).
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nova.compiler import dialect as nd
from nova.compiler.targets.cpu.device import CpuSpec

if TYPE_CHECKING:
    from nova.compiler.lowering.plan import KernelPlan, Schedule

DISPATCH_SECONDS = 5e-6
C_TRAFFIC_SHARE = 0.03    # C tile memory traffic per K block, as a share of its FMA time
MIN_MC_PANELS = 4         # A micro-panels an MC block holds at least
CAUSAL_DIAGONAL_BLOCKS = 8  # causal attention: blocks along the diagonal, at least
MR_SHRINK = 0.75           # the shortest register tile gemm_rows considers, x the tallest
MR_PADDING_GAIN = 0.04     # ... and the share of padded rows it must save
MR_MIN_SAVED_FLOPS = 5e7   # ... and at least this many FLOPs a call (~0.25 ms)
MIN_PANELS_PER_THREAD = 8  # MR-row micro-panels per core for a shared-B split "m"
SHARED_B_MIN_CORES = 4     # cores from which threads share the packed B panel
L3_PER_CORE_MAX = 4 << 20  # bytes of L3 a core may count on (see ``l3_share``)
SECONDS_PER_ITERATION = 1e-9
STREAM_CHUNKS_PER_THREAD = 4   # chunks per thread of a streaming kernel (``chunks_per_thread``)
GEMM_CHUNKS_PER_THREAD = 2     # ... and of a tiled GEMM, whose chunks each pack an operand


@dataclass(frozen=True)
class GemmTile:
    """A GEMM schedule: register tile MR x NR, cache blocks KC, MC, NC, thread split."""
    mr: int
    nr: int
    nc: int
    derivation: str
    kc: int = 0
    mc: int = 0
    split: str = "m"          # "m": threads split C's rows; "n": its columns
    shared_b: bool = False    # threads pack one B panel together (split "m", unbatched)
    b_in_place: bool = False  # B's rows read where they are (``gemm_reads_b_in_place``)


def _round_down(x: int, multiple: int) -> int:
    return max(multiple, x // multiple * multiple)


def gemm_kc_bounds(spec: CpuSpec, nr: int, mr: int, itemsize: int = 4) -> tuple[int, int, int]:
    """(KC_L1, KC_C, cap) of ``gemm_kc``."""
    lanes = spec.lanes(itemsize)
    by_l1 = (spec.l1d // 2) // (nr * itemsize)
    per_core = spec.bandwidth / max(spec.cores, 1)
    by_c = -(-int(2 * itemsize * lanes * spec.fma_units * spec.ghz * 1e9) //
             int(per_core * C_TRAFFIC_SHARE))
    cap = (spec.l2 // 2) // (MIN_MC_PANELS * mr * itemsize)
    return by_l1, by_c, cap


def gemm_kc(spec: CpuSpec, k: int, nr: int, mr: int, itemsize: int = 4) -> int:
    """KC, the depth of one K block: the larger of two lower bounds, capped by the L2,
    then balanced over K.

    - L1 (BLIS): the B micro-panel (KC x NR) in half the L1,
      KC_L1 = (L1 / 2) / (NR x itemsize).
    - C traffic: each K block reads and writes the MR x NR tile of C once, from memory
      when C is large (a GPT's logits); that costs 2 x MR x NR x itemsize bytes at the
      core's share of the bandwidth, against KC x MR x NR / (lanes x FMA units) cycles of
      FMAs. Keeping it under ``C_TRAFFIC_SHARE`` of them needs
      KC_C = 2 x itemsize x lanes x FMA units x clock / (bandwidth per core x share).
      Above KC_L1 the B micro-panel streams from L2 instead: 2 vectors per 2 MR / units
      cycles, a small fraction of any L2's bandwidth. Measured, one thread on the
      2-core Zen 3 bench VM (AVX2, 10 GB/s per core): at KC = 256 (the L1 bound) the
      model puts the C traffic at 12% of the FMA time, at KC = 1024 at 3%, and 1024
      ran 5% (2048 x 2048 x 512) and 10% (1024^3) faster, KC = 683 in between; on an
      earlier AVX-512 machine, 2048^3 went from 198 to 236 GFLOP/s per core as KC grew
      from 187 to 683. Hence a 3% share.
    - Cap: an MC block must still hold ``MIN_MC_PANELS`` A micro-panels in half the L2,
      KC <= (L2 / 2) / (MIN_MC_PANELS x MR x itemsize).
    Balanced: KC = ceil(K / ceil(K / KC)), so no K block is a sliver.
    """
    by_l1, by_c, cap = gemm_kc_bounds(spec, nr, mr, itemsize)
    kc = max(1, min(max(by_l1, by_c), cap))
    if k <= 0:
        return 1
    return -(-k // -(-k // kc))


def gemm_mc(spec: CpuSpec, kc: int, mr: int, itemsize: int = 4) -> int:
    """MC: the packed A block (MC x KC) in half the L2: MC = (L2 / 2) / (KC x itemsize),
    rounded down to a multiple of MR (at least MR)."""
    return _round_down((spec.l2 // 2) // max(kc * itemsize, 1), mr)


def l3_share(spec: CpuSpec) -> int:
    """Bytes of L3 one core can count on: L3 / cores, at most ``L3_PER_CORE_MAX``.

    Why the cap: an L3 is shared by every core of its die, and sysfs in a VM reports
    the host die's whole L3 for the VM's few vCPUs (the bench VM: 32 MiB for 2), while
    the host's other tenants use most of it. Server dies carry 1.5-4 MiB of L3 per
    core, so no core may count on more than 4 MiB. Measured on the bench VM, 2048^3 on
    2 threads with KC = 1024: a B panel of 8 MiB per thread (NC 2048, half of L3 /
    cores) ran at 116 GFLOP/s, 4 MiB at 136, 2 MiB (half of the capped share) at 153,
    1.5 MiB at 136."""
    return min(spec.l3 // max(spec.cores, 1), L3_PER_CORE_MAX)


def gemm_panel_width(spec: CpuSpec, kc: int, nr: int, itemsize: int = 4) -> int:
    """NC: one thread's packed B panel (KC x NC) in half its share of the L3
    (``l3_share``): NC = (share / 2) / (KC x itemsize), rounded down to a multiple of
    NR (at least NR)."""
    return _round_down((l3_share(spec) // 2) // max(kc * itemsize, 1), nr)


def gemm_rows(mr_max: int, m: int, needed_chains: int, row_flops: float = math.inf
              ) -> tuple[int, str]:
    """MR for a product of ``m`` rows: the register tile computes ``ceil(m / MR) x MR``
    rows, the last panel's padding included, so MR = ``mr_max`` wastes up to MR - 1 rows
    of FMAs -- 9% of a 64-row product (a convolution's 64 output channels: 70 rows),
    24% of a 32-row one (42 rows). A shorter tile, down to ``MR_SHRINK`` x ``mr_max``
    and keeping ``2 MR`` FMA chains against the latency, is taken when it computes at
    least ``MR_PADDING_GAIN`` fewer rows (64 -> MR 13: 65 rows; 32 -> 11: 33 rows) and
    that saves at least ``MR_MIN_SAVED_FLOPS`` a call (``row_flops``: the FLOPs of one
    row, all batches); it loads its B vectors once per MR rows instead of ``mr_max``,
    which the FMA-bound micro-kernel hides. Every other MR is another driver to compile
    once (~0.75 s, then on disk: ``gemm_support``), so products where the gain is
    smaller -- of one panel anyway (M <= ``mr_max``), or saving a fraction of a
    millisecond (the small GPT's 128-row weight gradients: 21 MFLOP; a 65-row
    vocabulary gradient over 4,096 tokens) -- keep ``mr_max``: a cold first step does
    not wait for a driver that saves it nothing. Measured on convolutions of batch 8
    (forward + both gradients, the two settings paired rep by rep in one process): a
    5 x 5 of 32 channels (MR 11 for its 32-row input gradient, 13 for its 64-row
    products) 0.88x the kernel time, 3 x 3s of 64 channels at 56 x 56 and 128 at 28 x
    28 (MR 13) 0.92x and 0.95x. Returns MR and the derivation's note ("" for
    ``mr_max``)."""
    def rows(mr: int) -> int:
        return -(-max(m, 1) // mr) * mr

    if m <= mr_max:                               # one panel whatever MR
        return mr_max, ""
    lowest = max(1, math.ceil(MR_SHRINK * mr_max))
    shorter = [mr for mr in range(mr_max - 1, lowest - 1, -1) if 2 * mr >= needed_chains]
    best = min(shorter, key=rows, default=mr_max)   # ties: the larger MR (listed first)
    if rows(best) > (1 - MR_PADDING_GAIN) * rows(mr_max) or \
            (rows(mr_max) - rows(best)) * row_flops < MR_MIN_SAVED_FLOPS:
        return mr_max, ""
    return best, (f", M={m} pads to {rows(mr_max)} rows, MR {best} to {rows(best)} "
                  f"-> MR = {best}")


# At most this many rows (M) for a GEMM to read a B of table rows in place
# (``gemm_reads_b_in_place``). Kernel time of conv2d forward + both gradients, batch
# 8, under ``nv.compile`` (``nv.debug.profile``, median of 7 per process; never /
# up to 64 rows / always, alternating processes, median of 4): a 5x5 of 32 -> 64
# channels at 28x28 (M = 64 and 32) 13.2 / 11.6 / 12.0 ms; a 3x3 of 64 -> 64 at 56x56
# 34.5 / 31.6 / 32.1; of 128 -> 128 at 28x28 (M = 128) 32.3 / 33.1 / 32.9 (no gain);
# of 64 -> 128 (M = 128 and 64) 17.9 / 17.5 / 17.8. So up to 64 rows.
B_IN_PLACE_MAX_ROWS = 64


def gemm_reads_b_in_place(m: int, b_table_rows: bool) -> tuple[bool, str]:
    """Whether the micro-kernel reads B's lines where they are instead of packing B:
    only for a B whose rows are unit-stride runs of one argument at tabled starts (a
    shifted-window stack, ``llvm_gemm.reads_in_place``), and only up to
    ``B_IN_PLACE_MAX_ROWS`` rows. Packing copies K x N floats once per product; reading
    in place instead costs every one of the ceil(M / MR) micro-tiles of a column panel
    unaligned loads (each line starts anywhere in a cache line, so most loads split
    across two), which grows with M while the packing it saves does not. Returns the
    decision and its note for the derivation."""
    if not b_table_rows:
        return False, ""
    if m > B_IN_PLACE_MAX_ROWS:
        return False, f"; B table rows packed (M={m} > {B_IN_PLACE_MAX_ROWS})"
    return True, f"; B table rows read in place (M={m} <= {B_IN_PLACE_MAX_ROWS})"


def gemm_tile(spec: CpuSpec, itemsize: int = 4, k: int = 256, m: int = 256, n: int = 256,
              k_blocking: bool = True, batched: bool = False, batches: int = 1,
              b_table_rows: bool = False) -> GemmTile:
    """The GEMM schedule for C (M x N) = A (M x K) B (K x N) on ``spec``.

    Register tile (BLIS register level): NR = 2 vectors (2 x lanes columns), so each k
    step loads 2 vectors of packed B; the MR x NR accumulator tile takes MR x 2
    registers, plus 2 for B and 1 for the broadcast element of A: MR x 2 + 3 <=
    registers, so MR = (registers - 3) // 2. Latency: the MR x 2 independent FMA chains
    must cover latency x units in flight, MR x 2 >= fma_latency x fma_units (the
    derivation says when too few registers leave it uncovered). KC, MC, NC and the
    thread split: see the module docstring and ``gemm_kc``, ``gemm_mc``,
    ``gemm_panel_width``. ``k_blocking=False`` (the output cannot hold float32 partial
    sums) makes KC = K. ``batched``: C is a batch of products (attention), whose thread
    chunks cannot share a B panel; ``batches``: how many (``gemm_rows`` weighs all).
    """
    lanes = spec.lanes(itemsize)
    nr = 2 * lanes
    needed = spec.fma_latency * spec.fma_units
    mr_max = max(1, (spec.vector_registers - 3) // 2)
    mr, why_mr = gemm_rows(mr_max, m, needed, 2.0 * n * k * batches)
    chains = 2 * mr
    in_place, why_in_place = gemm_reads_b_in_place(m, b_table_rows)
    kc = gemm_kc(spec, k, nr, mr, itemsize) if k_blocking else max(k, 1)
    mc = gemm_mc(spec, kc, mr, itemsize)
    nc = min(gemm_panel_width(spec, kc, nr, itemsize), _round_up(max(n, 1), nr))
    panels = -(-max(m, 1) // mr)
    can_share = not batched and spec.cores >= SHARED_B_MIN_CORES
    if can_share and panels >= MIN_PANELS_PER_THREAD * spec.cores:
        split, why_split = "m", (f"{panels} MR-row panels >= {MIN_PANELS_PER_THREAD} x "
                                 f"{spec.cores} cores, unbatched")
    else:
        split = "m" if m >= n else "n"
        why_split = f"M={m} {'>=' if split == 'm' else '<'} N={n}"
    shared_b = can_share and split == "m"
    by_l1, by_c, cap = gemm_kc_bounds(spec, nr, mr, itemsize)
    why = (f"NR = 2 x {lanes} lanes = {nr}; MR = ({spec.vector_registers} regs - 3) // 2"
           f" = {mr_max}{why_mr}; {chains} FMA chains vs latency x units = {needed}"
           + ("" if chains >= needed else " (latency not hidden: too few registers)")
           + (f"; KC = min(max(L1/2 / (NR x {itemsize} B) = {by_l1}, C traffic <= "
              f"{C_TRAFFIC_SHARE:g} of FMA time: {by_c}), L2/2 / ({MIN_MC_PANELS} MR x "
              f"{itemsize} B) = {cap}), balanced over K={k} -> {kc}"
              if k_blocking else f"; KC = K = {kc} (output holds no f32 partials)")
           + f"; MC = L2/2 / (KC x {itemsize} B) -> {mc}"
           + f"; NC = min(L3/{spec.cores} cores, {L3_PER_CORE_MAX >> 20} MiB)/2 / (KC x "
           f"{itemsize} B), <= N -> {nc}"
           + f"; pack A{'' if in_place else ' and B'}{why_in_place}; threads split "
           f"{split.upper()} ({why_split})"
           + ("; threads share the packed B panel (two, alternating)" if shared_b else ""))
    return GemmTile(mr, nr, nc, why, kc=kc, mc=mc, split=split, shared_b=shared_b,
                    b_in_place=in_place)


@dataclass(frozen=True)
class AttentionBlocks:
    """A fused attention schedule: BR queries x BC keys per score block, and the MR x
    NR register tile of its block products."""
    br: int
    bc: int
    mr: int
    nr: int
    derivation: str


def attention_blocks(spec: CpuSpec, queries: int, keys: int, causal: bool) -> AttentionBlocks:
    """The blocks of a fused attention kernel (``targets.cpu.llvm_attention``).

    The register tile is the GEMM's (``gemm_tile``): NR = 2 vectors, MR = (registers -
    3) // 2, each tile accumulating over the whole depth of its product (the head dim, or
    a block's BR or BC; a block's last row tile is shorter when MR does not divide it).
    The score block (BR x BC float32) is written by one product and read by the
    softmax's passes and two or three more products, so it stays in half the L1: at most
    ``side`` = the largest multiple of NR with side^2 x 4 <= L1 / 2. Each of L and S is cut
    into the fewest blocks of at most ``side``, evened out and rounded up to NR (padding
    is computed, so L = 128 takes two blocks of 64, not 60 + 60 + 8 of 60). With
    ``causal``, BR = BC, so the blocks meet the diagonal on whole blocks: a query block
    sees exactly the key blocks up to its own, the last one half masked. Of n blocks
    along the diagonal, the kernel then computes n (n + 1) / 2 block pairs where n^2 / 2
    are visible: 1/n more work than the mask lets through, all of it in the half-masked
    diagonal blocks. So the side shrinks by NR at a time (not below NR) until there are
    at least ``CAUSAL_DIAGONAL_BLOCKS`` blocks: at most 1/8 more work, against more
    passes per row of the shorter blocks. Measured on the 2-core AVX-512 VM (forward and
    backward kernels of 16 x 8 heads x T 256 x 32, causal, ``nv.debug.profile``, two
    rounds): blocks of 32 (8 along the diagonal, 56% of the square computed) against 64
    (4, 62.5%): forward 6.4 -> 5.7 ms, backward 12.5 -> 11.0 ms; at T = 128 (4 heads)
    1.1 -> 0.9 and 2.2 -> 2.0 ms; at T = 512 (8 heads of 64) 64 keeps 8 blocks.
    """
    lanes = spec.lanes(4)
    nr = 2 * lanes
    mr = max(1, (spec.vector_registers - 3) // 2)
    side = nr
    while (side + nr) ** 2 * 4 <= spec.l1d // 2:
        side += nr

    def even(n: int, limit: int) -> int:
        n = max(n, 1)
        return _round_up(-(-n // -(-n // limit)), nr)
    limit = side
    bc = even(keys, limit)
    while causal and limit > nr and -(-keys // bc) < CAUSAL_DIAGONAL_BLOCKS:
        limit -= nr
        bc = even(keys, limit)
    br = bc if causal else even(queries, side)
    why = (f"NR = 2 x {lanes} lanes = {nr}; MR = ({spec.vector_registers} regs - 3) // 2 = "
           f"{mr}; score block in L1/2 = {spec.l1d // 2} B: side {side}"
           + (f", causal: >= {CAUSAL_DIAGONAL_BLOCKS} blocks on the diagonal -> {limit}"
              if causal and limit < side else "")
           + f"; BC = S={keys} in even blocks <= {limit}, to NR = {bc}; BR = "
           + ("BC (causal)" if causal else f"L={queries} likewise = {br}"))
    return AttentionBlocks(br, bc, mr, nr, why)


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def elementwise_unroll(spec: CpuSpec) -> int:
    """Vectors in flight per iteration of a vectorized innermost loop (LLVM's interleave
    count) for elementwise and row-reduction kernels. A loop-carried chain (a
    reduction's accumulator, one add per iteration) issues one add per ``fma_latency``
    cycles, so keeping the FP units busy needs fma_latency x fma_units independent
    accumulators; each in-flight vector holds a register for its value and one for its
    input, and half the file stays for the loop's other values, so at most
    registers / 4: unroll = min(fma_latency x fma_units, registers // 4), at least 1.
    """
    return max(1, min(spec.fma_latency * spec.fma_units, spec.vector_registers // 4))


# Ops whose float32 code is an inline polynomial (``Emitter._exp_f32`` and friends,
# ``llvm_trig``): each holds a dozen constants and intermediates per vector.
POLYNOMIAL_MATH = (nd.ExpOp, nd.LogOp, nd.Log1pOp, nd.Expm1Op, nd.TanhOp, nd.ErfOp,
                   nd.SinOp, nd.CosOp)
# Ops whose float32 code calls a function with vector variants for the host's float32
# lanes only (``llvm_trig.VARIANT_LANES``: sin and cos's path for huge arguments).
VECTOR_VARIANT_OPS = (nd.SinOp, nd.CosOp)


def _float32_ops(fusion: nd.FusionOp, kinds: tuple[type, ...]) -> bool:
    return any(isinstance(op, kinds) and nd.element_name(op.results[0].type.element_type)
               in ("f32", "f16", "bf16") for op in fusion.body.block.ops)


# Float ops the CPU emitter lowers to a scalar libm call (``llvm_emit.Emitter.ARITH``):
# every float op of these kinds (float64 math; atan2, pow and fmod in any dtype).
SCALAR_CALL_OPS = (nd.Atan2Op, nd.PowOp, nd.RemOp)


def _scalar_calls(fusion: nd.FusionOp) -> bool:
    """Whether the kernel calls a scalar libm function: a loop holding such a call does
    not vectorize, whatever it is asked."""
    for op in fusion.body.block.ops:
        if not op.results or not isinstance(op, (*POLYNOMIAL_MATH, *SCALAR_CALL_OPS)):
            continue
        name = nd.element_name(op.results[0].type.element_type)
        if name.startswith("f") and not (isinstance(op, POLYNOMIAL_MATH) and
                                         name in ("f32", "f16", "bf16")):
            return True
    return False


def float32_vector_width(fusion: nd.FusionOp, spec: CpuSpec) -> int:
    """The lanes asked of the loop vectorizer for an elementwise or row kernel: the
    host's float32 lanes where the kernel holds a ``VECTOR_VARIANT_OPS`` op, whose
    variants exist at those lanes only (at another width LLVM calls the scalar function
    lane by lane), else 0 (LLVM's cost model decides). Also 0 where the kernel calls a
    scalar libm function (``_scalar_calls``: float32 ``sin(x) * cosh(y)``, cosh in
    float64): its loop stays scalar, and one asked for a width that it did not get
    makes LLVM print "remark: loop not vectorized" on the user's terminal."""
    if not _float32_ops(fusion, VECTOR_VARIANT_OPS) or _scalar_calls(fusion):
        return 0
    return spec.lanes(4)


def loop_unroll(fusion: nd.FusionOp, spec: CpuSpec) -> int:
    """Vectors in flight (the interleave count) for an elementwise or row kernel:
    ``elementwise_unroll``, or at most 2 where the kernel evaluates ``POLYNOMIAL_MATH``
    in float32. Its dozen live values per vector, times 8 vectors, exceed even
    AVX-512's 32 registers: the loops spilled (counted in the optimized x86 loop, per
    16 elements: log1p 15.8 stack accesses at 8 vectors and 2.0 at 2, gelu 11.1 and
    3.5, log 7.8 and 0: ``tools/vector_loop_cost.py``) and ran slower (the ops of
    ``bench_ops --only-unary``, runs at 8 and at 2 alternating on the 2-core AVX-512
    VM: log1p 57-66% of add's bandwidth at 8 and 69-74% at 2, expm1 72-79% and
    80-84%). Such code is long enough for the core to overlap consecutive
    iterations on its own; a row kernel's accumulator chain (one add per vector, next
    to ~35 instructions of polynomial) does not need more vectors to hide its latency
    either."""
    unroll = elementwise_unroll(spec)
    return min(2, unroll) if _float32_ops(fusion, POLYNOMIAL_MATH) else unroll


def estimated_seconds(strategy: str, loops: tuple[int, ...], spec: CpuSpec,
                      panel: int = 1) -> float:
    """A kernel's time on one core for the thread split (see module docstring): a tiled
    GEMM (loops = (micro-panels, other extent, K), ``panel`` rows or columns per
    micro-panel) at the core's peak FLOP/s, anything else at ``SECONDS_PER_ITERATION``."""
    work = 1
    for n in loops:
        work *= n
    if strategy == "tiled":
        return 2.0 * work * panel / (spec.peak_flops / max(spec.cores, 1))
    return work * SECONDS_PER_ITERATION


def chunks_per_thread(strategy: str, team: bool) -> int:
    """How many chunks per thread a kernel's job is cut into (see ``thread_chunks``).

    Threads claim chunks as they come (``nova.compiler.targets.cpu.pool``), so a thread
    that runs slowly -- its core shared with another busy process -- holds the job up
    by at most the chunk it is on, ~1/(k x threads) of the job for k chunks per thread,
    at the price of one claim (a compare-and-swap, ~0.1 us) and one kernel entry per
    chunk. Streaming kernels: ``STREAM_CHUNKS_PER_THREAD``. A tiled GEMM's chunk packs
    the whole of the other operand for its rows (or columns), so each chunk more
    repeats that packing: ``GEMM_CHUNKS_PER_THREAD``. A team (shared B panel) has one
    chunk per thread: its members must all run at once."""
    if team:
        return 1
    return GEMM_CHUNKS_PER_THREAD if strategy == "tiled" else STREAM_CHUNKS_PER_THREAD


# LLVM pipeline level per (kernel kind, strategy); O3 for the rest. Measured on the
# small GPT step's kernels (2-core AVX2 VM): a column reduction took 0.93 s to optimize
# and 2.30 s to emit at O3 for the step's 6 (O3's loop passes multiply its vector code),
# 0.15 s and 0.24 s at O2, and ran as fast (their share of a profiled step: 11.0 and
# 13.7 ms at O2 against 12.0 and 13.7 ms at O3, two interleaved runs). Elementwise
# kernels, GEMMs and row kernels cost about the same to compile at O2 as at O3, so they
# stay at O3. On a 2-core AVX-512 VM (2026-12-03) the step's 16 tiled GEMMs took 4.1 s
# at O3, most of it LLVM unrolling the tile write-back loops (loop strength reduction
# and unrolling over the unrolled copies); with those loops not unrolled
# (``Emitter.not_unrolled``) 2.6 s at O3 and 2.35 s at O2, with the same kernel time
# per step (40-41 ms, three interleaved runs each), so they stay at O3 too.
LLVM_SPEED_LEVELS = {("reduce", "column"): 2}


def llvm_speed_level(plan: KernelPlan) -> int:
    """The LLVM optimization level (1-3) kernel ``plan`` is compiled at."""
    return LLVM_SPEED_LEVELS.get((plan.kind, plan.schedule.strategy), 3)


def thread_chunks(extent: int, seconds: float, threads: int, spec: CpuSpec,
                  per_thread: int = 1, min_chunk: int = 1) -> list[tuple[int, int]]:
    """Split ``[0, extent)`` of a kernel estimated at ``seconds`` for ``threads``:
    n = min(threads x ``per_thread``, floor(extent / ``min_chunk``), floor(seconds /
    DISPATCH_SECONDS)) equal chunks (at least one; ``min_chunk``: ``smallest_chunk``).
    The chunks depend only on these numbers, never on which thread runs which chunk, so
    results do not either."""
    n = min(threads * per_thread, extent // max(min_chunk, 1),
            max(1, int(seconds / DISPATCH_SECONDS)))
    if n <= 1 or threads <= 1:
        return [(0, extent)]
    step = -(-extent // n)
    return [(s, min(s + step, extent)) for s in range(0, extent, step)]


def smallest_chunk(schedule: Schedule) -> int:
    """The fewest iterations of the parallel dim worth a chunk of their own (1: any).

    A column reduction split along its unit-stride dim (a bias gradient: every row
    summed into one accumulator row) gives each thread a slice of every row, and ran
    slower on two threads than on one: the small GPT step's five such kernels took 6.2-6.7
    ms a step split in chunks of 16-64 columns and 3.1 ms as one chunk (2-core AVX-512
    VM, ``nv.debug.profile``). Such a kernel is one chunk (its whole extent) until it
    splits its rows instead."""
    if schedule.strategy == "column" and schedule.parallel_dim is not None and \
            schedule.parallel_dim == len(schedule.loops) - 1:
        return schedule.parallel_extent
    return 1


def classify(flops: float, nbytes: float, spec: CpuSpec) -> str:
    """``"compute"`` or ``"memory"`` bound, by arithmetic intensity vs machine balance."""
    intensity = flops / max(nbytes, 1.0)
    return "compute" if intensity >= spec.balance else "memory"
