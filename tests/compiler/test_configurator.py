"""The analytic configurator on hand-written device specs, against hand-derived values."""
import nova as nv
from nova.compiler.configurator import classify, gemm_tile, min_parallel_work, thread_chunks
from nova.compiler.device import CpuSpec, detect_cpu

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
    # AVX-512: 16 lanes -> NR 32; (32 - 3) // 2 = 14, capped at 6.
    assert (gemm_tile(AVX512).mr, gemm_tile(AVX512).nr) == (6, 32)
    # float64 halves the lanes.
    assert gemm_tile(AVX512, itemsize=8).nr == 16
    # 8 registers: (8 - 3) // 2 = 2 rows, 4 chains < 4 x 1 latency? 4 >= 4: hidden.
    small = gemm_tile(SMALL)
    assert (small.mr, small.nr) == (2, 8) and "latency not hidden" not in small.derivation


def test_peak_balance_and_classification():
    # 4 cores x 2 FMA x 2 flops x 8 lanes x 3 GHz = 384 GFLOP/s; 40 GB/s -> balance 9.6.
    assert AVX2.peak_flops == 384e9 and AVX2.bandwidth == 40e9
    assert abs(AVX2.balance - 9.6) < 1e-9
    assert classify(2 * 1024**3, 3 * 4 * 1024**2, AVX2) == "compute"     # 1024^3 GEMM
    assert classify(1024**2, 3 * 4 * 1024**2, AVX2) == "memory"           # an add


def test_thread_split_needs_enough_work():
    assert min_parallel_work(AVX2) == 20000
    assert thread_chunks(100, 10_000, 4, AVX2) == [(0, 100)]               # too little work
    assert thread_chunks(100, 1_000_000, 4, AVX2) == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert thread_chunks(3, 10**9, 4, AVX2) == [(0, 1), (1, 2), (2, 3)]   # extent-bound
    assert thread_chunks(100, 50_000, 4, AVX2) == [(0, 50), (50, 100)]    # 2 threads' worth


def test_detected_host_spec_is_plausible_and_shows_in_the_dump():
    spec = detect_cpu()
    assert spec.cores >= 1 and spec.vector_bits in (128, 256, 512)
    assert spec.l1d < spec.l2 < spec.l3
    x = nv.ones(64, 64)
    dump = nv.debug.dump_ir(x @ x, stage="fused")
    assert "compute-bound" in dump or "memory-bound" in dump
    assert "MR = min(" in dump


def test_gemm_panel_width_fills_half_the_l2():
    # AVX2: (256 KiB / 2) / (K=256 x 4 B) = 128 columns (a multiple of NR = 16).
    assert gemm_tile(AVX2, k=256).nc == 128
    # AVX-512, 1 MiB L2: (512 KiB) / (512 x 4 B) = 256; K = 2048 -> 64.
    assert gemm_tile(AVX512, k=512).nc == 256 and gemm_tile(AVX512, k=2048).nc == 64
    # A small L2 and a huge K still get one NR-wide panel.
    assert gemm_tile(SMALL, k=1024).nc == 16 and gemm_tile(SMALL, k=100_000).nc == 8
