"""The compiler pipeline, spelled out once.

    PendingGraph --build--> nova function ("trace")
                 --optimize (CSE, DCE, remat)--> ("nova": what every engine runs)
                 --compile_step for a target (fusion by the target's policy, then a
                   target-neutral plan per kernel with the target's schedule)--> ("fused")

Engines compile what ``compile_step`` returns (the CPU engine's kernels through LLVM, the CUDA
engine's through NVRTC) and run it; ``nv.debug.dump_ir``, ``nv.debug.dump`` and
``NOVA_DEBUG`` show the same stages through ``stages``, so what a user inspects is what
runs. No other module strings these stages together.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from nova import config
from nova.compiler import dialect as nd
from nova.compiler.irgen import build_module
from nova.compiler.lowering.plan import KernelPlan, plan_kernels
from nova.compiler.passes import optimize
from nova.compiler.passes.fusion import fuse
from nova.compiler.targets import Target, resolve
from nova.core.graph import PendingGraph

STAGES = ("trace", "nova", "fused")


@dataclass
class Wiring:
    """A lowered step's data flow in slots (``CompiledStep.wiring``)."""

    n_args: int
    arg_types: list[tuple[tuple[int, ...], Any]]   # (shape, MLIR element type) per argument
    inputs: list[tuple[int, ...]]                   # per kernel: the slots it reads
    outputs: tuple[int, ...]                        # the slots the step returns


@dataclass
class CompiledStep:
    """A step grouped into kernels for one target, each with its plan: the input of an
    engine's code generation."""

    target: str                  # the target's name
    fused: ModuleOp              # the step function as a sequence of nova.fusion kernels
    plans: list[KernelPlan]      # one per nova.fusion op, in program order

    @property
    def function(self) -> func.FuncOp:
        return next(op for op in self.fused.ops if isinstance(op, func.FuncOp))

    def wiring(self) -> Wiring:
        """Which values each kernel reads and which the step returns, as slots:
        arguments ``0 .. n_args - 1``, then kernel k's result at ``n_args + k``."""
        fn = self.function
        slot = {a: i for i, a in enumerate(fn.body.block.args)}
        n_args = len(slot)
        inputs = []
        for op in fn.body.block.ops:
            if isinstance(op, nd.FusionOp):
                inputs.append(tuple(slot[v] for v in op.inputs))
                slot[op.results[0]] = len(slot)
        return Wiring(n_args,
                      [(tuple(a.type.get_shape()), a.type.get_element_type())
                       for a in fn.body.block.args],
                      inputs, tuple(slot[v] for v in fn.body.block.last_op.operands))

    def text(self) -> str:
        """The fused IR followed by each kernel's plan, as ``dump_ir(stage="fused")``."""
        return str(self.fused) + "\n" + "\n".join(f"// {p.describe()}" for p in self.plans)


def fused_attention(engine: str) -> bool:
    """Whether steps for ``engine`` ("cpu", "interp", "cuda", "mlir") fuse attention:
    the CPU and CUDA kernels and the interpreter have the fused ops, the upstream-MLIR
    engine not (upstream MLIR has no such op); and ``NOVA_FUSED_ATTENTION=0`` keeps the
    composite everywhere."""
    return engine != "mlir" and config.FUSED_ATTENTION.get()


def front(graph: PendingGraph, remat: str = "default", engine: str = "cpu") -> ModuleOp:
    """The verified, optimized nova function of ``graph`` (the "nova" stage) for
    ``engine``."""
    return optimize(build_module(graph), remat, fused_attention(engine))


def compile_step(module: ModuleOp, target: Target | str = "cpu") -> CompiledStep:
    """Fuse the optimized function for ``target`` (a ``Target`` or its name, resolved
    by ``targets.get_target``) and plan every kernel with its schedule."""
    resolved = resolve(target, "compile_step")
    fused = fuse(module, resolved)
    return CompiledStep(resolved.name, fused, plan_kernels(fused, target=resolved))


def stages(graph: PendingGraph, remat: str = "default",
           target: str = "cpu") -> Iterator[tuple[str, ModuleOp | CompiledStep]]:
    """Each stage of ``graph``'s compilation by name, in order, computed as they are
    asked for: ("trace", module), ("nova", module), ("fused", CompiledStep). Each result
    stays as yielded (the optimizer rewrites in place, so it works on a copy)."""
    module = build_module(graph)
    yield "trace", module
    module = optimize(module.clone(), remat, fused_attention(target))
    yield "nova", module
    yield "fused", compile_step(module, target)
