"""The ``cuda`` engine: a step function fused, planned, generated as CUDA C, compiled by
NVRTC and replayed as launches on one stream.

``CudaProgram`` follows ``CpuProgram`` stage for stage, so both backends share every
decision above codegen: the same fusion, the same ``KernelPlan`` s, the same memory plan
(order, donation, arena offsets). Only the last stage differs: each plan becomes CUDA C
(``nova.compiler.codegen.cuda.generate`` with the device's ``CudaSpec``), the
backend (``nova.runtime.cuda_runtime``) loads and launches it. Intermediates are views
into one arena allocated once from the backend (CuPy's memory pool on a GPU); results
that escape are fresh device arrays, or the donated argument's own memory.

Kernels report index errors and integer division by zero through their module's
``nova_error_flag``; the step reads all flags once at its end (its one
synchronization) and raises naming the kernels that set one. Launches are
asynchronous, so a failed step may already have written donated buffers: realization
then marks every result of the step as failed.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nova.compiler.lowering.plan import KernelPlan
from nova.compiler.pipeline import lower
from nova.runtime.cuda_runtime import (
    CudaCompileError,
    DeviceBackend,
    dump_failed_source,
)
from nova.runtime.interpreter import InterpreterError, affected_outputs
from nova.runtime.memory_report import MemoryReport
from nova.runtime.step_memory import (
    allocate_arena,
    cut_arena,
    plan_steps,
    report_steps,
)
from nova.core.graph import storage_dtype


@dataclass
class CudaStep:
    plan: KernelPlan
    kernel: Any                  # CudaKernel
    handle: Any                  # the backend's loaded kernel
    inputs: tuple[int, ...]
    out: int
    shape: tuple[int, ...]
    np_dtype: np.dtype           # the result's Nova dtype (numpy form)
    storage: np.dtype            # how the device holds it
    scratch: tuple[tuple[int, ...], np.dtype] | None   # (shape, storage dtype)
    donate: int | None = None


class CudaProgram:
    """A compiled CUDA step: ``program(args, donated) -> outputs`` on device arrays."""

    def __init__(self, module: ModuleOp, backend: DeviceBackend, reorder: bool = True):
        from nova.compiler.codegen.cuda import generate

        self.backend = backend
        lowered = lower(module, "cuda")
        self.fused, self.plans = lowered.fused, lowered.plans
        spec = backend.spec()
        kernels = []
        for plan in self.plans:
            try:
                kernels.append(generate(plan, spec))
            except Exception as e:   # codegen bug: name the kernel, keep its plan readable
                path = dump_failed_source(plan.name, spec.arch,
                                          f"// {plan.describe()}\n{plan.fusion}\n")
                raise CudaCompileError(f"cuda: no CUDA C for kernel {plan.name} "
                                       f"({plan.describe()}): {type(e).__name__}: {e}; its "
                                       f"fused IR is in {path}") from e
        handles = backend.load(list(zip(kernels, self.plans)))
        wiring = lowered.wiring()
        self.n_args, self.arg_types = wiring.n_args, wiring.arg_types
        steps: list[CudaStep] = []
        for k, (plan, kernel, handle, inputs) in enumerate(
                zip(self.plans, kernels, handles, wiring.inputs)):
            out = self.n_args + k
            shape, dtype = plan.out
            scratch = ((plan.scratch[0], storage_dtype(plan.scratch[1].np))
                       if plan.scratch else None)
            steps.append(CudaStep(plan, kernel, handle, inputs,
                                  out, shape, dtype.np, storage_dtype(dtype.np), scratch))
        self.outputs = wiring.outputs
        # The same memory plan as the CPU engine: pointwise kernels may write over an
        # input they read only at their own index (each CUDA thread reads its elements
        # before writing them; the kernels take no __restrict__ pointers).
        self.memory_plan, self.uses = plan_steps(steps, self.n_args, self.arg_types,
                                                 self.outputs, reorder)
        self.steps = [steps[k] for k in self.memory_plan.order]
        self.release = self.memory_plan.release
        self._read_flags = backend.flag_reader([st.handle for st in self.steps])
        self._views: dict[int, Any] | None = None
        self._scratch_views: list[Any] = []

    @property
    def num_kernels(self) -> int:
        return len(self.steps)

    @property
    def donation_candidates(self) -> frozenset[int]:
        return frozenset(self.memory_plan.donate.values())

    def sources(self) -> dict[str, str]:
        """Each kernel's CUDA C by kernel name (for reading and debugging)."""
        return {st.kernel.name: st.kernel.source for st in self.steps}

    def memory_report(self, arg_bytes: Sequence[int] | None,
                      roles: Sequence[str] | None = None,
                      donated: frozenset[int] = frozenset()) -> MemoryReport:
        """Peak device memory of this step from its plan (see memory_report)."""
        return report_steps(self.memory_plan, self.steps, self.arg_types, self.outputs,
                            arg_bytes, roles, donated)

    def _arena(self, arg_bytes: list[int]) -> None:
        """Allocate the arena once (kept for every later run) and cut its views."""
        xp = self.backend.xp
        arena = allocate_arena(self.memory_plan, self.memory_report(arg_bytes),
                               lambda n: xp.empty(n, dtype=np.uint8), self.backend.oom_errors,
                               "CUDA step")
        views, self._scratch_views = cut_arena(arena, self.memory_plan, self.steps,
                                               lambda st: st.storage)
        self._arena_buffer = arena
        self._views = views

    def enqueue(self, args: Sequence[Any], donated: frozenset[int] = frozenset()) -> list[Any]:
        """Launch the step's kernels on device arrays (storage dtypes) and return its
        results without waiting for them or reading the error flags (``__call__`` does
        both; benchmarks time the launches alone between device events). ``donated``:
        argument slots nobody else holds; results planned over them are written in
        place."""
        backend, xp = self.backend, self.backend.xp
        for i, a in enumerate(args):
            if not backend.is_device_array(a) or not a.flags.c_contiguous:
                raise TypeError(f"cuda engine: argument {i} is a {type(a).__name__} "
                                f"{getattr(a, 'shape', '')}, not a contiguous "
                                f"{backend.name} device array")
        values: list[Any] = list(args)
        values += [None] * len(self.steps)
        if self._views is None:
            self._arena([int(a.nbytes) for a in values[:self.n_args]])
        views = self._views
        for p, st in enumerate(self.steps):
            out = views.get(st.out)
            if out is None:
                if st.donate is not None and st.donate in donated:
                    out = values[st.donate].reshape(st.shape)   # a view: same memory
                else:       # a result: it escapes to a tensor
                    out = xp.empty(st.shape, dtype=st.storage)
            bufs = [values[i] for i in st.inputs] + [out]
            if st.scratch is not None:
                bufs.append(self._scratch_views[p])
            backend.launch(st.handle, bufs)
            values[st.out] = out
            for i in self.release[p]:
                values[i] = None
        return [values[i] for i in self.outputs]

    def __call__(self, args: Sequence[Any], donated: frozenset[int] = frozenset()) -> list[Any]:
        """Run the step and wait for it; raise if a kernel set its error flag."""
        results = self.enqueue(args, donated)
        flags = self._read_flags()          # waits for the step: its one synchronization
        failed = [p for p, f in enumerate(flags) if f]
        if failed:
            names = ", ".join(f"{self.steps[p].plan.name} ({self.steps[p].plan.kind})"
                              for p in failed)
            affected = set()
            for p in failed:
                affected |= set(affected_outputs([s.inputs for s in self.steps],
                                                 [s.out for s in self.steps], self.outputs, p))
            raise InterpreterError(f"cuda: kernel {names} reported an index out of range or "
                                   "an integer division by zero", tuple(sorted(affected)))
        return results
