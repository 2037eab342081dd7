"""The analytic configurator on hand-written device specs, against hand-derived values."""
import numpy as np

import nova as nv
from nova.compiler.targets.cpu.configurator import (
    GEMM_CHUNKS_PER_THREAD,
    STREAM_CHUNKS_PER_THREAD,
    chunks_per_thread,
    classify,
    elementwise_unroll,
    estimated_seconds,
    gemm_kc,
    gemm_kc_bounds,
    gemm_mc,
    gemm_panel_width,
    gemm_rows,
    gemm_tile,
    thread_chunks,
)
from nova.compiler.targets.cpu.device import CpuSpec, detect_cpu

AVX2 = CpuSpec("haswell-like", cores=4, isa="avx2", vector_bits=256, vector_registers=16,
               l1d=32 * 1024, l2=256 * 1024, l3=8 * 2**20, ghz=3.0)
AVX512 = CpuSpec("zen5-like", cores=2, isa="avx512", vector_bits=512, vector_registers=32,
                 l1d=48 * 1024, l2=2**20, l3=32 * 2**20, ghz=2.5)
SMALL = CpuSpec("sse-like", cores=1, isa="sse", vector_bits=128, vector_registers=8,
                l1d=16 * 1024, l2=128 * 1024, l3=2**20, fma_units=1)


def test_gemm_register_tile():
    # AVX2: 8 float lanes -> NR 16; (16 - 3) // 2 = 6 rows; 12 chains >= 4 x 2.
    t = gemm_tile(AVX2)
    assert (t.mr, t.nr) == (6, 16) and "latency not hidden" not in t.derivation
    # AVX-512: 16 lanes -> NR 32; (32 - 3) // 2 = 14 rows (A is packed, so the 14
    # broadcasts per k come from one contiguous line), 28 accumulators + 2 B + 1 = 31.
    assert (gemm_tile(AVX512).mr, gemm_tile(AVX512).nr) == (14, 32)
    # float64 halves the lanes.
    assert gemm_tile(AVX512, itemsize=8).nr == 16
    # 8 registers: (8 - 3) // 2 = 2 rows, 4 chains vs 4 x 1 latency: just hidden.
    small = gemm_tile(SMALL)
    assert (small.mr, small.nr) == (2, 8) and "latency not hidden" not in small.derivation
    # 6 registers: 1 row, 2 chains < 4 x 1.
    tiny = CpuSpec("tiny", cores=1, isa="sse", vector_bits=128, vector_registers=6,
                   l1d=16 * 1024, l2=128 * 1024, l3=2**20, fma_units=1)
    assert gemm_tile(tiny).mr == 1 and "latency not hidden" in gemm_tile(tiny).derivation


def test_gemm_kc_bounds():
    # AVX2: L1 bound 16 KiB / (NR 16 x 4 B) = 256; C-traffic bound 2 x 4 B x 8 lanes x 2
    # FMA x 3 GHz / (40 GB/s / 4 cores x 0.03) = 1280; L2 cap 128 KiB / (4 x 6 x 4 B) = 1365.
    assert gemm_kc_bounds(AVX2, 16, 6) == (256, 1280, 1365)
    # AVX-512: 24 KiB / 128 B = 192; 2 x 4 x 16 x 2 x 2.5e9 / (10 GB/s x 0.03) = 2133.3;
    # 512 KiB / (4 x 14 x 4 B) = 2340.
    assert gemm_kc_bounds(AVX512, 32, 14) == (192, 2134, 2340)
    # SSE-like (1 FMA unit, 4 lanes): 8 KiB / 32 B = 256; 2 x 4 x 4 x 1 x 2.5e9 / 3e8 = 266.7.
    assert gemm_kc_bounds(SMALL, 8, 2) == (256, 267, 2048)


