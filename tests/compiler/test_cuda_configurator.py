"""The CUDA configurator on the explicit sm_80/sm_86/sm_90 specs, against values derived
by hand from the formulas in its docstrings."""
import numpy as np
import pytest

import nova as nv
from nova.compiler.targets.cuda.configurator import (
    configure,
    gemm_stage_bytes,
    vector_width,
)
from nova.compiler.targets.cuda.device import SM80, SM86, SM90, from_attributes, spec_for_arch
from tests.compiler.cuda_cases import _graph, cases_of

F = nv.nn.functional


def _plan(*tensors, kind=None):
    plans = [c.plan for c in cases_of(_graph(*tensors))]
    plans = [p for p in plans if kind is None or p.kind == kind]
    assert len(plans) == 1, [p.describe() for p in plans]
    return plans[0]


def _t(*shape, dtype=np.float32):
    return nv.tensor(np.ones(shape, dtype=dtype))


def test_peaks_and_balance():
    # A100: 108 SMs x 64 lanes x 2 x 1.41 GHz = 19.5 TFLOP/s FP32;
    # 108 x 1024 x 1.41 GHz = 155.9 TFLOP/s TF32; / 2039 GB/s = 76.5 FLOP/B.
    assert SM80.peak_fp32 == pytest.approx(19.49e12, rel=1e-3)
    assert SM80.peak_tf32 == pytest.approx(155.93e12, rel=1e-3)
    assert SM80.balance == pytest.approx(76.47, rel=1e-3)
    # RTX 3060: 28 x 128 x 2 x 1.777 = 12.7 TFLOP/s FP32 and 28 x 256 x 1.777 TF32.
    assert SM86.peak_fp32 == pytest.approx(12.74e12, rel=1e-3)
    assert SM86.peak_tf32 == pytest.approx(12.74e12, rel=1e-3)
    # H100 SXM: 132 x 2048 x 1.83 GHz = 494.7 TFLOP/s TF32.
    assert SM90.peak_tf32 == pytest.approx(494.7e12, rel=1e-3)
    assert SM90.arch == "sm_90" and spec_for_arch("sm_86") is SM86
    with pytest.raises(ValueError, match="no explicit CudaSpec for 'sm_75'"):
        spec_for_arch("sm_75")


def test_spec_from_device_attributes():
    attrs = {"ComputeCapabilityMajor": 9, "ComputeCapabilityMinor": 0,
             "MultiProcessorCount": 132, "MaxSharedMemoryPerBlockOptin": 232448,
             "MaxSharedMemoryPerMultiprocessor": 233472, "MaxRegistersPerMultiprocessor": 65536,
             "L2CacheSize": 52428800, "ClockRate": 1980000, "MemoryClockRate": 3201000,
             "GlobalMemoryBusWidth": 6144, "MaxThreadsPerMultiProcessor": 2048}
    spec = from_attributes(attrs, name="NVIDIA H200")
    assert (spec.name, spec.arch, spec.sms, spec.l2_bytes) == ("NVIDIA H200", "sm_90", 132, 50 << 20)
    assert spec.sm_clock_ghz == pytest.approx(1.98)
    # 2 (DDR) x 3.201 GHz x 6144 bits / 8 = 4.917 TB/s
    assert spec.bandwidth == pytest.approx(4.917e12, rel=1e-3)
    # CUDA 13 may not report clocks: the nearest explicit spec fills in.
    del attrs["ClockRate"], attrs["MemoryClockRate"]
    assert from_attributes(attrs).sm_clock_ghz == SM90.sm_clock_ghz
    assert from_attributes(attrs).bandwidth == SM90.bandwidth


def test_device_attributes_add_the_capability_cupy_leaves_out():
    """CuPy 14 on an H200: ``Device.attributes`` has no ComputeCapabilityMajor/Minor
    (it exports them under another prefix), so the spec read them from
    ``compute_capability`` (the first GPU run failed every cuda test on a KeyError)."""
    from types import SimpleNamespace

    from nova.compiler.targets.cuda.device import device_attributes

    device = SimpleNamespace(attributes={"MultiProcessorCount": 132, "L2CacheSize": 52428800},
                             compute_capability="90")
    attrs = device_attributes(device)
    assert (attrs["ComputeCapabilityMajor"], attrs["ComputeCapabilityMinor"]) == (9, 0)
    assert from_attributes(attrs).arch == "sm_90"
    device = SimpleNamespace(attributes={"MultiProcessorCount": 84}, compute_capability="86")
    assert from_attributes(device_attributes(device)).arch == "sm_86"
    # what the device reports itself wins
    device = SimpleNamespace(attributes={"MultiProcessorCount": 108, "ComputeCapabilityMajor": 8,
                                         "ComputeCapabilityMinor": 0}, compute_capability="80")
    assert device_attributes(device)["ComputeCapabilityMajor"] == 8


def test_vector_width():
    assert vector_width(1 << 20, 4) == 4       # 16 B / 4 B
    assert vector_width(1000, 2) == 8          # 16 B / 2 B, 1000 % 8 == 0
    assert vector_width(15, 8) == 1            # 2 does not divide 15
    assert vector_width(6, 4) == 2


