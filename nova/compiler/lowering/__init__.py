"""Lowering: each ``nova.fusion`` kernel becomes a loop nest with an explicit schedule
(a target-neutral plan, then the target's schedule: ``nova.compiler.targets``)."""
from nova.compiler.lowering.plan import KernelPlan, Schedule, plan_kernel, plan_kernels

__all__ = ["KernelPlan", "Schedule", "plan_kernel", "plan_kernels"]
