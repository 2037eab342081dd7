"""Lowering: each ``nova.fusion`` kernel becomes a loop nest with an explicit schedule."""
from nova.compiler.lowering.plan import KernelPlan, Schedule, plan_kernels

__all__ = ["KernelPlan", "Schedule", "plan_kernels"]
