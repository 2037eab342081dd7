"""The CUDA configurator: (KernelPlan, CudaSpec) -> launch configuration, no search.

Every function is pure; the formula is in its docstring and the numbers it chose are in
``LaunchConfig.derivation`` (printed by the CUDA debug dumps and the golden tests).

Vocabulary: a *wave* is one block per SM slot, ``SMs x blocks_per_sm``; grids larger
than a wave buy nothing for streaming kernels, so they use grid-stride loops over a grid
capped at one wave (fewer blocks to schedule, and each thread amortizes its index setup
over several elements).
"""
from __future__ import annotations

from dataclasses import dataclass

from nova.compiler.targets.cuda.device import CudaSpec
from nova.compiler.lowering.plan import KernelPlan, contraction, reductions

ELEMENTWISE_THREADS = 256
WARP_ROW_MAX = 1024          # rows up to this length: one warp per row (<= 32 elements/lane)
ROW_ELEMENTS_PER_THREAD = 16
COLUMN_BLOCK = (32, 8)       # column reductions: 32 outputs x 8 slices of the reduced axes
SCATTER_THREADS = 256
SIMT_TILE = 16               # f64/integer GEMM: 16 x 16 outputs per block, one per thread
MAX_STAGES = 4
# TF32 block tiles (BM, BN, warps along M, warps along N), largest first.
GEMM_TILES: tuple[tuple[int, int, int, int], ...] = (
    (128, 128, 2, 4), (128, 64, 2, 2), (64, 64, 2, 2), (64, 32, 2, 2), (32, 32, 2, 2))
A_PAD, B_PAD = 4, 8          # shared-memory row padding in floats (bank-conflict free)
C_PAD = 4                    # row padding of the accumulator tile staged for the epilogue


@dataclass(frozen=True)
class GemmConfig:
    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int
    stages: int
    stage_bytes: int
    occupancy: int            # resident blocks per SM
    regs_estimate: int        # per thread, for occupancy
    intensity: float          # FLOPs per byte of the whole GEMM
    bound: str                # "memory" | "compute"
    tensor_cores: bool = True

    @property
    def warp_m(self) -> int:
        return self.bm // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.bn // self.warps_n

    @property
    def mi(self) -> int:
        """m16 mma tiles per warp along M."""
        return self.warp_m // 16

    @property
    def ni(self) -> int:
        """n8 mma tiles per warp along N."""
        return self.warp_n // 8

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n


@dataclass(frozen=True)
class AttentionConfig:
    """A fused attention kernel's tiles: BR = BC = ``block`` queries and keys per score
    block (a warp per 16 rows of it), the head dims padded to the mma's k-step of 8,
    and where each tile lives in the dynamic shared memory (offsets and row strides in
    floats, ``attention_layout``)."""
    block: int
    e_pad: int
    ev_pad: int
    layout: tuple[tuple[str, int, int], ...]   # (tile, offset, leading dimension)

    @property
    def warps(self) -> int:
        return self.block // 16

    def tile(self, name: str) -> tuple[int, int]:
        """(offset, leading dimension) of tile ``name`` in floats."""
        for n, off, ld in self.layout:
            if n == name:
                return off, ld
        raise KeyError(f"attention layout has no tile {name!r}")


