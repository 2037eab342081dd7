"""The analytic configurator: (kernel, CpuSpec) -> schedule, with no search.

Each function is pure and documents its formula; the chosen values and their
derivation appear in ``nv.debug.dump_ir(..., stage="fused")``.

GEMM register tile (the BLIS analytical model, Low et al., "Analytical modeling is
enough for high-performance BLIS", 2016, register level):
  NR = 2 vectors (2 * lanes columns), so each k step loads 2 vectors of packed B;
  the MR x NR accumulator tile takes MR * 2 registers, plus 2 for B and 1 for the
  broadcast element of A: MR * 2 + 3 <= registers, so MR = (registers - 3) // 2;
  latency: the MR * 2 independent FMA chains must cover latency x units in flight,
  MR * 2 >= fma_latency * fma_units;
  MR <= 6 cap: A is read unpacked (one scalar load per row per k), and beyond 6 rows
  those loads, not the FMAs, bound the k loop.

Parallel split: a kernel is split across threads only when each thread gets at least
``min_parallel_work`` loop iterations; below that the ~20 us of dispatching a chunk to
another thread costs more than the chunk's work (at ~1 ns per simple iteration).

Classification: arithmetic intensity (FLOPs per byte moved) against the machine balance
(peak FLOP/s / bandwidth): below it a kernel is memory-bound and its schedule only needs
to stream (vectorize, split across cores); above it, compute-bound (register tiling).
"""
from __future__ import annotations

from dataclasses import dataclass

from nova.compiler.device import CpuSpec

MR_CAP = 6
DISPATCH_SECONDS = 20e-6
SECONDS_PER_ITERATION = 1e-9


@dataclass(frozen=True)
class GemmTile:
    mr: int
    nr: int
    nc: int
    derivation: str


def gemm_panel_width(spec: CpuSpec, k: int, nr: int, itemsize: int = 4) -> int:
    """NC: columns of the packed K x NC panel of B, sized to half the L2 (the other half
    for the rows of A and C streaming past it): NC = (L2 / 2) / (K * itemsize), rounded
    down to a multiple of NR, at least NR."""
    cols = (spec.l2 // 2) // max(k * itemsize, 1)
    return max(nr, cols // nr * nr)


def gemm_tile(spec: CpuSpec, itemsize: int = 4, k: int = 256) -> GemmTile:
    lanes = spec.lanes(itemsize)
    nr = 2 * lanes
    by_registers = (spec.vector_registers - 3) // 2
    mr = max(1, min(MR_CAP, by_registers))
    chains = 2 * mr
    needed = spec.fma_latency * spec.fma_units
    nc = gemm_panel_width(spec, k, nr, itemsize)
    why = (f"NR = 2 x {lanes} lanes = {nr}; MR = min({MR_CAP}, ({spec.vector_registers} regs - 3)"
           f" // 2 = {by_registers}) = {mr}; {chains} FMA chains vs latency x units = {needed}"
           + ("" if chains >= needed else " (latency not hidden: too few registers)")
           + f"; NC = L2/2 / (K={k} x {itemsize} B) -> {nc}")
    return GemmTile(mr, nr, nc, why)


def min_parallel_work(spec: CpuSpec) -> int:
    """Iterations a thread must get to be worth dispatching (see module docstring)."""
    return int(DISPATCH_SECONDS / SECONDS_PER_ITERATION)


def thread_chunks(extent: int, work: int, threads: int, spec: CpuSpec) -> list[tuple[int, int]]:
    """Split ``[0, extent)`` of a kernel with ``work`` iterations across ``threads``."""
    n = min(threads, extent, max(1, work // max(min_parallel_work(spec), 1)))
    if n <= 1:
        return [(0, extent)]
    step = -(-extent // n)
    return [(s, min(s + step, extent)) for s in range(0, extent, step)]


def classify(flops: float, nbytes: float, spec: CpuSpec) -> str:
    """``"compute"`` or ``"memory"`` bound, by arithmetic intensity vs machine balance."""
    intensity = flops / max(nbytes, 1.0)
    return "compute" if intensity >= spec.balance else "memory"
