"""The ``cpu`` engine: a step function fused, lowered, compiled by LLVM and replayed.

``CpuProgram`` is ``nova.runtime.program.Program`` (everything above code generation:
the kernel plans, the memory plan, the arena, donation) with the CPU's launcher:
kernels come from the kernel cache (``KERNELS.get_all``: compiled by LLVM or loaded
from disk), each is split into chunks of its parallel dimension run on the worker pool
(``nova.runtime.threads``), and each is called through a table of buffer pointers
built once per program: arena views never move.

A run is one native call. A driver (``nova_drive``, LLVM IR in
``nova.compiler.targets.cpu.pool``, in the same JIT as the pool) walks a kernel list
built once per program and thread count: each kernel's entry point, pointer table,
chunks and team header, and which of its table entries change per run. Python fills
one address per argument and per escaping result into a slot table, and the driver
copies them into the kernels' tables as it goes, hands each kernel's chunks to the
pool and waits for them -- no Python per kernel (a GPT step has ~400). It returns to
Python only to wake workers that fell asleep, and when a kernel returns an error code:
the interpreter then re-runs that kernel to say what went wrong. Under
``nv.debug.profile`` the driver reads the clock around each kernel into an array the
profile reads afterwards.

Every escaping result is allocated before the run rather than when its kernel comes
(the driver cannot call the allocator); large arrays are ``mmap``-ed by malloc and take
memory only as the kernel writes them, so the step's peak is unchanged.
"""
from __future__ import annotations

import contextvars
import ctypes
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nova import config
from nova.compiler.targets.cpu.configurator import estimated_seconds, smallest_chunk
from nova.compiler.targets.cpu.device import detect_cpu
from nova.compiler.lowering.plan import KernelPlan
from nova.compiler.pipeline import CompiledStep
from nova.compiler.targets import get_target
from nova.core import dtypes as dt
from nova.core.graph import PendingGraph
from nova.runtime import collectives, threads
from nova.runtime.addresses import data_addresses
from nova.runtime.host_pages import fresh_pages
from nova.runtime.debug_dir import debug_subdirectory, write_debug_file
from nova.runtime.kernel_cache import KERNELS
from nova.compiler.targets.cpu.pool import (
    DRIVE_ADDRESSES,
    DRIVE_CLOCK,
    DRIVE_COUNT,
    DRIVE_FAILED,
    DRIVE_JOINING,
    DRIVE_MOVING,
    DRIVE_NEXT,
    DRIVE_RC,
    DRIVE_RECORDS,
    DRIVE_TIMES,
    DRIVE_WORDS,
    REC_CHUNKS,
    REC_FN,
    REC_MOVE_AT,
    REC_MOVE_COUNT,
    REC_RANGES,
    REC_TABLE,
    REC_TEAM,
    REC_WORDS,
)
from nova.runtime.program import Program

# This thread's active ``nv.debug.profile()`` collector, if any: (kernel, description,
# seconds) per kernel run.
PROFILE: contextvars.ContextVar[list[tuple[str, str, float]] | None] = contextvars.ContextVar(
    "nova_profile", default=None)


class TimedRuns(list):
    """A ``PROFILE`` collector that also keeps when each kernel run started
    (``CLOCK_MONOTONIC`` nanoseconds, ``time.monotonic_ns``'s clock, in ``starts``,
    parallel to the list): what a timeline (``nv.profiler``'s Chrome trace) needs."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[int] = []


def anticipate(graph: PendingGraph) -> None:
    """A step of ``graph`` is about to be built for this engine (its front end: IR,
    optimization, fusion, planning -- ~1.4 s of one core for a medium GPT): if it has
    float32 matrix products, have the GEMM driver their kernels will call made ready
    meanwhile, from the disk cache or compiled on a worker
    (``KernelCache.prefetch_support``). On a machine whose cache lacks it, that takes
    the driver's compile (~0.6 s of a worker) and the workers' start out of the step's
    batch of kernels."""
    if any(n.op == "matmul" and n.dtype == dt.float32 for n in graph.inlined().nodes):
        KERNELS.prefetch_support(get_target("cpu").product_support())


def debug_files(module: ModuleOp, lowered: CompiledStep) -> dict[str, str]:
    """What ``NOVA_DEBUG=1`` and ``nv.debug.dump`` write for a CPU step, by file name:
    the nova IR, the fused IR with each kernel's plan, and every kernel's LLVM IR (then
    that of the support modules they call, the GEMM driver)."""
    return {"step.nova.mlir": str(module),
            "step.fused.mlir": lowered.text(),
            "step.ll": KERNELS.step_llvm_ir([p for p in lowered.plans
                                             if p.kind != "collective"])}


def one_core_seconds(plan: KernelPlan) -> float:
    """The kernel's estimated time on one core: how finely its work is split."""
    sch = plan.schedule
    panel = (sch.tile[0] if sch.split == "m" else sch.tile[1]) if sch.tile else 1
    return estimated_seconds(sch.strategy, sch.loops, detect_cpu(), panel)