@dataclass(frozen=True)
class LaunchConfig:
    strategy: str              # grid_stride | warp_per_row | block_per_row | column | lines
    grid: tuple[int, int, int]  # | mma_tf32 | simt
    block: tuple[int, int, int]
    shared_bytes: int = 0      # dynamic shared memory
    vec: int = 1               # elementwise: consecutive elements per thread
    gemm: GemmConfig | None = None
    derivation: str = ""
    attention: AttentionConfig | None = None

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def blocks_per_sm(threads: int, spec: CudaSpec) -> int:
    """Resident blocks per SM when only threads limit occupancy."""
    return max(1, min(spec.max_blocks_per_sm, spec.max_threads_per_sm // threads))


def wave(threads: int, spec: CudaSpec) -> int:
    """Blocks that fill the GPU once: SMs x blocks_per_sm."""
    return spec.sms * blocks_per_sm(threads, spec)


def vector_width(numel: int, itemsize: int) -> int:
    """Elements per thread: a 16-byte access (4 x f32, 2 x f64, 8 x f16), halved until
    it divides the element count so no thread straddles the end."""
    vec = max(1, 16 // itemsize)
    while vec > 1 and numel % vec:
        vec //= 2
    return vec


def elementwise_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """threads = 256 (8 warps: enough to hide latency, small enough for 8 blocks/SM);
    vec = vector_width(numel, itemsize); grid = min(ceil(numel / (vec x threads)),
    wave) with a grid-stride loop over the rest."""
    shape, dtype = plan.out
    numel = max(_prod(shape), 1)
    vec = vector_width(numel, dtype.itemsize)
    threads = ELEMENTWISE_THREADS
    need = _cdiv(numel, vec * threads)
    w = wave(threads, spec)
    grid = max(1, min(need, w))
    why = (f"numel={numel}, vec=16B/{dtype.itemsize}B->{vec}, threads={threads}, "
           f"grid=min(ceil({numel}/({vec}x{threads}))={need}, wave {spec.sms}x"
           f"{blocks_per_sm(threads, spec)}={w})={grid}, grid-stride")
    return LaunchConfig("grid_stride", (grid, 1, 1), (threads, 1, 1), vec=vec, derivation=why)


def row_geometry(plan: KernelPlan) -> tuple[int, int]:
    """(rows, row length) of a ``rows`` kernel or a suffix reduction."""
    red = reductions(plan.fusion)[0] if plan.kind == "rows" else contraction(plan.fusion)
    x_shape = tuple(red.operands[0].type.get_shape())
    n_kept = len(x_shape) - len(plan.schedule.reduced)
    return _prod(x_shape[:n_kept]), _prod(x_shape[n_kept:])


def rows_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """Row kernels (softmax, layer_norm, cross_entropy, suffix reductions).

    Row length L <= 1024: one warp per row, each lane strides the row by 32 (<= 32
    elements per lane per pass) and the reduction is a 5-step ``__shfl_xor_sync``
    butterfly, with no shared memory or barriers; 8 warps (256 threads) per block,
    grid = min(ceil(rows / 8), wave), grid-stride over rows.
    Longer rows: one block per row, threads = clamp(pow2ceil(L / 16), 64, 1024) so each
    thread takes ~16 elements per pass, warp shuffles then one shared-memory exchange of
    the per-warp partials; grid = min(rows, wave).
    """
    rows, length = row_geometry(plan)
    if length <= WARP_ROW_MAX and rows > 1:
        threads = 256
        per_block = threads // spec.warp_size
        need = _cdiv(rows, per_block)
        grid = max(1, min(need, wave(threads, spec)))
        why = (f"rows={rows}, L={length} <= {WARP_ROW_MAX}: warp per row, {per_block} rows/"
               f"block, grid=min({need}, wave {wave(threads, spec)})={grid}")
        return LaunchConfig("warp_per_row", (grid, 1, 1), (threads, 1, 1), derivation=why)
    threads = 64
    while threads < 1024 and threads * ROW_ELEMENTS_PER_THREAD < length:
        threads *= 2
    grid = max(1, min(rows, wave(threads, spec)))
    shared = 2 * (threads // spec.warp_size) * 8
    why = (f"rows={rows}, L={length}: block per row, threads=clamp(pow2ceil(L/"
           f"{ROW_ELEMENTS_PER_THREAD}),64,1024)={threads}, grid=min(rows, wave "
           f"{wave(threads, spec)})={grid}")
    return LaunchConfig("block_per_row", (grid, 1, 1), (threads, 1, 1), shared_bytes=shared,
                        derivation=why)


def column_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """Reductions that keep an inner axis (bias gradients): threadIdx.x walks 32
    consecutive outputs (coalesced reads of the kept inner axis), threadIdx.y takes every
    by-th position of the reduced axes, and the by partials meet in shared memory (in a
    fixed order: deterministic). by = 8, or 32 when the reduced extent is >= 1024 (so a
    long reduction over few outputs still has 1024 threads per block in flight).
    grid = ceil(outputs / 32)."""
    shape, _ = plan.out
    outputs = max(_prod(shape), 1)
    red = contraction(plan.fusion)
    x_shape = tuple(red.operands[0].type.get_shape())
    length = _prod(x_shape[d] for d in plan.schedule.reduced)
    bx = COLUMN_BLOCK[0]
    by = 32 if length >= 1024 else COLUMN_BLOCK[1]
    grid = _cdiv(outputs, bx)
    why = (f"outputs={outputs}, reduced extent {length} -> block={bx}x{by}, "
           f"grid=ceil({outputs}/{bx})={grid}")
    return LaunchConfig("column", (grid, 1, 1), (bx, by, 1), shared_bytes=bx * by * 8,
                        derivation=why)


def scatter_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """scatter_add along dim d: a warp per line of the output along d (all other
    coordinates fixed); its lanes copy the line, then one lane adds the line's updates in
    index order. Lines are disjoint, so there are no atomics and the sums are
    deterministic. 8 warps per block, grid = min(ceil(lines / 8), wave), grid-stride."""
    sc = contraction(plan.fusion)
    d = sc.dim.value.data
    shape, _ = plan.out
    lines = max(_prod(shape) // max(shape[d], 1), 1)
    per_block = SCATTER_THREADS // spec.warp_size
    need = _cdiv(lines, per_block)
    grid = max(1, min(need, wave(SCATTER_THREADS, spec)))
    why = (f"lines={lines} (output {list(shape)} without dim {d}), warp per line, "
           f"grid=min(ceil(lines/{per_block})={need}, wave {wave(SCATTER_THREADS, spec)})={grid}")
    return LaunchConfig("lines", (grid, 1, 1), (SCATTER_THREADS, 1, 1), derivation=why)


SORT_ELEMENTS_PER_THREAD = 16   # a sort block's threads: about this many elements each


def sort_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """argsort: a block per row (grid-stride over rows), threads = clamp(pow2ceil(N /
    ``SORT_ELEMENTS_PER_THREAD``), 32, 1024). Each merge pass places every element
    at once (its rank in the other run by binary search), then the block syncs:
    ceil(log2 N) passes, no shared memory (rows of any length live in the scratch)."""
    rows, n = plan.schedule.loops
    threads = spec.warp_size
    while threads < 1024 and threads * SORT_ELEMENTS_PER_THREAD < n:
        threads *= 2
    grid = max(1, min(rows, wave(threads, spec)))
    why = (f"rows={rows}, N={n}: block per row, threads=clamp(pow2ceil(N/"
           f"{SORT_ELEMENTS_PER_THREAD}),{spec.warp_size},1024)={threads}, grid=min(rows, "
           f"wave {wave(threads, spec)})={grid}")
    return LaunchConfig("block_sort", (grid, 1, 1), (threads, 1, 1), derivation=why)


SCAN_THREADS = 128   # a scan block: this many rows, one per thread


def scan_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """cumsum/cumprod: a thread per row (grid-stride over rows), each walking its row
    once with the running value in a register, ``SCAN_THREADS`` rows per block, grid =
    min(ceil(rows / SCAN_THREADS), wave). Sequential within a row, so the result is the
    CPU's to the last bit of the float64 accumulator; long rows with few of them leave
    the GPU idle (a block-parallel scan would not)."""
    rows, n = plan.schedule.loops
    grid = max(1, min(-(-rows // SCAN_THREADS), wave(SCAN_THREADS, spec)))
    why = (f"rows={rows}, N={n}: thread per row, block={SCAN_THREADS}, grid=min(ceil(rows/"
           f"{SCAN_THREADS}), wave {wave(SCAN_THREADS, spec)})={grid}")
    return LaunchConfig("thread_scan", (grid, 1, 1), (SCAN_THREADS, 1, 1), derivation=why)


def gemm_dims(plan: KernelPlan) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a matmul kernel."""
    mm = contraction(plan.fusion)
    a = tuple(mm.operands[0].type.get_shape())
    n = tuple(mm.operands[1].type.get_shape())[-1]
    return _prod(a[:-2]), a[-2], n, a[-1]


def gemm_stage_bytes(bm: int, bn: int, bk: int) -> int:
    """Shared memory of one pipeline stage: the A tile (BM x (BK + 4) or BK x (BM + 8),
    whichever layout the operand needs) plus the B tile (BK x (BN + 8) or BN x (BK + 4)),
    in float32. The padding puts the 8 x 4 fragment reads of a warp on 32 distinct banks."""
    a = max(bm * (bk + A_PAD), bk * (bm + B_PAD))
    b = max(bk * (bn + B_PAD), bn * (bk + A_PAD))
    return 4 * (a + b)


def gemm_epilogue_bytes(bm: int, bn: int) -> int:
    """The accumulator tile staged in shared memory for the epilogue, BM x (BN + 4)
    floats; it reuses the drained pipeline ring, which is almost always larger."""
    return 4 * bm * (bn + C_PAD)


def gemm_regs_estimate(mi: int, ni: int) -> int:
    """Registers per thread: accumulators 4 x MI x NI, fragments 4 x MI + 2 x NI, and
    ~40 for addresses, loop counters and the epilogue; rounded up to the allocation
    granule of 8."""
    regs = 4 * mi * ni + 4 * mi + 2 * ni + 40
    return _cdiv(regs, 8) * 8


def gemm_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """TF32 tensor-core GEMM (float32, float16 and bfloat16 operands; the half types are
    exact in TF32) and the SIMT fallback (float64, integers).

    Tile: the largest (BM, BN) of GEMM_TILES whose grid batch x ceil(M/BM) x ceil(N/BN)
    fills one wave of SMs; if none does, the smallest (more blocks, better balance).
    Warps are laid out warps_m x warps_n, each owning a (BM/warps_m) x (BN/warps_n) warp
    tile of MI x NI m16n8k8 mma tiles. BK = 32 (one 128-byte line of float32 per row)
    when K >= 32, else 16 (and 8 when K <= 8).
    Stages: registers bound the blocks per SM, regs_blocks = regs_per_sm /
    (threads x regs_estimate); aiming at min(2, regs_blocks) resident blocks, the
    shared-memory budget per block is min(opt-in max, smem_per_SM / target - 1 KiB
    reserved), and stages = clamp(budget / stage_bytes, 2, 4), at most the K tiles
    (but >= 2: the pipeline structure needs a second buffer).
    Shared memory = max(stages x stage_bytes, the BM x (BN + 4) float epilogue tile).
    Occupancy = min(regs_blocks, smem_per_SM / (shared memory + 1 KiB),
    threads_per_SM / threads, max blocks).
    Arithmetic intensity = 2 batch M N K / (itemsize x batch (MK + KN + MN)), compared
    with the machine balance (TF32 peak / bandwidth) for the bound.
    """
    batch, m, n, k = gemm_dims(plan)
    dtype = plan.out[1]
    flops = 2.0 * batch * m * n * k
    nbytes = float(dtype.itemsize * batch * (m * k + k * n + m * n))
    intensity = flops / max(nbytes, 1.0)
    if dtype.mlir not in ("f32", "f16", "bf16"):
        t = SIMT_TILE
        grid = (_cdiv(n, t), _cdiv(m, t), max(1, min(batch, 65535)))
        bound = "compute" if intensity >= spec.balance_fp32 else "memory"
        g = GemmConfig(t, t, t, 1, 1, 1, 2 * t * t * dtype.itemsize, 0, 0, intensity, bound,
                       tensor_cores=False)
        why = (f"{dtype.name}: no tensor-core path, SIMT {t}x{t} tiles through shared memory; "
               f"batch={batch} M={m} N={n} K={k}, intensity={intensity:.1f} FLOP/B")
        return LaunchConfig("simt", grid, (t, t, 1), shared_bytes=0, gemm=g, derivation=why)
    w_blocks = spec.sms
    chosen = GEMM_TILES[-1]
    for tile in GEMM_TILES:
        bm, bn = tile[0], tile[1]
        if batch * _cdiv(m, bm) * _cdiv(n, bn) >= w_blocks:
            chosen = tile
            break
    bm, bn, wm, wn = chosen
    bk = 32 if k >= 32 else (16 if k > 8 else 8)
    threads = 32 * wm * wn
    mi, ni = bm // wm // 16, bn // wn // 8
    regs = gemm_regs_estimate(mi, ni)
    regs_blocks = max(1, spec.regs_per_sm // (threads * regs))
    target = min(2, regs_blocks)
    stage = gemm_stage_bytes(bm, bn, bk)
    budget = min(spec.smem_per_block_optin,
                 spec.smem_per_sm // target - spec.reserved_smem_per_block)
    k_tiles = _cdiv(k, bk)
    stages = max(2, min(MAX_STAGES, budget // stage, max(k_tiles, 2)))
    smem = max(stages * stage, gemm_epilogue_bytes(bm, bn))
    if smem > spec.smem_per_block_optin:
        raise ValueError(f"{plan.name}: GEMM tile {bm}x{bn}x{bk} needs {smem} B of shared "
                         f"memory, more than {spec.name}'s {spec.smem_per_block_optin}")
    occupancy = max(1, min(regs_blocks, spec.smem_per_sm // (smem + spec.reserved_smem_per_block),
                           spec.max_threads_per_sm // threads, spec.max_blocks_per_sm))
    bound = "compute" if intensity >= spec.balance else "memory"
    grid = (_cdiv(n, bn), _cdiv(m, bm), max(1, min(batch, 65535)))
    if grid[1] > 65535:
        raise ValueError(f"{plan.name}: M={m} needs {grid[1]} row blocks, over CUDA's 65535")
    g = GemmConfig(bm, bn, bk, wm, wn, stages, stage, occupancy, regs, intensity, bound)
    why = (f"batch={batch} M={m} N={n} K={k}; tile {bm}x{bn}: first with "
           f"batch*ceil(M/BM)*ceil(N/BN)={batch * _cdiv(m, bm) * _cdiv(n, bn)} >= "
           f"{w_blocks} SMs (else smallest); warps {wm}x{wn} -> warp tile {bm // wm}x"
           f"{bn // wn} = {mi}x{ni} m16n8k8; BK={bk}; regs~{regs} -> {regs_blocks} blocks/SM by "
           f"registers; stage={stage} B, budget=min({spec.smem_per_block_optin}, "
           f"{spec.smem_per_sm}/{target}-{spec.reserved_smem_per_block})={budget} -> "
           f"{stages} stages ({smem} B with the epilogue tile); occupancy {occupancy} blocks/SM; intensity "
           f"{intensity:.1f} FLOP/B vs balance {spec.balance:.1f}: {bound}-bound")
    return LaunchConfig("mma_tf32", grid, (threads, 1, 1), shared_bytes=smem, gemm=g,
                        derivation=why)


ATTENTION_BLOCKS = (64, 32, 16)   # BR = BC candidates, largest first (a warp per 16 rows)


def attention_layout(block: int, e_pad: int, ev_pad: int, backward: bool
                     ) -> tuple[tuple[str, int, int], ...]:
    """The shared-memory tiles of a fused attention kernel, each ``block`` rows: Q and K
    (head dim E), V (and in the backward dO) (head dim Ev), and the warps' probability
    (or dS) rows ``P`` (``block`` wide); the backward adds each query row's D =
    rowsum(dO * O) and log-sum-exp. Rows are padded by 4 floats (8 for V in the
    forward, whose rows the P V product reads along a column) so a warp's fragment
    reads fall on distinct banks."""
    tiles = [("Q", e_pad + 4), ("K", e_pad + 4), ("V", ev_pad + (4 if backward else 8))]
    if backward:
        tiles.append(("dO", ev_pad + 4))
    tiles.append(("P", block + 4))
    out, off = [], 0
    for name, ld in tiles:
        out.append((name, off, ld))
        off += block * ld
    if backward:
        out += [("D", off, 1), ("lse", off + block, 1)]
        off += 2 * block
    out.append(("end", off, 0))
    return tuple(out)


def attention_config(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """Fused attention (``targets.cuda.attention``): BR = BC = B, a warp per 16 rows of
    a score block (B / 16 warps), the score blocks' products on the TF32 tensor cores.

    B: the largest of ``ATTENTION_BLOCKS`` whose tiles (``attention_layout``) fit the
    shared memory of two resident blocks per SM (min(opt-in max, smem_per_SM / 2 -
    reserved)) and whose grid fills the SMs (batch x ceil(L / B) blocks of queries in
    the forward, batch x (ceil(L / B) + ceil(S / B)) in the backward); if none fills
    them, the smallest that fits. Equal blocks meet a causal diagonal on whole blocks,
    so a query block sees exactly the key blocks up to its own.
    Grid: x the query blocks (forward) or the key blocks followed by the query blocks
    (backward: a key block accumulates its dK and dV over the query blocks that see it,
    a query block its dQ over the key blocks it sees -- each output written by one
    block, no atomics), y the batch (grid-stride past 65535)."""
    batch, queries, keys, e = plan.schedule.loops
    op = contraction(plan.fusion)
    ev = tuple(op.operands[2].type.get_shape())[-1]
    backward = plan.schedule.strategy == "attention_grad"
    e_pad, ev_pad = _cdiv(max(e, 1), 8) * 8, _cdiv(max(ev, 1), 8) * 8
    budget = min(spec.smem_per_block_optin,
                 spec.smem_per_sm // 2 - spec.reserved_smem_per_block)
    fitting = [b for b in ATTENTION_BLOCKS
               if 4 * attention_layout(b, e_pad, ev_pad, backward)[-1][1] <= budget]
    if not fitting:
        raise ValueError(f"{plan.name}: attention head dims E={e}, Ev={ev} need "
                         f"{4 * attention_layout(16, e_pad, ev_pad, backward)[-1][1]} B of "
                         f"shared memory even in blocks of 16, more than {spec.name}'s "
                         f"budget of {budget} B")

    def blocks(b: int) -> int:
        return batch * (_cdiv(queries, b) + (_cdiv(keys, b) if backward else 0))
    block = next((b for b in fitting if blocks(b) >= spec.sms), fitting[-1])
    layout = attention_layout(block, e_pad, ev_pad, backward)
    smem = 4 * layout[-1][1]
    x = _cdiv(queries, block) + (_cdiv(keys, block) if backward else 0)
    grid = (max(x, 1), max(1, min(batch, 65535)), 1)
    threads = 32 * (block // 16)
    why = (f"batch={batch} L={queries} S={keys} E={e} Ev={ev}; B = largest of "
           f"{list(ATTENTION_BLOCKS)} within smem budget min({spec.smem_per_block_optin}, "
           f"{spec.smem_per_sm}/2-{spec.reserved_smem_per_block})={budget} B with "
           f"{'batch*(ceil(L/B)+ceil(S/B))' if backward else 'batch*ceil(L/B)'} >= "
           f"{spec.sms} SMs (else smallest fitting) = {block}: {blocks(block)} blocks of "
           f"{threads} threads, {smem} B shared")
    cfg = AttentionConfig(block, e_pad, ev_pad, layout)
    return LaunchConfig(plan.schedule.strategy, grid, (threads, 1, 1), shared_bytes=smem,
                        derivation=why, attention=cfg)


def configure(plan: KernelPlan, spec: CudaSpec) -> LaunchConfig:
    """The launch configuration of any kernel plan."""
    strategy = plan.schedule.strategy
    if plan.kind == "attention":
        return attention_config(plan, spec)
    if plan.kind == "matmul":
        return gemm_config(plan, spec)
    if plan.kind == "scatter":
        return scatter_config(plan, spec)
    if plan.kind == "sort":
        return sort_config(plan, spec)
    if plan.kind == "scan":
        return scan_config(plan, spec)
    if plan.kind == "rows" or strategy == "row":
        return rows_config(plan, spec)
    if strategy == "column":
        return column_config(plan, spec)
    return elementwise_config(plan, spec)