def test_gemm_kc_is_the_larger_bound_capped_and_balanced():
    # AVX2: max(256, 1280) = 1280; K = 256 and 1000 are one block; K = 4096 -> 4 blocks
    # of 1024.
    assert gemm_kc(AVX2, 256, 16, 6) == 256 and gemm_kc(AVX2, 1000, 16, 6) == 1000
    assert gemm_kc(AVX2, 4096, 16, 6) == 1024
    # AVX-512: 2134; K = 4096 -> 2 blocks of 2048; K = 2048, 512 and 100 are one block.
    assert gemm_kc(AVX512, 4096, 32, 14) == 2048 and gemm_kc(AVX512, 2048, 32, 14) == 2048
    assert gemm_kc(AVX512, 512, 32, 14) == 512
    assert gemm_kc(AVX512, 100, 32, 14) == 100 and gemm_kc(AVX512, 1, 32, 14) == 1
    # SSE-like: the C-traffic bound (267) just beats the L1 one (256): K = 10^4 -> 38
    # blocks of 264.
    assert gemm_kc(SMALL, 10_000, 8, 2) == 264
    # A 64 KiB L2 caps the AVX-512 KC at 32 KiB / (4 x 14 x 4 B) = 146.
    small_l2 = CpuSpec("small-l2", cores=2, isa="avx512", vector_bits=512,
                       vector_registers=32, l1d=48 * 1024, l2=64 * 1024, l3=32 * 2**20,
                       ghz=2.5)
    assert gemm_kc(small_l2, 10**6, 32, 14) == 146


def test_gemm_mc_keeps_the_packed_a_block_in_half_the_l2():
    # AVX2: 128 KiB / (KC 384 x 4 B) = 85.3 rows -> a multiple of MR 6: 84.
    assert gemm_mc(AVX2, 384, 6) == 84
    # AVX-512: 512 KiB / (512 x 4 B) = 256 -> 252 (a multiple of 14); KC 640: 204.8 -> 196.
    assert gemm_mc(AVX512, 512, 14) == 252 and gemm_mc(AVX512, 640, 14) == 196
    # SSE-like: 64 KiB / (256 x 4 B) = 64; never below one MR.
    assert gemm_mc(SMALL, 256, 2) == 64 and gemm_mc(SMALL, 10**6, 2) == 2


def test_gemm_nc_gives_each_core_half_its_share_of_the_l3():
    # AVX2: 8 MiB / 4 cores = 2 MiB, half of it 1 MiB; / (KC 384 x 4 B) = 682.7 -> 672
    # (x 16).
    assert gemm_panel_width(AVX2, 384, 16) == 672
    # AVX-512: 32 MiB / 2 cores = 16 MiB, capped at 4 MiB a core: 2 MiB / (512 x 4 B) =
    # 1024.
    assert gemm_panel_width(AVX512, 512, 32) == 1024
    # SSE-like: 512 KiB / (256 x 4 B) = 512; never below one NR.
    assert gemm_panel_width(SMALL, 256, 8) == 512 and gemm_panel_width(SMALL, 10**7, 8) == 8