class CpuProgram(Program):
    """A compiled CPU step: ``program(args, donated) -> outputs`` on numpy arrays."""

    target = "cpu"
    what = "step"
    _empty = staticmethod(np.empty)

    def __init__(self, module: ModuleOp, reorder: bool = True,
                 lowered: CompiledStep | None = None):
        self._ranges: list[list[tuple[int, int]]] | None = None   # per kernel: thread chunks
        self._ranges_threads = (0, 0)
        self._range_arrays: list[ctypes.Array] = []   # per kernel: its chunks, flat
        self._records: ctypes.Array | None = None      # the driver's kernel list
        self._described: list[tuple[str, str]] | None = None   # (name, plan) per kernel
        super().__init__(module, reorder, lowered)

    # A CPU kernel reports its failure as it returns: at the end there is nothing to
    # wait for or read, so running the step is launching it (two calls fewer a replay).
    __call__ = Program.enqueue

    def _compile(self, module: ModuleOp, lowered: CompiledStep) -> list[tuple[Any, Any]]:
        if config.DEBUG.get():
            directory = debug_subdirectory()
            for name, text in debug_files(module, lowered).items():
                write_debug_file(directory, name, text)
            print(f"nova: NOVA_DEBUG wrote {directory}", file=sys.stderr)
        # Holding the Kernel keeps its code mapped (kernel_cache); fn is its entry point.
        # A collective is a host kernel the driver calls back (nova.runtime.collectives).
        compiled = iter(KERNELS.get_all([p for p in self.plans if p.kind != "collective"]))
        kernels = [collectives.HostCollective(p) if p.kind == "collective" else next(compiled)
                   for p in self.plans]
        return [(kernel, kernel.fn) for kernel in kernels]

    def _planned(self) -> None:
        self._seconds = [one_core_seconds(st.plan) for st in self.steps]
        # ranks compare the step's collectives before its first run (if it has any)
        self._checked = not collectives.link(self.steps)

    def _allocate(self, nbytes: int) -> np.ndarray:
        return fresh_pages(nbytes)    # (no huge-page compaction stall in the first run)

    def _arguments(self, args: Sequence[Any]) -> list[Any]:
        return [np.ascontiguousarray(a) for a in args]

    def _bind(self) -> None:
        """Each kernel's pointer table, arena slots filled in now, for good; the other
        entries (arguments, escaping results) go to the moving list, which the driver
        fills from the slot table on every run."""
        views = self._views
        self._ptrs: list[ctypes.Array] = []
        self._teams: list[ctypes.Array | None] = []   # per kernel: its team header
        moving: list[int] = []
        self._move_spans: list[tuple[int, int]] = []  # per kernel: its moving pairs
        for p, st in enumerate(self.steps):
            slots = list(st.inputs) + [st.out]
            table = (ctypes.c_void_p * (len(slots) + (st.scratch is not None)))()
            at = len(moving) // 2
            for j, slot in enumerate(slots):
                if slot in views:
                    table[j] = views[slot].ctypes.data
                else:
                    moving += (j, slot)
            self._move_spans.append((at, len(moving) // 2 - at))
            team = None
            if st.scratch is not None:
                table[len(slots)] = self._scratch_views[p].ctypes.data
                if st.plan.schedule.shared_b:
                    team = threads.team_header(self._scratch_views[p].ctypes.data)
            self._teams.append(team)
            self._ptrs.append(table)
        self._moving = (ctypes.c_int64 * max(len(moving), 1))(*moving)
        self._slots = (ctypes.c_int64 * (self.n_args + len(self.steps)))()
        # The kernels whose output is not in the arena: (output slot, donatable
        # argument or None, shape, storage dtype), walked on every run.
        self._escaping = [(st.out, st.donate, st.shape, st.storage)
                          for st in self.steps if st.out not in views]
        self._escaping_slots = [e[0] for e in self._escaping]
        self._has_teams = any(team is not None for team in self._teams)
        self._control = (ctypes.c_int64 * DRIVE_WORDS)()
        self._control[DRIVE_COUNT] = len(self.steps)
        self._control[DRIVE_MOVING] = ctypes.addressof(self._moving)
        self._control[DRIVE_ADDRESSES] = ctypes.addressof(self._slots)
        self._control[DRIVE_CLOCK] = time.CLOCK_MONOTONIC

    def _kernel_list(self) -> None:
        """Split the kernels for the current thread count (and, for teams, the threads
        in use now) and write the driver's kernel list (again when either changed)."""
        count = (threads.get_num_threads(), threads.active_threads() if self._has_teams else 0)
        if self._ranges is not None and count == self._ranges_threads:
            return
        self._ranges_threads = count
        self._ranges = [threads.chunks(st.plan.schedule.parallel_extent, s,
                                       st.plan.schedule.strategy, self._teams[p] is not None,
                                       active=count[1],
                                       min_chunk=smallest_chunk(st.plan.schedule))
                        for p, (st, s) in enumerate(zip(self.steps, self._seconds))]
        self._range_arrays = [threads.ranges_array(r) for r in self._ranges]
        records = (ctypes.c_int64 * (REC_WORDS * max(len(self.steps), 1)))()
        for p, st in enumerate(self.steps):
            r = REC_WORDS * p
            records[r + REC_FN] = ctypes.cast(st.handle, ctypes.c_void_p).value
            records[r + REC_TABLE] = ctypes.addressof(self._ptrs[p])
            records[r + REC_RANGES] = ctypes.addressof(self._range_arrays[p])
            records[r + REC_CHUNKS] = len(self._ranges[p])
            team = self._teams[p]
            records[r + REC_TEAM] = ctypes.addressof(team) if team is not None else 0
            records[r + REC_MOVE_AT], records[r + REC_MOVE_COUNT] = self._move_spans[p]
        self._records = records
        self._control[DRIVE_RECORDS] = ctypes.addressof(records)

    def _run(self, values: list[Any], donated: frozenset[int]) -> list[Any]:
        """Fill the slot table with this run's addresses and run the driver once."""
        if not self._checked:
            collectives.check_step([st.plan for st in self.steps])
            self._checked = True
        self._kernel_list()
        slots, n = self._slots, self.n_args
        slots[:n] = data_addresses(values[:n])
        self.overwrote_donated = False
        memory = self._escaping_memory
        for out, donate, shape, storage in self._escaping:
            values[out] = memory(donate, shape, storage, values, donated)
        for out, address in zip(self._escaping_slots,
                                data_addresses([values[i] for i in self._escaping_slots])):
            slots[out] = address
        collector = PROFILE.get()
        control = self._control
        times = None
        if collector is not None:
            times = (ctypes.c_int64 * (2 * max(len(self.steps), 1)))()
            control[DRIVE_TIMES] = ctypes.addressof(times)
        control[DRIVE_NEXT], control[DRIVE_JOINING], control[DRIVE_RC] = 0, 0, 0
        try:
            code = threads.drive(control)
        finally:
            control[DRIVE_TIMES] = 0
        if times is not None:
            ran = len(self.steps) if code != DRIVE_FAILED else control[DRIVE_NEXT] + 1
            if self._described is None:      # once per program: ~5 us per kernel
                self._described = [(st.plan.name, st.plan.describe()) for st in self.steps]
            collector.extend((name, text, (times[2 * p + 1] - times[2 * p]) * 1e-9)
                             for p, (name, text) in enumerate(self._described[:ran]))
            if type(collector) is TimedRuns:
                collector.starts.extend(times[2 * p] for p in range(ran))
        if code == DRIVE_FAILED:
            self._failed_in_driver(control[DRIVE_NEXT], values, donated)
        views = self._views
        return [views[i] if i in views else values[i] for i in self.outputs]

    def _failed_in_driver(self, p: int, values: list[Any], donated: frozenset[int]) -> None:
        """Kernel ``p`` returned an error code: say what went wrong (``_failed_now``),
        with every slot's array at hand (the arena keeps its views; nothing was
        released) and ``overwrote_donated`` true only if a kernel up to ``p`` wrote
        over a donated argument. A collective re-raises what its host kernel raised."""
        self.overwrote_donated = any(st.donate is not None and st.donate in donated
                                     and st.out not in self._views
                                     for st in self.steps[:p + 1])
        kernel = self.steps[p].kernel
        if isinstance(kernel, collectives.HostCollective) and kernel.error is not None:
            error, kernel.error = kernel.error, None
            raise error
        for slot, view in self._views.items():
            values[slot] = view
        self._failed_now(p, values)

