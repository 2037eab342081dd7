"""The analytic configurator on hand-written device specs, against hand-derived values."""
import nova as nv
from nova.compiler.configurator import (classify, gemm_kc, gemm_mc, gemm_panel_width, gemm_tile,
                                       min_parallel_work, thread_chunks)
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


def test_gemm_kc_keeps_the_b_micro_panel_in_half_the_l1():
    # AVX2: 32 KiB / 2 / (NR 16 x 4 B) = 256 (BLIS's Haswell sgemm KC).
    assert gemm_kc(AVX2, 256, 16) == 256 and gemm_kc(AVX2, 4096, 16) == 256
    # K = 1000 needs 4 blocks of at most 256: balanced to ceil(1000 / 4) = 250.
    assert gemm_kc(AVX2, 1000, 16) == 250
    # AVX-512, 48 KiB L1: 24 KiB / (32 x 4 B) = 192; K = 2048 -> 11 blocks of 187;
    # K = 512 -> 3 blocks of 171; a K below the cap is one block.
    assert gemm_kc(AVX512, 2048, 32) == 187 and gemm_kc(AVX512, 512, 32) == 171
    assert gemm_kc(AVX512, 100, 32) == 100 and gemm_kc(AVX512, 1, 32) == 1
    # SSE-like: 8 KiB / (8 x 4 B) = 256.
    assert gemm_kc(SMALL, 10_000, 8) == 250


def test_gemm_mc_keeps_the_packed_a_block_in_half_the_l2():
    # AVX2: 128 KiB / (KC 256 x 4 B) = 128 rows -> a multiple of MR 6: 126.
    assert gemm_mc(AVX2, 256, 6) == 126
    # AVX-512: 512 KiB / (187 x 4 B) = 700.9 -> 700 (a multiple of 14);
    # KC 171: 766.4 -> 756.
    assert gemm_mc(AVX512, 187, 14) == 700 and gemm_mc(AVX512, 171, 14) == 756
    # SSE-like: 64 KiB / (256 x 4 B) = 64; never below one MR.
    assert gemm_mc(SMALL, 256, 2) == 64 and gemm_mc(SMALL, 10**6, 2) == 2


def test_gemm_nc_gives_each_core_a_share_of_half_the_l3():
    # AVX2: 8 MiB / 2 / 4 cores = 1 MiB; / (KC 256 x 4 B) = 1024 columns.
    assert gemm_panel_width(AVX2, 256, 16) == 1024
    # AVX-512: 32 MiB / 2 / 2 = 8 MiB; / (187 x 4 B) = 11214.7 -> 11200 (x 32).
    assert gemm_panel_width(AVX512, 187, 32) == 11200
    # SSE-like: 512 KiB / (256 x 4 B) = 512; never below one NR.
    assert gemm_panel_width(SMALL, 256, 8) == 512 and gemm_panel_width(SMALL, 10**7, 8) == 8


def test_gemm_tile_blocks_split_and_dump():
    # gpt-42m mlp-up weight gradient on the AVX-512 spec: M = 2048, K = 2048, N = 512.
    t = gemm_tile(AVX512, k=2048, m=2048, n=512)
    assert (t.mr, t.nr, t.kc, t.mc, t.nc, t.split) == (14, 32, 187, 700, 512, "m")
    assert t.pack_a and t.pack_b
    # NC is capped by N rounded up to NR; threads split the larger of M and N.
    t = gemm_tile(AVX2, k=1000, m=100, n=5000)
    assert (t.kc, t.mc, t.nc, t.split) == (250, 126, 1040, "n")
    assert gemm_tile(AVX2, k=100, m=300, n=7).nc == 16
    # An output that cannot hold float32 partial sums is not blocked along K.
    t = gemm_tile(AVX2, k=1000, m=64, n=64, k_blocking=False)
    assert t.kc == 1000 and t.mc == 30 and "KC = K = 1000" in t.derivation
    for text in ("KC = L1/2", "MC = L2/2", "NC = L3/2", "threads split M"):
        assert text in gemm_tile(AVX512, k=2048, m=2048, n=512).derivation


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
    assert "MR = (" in dump and "KC = " in dump and "MC=" in dump