def test_gemm_rows_shortens_the_tile_where_it_pads_fewer_rows():
    # AVX-512: 14 rows at most. 64 rows pad to 70 with 14, to 65 with 13 (7% fewer).
    assert gemm_rows(14, 64, 8) == (13, ", M=64 pads to 70 rows, MR 13 to 65 -> MR = 13")
    assert gemm_rows(14, 128, 8)[0] == 13            # 140 -> 130 rows
    assert gemm_rows(14, 32, 8)[0] == 11             # 42 -> 33 rows
    # a gain under 4% keeps 14 (one driver fewer to compile): 256 -> 266 vs 260 rows
    assert gemm_rows(14, 256, 8) == (14, "") and gemm_rows(14, 2048, 8) == (14, "")
    assert gemm_rows(14, 98, 8) == (14, "")          # exact
    # one panel whatever MR: M <= 14 keeps it
    assert gemm_rows(14, 8, 8) == (14, "") and gemm_rows(14, 14, 8) == (14, "")
    # never below 3/4 of the tallest tile, nor below the FMA latency's chains
    assert gemm_rows(14, 16, 8)[0] == 11             # 28 -> 22 rows (8 would be 16)
    assert gemm_rows(6, 16, 8)[0] == 6 and gemm_rows(6, 25, 8)[0] == 5   # 30 -> 25
    assert gemm_rows(6, 25, 12)[0] == 6              # 5 rows: 10 chains < 12
    # a shorter tile saving under MR_MIN_SAVED_FLOPS a call keeps the tallest (no
    # driver to compile for a fraction of a millisecond a step): a 65-row vocabulary
    # gradient over 4,096 tokens (5 rows of 4.2 MFLOP), the small GPT's 128-row
    # weight gradients (10 rows of 2.1 MFLOP)
    assert gemm_rows(14, 65, 8, 2.0 * 512 * 4096) == (14, "")
    assert gemm_rows(14, 65, 8, 2.0 * 512 * 16384)[0] == 13
    assert gemm_tile(AVX512, k=2048, m=128, n=512).mr == 14
    assert gemm_tile(AVX512, k=64, m=64, n=64).mr == 14
    assert gemm_tile(AVX512, k=576, m=64, n=3136, batches=8).mr == 13     # 1.85 GFLOP
    # a 5x5 convolution of 32 channels: its input gradient (32 rows, 0.87 GFLOP) and
    # forward (64 rows, 0.73 GFLOP, of 8 images)
    assert gemm_tile(AVX512, k=1600, m=32, n=1056, batches=8).mr == 11
    assert gemm_tile(AVX512, k=800, m=64, n=896, batches=8).mr == 13
    # the tile and its derivation follow, MC a multiple of the shorter MR
    t = gemm_tile(AVX512, k=576, m=64, n=3136, batches=8)
    assert t.mr == 13 and t.mc % 13 == 0 and "M=64 pads to 70 rows" in t.derivation


def test_gemm_tile_blocks_split_and_dump():
    # gpt-42m mlp-up weight gradient on the AVX-512 spec: M = 2048, K = 2048, N = 512:
    # one K block, MC 512 KiB / (2048 x 4 B) = 64 -> 56 (x 14), NC 2 MiB / 8 KiB = 256.
    t = gemm_tile(AVX512, k=2048, m=2048, n=512)
    assert (t.mr, t.nr, t.kc, t.mc, t.nc, t.split) == (14, 32, 2048, 56, 256, "m")
    assert "pack A and B" in t.derivation
    # AVX2, K = 1000 -> KC 1000, MC 128 KiB / 4000 B = 32.8 -> 30, NC 1 MiB / 4000 B =
    # 262 -> 256 (<= N = 5000); threads split the larger side, N.
    t = gemm_tile(AVX2, k=1000, m=100, n=5000)
    assert (t.kc, t.mc, t.nc, t.split) == (1000, 30, 256, "n")
    # NC is capped by N rounded up to NR.
    assert gemm_tile(AVX2, k=100, m=300, n=7).nc == 16
    # An output that cannot hold float32 partial sums is not blocked along K.
    t = gemm_tile(AVX2, k=1000, m=64, n=64, k_blocking=False)
    assert t.kc == 1000 and t.mc == 30 and "KC = K = 1000" in t.derivation
    why = gemm_tile(AVX512, k=2048, m=2048, n=512).derivation
    for text in ("L1/2 / (NR x 4 B) = 192", "FMA time: 2134", "= 2340", "-> 2048",
                 "MC = L2/2", "NC = min(L3/2 cores, 4 MiB)/2", "threads split M"):
        assert text in why


def test_threads_share_the_packed_b_panel_from_four_cores():
    # AVX2 spec, 4 cores: the mlp-down weight gradient of the medium GPT, M = 256 < N =
    # 1024, has ceil(256 / 6) = 43 MR-row panels >= 8 x 4: split "m", one shared B panel
    # (packing M K + K N in all instead of M K x 4 + K N with split "n").
    t = gemm_tile(AVX2, k=2048, m=256, n=1024)
    assert (t.split, t.shared_b) == ("m", True)
    assert "43 MR-row panels >= 8 x 4 cores" in t.derivation
    assert "share the packed B panel" in t.derivation
    # 31 panels < 32: the larger side, N, each thread packing all of A for its columns.
    t = gemm_tile(AVX2, k=2048, m=186, n=1024)
    assert (t.split, t.shared_b) == ("n", False) and "M=186 < N=1024" in t.derivation
    # M >= N but batched (attention): chunks cover different batches, nothing shared.
    t = gemm_tile(AVX2, k=64, m=256, n=64, batched=True)
    assert (t.split, t.shared_b) == ("m", False)
    # 2 cores (the AVX-512 spec, and the bench VM): private panels, split the larger side.
    t = gemm_tile(AVX512, k=2048, m=256, n=1024)
    assert (t.split, t.shared_b) == ("n", False)
    assert not gemm_tile(AVX512, k=2048, m=2048, n=512).shared_b


