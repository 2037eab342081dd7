"""A compiled step, on any target: ``Program`` is what the cpu and cuda engines share.

Both engines take a verified nova module through the same stages, and every decision
above code generation is target-neutral, so it lives here once:

- ``compile_step(module, target)``: the same fusion and ``KernelPlan`` s;
- the wiring (which slots each kernel reads and writes) and one ``Step`` per kernel;
- the memory plan (``step_memory.plan_steps``): a memory-aware kernel order, every
  intermediate at a fixed offset of one arena, results planned over donated arguments
  (the donation candidates), and when each slot is released;
- the memory report, the arena (allocated once, on the first run, from the first
  arguments' sizes) and its views;
- where each kernel's output goes (``_result_memory``): its arena view, or the donated
  argument's own memory reshaped, or a fresh array that escapes to a tensor;
- error attribution: a failing kernel names the outputs it can have affected
  (``interpreter.affected_outputs``), so realization fails only those tensors; and
  what the failed run leaves usable (``Salvage``: the results computed before the
  failure, the arguments written over), so that realization keeps those results
  rather than computing them again from arguments whose old values are gone.

What differs per target is a *launcher*: the methods a subclass implements (the
section "the launcher interface" below, with the attributes ``target``, ``what``,
``oom_errors`` and ``_empty``). A launcher compiles the plans to kernels,
says how a buffer is stored, allocates memory, checks the arguments, precomputes what
it needs once the arena exists, runs the kernels (``_run``), and reports the kernels
that failed once the step ends. ``nova.runtime.cpu_engine.CpuProgram`` runs a whole
step as one native call (a generated driver walks the kernel list and hands chunks
to the worker pool; no Python per kernel) and reports a failure as the kernel
returns; ``nova.runtime.cuda_engine.CudaProgram`` is a ``LaunchLoop``: Python launches
each NVRTC kernel on one stream through a ``DeviceBackend`` (a launch only queues work,
so the loop overlaps the device) and reads every kernel's error flag once at the end.

The launcher is a subclass rather than a separate object so that its per-program state
(the CPU's pointer tables, kernel list and team headers) is the program's own
attributes, read by tests and benchmarks and patched by the fault injection tests.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nova.compiler.lowering.plan import KernelPlan
from nova.compiler.pipeline import CompiledStep, compile_step
from nova.runtime.interpreter import InterpreterError, affected_outputs, run_region
from nova.runtime.memory_report import MemoryReport
from nova.runtime.step_memory import allocate_arena, cut_arena, plan_steps, report_steps


@dataclass(frozen=True)
class Salvage:
    """What a run that a kernel failed leaves usable, attached to its error as
    ``nova_salvage`` (``salvage_of``).

    A run that donated arguments cannot be repeated once a kernel has written over one
    (the argument's old value is gone), so realization keeps what the run did compute:
    ``results`` are the outputs (by position) that kernels finished before the failure
    and that do not depend on it -- right, bit for bit; ``overwritten`` are the donated
    arguments a kernel up to the failing one wrote over (a superset when unsure): a
    value computed again must not read them."""

    results: dict[int, Any]
    overwritten: frozenset[int]


def salvage_of(error: BaseException) -> Salvage | None:
    """What the failed run that raised ``error`` left usable (None: unknown)."""
    return getattr(error, "nova_salvage", None)


@dataclass
class Step:
    """One kernel of a program: what it reads and writes, and what the launcher calls."""

    plan: KernelPlan
    kernel: Any                # the compiled kernel (holding it keeps its code loaded)
    handle: Any                # what the launcher calls: a KernelFn, a backend handle
    inputs: tuple[int, ...]    # slots it reads
    out: int                   # the slot it writes
    shape: tuple[int, ...]
    np_dtype: np.dtype         # the result's Nova dtype (numpy form)
    storage: np.dtype          # how the target holds the result
    scratch: tuple[tuple[int, ...], np.dtype] | None   # (shape, storage dtype)
    donate: int | None = None  # the argument slot its result may be written over

    @property
    def fn(self) -> Any:
        """The CPU name of ``handle`` (the kernel's entry point; benchmarks call it)."""
        return self.handle


class Program(ABC):
    """A compiled step: ``program(args, donated) -> outputs``.

    ``args`` are the step's argument buffers in the target's array type; ``donated``
    are argument slots nobody else holds, which results planned over them may overwrite
    (their old values are gone afterwards). A subclass is the target's launcher."""

    target: ClassVar[str]         # what ``compile_step`` compiles for: "cpu", "cuda"
    what: ClassVar[str]           # how out-of-memory errors name the step
    oom_errors: tuple[type[BaseException], ...] = (MemoryError,)   # what _allocate raises
    # A fresh array for a result that escapes the step, ``_empty(shape, dtype)``: an
    # array module's ``empty`` itself, not a method wrapping it (one call per result).
    _empty: Callable[[tuple[int, ...], np.dtype], Any]

    def __init__(self, module: ModuleOp, reorder: bool = True,
                 lowered: CompiledStep | None = None):
        # ``lowered``: ``compile_step(module, self.target)`` done already (the step cache)
        lowered = lowered if lowered is not None else compile_step(module, self.target)
        self.lowered = lowered
        self.fused, self.plans = lowered.fused, lowered.plans
        compiled = self._compile(module, lowered)
        wiring = lowered.wiring()
        self.n_args, self.arg_types = wiring.n_args, wiring.arg_types
        steps = []
        for k, (plan, (kernel, handle), inputs) in enumerate(
                zip(self.plans, compiled, wiring.inputs)):
            shape, dtype = plan.out
            scratch = ((plan.scratch[0], self._storage(plan.scratch[1].np))
                       if plan.scratch else None)
            steps.append(Step(plan, kernel, handle, inputs, self.n_args + k, shape,
                              dtype.np, self._storage(dtype.np), scratch))
        self.outputs = wiring.outputs
        # Pointwise kernels may write over an input they read only at their own index,
        # on every target: each element is read before it is written, by the same
        # thread (the CUDA kernels take no __restrict__ pointers).
        self.memory_plan, self.uses = plan_steps(steps, self.n_args, self.arg_types,
                                                 self.outputs, reorder)
        self.steps = [steps[k] for k in self.memory_plan.order]
        self.release = self.memory_plan.release
        self._arena_buffer: Any = None
        self._views: dict[int, Any] | None = None   # slot -> its view of the arena
        self._scratch_views: list[Any] = []         # per kernel (plan order)
        self.overwrote_donated = False   # by the latest run (see Executable)
        self._donated: frozenset[int] = frozenset()   # the latest run's (for Salvage)
        self._planned()

    # ------------------------------------------------------------ the launcher interface

    @abstractmethod
    def _compile(self, module: ModuleOp, lowered: CompiledStep) -> list[tuple[Any, Any]]:
        """Each plan's ``(kernel, handle)``, in program order; raise naming the kernel
        that does not compile."""

    def _storage(self, np_dtype: np.dtype) -> np.dtype:
        """How this target holds a buffer of ``np_dtype`` (as itself by default)."""
        return np.dtype(np_dtype)

    def _planned(self) -> None:
        """Called once the steps are in plan order (before any run)."""

    @abstractmethod
    def _allocate(self, nbytes: int) -> Any:
        """A new uint8 buffer of ``nbytes`` (the arena)."""

    @abstractmethod
    def _arguments(self, args: Sequence[Any]) -> list[Any]:
        """The argument buffers as the kernels take them (or raise saying why not)."""

    def _bind(self) -> None:
        """Called once the arena's views exist (``_views``, ``_scratch_views``)."""

    @abstractmethod
    def _run(self, values: list[Any], donated: frozenset[int]) -> list[Any]:
        """Run every kernel once, in plan order, on ``values`` (the arguments as
        ``_arguments`` returned them, then one ``None`` per kernel) and return the
        step's outputs; set ``overwrote_donated``; raise through ``_failed_now`` when a
        kernel reports a failure as it runs. ``LaunchLoop`` runs it from Python, one
        launch per kernel; the CPU's driver runs it natively."""

    def _finish(self) -> Sequence[int]:
        """After the last launch: the positions of kernels that reported a failure
        (none by default: failures were reported by each launch)."""
        return ()

    # ------------------------------------------------------------ target-neutral

    @property
    def num_kernels(self) -> int:
        return len(self.steps)

    @property
    def donation_candidates(self) -> frozenset[int]:
        """Arguments this step can write results over, if the caller donates them."""
        return frozenset(self.memory_plan.donate.values())

    def memory_report(self, arg_bytes: Sequence[int] | None,
                      roles: Sequence[str] | None = None,
                      donated: frozenset[int] = frozenset()) -> MemoryReport:
        """Peak memory of this step from its plan (see memory_report)."""
        return report_steps(self.memory_plan, self.steps, self.arg_types, self.outputs,
                            arg_bytes, roles, donated)

    def _arena(self, arg_bytes: list[int]) -> None:
        """Allocate the arena (once; it is kept for every later run) and cut its views."""
        self._arena_buffer = allocate_arena(self.memory_plan, self.memory_report(arg_bytes),
                                            self._allocate, self.oom_errors, self.what)
        self._views, self._scratch_views = cut_arena(self._arena_buffer, self.memory_plan,
                                                     self.steps)
        self._bind()

    def enqueue(self, args: Sequence[Any], donated: frozenset[int] = frozenset()) -> list[Any]:
        """Launch the step's kernels and return its results, without asking which
        kernels failed at the end (``__call__`` does; CUDA benchmarks time the launches
        alone between device events)."""
        values = self._arguments(args)
        values += [None] * len(self.steps)
        if self._views is None:
            self._arena([int(a.nbytes) for a in values[:self.n_args]])
        self._donated = donated
        return self._run(values, donated)

    def _result_memory(self, st: Step, values: list[Any], donated: frozenset[int]) -> Any:
        """Where kernel ``st`` writes: its arena view, or the donated argument's own
        memory reshaped, or a fresh array that escapes to a tensor."""
        out = self._views.get(st.out)
        if out is not None:
            return out
        return self._escaping_memory(st.donate, st.shape, st.storage, values, donated)

    def _escaping_memory(self, donate: int | None, shape: tuple[int, ...], storage: Any,
                         values: list[Any], donated: frozenset[int]) -> Any:
        """Where a kernel outside the arena writes: over donated argument ``donate``
        (its memory reshaped) when the caller donated it, else a fresh array."""
        if donate is not None and donate in donated:
            self.overwrote_donated = True
            return values[donate].reshape(shape)   # a view: same memory
        return self._empty(shape, storage)

    def __call__(self, args: Sequence[Any], donated: frozenset[int] = frozenset()) -> list[Any]:
        """Run the step; raise if a kernel reported a failure."""
        results = self.enqueue(args, donated)
        failed = self._finish()
        if failed:
            try:
                self._failed_at_end(failed)
            except InterpreterError as e:
                # every kernel ran (a failing one reads element 0 for a bad index):
                # the results the failure does not reach are right
                affected = set(e.outputs or ())
                e.nova_salvage = Salvage(
                    {pos: r for pos, r in enumerate(results) if pos not in affected},
                    self._written_over(len(self.steps)))
                raise
        return results

    def _affected(self, positions: Sequence[int]) -> tuple[int, ...]:
        """The outputs the kernels at ``positions`` (plan order) can have affected."""
        inputs, outs = [s.inputs for s in self.steps], [s.out for s in self.steps]
        affected: set[int] = set()
        for p in positions:
            affected.update(affected_outputs(inputs, outs, self.outputs, p))
        return tuple(sorted(affected))

    def _written_over(self, ran: int) -> frozenset[int]:
        """The donated arguments that the first ``ran`` kernels (plan order) of the
        latest run wrote over."""
        donated, views = self._donated, self._views or {}
        return frozenset(st.donate for st in self.steps[:ran]
                         if st.donate is not None and st.donate in donated
                         and st.out not in views)

    def _salvage_before(self, p: int, values: list[Any]) -> Salvage:
        """What a run stopped by kernel ``p`` leaves: the outputs of the kernels before
        it (none of which depends on it) and of the arguments themselves, and the
        arguments written over up to ``p`` (it may have begun writing its own)."""
        done = {st.out for st in self.steps[:p]}
        views = self._views or {}
        return Salvage({pos: views.get(slot, values[slot])
                        for pos, slot in enumerate(self.outputs)
                        if slot < self.n_args or slot in done},
                       self._written_over(p + 1))

    def _failed_now(self, p: int, values: list[Any]) -> None:
        """Kernel ``p`` failed as it ran, its inputs still in ``values`` (host arrays):
        the interpreter, which defines the ops, re-runs it to say precisely what went
        wrong. The error carries the run's ``Salvage``."""
        st = self.steps[p]
        affected = self._affected([p])
        try:
            run_region(st.plan.fusion.body.block, [values[i] for i in st.inputs])
        except InterpreterError as e:
            error = InterpreterError(f"{e} (in kernel {st.plan.name})", affected)
        else:
            error = InterpreterError(f"kernel {st.plan.name} ({st.plan.kind}) reported an "
                                     "index out of range or an integer division by zero",
                                     affected)
        error.nova_salvage = self._salvage_before(p, values)
        raise error from None

    def _failed_at_end(self, positions: Sequence[int]) -> None:
        """Kernels reported failures once the step ended (their inputs may be gone)."""
        names = ", ".join(f"{self.steps[p].plan.name} ({self.steps[p].plan.kind})"
                          for p in positions)
        raise InterpreterError(f"{self.target}: kernel {names} reported an index out of "
                               "range or an integer division by zero",
                               self._affected(positions))


class LaunchLoop(Program):
    """A ``Program`` whose run loop is Python: one ``launch`` call per kernel. The
    CUDA engine's launches only queue work on a stream, so the loop's few microseconds
    per kernel overlap the device; a launcher implements ``_begin`` (and ``_finish``).
    Slots are dropped after their last use, so escaped buffers do not outlive the step
    (on a device, memory goes back to the pool mid-step)."""

    @abstractmethod
    def _begin(self) -> Callable[[int, Step, list[Any]], Any]:
        """Prepare a run; return the function that launches kernel ``p`` of it on
        ``values`` (every slot, this kernel's output included). That function returns
        nonzero if the kernel failed as it ran (the loop then raises, naming what went
        wrong), anything false otherwise."""

    def _run(self, values: list[Any], donated: frozenset[int]) -> list[Any]:
        launch = self._begin()
        release, result_memory = self.release, self._result_memory
        self.overwrote_donated = False
        for p, st in enumerate(self.steps):
            values[st.out] = result_memory(st, values, donated)
            if launch(p, st, values):
                self._failed_now(p, values)
            for i in release[p]:
                values[i] = None
        return [values[i] for i in self.outputs]


class PlannedOnly(Program):
    """A step taken through fusion, planning and the memory plan, but not compiled:
    what ``nv.debug.memory_report(*tensors)`` reports on -- the memory a step would need
    on the CPU target, known before any kernel of it exists. It cannot run."""

    target = "cpu"
    what = "planned step"

    def _compile(self, module: ModuleOp, lowered: CompiledStep) -> list[tuple[Any, Any]]:
        return [(None, None)] * len(lowered.plans)

    def _allocate(self, nbytes: int) -> Any:
        raise TypeError("a planned-only step is not compiled and cannot run")

    _arguments = _run = _allocate
