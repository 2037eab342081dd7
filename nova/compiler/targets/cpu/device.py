"""What the analytic configurator knows about a CPU: a ``CpuSpec``.

``detect_cpu()`` reads the host: usable cores (affinity-aware), the vector ISA from
LLVM's host features, cache sizes from sysfs (with conservative fallbacks when sysfs is
absent), and two estimates:

- peak FLOP/s = cores x FMA units x 2 (mul+add) x float32 lanes x clock. The clock is
  the highest of ``cpuinfo_max_freq`` (sysfs) and ``cpu MHz`` (``/proc/cpuinfo``), else
  2.5 GHz; FMA units are 2 on AVX2/AVX-512 cores (1 otherwise). In a VM that hides the
  boost clock this is a lower bound (measured GEMMs can exceed it).
- memory bandwidth = 10 GB/s per core, capped at 100 GB/s: a deliberately rough
  figure (a measured one is what ``benchmarks/bench_ops.py`` reports as copy bandwidth).

Specs can be built by hand for machines we don't have, which is how the configurator is
tested.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class CpuSpec:
    name: str
    cores: int
    isa: str                 # "avx512", "avx2" or "sse"
    vector_bits: int         # 512, 256, 128
    vector_registers: int    # 32 with AVX-512, else 16
    l1d: int                 # bytes, per core
    l2: int                  # bytes, per core
    l3: int                  # bytes, shared
    fma_units: int = 2
    ghz: float = 2.5
    fma_latency: int = 4     # cycles

    def lanes(self, itemsize: int = 4) -> int:
        return self.vector_bits // (8 * itemsize)

    @property
    def peak_flops(self) -> float:
        return self.cores * self.fma_units * 2 * self.lanes(4) * self.ghz * 1e9

    @property
    def bandwidth(self) -> float:
        return min(10e9 * self.cores, 100e9)

    @property
    def balance(self) -> float:
        """FLOPs per byte at which a kernel stops being memory-bound (machine balance)."""
        return self.peak_flops / self.bandwidth


def _sysfs_caches() -> dict[str, int]:
    sizes: dict[str, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return sizes
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(base, entry, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(base, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        value = int(text.rstrip("KM")) * scale
        if level == "1" and kind in ("Data", "Unified"):
            sizes["l1d"] = value
        elif level in ("2", "3"):
            sizes[f"l{level}"] = value
    return sizes


def _clock_ghz() -> float:
    readings = []
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            readings.append(int(f.read().strip()) / 1e6)
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    readings.append(float(line.split(":")[1]) / 1000)
                    break
    except (OSError, ValueError):
        pass
    return max(readings) if readings else 2.5


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


@lru_cache(maxsize=1)
def detect_cpu() -> CpuSpec:
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        isa, bits, regs = "avx512", 512, 32
    elif features.get("avx2"):
        isa, bits, regs = "avx2", 256, 16
    else:
        isa, bits, regs = "sse", 128, 16
    cores = usable_cores()
    caches = _sysfs_caches()
    return CpuSpec(name=llvm.get_host_cpu_name(), cores=cores, isa=isa, vector_bits=bits,
                   vector_registers=regs, l1d=caches.get("l1d", 32 * 1024),
                   l2=caches.get("l2", 256 * 1024), l3=caches.get("l3", 8 * 1024 * 1024),
                   fma_units=2 if isa != "sse" else 1, ghz=_clock_ghz())