def test_shared_b_plans_carry_the_team_header_and_two_panels():
    """On a 4-core spec, the CPU plan of x @ W^T (M = 300 >= N = 50) shares B: its
    scratch holds the team header and two KC x NC panels (+ a vector of slack), and the
    GEMM driver it calls meets at the team barrier; the CUDA plan of the same product has no scratch
    (CUDA kernels configure themselves)."""
    import dataclasses

    from nova.compiler.irgen import build_module
    from nova.compiler.lowering.plan import TEAM_WORDS, plan_kernels
    from nova.compiler.passes import simplify
    from nova.compiler.passes.fusion import fuse
    from nova.compiler.targets.cpu import CpuTarget
    from nova.runtime.kernel_cache import KERNELS
    from nova.tensor.realize import pending_graph
    spec = dataclasses.replace(detect_cpu(), cores=4)
    x = nv.tensor(np.ones((300, 70), np.float32))
    w = nv.tensor(np.ones((50, 70), np.float32))
    fused = fuse(simplify(build_module(pending_graph(x @ w.T))))
    (plan,) = plan_kernels(fused, CpuTarget(spec))
    s = plan.schedule
    assert s.shared_b and s.split == "m" and "shared_b" in plan.describe()
    assert plan.scratch[0] == (2 * TEAM_WORDS + 2 * s.kc * s.tile[2] + s.tile[1],)
    # the kernel calls the shared GEMM driver, whose code meets at the team barrier
    from nova.compiler.targets.cpu.llvm_gemm import driver_module, driver_name
    assert f'call i32 @"{driver_name(*s.tile[:2])}"' in KERNELS.llvm_ir(plan)
    driver = str(driver_module(*s.tile[:2], KERNELS.jit.triple, KERNELS.jit.data_layout))
    assert "atomicrmw add" in driver and "load atomic" in driver and "sched_yield" in driver
    (cuda_plan,) = plan_kernels(fused, target="cuda")
    assert cuda_plan.scratch is None and not cuda_plan.schedule.shared_b


def test_peak_balance_and_classification():
    # 4 cores x 2 FMA x 2 flops x 8 lanes x 3 GHz = 384 GFLOP/s; 40 GB/s -> balance 9.6.
    assert AVX2.peak_flops == 384e9 and AVX2.bandwidth == 40e9
    assert abs(AVX2.balance - 9.6) < 1e-9
    assert classify(2 * 1024**3, 3 * 4 * 1024**2, AVX2) == "compute"     # 1024^3 GEMM
    assert classify(1024**2, 3 * 4 * 1024**2, AVX2) == "memory"           # an add


def test_thread_split_needs_enough_work():
    # n = min(threads x per_thread, extent, floor(T / 5 us)): 2 chunks only when
    # T/2 + 5 us <= T.
    assert thread_chunks(100, 9e-6, 4, AVX2) == [(0, 100)]                   # too little work
    assert thread_chunks(100, 1e-3, 4, AVX2) == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert thread_chunks(3, 1.0, 4, AVX2) == [(0, 1), (1, 2), (2, 3)]        # extent-bound
    assert thread_chunks(100, 12e-6, 4, AVX2) == [(0, 50), (50, 100)]        # 2 threads' worth
    assert thread_chunks(100, 1e-3, 2, AVX2, per_thread=4) == [               # claimed: 4 each
        (0, 13), (13, 26), (26, 39), (39, 52), (52, 65), (65, 78), (78, 91), (91, 100)]
    assert thread_chunks(100, 1e-3, 1, AVX2, per_thread=4) == [(0, 100)]      # one thread