def test_elementwise_grid_is_capped_at_one_wave():
    plan = _plan(_t(1024, 1024).exp())
    # 2^20 elements / (4 per thread x 256 threads) = 1024 blocks wanted.
    # Waves: sm_80 108 x 8 = 864, sm_86 28 x min(16, 1536/256 = 6) = 168, sm_90 132 x 8 = 1056.
    assert [configure(plan, s).grid[0] for s in (SM80, SM86, SM90)] == [864, 168, 1024]
    cfg = configure(plan, SM90)
    assert (cfg.strategy, cfg.block, cfg.vec) == ("grid_stride", (256, 1, 1), 4)
    assert "grid-stride" in cfg.derivation


def test_rows_warp_or_block_per_row():
    short = configure(_plan(F.softmax(_t(64, 128), dim=-1)), SM80)
    # L = 128 <= 1024: a warp per row, 8 rows per 256-thread block, 64 / 8 = 8 blocks.
    assert (short.strategy, short.block[0], short.grid[0]) == ("warp_per_row", 256, 8)
    long = configure(_plan(F.softmax(_t(4, 5000), dim=-1)), SM80)
    # L = 5000: threads doubles from 64 while threads x 16 < 5000 -> 512; one block per row.
    assert (long.strategy, long.block[0], long.grid[0]) == ("block_per_row", 512, 4)
    assert long.shared_bytes >= (512 // 32) * 8
    total = configure(_plan(_t(300).sum()), SM86)
    assert total.strategy == "block_per_row" and total.grid[0] == 1


def test_column_reduction():
    cfg = configure(_plan(_t(512, 96).sum(dim=0)), SM90)
    assert (cfg.strategy, cfg.block, cfg.grid[0]) == ("column", (32, 8, 1), 3)  # ceil(96/32)
    # 4096 rows >= 1024: 32 slices of the reduced axis, 1024 threads per block
    long = configure(_plan(_t(4096, 96).sum(dim=0)), SM90)
    assert (long.block, long.grid[0], long.shared_bytes) == ((32, 32, 1), 3, 32 * 32 * 8)


def test_gemm_1024_cube_on_each_arch():
    plan = _plan(_t(1024, 1024) @ _t(1024, 1024))
    a100 = configure(plan, SM80)
    g = a100.gemm
    # 128x128 gives 64 < 108 blocks; 128x64 gives 128 >= 108. Warps 2x2 -> 64x32 warp tile
    # = 4 x 4 m16n8k8. regs ~ 4*16 + 16 + 8 + 40 = 128; 65536 / (128 x 128) = 4 blocks.
    # stage = 4 x (128 x 36 + 32 x 72) = 27648 B; budget min(163 KiB, 164 KiB / 2 - 1 KiB)
    # = 82944 -> 3 stages; 167936 / (82944 + 1024) = 2 blocks per SM.
    assert (g.bm, g.bn, g.bk, g.warps_m, g.warps_n, g.mi, g.ni) == (128, 64, 32, 2, 2, 4, 4)
    assert (g.regs_estimate, g.stage_bytes, g.stages, g.occupancy) == (128, 27648, 3, 2)
    assert a100.grid == (16, 8, 1) and a100.block == (128, 1, 1)
    assert a100.shared_bytes == 3 * 27648
    # intensity 2 x 1024^3 / (4 x 3 x 1024^2) = 170.7 FLOP/B > 76.5: compute-bound.
    assert g.intensity == pytest.approx(170.67, rel=1e-3) and g.bound == "compute"
    h100 = configure(plan, SM90).gemm
    # 128 blocks of 128x64 < 132 SMs: 64x64 (256 blocks). regs 88 -> 5 blocks; stage
    # 18432 B, budget 115712 -> capped at 4 stages; 233472 / 74752 = 3 blocks per SM.
    assert (h100.bm, h100.bn, h100.mi, h100.ni, h100.stages, h100.occupancy) == (64, 64, 2, 4, 4, 3)
    rtx = configure(plan, SM86).gemm
    # 28 SMs: 128x128 fills them; 8 warps (2x4), regs 128 -> 2 blocks; stage 36864 B,
    # budget 50176 -> 1 -> clamped to 2 stages (73728 B, within 99 KiB); 1 block/SM.
    assert (rtx.bm, rtx.bn, rtx.threads, rtx.stages, rtx.occupancy) == (128, 128, 256, 2, 1)
    assert gemm_stage_bytes(128, 128, 32) == 36864


def test_gemm_small_batched_and_simt():
    attn = configure(_plan(_t(8, 32, 16) @ _t(8, 16, 32)), SM90)
    # 8 x 1 x 1 tiles never fill 132 SMs: the smallest tile, 32x32; BK 16 since K = 16.
    assert (attn.gemm.bm, attn.gemm.bn, attn.gemm.bk) == (32, 32, 16)
    assert attn.grid == (1, 1, 8)
    f64 = configure(_plan(_t(40, 30, dtype=np.float64) @ _t(30, 50, dtype=np.float64)), SM80)
    assert (f64.strategy, f64.block, f64.grid) == ("simt", (16, 16, 1), (4, 3, 1))
    assert not f64.gemm.tensor_cores
