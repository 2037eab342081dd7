"""The ``cpu`` engine: a step function fused, lowered, compiled by LLVM and replayed.

``CpuProgram`` turns a verified nova module into a list of compiled kernels with the
slots they read and write. Replay allocates each kernel's output, calls the kernel on
one or more threads. Where each buffer lives is decided once, at compile time, by the
memory plan (``nova.runtime.memory_plan``): kernels run in a memory-aware order, every
intermediate is a fixed view into one arena, and results may be written over donated
arguments (an optimizer update over the old parameter).
"""
from __future__ import annotations

import contextvars
import ctypes
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nova import config
from nova.compiler.configurator import estimated_seconds
from nova.compiler.device import detect_cpu
from nova.compiler.lowering.plan import TEAM_MEMBERS, KernelPlan
from nova.compiler.pipeline import LoweredStep, lower
from nova.runtime import threads
from nova.runtime.addresses import data_address
from nova.runtime.debug_dir import debug_subdirectory, write_debug_file
from nova.runtime.interpreter import InterpreterError, affected_outputs, run_region
from nova.runtime.kernel_cache import KERNELS, Kernel, KernelFn
from nova.runtime.memory_report import MemoryReport
from nova.runtime.step_memory import allocate_arena, cut_arena, plan_steps, report_steps

# This thread's active ``nv.debug.profile()`` collector, if any: (kernel, description,
# seconds) per kernel run.
PROFILE: contextvars.ContextVar[list[tuple[str, str, float]] | None] = contextvars.ContextVar(
    "nova_profile", default=None)


@dataclass
class Step:
    plan: KernelPlan
    kernel: Kernel             # holding it keeps the kernel's code mapped (kernel_cache)
    inputs: tuple[int, ...]
    out: int
    shape: tuple[int, ...]
    np_dtype: np.dtype
    scratch: tuple[tuple[int, ...], np.dtype] | None
    seconds: float             # estimated one-core time, for the thread split
    donate: int | None = None   # the argument slot this kernel may write its result over
    fn: KernelFn = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.fn = self.kernel.fn




def debug_files(module: ModuleOp, lowered: LoweredStep) -> dict[str, str]:
    """What ``NOVA_DEBUG=1`` and ``nv.debug.dump`` write for a CPU step, by file name:
    the nova IR, the fused IR with each kernel's plan, and every kernel's LLVM IR."""
    return {"step.nova.mlir": str(module),
            "step.fused.mlir": lowered.text(),
            "step.ll": "\n".join(KERNELS.llvm_ir(p) for p in lowered.plans)}


