"""What the CUDA configurator knows about an NVIDIA GPU: a ``CudaSpec``.

Explicit specs (``SM80``, ``SM86``, ``SM90``) let configurations and compilation be tested
on machines without a GPU; ``from_device`` reads a real device's attributes through CuPy
(imported lazily, so ``import nova`` never needs CuPy or a driver).

Derived figures, each a closed formula of the fields:

- ``peak_fp32`` = SMs x FP32 lanes per SM x 2 (an FMA is two FLOPs) x SM clock.
  FP32 lanes per SM: 64 on sm_80 (A100), 128 on sm_86/sm_89/sm_90.
- ``peak_tf32`` = SMs x dense TF32 tensor-core FLOPs per SM per clock x SM clock.
  Per SM per clock: 1024 on sm_80 (A100: 108 x 1024 x 1.41 GHz = 156 TFLOP/s),
  256 on the consumer sm_86/sm_89 parts (RTX 3060: 28 x 256 x 1.78 GHz = 12.7 TFLOP/s),
  2048 on sm_90 (H100 SXM: 132 x 2048 x 1.83 GHz = 495 TFLOP/s). On sm_90 that peak is
  reached only by ``wgmma``; the ``mma.sync`` instructions Nova emits reach roughly
  two thirds of it, which the configurator does not need (it only compares orders of
  magnitude to classify kernels).
- ``bandwidth`` (bytes/s): HBM/GDDR, from the data sheet for the explicit specs, or
  2 (double data rate) x memory clock x bus width / 8 from the device attributes.
- ``balance`` = peak_tf32 / bandwidth: the arithmetic intensity (FLOPs per byte) above
  which a tensor-core GEMM is compute-bound.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MMA_SHAPES_TF32: tuple[tuple[int, int, int], ...] = ((16, 8, 8), (16, 8, 4))


def fp32_lanes_per_sm(major: int, minor: int) -> int:
    """FP32 FMA lanes per SM by compute capability (A100 has half of Ampere's consumer
    parts, which double-issue FP32)."""
    return 64 if (major, minor) == (8, 0) else 128


def tf32_flops_per_sm_clock(major: int, minor: int) -> int:
    """Dense TF32 tensor-core FLOPs per SM per clock (see the module docstring)."""
    if major >= 9:
        return 2048
    if (major, minor) == (8, 0):
        return 1024
    return 256


@dataclass(frozen=True)
class CudaSpec:
    name: str
    major: int                     # compute capability
    minor: int
    sms: int                       # streaming multiprocessors
    smem_per_block: int            # bytes of static shared memory a block may use (48 KiB)
    smem_per_block_optin: int      # bytes with cudaFuncAttributeMaxDynamicSharedMemorySize
    smem_per_sm: int               # bytes per SM, shared by its resident blocks
    regs_per_sm: int               # 32-bit registers per SM
    regs_per_thread: int           # most a thread may use (255)
    max_threads_per_sm: int
    max_threads_per_block: int
    max_blocks_per_sm: int
    l2_bytes: int
    sm_clock_ghz: float
    bandwidth: float               # bytes/s of device memory
    warp_size: int = 32
    mma_shapes: tuple[tuple[int, int, int], ...] = MMA_SHAPES_TF32
    reserved_smem_per_block: int = 1024   # the driver keeps 1 KiB per block (sm_80+)

    @property
    def arch(self) -> str:
        """The NVRTC/ptxas target, e.g. ``sm_90``."""
        return f"sm_{self.major}{self.minor}"

    @property
    def peak_fp32(self) -> float:
        return self.sms * fp32_lanes_per_sm(self.major, self.minor) * 2 * self.sm_clock_ghz * 1e9

    @property
    def peak_tf32(self) -> float:
        return self.sms * tf32_flops_per_sm_clock(self.major, self.minor) * self.sm_clock_ghz * 1e9

    @property
    def balance(self) -> float:
        """FLOPs per byte at which a tensor-core kernel stops being memory-bound."""
        return self.peak_tf32 / self.bandwidth

    @property
    def balance_fp32(self) -> float:
        """The same for CUDA-core (SIMT) arithmetic."""
        return self.peak_fp32 / self.bandwidth

    def describe(self) -> str:
        return (f"{self.name} ({self.arch}): {self.sms} SMs at {self.sm_clock_ghz} GHz, "
                f"{self.smem_per_sm // 1024} KiB smem/SM ({self.smem_per_block_optin // 1024} KiB"
                f"/block opt-in), {self.regs_per_sm} regs/SM, L2 {self.l2_bytes >> 20} MiB, "
                f"{self.bandwidth / 1e9:.0f} GB/s, FP32 {self.peak_fp32 / 1e12:.1f} TFLOP/s, "
                f"TF32 {self.peak_tf32 / 1e12:.1f} TFLOP/s")


# A100-SXM4-80GB: 108 SMs, 1.41 GHz boost, 164 KiB smem/SM (163 KiB per block), 40 MiB L2,
# 2039 GB/s HBM2e.
SM80 = CudaSpec(name="A100-SXM4-80GB", major=8, minor=0, sms=108, smem_per_block=48 * 1024,
                smem_per_block_optin=163 * 1024, smem_per_sm=164 * 1024, regs_per_sm=65536,
                regs_per_thread=255, max_threads_per_sm=2048, max_threads_per_block=1024,
                max_blocks_per_sm=32, l2_bytes=40 << 20, sm_clock_ghz=1.41,
                bandwidth=2039e9)

# GeForce RTX 3060 (GA106): 28 SMs, 1.777 GHz boost, 100 KiB smem/SM (99 KiB per block),
# 1536 threads/SM, 3 MiB L2, 360 GB/s GDDR6.
SM86 = CudaSpec(name="RTX-3060", major=8, minor=6, sms=28, smem_per_block=48 * 1024,
                smem_per_block_optin=99 * 1024, smem_per_sm=100 * 1024, regs_per_sm=65536,
                regs_per_thread=255, max_threads_per_sm=1536, max_threads_per_block=1024,
                max_blocks_per_sm=16, l2_bytes=3 << 20, sm_clock_ghz=1.777, bandwidth=360e9)

# H100 SXM5 (H200 has the same SM array, 4.8 TB/s HBM3e): 132 SMs, tensor-core rating
# clock 1.83 GHz, 228 KiB smem/SM (227 KiB per block), 50 MiB L2, 3.35 TB/s HBM3.
SM90 = CudaSpec(name="H100-SXM5", major=9, minor=0, sms=132, smem_per_block=48 * 1024,
                smem_per_block_optin=227 * 1024, smem_per_sm=228 * 1024, regs_per_sm=65536,
                regs_per_thread=255, max_threads_per_sm=2048, max_threads_per_block=1024,
                max_blocks_per_sm=32, l2_bytes=50 << 20, sm_clock_ghz=1.83,
                bandwidth=3.35e12)

SPECS: dict[str, CudaSpec] = {"sm_80": SM80, "sm_86": SM86, "sm_90": SM90}


def spec_for_arch(arch: str) -> CudaSpec:
    """The explicit spec of an ``sm_XY`` target (for tests and offline compilation)."""
    try:
        return SPECS[arch]
    except KeyError:
        raise ValueError(f"no explicit CudaSpec for {arch!r}; known: {sorted(SPECS)}") from None


def _closest(major: int, minor: int) -> CudaSpec:
    if major >= 9:
        return SM90
    return SM80 if (major, minor) == (8, 0) else SM86


def from_attributes(attrs: dict[str, Any], name: str = "cuda") -> CudaSpec:
    """A spec from CUDA device attributes (the names of ``cudaDeviceAttr`` without the
    ``cudaDevAttr`` prefix, as ``cupy.cuda.Device.attributes`` returns them). Missing
    attributes (CUDA 13 dropped the clock rates from some queries) fall back to the
    explicit spec of the nearest architecture."""
    major = int(attrs["ComputeCapabilityMajor"])
    minor = int(attrs["ComputeCapabilityMinor"])
    base = _closest(major, minor)

    def get(key: str, default: Any) -> Any:
        value = attrs.get(key)
        return default if value in (None, 0) else value

    clock_khz = get("ClockRate", 0)
    mem_khz, bus_bits = get("MemoryClockRate", 0), get("GlobalMemoryBusWidth", 0)
    bandwidth = 2.0 * mem_khz * 1e3 * bus_bits / 8 if mem_khz and bus_bits else base.bandwidth
    return replace(
        base, name=name, major=major, minor=minor,
        sms=int(attrs["MultiProcessorCount"]),
        smem_per_block=int(get("MaxSharedMemoryPerBlock", base.smem_per_block)),
        smem_per_block_optin=int(get("MaxSharedMemoryPerBlockOptin", base.smem_per_block_optin)),
        smem_per_sm=int(get("MaxSharedMemoryPerMultiprocessor", base.smem_per_sm)),
        regs_per_sm=int(get("MaxRegistersPerMultiprocessor", base.regs_per_sm)),
        max_threads_per_sm=int(get("MaxThreadsPerMultiProcessor", base.max_threads_per_sm)),
        max_threads_per_block=int(get("MaxThreadsPerBlock", base.max_threads_per_block)),
        max_blocks_per_sm=int(get("MaxBlocksPerMultiprocessor", base.max_blocks_per_sm)),
        l2_bytes=int(get("L2CacheSize", base.l2_bytes)),
        warp_size=int(get("WarpSize", 32)),
        sm_clock_ghz=clock_khz / 1e6 if clock_khz else base.sm_clock_ghz,
        bandwidth=bandwidth)


def from_device(device: Any = None) -> CudaSpec:
    """The spec of a CuPy device (``cupy.cuda.Device``, a device id, or None for the
    current one). CuPy is imported here, never at module import."""
    import cupy

    if device is None or isinstance(device, int):
        device = cupy.cuda.Device(device if device is not None else cupy.cuda.runtime.getDevice())
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    raw = props.get("name", b"cuda")
    name = raw.decode() if isinstance(raw, bytes) else str(raw)
    return from_attributes(device_attributes(device), name=name)


def device_attributes(device: Any) -> dict[str, Any]:
    """``device.attributes`` with the compute capability added: CuPy exports the
    capability's two attributes as ``deviceAttributeComputeCapabilityMajor/Minor``
    rather than under the ``cudaDevAttr`` prefix its ``attributes`` collects, so the
    dict lacks them (CuPy 14, seen on an H200); ``compute_capability`` ("90") has
    them on every version."""
    attrs = dict(device.attributes)
    capability = str(device.compute_capability)
    attrs.setdefault("ComputeCapabilityMajor", int(capability[:-1]))
    attrs.setdefault("ComputeCapabilityMinor", int(capability[-1]))
    return attrs
