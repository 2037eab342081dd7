"""What a compiled step holds in memory, from liveness over its kernel order.

The cpu engine frees every intermediate after its last reader, so the step's peak is
the largest sum of simultaneously live intermediates, plus its arguments (parameters,
optimizer state, data) and its results. This report is computed from the plan, not
measured; ``benchmarks/bench_train.py`` measures RSS.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Buffer:
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    kernel: str          # the kernel that writes it


@dataclass
class MemoryReport:
    argument_bytes: int
    result_bytes: int
    peak_intermediate_bytes: int
    peak_kernel: int                       # index of the kernel at which the peak occurs
    num_kernels: int
    top: list[Buffer] = field(default_factory=list)   # largest live buffers at the peak

    @property
    def peak_bytes(self) -> int:
        """Arguments + results + the peak of live intermediates (an upper bound: results
        are counted as live for the whole step)."""
        return self.argument_bytes + self.result_bytes + self.peak_intermediate_bytes

    def __str__(self) -> str:
        mib = 2**20
        lines = [f"nova memory report: peak {self.peak_bytes / mib:.1f} MiB = arguments "
                 f"{self.argument_bytes / mib:.1f} + results {self.result_bytes / mib:.1f} + "
                 f"live intermediates {self.peak_intermediate_bytes / mib:.1f} (at kernel "
                 f"{self.peak_kernel} of {self.num_kernels})"]
        lines += [f"  {b.nbytes / mib:9.2f} MiB  {b.dtype}{list(b.shape)}  from {b.kernel}"
                  for b in self.top]
        return "\n".join(lines)


def liveness_report(arg_bytes: list[int], steps: list[tuple[tuple[int, ...], int, Buffer]],
                    release: list[list[int]], outputs: tuple[int, ...], top: int = 10
                    ) -> MemoryReport:
    """``steps[k]`` = (slots read, slot written, the written buffer); ``release[k]`` the
    slots dead after step k; slots below ``len(arg_bytes)`` are arguments."""
    n_args = len(arg_bytes)
    keep = set(outputs)
    sizes: dict[int, Buffer] = {}
    live: set[int] = set()
    current = peak = 0
    peak_k = 0
    snapshot: set[int] = set()
    for k, (_, out, buf) in enumerate(steps):
        sizes[out] = buf
        if out not in keep:
            live.add(out)
            current += buf.nbytes
        if current > peak:
            peak, peak_k, snapshot = current, k, set(live)
        for s in release[k]:
            if s in live:
                live.discard(s)
                current -= sizes[s].nbytes
    results = sum(sizes[s].nbytes if s >= n_args else arg_bytes[s] for s in set(outputs))
    largest = sorted((sizes[s] for s in snapshot), key=lambda b: -b.nbytes)[:top]
    return MemoryReport(sum(arg_bytes), results, peak, peak_k, len(steps), largest)
