"""The CUDA target: kernels as CUDA C, compiled by NVRTC and launched on one stream.

What is CUDA-specific, and why:

- The spec is a ``CudaSpec``: the device's (the engine's backend reads it,
  ``targets.cuda.device.from_device``) or an explicit one (``SM80``, ``SM86``, ``SM90``) for
  offline compilation and tests; ``DEFAULT_SPEC`` when none is given. Only emission
  reads it (the launch configuration is a formula of the kernel and the spec,
  ``targets.cuda.configurator``); plans never do, and no CPU spec is read at all, so a CUDA
  kernel's name and source depend on the kernel and the GPU alone, never on the host
  that compiled it (its NVRTC cache entries can be shared between hosts).
- Fusion: a matmul's epilogue is one coalesced loop of threads over the staged output
  tile, as fast as an elementwise kernel, so ``Expensive`` ops stay in it (one kernel
  for ``gelu(x @ w + b)``).
- Schedule: the target-neutral loop structure as it is (kind, strategy, reduced axes:
  what ``targets.cuda.configurator.configure`` reads to pick a thread mapping); the CPU's
  refinements (unrolling, BLIS blocking, shared B panels, CPU-balance classification)
  do not apply, and the GPU's own (grid, block, GEMM tiles, pipeline stages) come from
  the spec at emission.
- Fused attention: the neutral plan, with blocks of queries and keys and the shared-memory
  tiles chosen at emission from the GPU's shared memory and SM count
  (``configurator.attention_config``), not the CPU's cache sizes.
- Emission: ``targets.cuda.codegen.generate`` writes the kernel's CUDA C with its launch
  geometry.
"""
from __future__ import annotations

from nova.compiler.targets.cuda.codegen import CudaKernel, generate
from nova.compiler.targets.cuda.configurator import LaunchConfig, configure, sort_config
from nova.compiler.targets.cuda.device import SM90, CudaSpec
from nova.compiler.lowering.plan import KernelPlan
from nova.compiler.targets import FusionPolicy, Target
from nova.core import dtypes as dt

# The spec of a CUDA target built without one (the newest explicit spec, sm_90); an
# engine passes its device's.
DEFAULT_SPEC = SM90


class CudaTarget(Target):
    """CUDA C for ``spec`` (``DEFAULT_SPEC`` if None)."""

    name = "cuda"

    def __init__(self, spec: CudaSpec | None = None):
        self._spec = spec if spec is not None else DEFAULT_SPEC

    def spec(self) -> CudaSpec:
        return self._spec

    @property
    def fusion_policy(self) -> FusionPolicy:
        return FusionPolicy(expensive_epilogues=True)

    def schedule(self, plan: KernelPlan) -> KernelPlan:
        """The neutral plan itself: its structure is what the CUDA configurator reads,
        and its name is already a digest of that structure and the kernel; a sort gets
        the scratch its grid needs."""
        if plan.kind == "sort":
            # each block sorts its rows in its own part of the scratch: N spare
            # indices and N keys (8-byte slots) per block of the grid
            blocks = sort_config(plan, self._spec).grid[0]
            return plan.with_schedule(plan.schedule,
                                      ((blocks * 2 * plan.schedule.loops[1],), dt.int64))
        return plan

    def configure(self, plan: KernelPlan) -> LaunchConfig:
        """The launch configuration of ``plan`` on this target's GPU."""
        return configure(plan, self._spec)

    def emit(self, plan: KernelPlan) -> CudaKernel:
        """The CUDA C of ``plan`` with its launch geometry on this target's GPU."""
        return generate(plan, self._spec)


__all__ = ["DEFAULT_SPEC", "CudaTarget"]