def test_a_column_reduction_along_its_unit_stride_dim_is_one_chunk():
    """A bias-gradient-shaped reduction (rows summed into one row, split by columns)
    ran slower on two threads than on one: ``smallest_chunk`` makes it one chunk; a
    column reduction split along another dim, and every other kernel, split as before."""
    from nova.compiler.lowering.plan import Schedule
    from nova.compiler.targets.cpu.configurator import smallest_chunk
    bias_grad = Schedule((16, 128, 384), 2, "column", (0, 1), vector_dim=2)
    assert smallest_chunk(bias_grad) == 384
    assert thread_chunks(384, 1e-3, 2, AVX2, per_thread=4,
                         min_chunk=smallest_chunk(bias_grad)) == [(0, 384)]
    outer = Schedule((128, 16, 384), 0, "column", (1,), vector_dim=2)
    assert smallest_chunk(outer) == 1
    assert smallest_chunk(Schedule((16, 128, 384), 0, "elementwise", vector_dim=2)) == 1
    assert thread_chunks(100, 1e-3, 2, AVX2, per_thread=4, min_chunk=30) == [
        (0, 34), (34, 68), (68, 100)]                # at most floor(100 / 30) = 3 chunks


def test_a_bias_gradient_runs_as_one_chunk_and_sums_exactly():
    """Through the engine: the column reduction's kernel list holds one range, and the
    sum equals float64 numpy's to float32 rounding on any thread count."""
    from nova.runtime.cache import CACHE
    rng = np.random.default_rng(0)
    g = rng.standard_normal((16, 128, 96)).astype(np.float32)
    before = nv.get_num_threads()
    try:
        nv.set_num_threads(2)
        t = nv.tensor(g)
        nv.realize(t)
        out = (t * 3.0).sum((0, 1))
        nv.realize(out)
        program = CACHE.last._program
        ranges = [r for st, r in zip(program.steps, program._ranges)
                  if st.plan.schedule.strategy == "column"]
        assert ranges == [[(0, 96)]]
        np.testing.assert_allclose(out.numpy(), (g.astype(np.float64) * 3).sum((0, 1)),
                                   rtol=1e-5, atol=1e-3)
    finally:
        nv.set_num_threads(before)


def test_chunks_per_thread_balance_streams_finely_gemms_less_and_teams_one_each():
    assert chunks_per_thread("elementwise", team=False) == STREAM_CHUNKS_PER_THREAD > 1
    assert chunks_per_thread("tiled", team=False) == GEMM_CHUNKS_PER_THREAD > 1
    assert chunks_per_thread("tiled", team=True) == 1


def test_estimated_seconds_of_a_gemm_uses_one_cores_peak_and_others_1ns_per_iteration():
    # AVX2 spec: 384 GFLOP/s over 4 cores = 96 GFLOP/s per core. A 512^3 GEMM split "m"
    # with MR = 6 has loops (ceil(512 / 6) = 86 micro-panels, 512, 512).
    t = estimated_seconds("tiled", (86, 512, 512), AVX2, panel=6)
    assert abs(t - 2 * 86 * 6 * 512 * 512 / 96e9) < 1e-12
    assert estimated_seconds("elementwise", (16, 128, 384), AVX2) == 16 * 128 * 384 * 1e-9
    # a 64^3 product (~5.5 us at peak) stays on one thread; 128^3 (~44 us) is split.
    assert len(thread_chunks(11, estimated_seconds("tiled", (11, 64, 64), AVX2, 6), 4,
                             AVX2)) == 1
    assert len(thread_chunks(22, estimated_seconds("tiled", (22, 128, 128), AVX2, 6), 4,
                             AVX2)) == 4


def test_detected_host_spec_is_plausible_and_shows_in_the_dump():
    spec = detect_cpu()
    assert spec.cores >= 1 and spec.vector_bits in (128, 256, 512)
    assert spec.l1d < spec.l2 < spec.l3
    x = nv.ones(64, 64)
    dump = nv.debug.dump_ir(x @ x, stage="fused")
    assert "compute-bound" in dump or "memory-bound" in dump
    assert "MR = (" in dump and "KC = " in dump and "MC=" in dump


