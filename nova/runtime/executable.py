"""An Executable: one compiled step function and the engine that runs it.

The cpu and cuda engines run a ``nova.runtime.program.Program`` (``CpuProgram``,
``CudaProgram``: one run loop, memory plan and donation, two launchers); ``interp``
runs the interpreter's program over the unfused ops, and ``mlir`` the step compiled by
upstream MLIR (``nova.runtime.mlir_engine``).
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from nova.compiler import dialect as nd
from nova.runtime.interpreter import compile_function

ENGINES = ("cpu", "interp", "mlir")  # what nv.set_engine chooses among, for CPU steps
# Steps on the GPU always run on ``cuda`` (realization picks it from the devices).
ALL_ENGINES = ENGINES + ("cuda",)
_PLANNED = ("cpu", "cuda")         # engines running a Program: memory plan, donation, fusion


class Executable:
    """A verified nova module plus its runnable form for one engine.

    Built once per structural key; replay only calls :meth:`run` with new buffers.
    """

    def __init__(self, module: ModuleOp, engine: str = "interp", backend: Any = None,
                 lowered: Any = None):
        """``lowered``: the cpu engine's ``compile_step`` of ``module``, if done already
        (``nova.runtime.step_cache``)."""
        if engine not in ALL_ENGINES:
            raise ValueError(f"Executable: unknown engine {engine!r}; valid engines are "
                             f"{ALL_ENGINES}")
        self.module = module
        self.engine = engine
        self.function = next(op for op in module.ops if isinstance(op, func.FuncOp))
        self.num_ops = sum(1 for op in self.function.body.block.ops) - 1
        # A step that exchanges data with other processes (nova.distributed) must run
        # whole: interrupted or retried, this rank would issue its collectives again.
        self.has_collectives = any(isinstance(op, nd.COLLECTIVE_OPS)
                                   for op in self.function.body.block.ops)
        if engine == "cpu":
            from nova.runtime.cpu_engine import CpuProgram
            self._program = CpuProgram(module, lowered=lowered)
            self.num_kernels = self._program.num_kernels
        elif engine == "cuda":
            from nova.runtime.cuda_engine import CudaProgram
            from nova.runtime.cuda_runtime import backend as current_backend
            self._program = CudaProgram(module, backend or current_backend())
            self.num_kernels = self._program.num_kernels
        elif engine == "mlir":        # upstream MLIR's linalg pipeline and JIT
            from nova.runtime.mlir_engine import MlirProgram
            self._program = MlirProgram(module)
            self.num_kernels = 1
        else:
            self._program = compile_function(self.function)
            self.num_kernels = self.num_ops
        self.runs = 0
        self.last_arg_bytes: list[int] | None = None   # the arguments' sizes, once run
        # One run at a time: a program's arena, pointer tables and value slots are its
        # own state, so two threads replaying the same structure take turns (steps of
        # different structures run concurrently).
        self._lock = threading.Lock()

    @property
    def lowered(self) -> Any:
        """The cpu/cuda program's ``CompiledStep`` (fused module and plans)."""
        if self.engine not in _PLANNED:
            raise ValueError("lowered: only the cpu and cuda engines fuse kernels")
        return self._program.lowered

    def fused_ir(self) -> str:
        if self.engine not in _PLANNED:
            raise ValueError("fused_ir: only the cpu and cuda engines fuse kernels")
        return str(self._program.fused)

    def ir(self) -> str:
        return str(self.module)

    @property
    def donation_candidates(self) -> frozenset[int]:
        """Arguments whose buffers this step can reuse for results (cpu, cuda)."""
        return self._program.donation_candidates if self.engine in _PLANNED else frozenset()

    def run(self, buffers: Sequence[Any], donated: frozenset[int] = frozenset(),
            roles: Sequence[str] = ()) -> list[Any]:
        """Run on ``buffers``. ``donated`` arguments (a subset of ``donation_candidates``
        that the caller guarantees nobody else reads) may be overwritten by results;
        ``roles`` name the arguments for the memory report."""
        with self._lock:
            self.runs += 1
            if self.last_arg_bytes is None:     # sizes only (none kept alive); a step's
                self.last_arg_bytes = [b.nbytes for b in buffers]   # types fix them
            self.last_roles, self.last_donated = list(roles), donated
            try:
                if self.engine in _PLANNED:
                    return self._program(buffers, donated)
                return self._program(buffers)
            except Exception as e:
                # Read under the lock: another thread's run would reset it. A Program
                # knows; the interpreter's program donates nothing.
                try:
                    e.nova_overwrote_donated = bool(donated) and getattr(
                        self._program, "overwrote_donated", True)
                except AttributeError:     # an exception without a __dict__: "lost"
                    pass
                raise

    def memory_report(self):
        """Peak bytes of this step and what holds them (cpu, cuda; after a run)."""
        if self.engine not in _PLANNED:
            raise ValueError("memory_report: only the cpu and cuda engines plan their buffers")
        if self.last_arg_bytes is None:
            raise ValueError("memory_report: the step has not run yet")
        return self._program.memory_report(self.last_arg_bytes, self.last_roles,
                                           self.last_donated)


def overwrote_donated(error: BaseException) -> bool:
    """Whether the run that raised ``error`` had begun writing results over donated
    buffers (their old values are then lost). Engines that do not track it (and errors
    that did not come from a run) answer True."""
    return getattr(error, "nova_overwrote_donated", True)
