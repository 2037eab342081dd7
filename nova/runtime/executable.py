"""An Executable: one compiled step function and the engine that runs it."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from nova.runtime.interpreter import compile_function

ENGINES = ("interp",)


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
        self._program = compile_function(self.function)
        self.runs = 0

    @property
    def num_ops(self) -> int:
        return len(self._program.steps)

    def ir(self) -> str:
        return str(self.module)

    def run(self, buffers: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.runs += 1
        return self._program(buffers)