def test_elementwise_unroll_covers_the_add_latency():
    # AVX-512: min(latency 4 x 2 units, 32 regs // 4) = 8; AVX2: min(8, 16 // 4) = 4;
    # SSE-like (8 registers, 1 unit): min(4, 2) = 2.
    assert elementwise_unroll(AVX512) == 8 and elementwise_unroll(AVX2) == 4
    assert elementwise_unroll(SMALL) == 2


def test_unroll_reaches_the_generated_loops():
    """Elementwise and row-reduction plans carry the unroll, and their LLVM IR asks the
    loop vectorizer for that interleave count on the innermost loop."""
    from nova.compiler.irgen import build_module
    from nova.compiler.lowering.plan import plan_kernels
    from nova.compiler.passes import simplify
    from nova.compiler.passes.fusion import fuse
    from nova.runtime.kernel_cache import KERNELS
    from nova.tensor.realize import pending_graph
    unroll = elementwise_unroll(detect_cpu())
    x = nv.tensor(np.ones((8, 300), np.float32))
    for t, strategy in ((x * 2 + 1, "elementwise"), ((x * 2).sum(1), "row")):
        plans = plan_kernels(fuse(simplify(build_module(pending_graph(t)))))
        plan = next(p for p in plans if p.schedule.strategy == strategy)
        assert plan.schedule.unroll == unroll and f"unroll={unroll}" in plan.describe()
        text = KERNELS.llvm_ir(plan)
        assert f'!"llvm.loop.interleave.count", i32 {unroll}' in text
        assert "!llvm.loop" in text


def test_a_tiny_innermost_loop_asks_nothing_of_the_vectorizer_and_compiles_silently(capfd):
    """A loop of fewer than 16 iterations that was asked to vectorize (interleave count,
    width) and was not made LLVM print "remark: ... loop not vectorized: runtime pointer
    checks needed ... '#pragma clang loop vectorize(enable)'" on the user's terminal (a
    (10, 4) normal initialization of an Embedding did). Its IR now carries no such
    hint, the same kernel at 64 columns still does, and compiling it prints nothing. (A
    flat kernel's one loop is its launch range, of no constant length: it keeps its
    hints, and a tiny one compiles silently too.)"""
    from nova.compiler.irgen import build_module
    from nova.compiler.lowering.plan import plan_kernels
    from nova.compiler.passes import simplify
    from nova.compiler.passes.fusion import fuse
    from nova.compiler.targets.cpu.llvm_emit import TINY_TRIP_COUNT
    from nova.runtime.kernel_cache import KERNELS
    from nova.tensor.realize import pending_graph

    def kernel(cols, flat=False):   # a normal draw: Box-Muller's cos asks for a width
        x = nv.randn(10, cols) if flat else nv.randn(10, cols) + nv.arange(cols)
        plans = plan_kernels(fuse(simplify(build_module(pending_graph(x)))))
        return next(p for p in plans if p.out[0] == (10, cols))

    assert TINY_TRIP_COUNT == 16
    tiny, wide = kernel(4), kernel(64)
    assert "llvm.loop.vectorize.width" not in KERNELS.llvm_ir(tiny)
    assert "llvm.loop.interleave.count" not in KERNELS.llvm_ir(tiny)
    assert "llvm.loop.vectorize.width" in KERNELS.llvm_ir(wide)
    assert "llvm.loop.interleave.count" in KERNELS.llvm_ir(wide)
    flat = kernel(1, flat=True)
    assert not tiny.schedule.flat and flat.schedule.flat
    assert "llvm.loop.vectorize.width" in KERNELS.llvm_ir(flat)
    for plan in (tiny, flat):
        capfd.readouterr()
        KERNELS.optimized(plan)         # in this process: LLVM's remarks go to fd 2
        out, err = capfd.readouterr()
        assert "remark" not in err and "not vectorized" not in err + out


