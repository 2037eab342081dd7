"""An Executable: one compiled step function and the engine that runs it."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from nova.runtime.interpreter import compile_function

ENGINES = ("cpu", "interp")


class Executable:
    """A verified nova module plus its runnable form for one engine.

    Built once per structural key; replay only calls :meth:`run` with new buffers.
    """

    def __init__(self, module: ModuleOp, engine: str = "interp"):
        if engine not in ENGINES:
            raise ValueError(f"Executable: unknown engine {engine!r}; valid engines are {ENGINES}")
        self.module = module
        self.engine = engine
        self.function = next(op for op in module.ops if isinstance(op, func.FuncOp))
        self.num_ops = sum(1 for op in self.function.body.block.ops) - 1
        if engine == "cpu":
            from nova.runtime.cpu_engine import CpuProgram
            self._program = CpuProgram(module)
            self.num_kernels = self._program.num_kernels
        else:
            self._program = compile_function(self.function)
            self.num_kernels = self.num_ops
        self.runs = 0

    def fused_ir(self) -> str:
        if self.engine != "cpu":
            raise ValueError("fused_ir: only the cpu engine fuses kernels")
        return str(self._program.fused)

    def ir(self) -> str:
        return str(self.module)

    def run(self, buffers: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.runs += 1
        self.last_arg_bytes = [b.nbytes for b in buffers]   # sizes only: no buffer kept alive
        return self._program(buffers)

    def memory_report(self):
        """Peak bytes of this step and what holds them (cpu engine, after a run)."""
        if self.engine != "cpu":
            raise ValueError("memory_report: only the cpu engine plans its buffers")
        if not hasattr(self, "last_arg_bytes"):
            raise ValueError("memory_report: the step has not run yet")
        return self._program.memory_report(self.last_arg_bytes)
