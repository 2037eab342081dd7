"""What a compiled step holds in memory, from its memory plan.

The peak of a step is its arguments (parameters, optimizer state, data), the arena that
holds every intermediate (sized by the plan: the largest set of simultaneously live
buffers, packed), and the results that are not written over donated arguments. The
report is computed from the plan, not measured; ``benchmarks/bench_memory.py`` measures
RSS. Intermediates are told apart as *activations* (forward values the backward reads:
what rematerialization trades against compute) and *temporaries* (everything else).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nova.compiler.dialect import BACKWARD_ATTR
from nova.runtime.memory_plan import MemoryPlan


@dataclass
class Buffer:
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    kernel: str          # the kernel that writes it
    category: str = ""   # activation | temporary


@dataclass
class MemoryReport:
    argument_bytes: int
    result_bytes: int                       # results not written over donated arguments
    arena_bytes: int                        # the one allocation holding all intermediates
    peak_intermediate_bytes: int            # live intermediates at the peak (<= arena)
    peak_kernel: int                        # position of the kernel at the peak
    num_kernels: int
    categories: dict[str, int] = field(default_factory=dict)  # bytes by role at the peak
    donated_bytes: int = 0                  # results written over their old arguments
    top: list[Buffer] = field(default_factory=list)   # largest live buffers at the peak

    @property
    def peak_bytes(self) -> int:
        """Arguments + arena + fresh results (an upper bound: results are counted as
        live for the whole step)."""
        return self.argument_bytes + self.arena_bytes + self.result_bytes

    def __str__(self) -> str:
        mib = 2**20
        lines = [f"nova memory report: peak {self.peak_bytes / mib:.1f} MiB = arguments "
                 f"{self.argument_bytes / mib:.1f} + arena {self.arena_bytes / mib:.1f} + "
                 f"new results {self.result_bytes / mib:.1f} ({self.donated_bytes / mib:.1f} "
                 f"MiB of results written over donated arguments); live intermediates at "
                 f"the peak {self.peak_intermediate_bytes / mib:.1f} MiB (kernel "
                 f"{self.peak_kernel} of {self.num_kernels})",
                 "  by role: " + ", ".join(f"{k} {v / mib:.1f} MiB"
                                           for k, v in self.categories.items())]
        lines += [f"  {b.nbytes / mib:9.2f} MiB  {b.category:10s} {b.dtype}{list(b.shape)}  "
                  f"from {b.kernel}" for b in self.top]
        return "\n".join(lines)


def is_backward(fusion) -> bool:
    """Whether a kernel belongs to the backward pass (its result's op was recorded there)."""
    yielded = fusion.body.block.last_op.operands[0].owner
    return BACKWARD_ATTR in getattr(yielded, "attributes", {})


def plan_report(plan: MemoryPlan, arg_bytes: list[int], roles: list[str],
                buffers: dict[int, Buffer], outputs: Sequence[int],
                donated_results: set[int], backward: list[bool], top: int = 10
                ) -> MemoryReport:
    """The report of ``plan``. ``buffers`` maps each slot a kernel writes to its buffer;
    ``backward[p]`` says whether the kernel at position p is part of the backward pass;
    ``roles`` name the arguments (parameter, optimizer state, input); ``donated_results``
    are the result slots written over donated arguments."""
    n_args = len(arg_bytes)
    lifetimes = plan.live_lifetimes()
    for s, (first, last) in lifetimes.items():
        crosses = not backward[first] and any(backward[first:last + 1])
        buffers[s].category = "activation" if crosses else "temporary"
    live = [0] * max(len(plan.order), 1)
    for s, (f, la) in lifetimes.items():
        for p in range(f, la + 1):
            live[p] += buffers[s].nbytes
    peak_pos = max(range(len(live)), key=live.__getitem__)
    at_peak = [buffers[s] for s, (f, la) in lifetimes.items() if f <= peak_pos <= la]
    categories: dict[str, int] = {}
    for a, nbytes in enumerate(arg_bytes):
        role = roles[a] if a < len(roles) else "input"
        categories[role] = categories.get(role, 0) + nbytes
    for b in at_peak:
        categories[b.category] = categories.get(b.category, 0) + b.nbytes
    results = set(s for s in outputs if s >= n_args)
    fresh = sum(buffers[s].nbytes for s in results - donated_results)
    donated = sum(buffers[s].nbytes for s in results & donated_results)
    largest = sorted(at_peak, key=lambda b: -b.nbytes)[:top]
    return MemoryReport(sum(arg_bytes), fresh, plan.arena_bytes, live[peak_pos], peak_pos,
                        len(plan.order), categories, donated, largest)
