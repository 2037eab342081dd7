"""Compilation targets: what differs between compiling a fused step for the CPU and for
CUDA, stated in one interface.

Everything above a target is shared: the nova function, fusion's rules, the kernel
plans (``lowering.plan``: kind, loop structure, reduced axes, operand layouts, scratch)
and the memory plan. A ``Target`` supplies the four things that are not:

- ``spec()``: the device it compiles for (a ``CpuSpec``, a ``CudaSpec``), the only input
  of its configurator besides the kernel;
- ``fusion_policy``: the facts about its code generator that change how kernels form
  (``FusionPolicy``), so fusion never asks which target it runs for;
- ``schedule(plan)``: the target-neutral plan with the target's own schedule attached
  (and the plan renamed by it), a pure function of the plan and ``spec()``;
- ``emit(plan)``: the code of one scheduled plan (LLVM IR for the CPU, CUDA C for a GPU).

A target's plans depend on its own spec and nothing else, so a CUDA kernel's name and
source are the same on every host. Targets are looked up by name (``get_target``), which
is how the engines, ``pipeline.compile_step`` and the debug dumps name them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from xdsl.ir import Operation

from nova.compiler import dialect as nd

if TYPE_CHECKING:
    from nova.compiler.lowering.plan import KernelPlan


@dataclass(frozen=True)
class FusionPolicy:
    """What fusion needs to know about a target's code generator.

    ``expensive_epilogues``: whether a contraction's epilogue (the elementwise ops a
    matmul applies to its output tile) may hold ``Expensive`` ops. Where the epilogue
    runs tile by tile between the product's FMAs (the CPU's register tile), such ops
    cost more there than in an elementwise kernel of their own, so fusion starts a new
    kernel at them instead.

    ``operand_prologues``: whether a contraction may compute an operand from pointwise
    ops as it packs it (the CPU GEMM packs every operand into micro-panels, through a
    callback where the operand is computed) instead of reading it stored. The CUDA GEMM
    would lose its asynchronous copies of that operand and recompute it per block column,
    unmeasured on a GPU so far: off there.
    """

    expensive_epilogues: bool
    operand_prologues: bool = False

    def epilogue_admits(self, op: Operation) -> bool:
        """Whether ``op`` may run in a contraction's epilogue on this target."""
        return self.expensive_epilogues or not op.has_trait(nd.Expensive)


class Target(ABC):
    """One compilation target (see the module docstring for what each method is for)."""

    name: str

    @abstractmethod
    def spec(self) -> Any:
        """The device this target compiles for."""

    @property
    @abstractmethod
    def fusion_policy(self) -> FusionPolicy:
        """How this target's code generator changes what fusion should group."""

    @abstractmethod
    def schedule(self, plan: KernelPlan) -> KernelPlan:
        """``plan`` (target-neutral, as ``lowering.plan.plan_kernel`` builds it) with this
        target's schedule and scratch attached and the name derived from them."""

    @abstractmethod
    def emit(self, plan: KernelPlan) -> Any:
        """The code of one plan this target scheduled."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _cpu(**options: Any) -> Target:
    from nova.compiler.targets.cpu import CpuTarget
    return CpuTarget(**options)


def _cuda(**options: Any) -> Target:
    from nova.compiler.targets.cuda import CudaTarget
    return CudaTarget(**options)


# Name -> constructor. The modules load on first use: the CPU target imports llvmlite's
# code generator, the CUDA one the CUDA configurator and C emitter.
_REGISTRY: dict[str, Callable[..., Target]] = {"cpu": _cpu, "cuda": _cuda}
TARGET_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def get_target(name: str, **options: Any) -> Target:
    """The target called ``name`` ("cpu" or "cuda"); ``options`` go to its constructor
    (``spec=`` pins the device, otherwise the CPU target reads the host and the CUDA
    target uses its default spec)."""
    try:
        make = _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown target {name!r}; valid targets are "
                         f"{', '.join(TARGET_NAMES)}") from None
    return make(**options)


def resolve(target: Target | str, who: str) -> Target:
    """``target`` itself, or the target of that name; ``who`` (the caller) prefixes the
    error for an unknown name."""
    if isinstance(target, Target):
        return target
    try:
        return get_target(target)
    except ValueError as e:
        raise ValueError(f"{who}: {e}") from None


__all__ = ["FusionPolicy", "TARGET_NAMES", "Target", "get_target", "resolve"]