def test_polynomial_math_runs_two_vectors_in_flight_and_sin_cos_the_float32_width():
    """Kernels evaluating inline polynomial math (exp, log, sin...) in float32 interleave
    2 vectors, not ``elementwise_unroll``'s 8 (their live values spilled); sin and cos
    also ask for the host's float32 lanes, the width their huge-argument path has
    vector variants for (``llvm_trig.VARIANT_LANES``). Other kernels, and float64 math
    (libm), leave the width to LLVM at the usual interleave."""
    from nova.compiler.irgen import build_module
    from nova.compiler.lowering.plan import plan_kernels
    from nova.compiler.passes import simplify
    from nova.compiler.passes.fusion import fuse
    from nova.runtime.kernel_cache import KERNELS
    from nova.tensor.realize import pending_graph
    spec = detect_cpu()
    x = nv.tensor(np.ones((8, 300), np.float32))
    two = min(2, elementwise_unroll(spec))
    cases = ((x.sin() * 2, spec.lanes(4), two),
             (x.cos().sum(1), spec.lanes(4), two),
             (x.exp() * 2, 0, two),
             (x.log1p().sum(1), 0, two),
             (x * 2 + 1, 0, elementwise_unroll(spec)),
             (x.double().sin(), 0, elementwise_unroll(spec)))      # float64: libm
    for t, width, unroll in cases:
        (plan,) = [p for p in plan_kernels(fuse(simplify(build_module(pending_graph(t)))))
                   if p.schedule.strategy in ("elementwise", "row")]
        assert (plan.schedule.vector_width, plan.schedule.unroll) == (width, unroll)
        text = KERNELS.llvm_ir(plan)
        assert (f'!"llvm.loop.vectorize.width", i32 {width}' in text) == (width > 0)


def test_sin_beside_a_libm_call_asks_for_no_width_and_compiles_silently(capfd):
    """float32 ``sin`` fused with an op that calls libm (float32 ``cosh`` computes in
    float64 through ``exp``/``expm1``; ``atan2``; ``pow``): the loop cannot vectorize,
    and asking it for the sin lanes made LLVM print "remark: <unknown>:0:0: loop not
    vectorized: call instruction cannot be vectorized" on the user's terminal (a complex
    ``sin``, ``sin(re) * cosh(im)``, did). Such kernels ask for no width."""
    from nova.compiler.irgen import build_module
    from nova.compiler.lowering.plan import plan_kernels
    from nova.compiler.passes import simplify
    from nova.compiler.passes.fusion import fuse
    from nova.runtime.kernel_cache import KERNELS
    from nova.tensor.realize import pending_graph
    x = nv.tensor(np.linspace(-2, 2, 300, dtype=np.float32))
    y = nv.tensor(np.linspace(0.1, 3, 300, dtype=np.float32))
    for t in (x.sin() * y.cosh(), x.sin() * nv.atan2(y, x), x.sin() * y.pow(x)):
        (plan,) = [p for p in plan_kernels(fuse(simplify(build_module(pending_graph(t)))))
                   if p.schedule.strategy == "elementwise"]
        assert plan.schedule.vector_width == 0
        capfd.readouterr()
        KERNELS.optimized(plan)         # in this process: LLVM's remarks go to fd 2
        out, err = capfd.readouterr()
        assert "remark" not in err and "not vectorized" not in err + out


def test_causal_attention_blocks_keep_eight_blocks_on_the_diagonal():
    """Causal blocks shrink by NR until the diagonal has at least 8 (the half-masked
    diagonal blocks are then at most 1/8 more work), never below NR; without the mask
    the L1 bound alone decides."""
    from nova.compiler.targets.cpu.configurator import attention_blocks
    # AVX-512: NR 32; 64 x 64 x 4 B fills half of a 48 KiB L1
    assert [attention_blocks(AVX512, t, t, True).bc for t in (31, 128, 256, 512, 1024)] == \
        [32, 32, 32, 64, 64]
    def sides(spec, t, causal=True):
        blocks = attention_blocks(spec, t, t, causal)
        return blocks.br, blocks.bc
    assert sides(AVX512, 256, causal=False) == (64, 64)
    assert "8 blocks on the diagonal -> 32" in attention_blocks(AVX512, 256, 256, True).derivation
    # AVX2: NR 16, side 64; T 256 goes 64 -> 48 (6 blocks) -> 32 (8)
    assert sides(AVX2, 256) == (32, 32) and sides(AVX2, 384) == (48, 48)
