"""The ``cpu`` engine: a step function fused, lowered, compiled by LLVM and replayed.

``CpuProgram`` is ``nova.runtime.program.Program`` (everything above code generation:
the kernel plans, the memory plan, the arena, donation, the run loop) with the CPU's
launcher: kernels come from the kernel cache (``KERNELS.get_all``: compiled by LLVM or
loaded from disk), each is split into chunks of its parallel dimension run on the
worker pool (``nova.runtime.threads``), and is called through a ctypes table of buffer
pointers built once per program: arena views never move, so a replay writes only the
arguments' and results' addresses. A kernel returns an error code as it ends; the
interpreter then re-runs it to say what went wrong.
"""
from __future__ import annotations

import contextvars
import ctypes
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nova import config
from nova.compiler.targets.cpu.configurator import estimated_seconds
from nova.compiler.targets.cpu.device import detect_cpu
from nova.compiler.lowering.plan import TEAM_MEMBERS, KernelPlan
from nova.compiler.pipeline import CompiledStep
from nova.runtime import threads
from nova.runtime.addresses import data_address
from nova.runtime.debug_dir import debug_subdirectory, write_debug_file
from nova.runtime.kernel_cache import KERNELS
from nova.runtime.program import Program, Step

# This thread's active ``nv.debug.profile()`` collector, if any: (kernel, description,
# seconds) per kernel run.
PROFILE: contextvars.ContextVar[list[tuple[str, str, float]] | None] = contextvars.ContextVar(
    "nova_profile", default=None)


def debug_files(module: ModuleOp, lowered: CompiledStep) -> dict[str, str]:
    """What ``NOVA_DEBUG=1`` and ``nv.debug.dump`` write for a CPU step, by file name:
    the nova IR, the fused IR with each kernel's plan, and every kernel's LLVM IR."""
    return {"step.nova.mlir": str(module),
            "step.fused.mlir": lowered.text(),
            "step.ll": "\n".join(KERNELS.llvm_ir(p) for p in lowered.plans)}


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

    def __init__(self, module: ModuleOp, reorder: bool = True):
        self._ranges: list[list[tuple[int, int]]] | None = None   # per kernel: thread chunks
        self._ranges_threads = 0
        self._range_arrays: list[ctypes.Array] = []   # per kernel: its chunks, flat
        self._addresses: list[int] = []               # per kernel: its entry point
        self._collector: list[tuple[str, str, float]] | None = None   # this run's profile
        super().__init__(module, reorder)

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
        return [(kernel, kernel.fn) for kernel in KERNELS.get_all(self.plans)]

    def _planned(self) -> None:
        self._seconds = [one_core_seconds(st.plan) for st in self.steps]

    def _allocate(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, dtype=np.uint8)

    def _arguments(self, args: Sequence[Any]) -> list[Any]:
        return [np.ascontiguousarray(a) for a in args]

    def _bind(self) -> None:
        """Each kernel's pointer table: arena slots filled in now, for good; the others
        (arguments, escaping results) listed as ``_moving``, written on every run."""
        views = self._views
        self._ptrs, self._moving, self._table_addresses = [], [], []
        self._teams: list[ctypes.Array | None] = []   # per kernel: its team header
        for p, st in enumerate(self.steps):
            slots = list(st.inputs) + [st.out]
            table = (ctypes.c_void_p * (len(slots) + (st.scratch is not None)))()
            moving = []
            for j, slot in enumerate(slots):
                if slot in views:
                    table[j] = views[slot].ctypes.data
                else:
                    moving.append((j, slot))
            team = None
            if st.scratch is not None:
                table[len(slots)] = self._scratch_views[p].ctypes.data
                if st.plan.schedule.shared_b:
                    team = threads.team_header(self._scratch_views[p].ctypes.data)
            self._teams.append(team)
            self._ptrs.append(table)
            self._table_addresses.append(ctypes.addressof(table))
            self._moving.append(moving)

    def _begin(self) -> Callable[[int, Step, list[Any]], Any]:
        """Split the kernels again if the thread count changed; note the profiler."""
        if self._ranges is None or threads.get_num_threads() != self._ranges_threads:
            self._ranges_threads = threads.get_num_threads()
            self._ranges = [threads.chunks(st.plan.schedule.parallel_extent, s)
                            for st, s in zip(self.steps, self._seconds)]
            self._range_arrays = [threads.ranges_array(r) for r in self._ranges]
            self._addresses = [ctypes.cast(st.handle, ctypes.c_void_p).value
                               for st in self.steps]
        self._collector = PROFILE.get()
        return self._launch

    def _launch(self, p: int, st: Step, values: list[Any]) -> int:
        ptrs = self._ptrs[p]    # arena addresses are fixed: only args and results change
        for j, slot in self._moving[p]:
            ptrs[j] = data_address(values[slot])
        if self._collector is None:
            return self._call(p, st, ptrs)
        t0 = time.perf_counter()
        rc = self._call(p, st, ptrs)
        self._collector.append((st.plan.name, st.plan.describe(), time.perf_counter() - t0))
        return rc

    def _call(self, k: int, st: Step, ptrs: ctypes.Array) -> int:
        """Run kernel ``k`` on its chunks (on this thread alone if it has one); its
        error code."""
        ranges = self._ranges[k]
        if len(ranges) == 1:
            if self._teams[k] is not None:
                self._teams[k][TEAM_MEMBERS] = 1
            return st.handle(ptrs, 0, ranges[0][1])
        return threads.pool().run(st.handle, self._addresses[k], self._table_addresses[k],
                                  self._range_arrays[k], len(ranges), self._teams[k])