class CpuProgram:
    """A compiled step: ``run(args) -> outputs`` like the interpreter's Program."""

    def __init__(self, module: ModuleOp, reorder: bool = True):
        lowered = lower(module, "cpu")
        self.fused, self.plans = lowered.fused, lowered.plans
        if config.DEBUG.get():
            directory = debug_subdirectory()
            for name, text in debug_files(module, lowered).items():
                write_debug_file(directory, name, text)
            print(f"nova: NOVA_DEBUG wrote {directory}", file=sys.stderr)
        wiring = lowered.wiring()
        self.n_args, self.arg_types = wiring.n_args, wiring.arg_types
        steps: list[Step] = []
        kernels = KERNELS.get_all(self.plans)
        for k, (plan, kernel, inputs) in enumerate(zip(self.plans, kernels, wiring.inputs)):
            out = self.n_args + k
            shape, dtype = plan.out
            sch = plan.schedule
            panel = (sch.tile[0] if sch.split == "m" else sch.tile[1]) if sch.tile else 1
            seconds = estimated_seconds(sch.strategy, sch.loops, detect_cpu(), panel)
            scratch = (plan.scratch[0], plan.scratch[1].np) if plan.scratch else None
            steps.append(Step(plan, kernel, inputs,
                              out, shape, dtype.np, scratch, seconds))
        self.outputs = wiring.outputs
        self.memory_plan, self.uses = plan_steps(steps, self.n_args, self.arg_types,
                                                 self.outputs, reorder)
        self.steps = [steps[k] for k in self.memory_plan.order]
        self.release = self.memory_plan.release
        self._views: dict[int, np.ndarray] | None = None   # slot -> its view of the arena
        self._ranges: list[list[tuple[int, int]]] | None = None   # per kernel: thread chunks
        self._ranges_threads = 0
        self._range_arrays: list[ctypes.Array] = []   # per kernel: its chunks, flat
        self._addresses: list[int] = []               # per kernel: its entry point
        self._values: list[np.ndarray | None] | None = None
        self._scratch_views: list[np.ndarray | None] = []
        self.overwrote_donated = False   # by the latest run (see Executable)

    @property
    def donation_candidates(self) -> frozenset[int]:
        """Arguments this step can write results over, if the caller donates them."""
        return frozenset(self.memory_plan.donate.values())

    def _arena(self, arg_bytes: list[int]) -> None:
        """Allocate the arena (once; it is kept for every later run) and cut its views."""
        arena = allocate_arena(self.memory_plan, self.memory_report(arg_bytes),
                               lambda n: np.empty(n, dtype=np.uint8), (MemoryError,), "step")
        views, self._scratch_views = cut_arena(arena, self.memory_plan, self.steps,
                                               lambda st: st.np_dtype)
        self._arena_buffer = arena
        self._views = views
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

    def memory_report(self, arg_bytes: Sequence[int] | None,
                      roles: Sequence[str] | None = None,
                      donated: frozenset[int] = frozenset()) -> MemoryReport:
        """Peak memory of this step from its plan (see memory_report)."""
        return report_steps(self.memory_plan, self.steps, self.arg_types, self.outputs,
                            arg_bytes, roles, donated)

    @property
    def num_kernels(self) -> int:
        return len(self.steps)

    def _call(self, k: int, st: Step, ptrs: ctypes.Array) -> None:
        ranges = self._ranges[k]
        if len(ranges) == 1:
            if self._teams[k] is not None:
                self._teams[k][TEAM_MEMBERS] = 1
            rc = st.fn(ptrs, 0, ranges[0][1])
        else:
            rc = threads.pool().run(st.fn, self._addresses[k], self._table_addresses[k],
                                    self._range_arrays[k], len(ranges), self._teams[k])
        if rc:
            self._fail(k, st)

    def _fail(self, k: int, st: Step) -> None:
        """Kernel ``k`` returned an error code: raise what went wrong, and where."""
        affected = affected_outputs([s.inputs for s in self.steps],
                                    [s.out for s in self.steps], self.outputs, k)
        try:  # the interpreter, which defines the ops, says precisely what went wrong
            run_region(st.plan.fusion.body.block, [self._values[i] for i in st.inputs])
        except InterpreterError as e:
            raise InterpreterError(f"{e} (in kernel {st.plan.name})", affected) from None
        raise InterpreterError(f"kernel {st.plan.name} ({st.plan.kind}) reported an index "
                               "out of range or an integer division by zero", affected)

    def __call__(self, args: Sequence[np.ndarray],
                 donated: frozenset[int] = frozenset()) -> list[np.ndarray]:
        """Run the step. ``donated``: argument slots nobody else holds; results planned
        over them are written in place (the argument's values are gone afterwards)."""
        values: list[np.ndarray | None] = [np.ascontiguousarray(a) for a in args]
        values += [None] * len(self.steps)
        if self._views is None:
            self._arena([a.nbytes for a in values[:self.n_args]])
        if self._ranges is None or threads.get_num_threads() != self._ranges_threads:
            self._ranges_threads = threads.get_num_threads()
            self._ranges = [threads.chunks(st.plan.schedule.parallel_extent, st.seconds)
                            for st in self.steps]
            self._range_arrays = [threads.ranges_array(r) for r in self._ranges]
            self._addresses = [ctypes.cast(st.fn, ctypes.c_void_p).value for st in self.steps]
        views = self._views
        self._values = values
        self.overwrote_donated = False
        collector = PROFILE.get()
        timing = collector is not None
        for p, st in enumerate(self.steps):
            out = views.get(st.out)
            if out is None:
                if st.donate is not None and st.donate in donated:
                    out = values[st.donate].reshape(st.shape)   # a view: same bytes
                    self.overwrote_donated = True
                else:       # a result: it escapes to a tensor
                    out = np.empty(st.shape, dtype=st.np_dtype)
            values[st.out] = out
            ptrs = self._ptrs[p]    # arena addresses are fixed: only args and results change
            for j, slot in self._moving[p]:
                ptrs[j] = data_address(values[slot])
            t0 = time.perf_counter() if timing else 0.0
            self._call(p, st, ptrs)
            if timing:
                collector.append((st.plan.name, st.plan.describe(), time.perf_counter() - t0))
            for i in self.release[p]:
                values[i] = None
        self._values = None
        return [values[i] for i in self.outputs]
