"""The ``cuda`` engine: a step function fused, planned, generated as CUDA C, compiled by
NVRTC and replayed as launches on one stream.

``CudaProgram`` is ``nova.runtime.program.LaunchLoop`` (a ``Program`` launched kernel by
kernel from Python) with the CUDA launcher, so both
backends share every decision above codegen: the same fusion, the same ``KernelPlan`` s,
the same memory plan (order, donation, arena offsets). Only the last stage differs: each
plan becomes CUDA C (``nova.compiler.targets.cuda.codegen.generate`` with the device's
``CudaSpec``), the backend (``nova.runtime.cuda_runtime``) loads and launches it.
Intermediates are views into one arena allocated once from the backend (CuPy's memory
pool on a GPU); results that escape are fresh device arrays, or the donated argument's
own memory. Buffers are held in storage dtypes (``storage_dtype``: half floats as their
uint16 bits).

From its second run with the same argument addresses on, a step replays as one CUDA
graph (``nova.runtime.launch_graph``: captured once, arguments that move staged,
escaping results copied out).

Kernels report index errors and integer division by zero through their module's
``nova_error_flag``; the step reads all flags once at its end (its one
synchronization) and raises naming the kernels that set one. Launches are
asynchronous, so a failed step may already have written donated buffers: every kernel
ran, so realization keeps the results the failure does not reach (``program.Salvage``)
and fails the others.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nova import config
from nova.compiler.pipeline import CompiledStep
from nova.compiler.targets import get_target
from nova.core.graph import storage_dtype
from nova.runtime import collectives
from nova.runtime.cuda_runtime import CudaCompileError, DeviceBackend, dump_failed_source
from nova.runtime.launch_graph import GraphedRuns
from nova.runtime.program import LaunchLoop, Step


class CudaProgram(LaunchLoop):
    """A compiled CUDA step: ``program(args, donated) -> outputs`` on device arrays."""

    target = "cuda"
    what = "CUDA step"

    def __init__(self, module: ModuleOp, backend: DeviceBackend, reorder: bool = True):
        self.backend = backend
        self._empty = backend.xp.empty
        super().__init__(module, reorder)

    @property
    def oom_errors(self) -> tuple[type[BaseException], ...]:
        return self.backend.oom_errors

    def _compile(self, module: ModuleOp, lowered: CompiledStep) -> list[tuple[Any, Any]]:
        spec = self.backend.spec()
        target = get_target("cuda", spec=spec)   # this GPU's spec: emission needs it
        kernels = []
        for plan in self.plans:
            if plan.kind == "collective":     # launched by the loop (DeviceCollective)
                continue
            try:
                kernels.append(target.emit(plan))
            except Exception as e:   # codegen bug: name the kernel, keep its plan readable
                path = dump_failed_source(plan.name, spec.arch,
                                          f"// {plan.describe()}\n{plan.fusion}\n")
                raise CudaCompileError(f"cuda: no CUDA C for kernel {plan.name} "
                                       f"({plan.describe()}): {type(e).__name__}: {e}; its "
                                       f"fused IR is in {path}") from e
        compiled = [p for p in self.plans if p.kind != "collective"]
        loaded = iter(zip(kernels, self.backend.load(list(zip(kernels, compiled)))))
        out: list[tuple[Any, Any]] = []
        for plan in self.plans:
            if plan.kind == "collective":
                collective = collectives.DeviceCollective(plan)
                out.append((collective, collective))
            else:
                out.append(next(loaded))
        return out

    def _storage(self, np_dtype: np.dtype) -> np.dtype:
        return storage_dtype(np_dtype)

    def _planned(self) -> None:
        # collectives raise as they run; the kernels' flags are read at the end
        self._kernel_positions = [p for p, st in enumerate(self.steps)
                                  if st.plan.kind != "collective"]
        self._read_flags = self.backend.flag_reader(
            [self.steps[p].handle for p in self._kernel_positions])
        self._checked = not collectives.link(self.steps)
        why_not = None
        if not config.CUDA_GRAPHS.get():
            why_not = "NOVA_CUDA_GRAPHS=0"
        elif not self.backend.supports_graphs:
            why_not = f"the {self.backend.name} backend has no graphs"
        elif len(self._kernel_positions) < len(self.steps):
            why_not = "it exchanges data with other processes (collectives)"
        self.graphs = GraphedRuns(self.backend, self.n_args, self.outputs, self._launch_all,
                                  self.steps, lambda: self._views, self._empty, why_not)

    def _allocate(self, nbytes: int) -> Any:
        return self.backend.xp.empty(nbytes, dtype=np.uint8)

    def _arguments(self, args: Sequence[Any]) -> list[Any]:
        for i, a in enumerate(args):
            if not self.backend.is_device_array(a) or not a.flags.c_contiguous:
                raise TypeError(f"cuda engine: argument {i} is a {type(a).__name__} "
                                f"{getattr(a, 'shape', '')}, not a contiguous "
                                f"{self.backend.name} device array")
        return list(args)

    def _begin(self) -> Callable[[int, Step, list[Any]], Any]:
        if not self._checked:          # ranks compare the step's collectives once
            collectives.check_step([st.plan for st in self.steps])
            self._checked = True
        return self._launch

    def _run(self, values: list[Any], donated: frozenset[int]) -> list[Any]:
        """A replay of the step's CUDA graph where one fits (``launch_graph``), else
        one launch per kernel."""
        graphs = self.graphs
        if graphs.why_not is None:
            try:
                out = graphs.run(values, donated)
            finally:
                self.overwrote_donated = graphs.wrote_donated
            if out is not None:
                return out
        return super()._run(values, donated)

    def _launch_all(self, values: list[Any], memory: Callable[[Step], Any]) -> None:
        """Every kernel in plan order, each writing ``memory(step)`` (a graph capture:
        no slot is released, no memory allocated)."""
        for p, st in enumerate(self.steps):
            values[st.out] = memory(st)
            self._launch(p, st, values)

    def _launch(self, p: int, st: Step, values: list[Any]) -> None:
        bufs = [values[i] for i in st.inputs]
        bufs.append(values[st.out])
        if isinstance(st.handle, collectives.DeviceCollective):
            st.handle.launch(self.backend, bufs)
            return
        if st.scratch is not None:
            bufs.append(self._scratch_views[p])
        self.backend.launch(st.handle, bufs)

    def _finish(self) -> list[int]:
        flags = self._read_flags()          # waits for the step: its one synchronization
        return [p for p, f in zip(self._kernel_positions, flags) if f]

    def sources(self) -> dict[str, str]:
        """Each kernel's CUDA C by kernel name (for reading and debugging)."""
        return {st.kernel.name: st.kernel.source for st in self.steps}
