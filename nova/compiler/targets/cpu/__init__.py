"""The CPU target: kernels compiled by LLVM for the host, run by ``nova.runtime``'s
thread pool.

What is CPU-specific, and why:

- The spec is the host's ``CpuSpec`` (``device.detect_cpu``: ISA, registers, caches,
  cores, clock), or one passed in (tests, planning for another machine). Every number
  below is a formula of it (``configurator``), so a CPU kernel's schedule, and with it
  its name, differ between hosts; the CPU kernel cache keys on both.
- Fusion: a matmul's epilogue runs over each register tile spilled to a stack buffer,
  a short loop per row (vectorized for a full tile), between the tile's FMAs, so
  ``Expensive`` ops (exp, erf, ...) cost more there than in an elementwise kernel of
  their own, even counting that kernel's extra pass over memory (measured: GELU's
  backward over 4096 x 1024 as the epilogue of its dX product, 11.9-12.7 ms for the
  kernel, against 8.1-8.2 ms for the product and 2.1-2.2 ms for the elementwise kernel;
  with the math inline vector code, a GPT step's kernels 2-5% slower with GELU in the
  epilogues: ``benchmarks/results/gelu_epilogue_20.md``). They start a kernel of their
  own instead.
- Schedule: an elementwise kernel that reads every input at the output's own position
  (or a scalar) is *flat* (``lowering.flat``): one loop over the elements, whose code
  and name are the same for every size, so the kernels of same-structured parameters
  of different shapes (optimizer updates, initializations) compile once. The vectorized
  innermost loop of elementwise kernels and row reductions is interleaved
  ``loop_unroll`` times (fewer where inline polynomial math would spill); float32
  matmuls become BLIS-blocked ``tiled`` kernels (register tile, KC/MC/NC blocks and
  thread split from ``gemm_tile``), and an unbatched one on enough cores shares one
  packed B panel among its threads (``shared_b``, with a scratch buffer for the team
  header and two panels); every kernel is classified memory- or compute-bound against
  the host's balance.
- Fused attention: blocks of queries and keys sized so a score block stays in L1, and
  the GEMM's register tile for the block products (``configurator.attention_blocks``).
- Emission: ``targets.cpu.llvm`` turns a scheduled plan into an LLVM module for the host's
  triple and data layout.
"""
from __future__ import annotations

from dataclasses import replace

from nova.compiler import dialect as nd
from nova.compiler.lowering.flat import flat_key
from nova.compiler.targets.cpu.llvm import SupportModule, gemm_support, module_for
from nova.compiler.targets.cpu.llvm_gemm import b_table, reads_in_place
from nova.compiler.targets.cpu.configurator import (attention_blocks, classify,
                                                    float32_vector_width, gemm_tile,
                                                    loop_unroll)
from nova.compiler.targets.cpu.device import CpuSpec, detect_cpu
from nova.compiler.lowering.plan import (
    TEAM_WORDS,
    KernelPlan,
    Schedule,
    contraction,
    cost,
    gemm_extents,
)
from nova.compiler.targets import FusionPolicy, Target
from nova.core import dtypes as dt
from nova.core.shapes import numel


def _tiled(plan: KernelPlan, spec: CpuSpec) -> tuple[Schedule, tuple | None]:
    """The BLIS-blocked schedule of a float32 matmul: A and B packed (any layout) into
    cache-sized blocks, an MR x NR tile of C in vector registers across each K block.
    Partial sums over K blocks live in the output, so K is blocked only when the output
    is float32. The parallel extent counts micro-panels of the split dimension over all
    batches."""
    mm = contraction(plan.fusion)
    rows, n, k = gemm_extents(mm)
    m = tuple(mm.operands[0].type.get_shape())[-2]
    batches = rows // m if m else 0
    k_blocking = plan.out[1] == dt.float32
    rank = len(mm.results[0].type.get_shape()) - 2
    table = b_table(plan, mm.operands[1], rank)
    tile = gemm_tile(spec, k=k, m=m, n=n, k_blocking=k_blocking, batched=batches > 1,
                     batches=max(batches, 1),
                     b_table_rows=table is not None and reads_in_place(table, rank))
    if tile.split == "m":
        extent, other = batches * -(-m // tile.mr), n
    else:
        extent, other = batches * -(-n // tile.nr), m
    scratch = None
    if tile.shared_b:   # team header (i64 words), two B panels, a vector of slack
        floats = 2 * TEAM_WORDS + 2 * tile.kc * tile.nc + tile.nr
        scratch = ((floats,), dt.float32)
    return Schedule((extent, other, k), 0, "tiled", vector_dim=1,
                    tile=(tile.mr, tile.nr, tile.nc), derivation=tile.derivation,
                    kc=tile.kc, mc=tile.mc, split=tile.split,
                    shared_b=tile.shared_b, b_in_place=tile.b_in_place), scratch


class CpuTarget(Target):
    """LLVM code for a CPU: the host's (``detect_cpu()``, read when a plan is scheduled)
    unless ``spec`` pins one. ``triple`` and ``data_layout`` are what ``emit`` builds
    modules for (the host's by default)."""

    name = "cpu"

    def __init__(self, spec: CpuSpec | None = None, triple: str | None = None,
                 data_layout: str | None = None):
        self._spec = spec
        self._triple = triple
        self._data_layout = data_layout

    def spec(self) -> CpuSpec:
        return self._spec if self._spec is not None else detect_cpu()

    @property
    def fusion_policy(self) -> FusionPolicy:
        return FusionPolicy(expensive_epilogues=False, operand_prologues=True)

    def schedule(self, plan: KernelPlan) -> KernelPlan:
        """The neutral structure refined by the host: interleaved vector loops, blocked
        float32 GEMMs, and the memory/compute classification."""
        spec = self.spec()
        schedule, scratch = plan.schedule, plan.scratch
        if schedule.strategy in ("elementwise", "row"):
            width = float32_vector_width(plan.fusion, spec)
            unroll = loop_unroll(plan.fusion, spec)
            schedule = replace(schedule, unroll=max(unroll, 1), vector_width=width)
            key = flat_key(plan.fusion) if schedule.strategy == "elementwise" else None
            if key is not None:     # one loop over the elements, one name for every size
                schedule = replace(schedule, loops=(numel(plan.out[0]),), parallel_dim=0,
                                   vector_dim=0, flat=True)
                plan = replace(plan, body=key)
        elif plan.kind == "attention":
            _, queries, keys, _ = schedule.loops
            op = contraction(plan.fusion)
            blocks = attention_blocks(spec, queries, keys, bool(op.causal.value.data))
            schedule = replace(schedule, blocks=(blocks.br, blocks.bc),
                               tile=(blocks.mr, blocks.nr, 0), derivation=blocks.derivation)
        elif plan.kind == "matmul" and \
                nd.element_name(contraction(plan.fusion).results[0].type.element_type) == "f32":
            schedule, scratch = _tiled(plan, spec)
        schedule = replace(schedule, bound=classify(*cost(plan.fusion), spec))
        return plan.with_schedule(schedule, scratch)

    def _host_target(self) -> tuple[str, str]:
        if self._triple is None or self._data_layout is None:
            import llvmlite.binding as llvm
            llvm.initialize_native_target()
            triple = self._triple or llvm.get_process_triple()
            machine = llvm.Target.from_triple(triple).create_target_machine()
            self._triple = triple
            self._data_layout = self._data_layout or str(machine.target_data)
        return self._triple, self._data_layout

    def emit(self, plan: KernelPlan) -> str:
        """The LLVM IR of ``plan``'s kernel, for this target's triple and data layout."""
        triple, data_layout = self._host_target()
        return str(module_for(plan, triple, data_layout))

    def product_support(self) -> SupportModule:
        """The support module every float32 matrix product's kernel calls on this CPU:
        the GEMM driver of its register tile (which depends on the vector registers and
        lanes only, not on the product's shape). Known before a step is planned, so the
        runtime can have it ready while the step's front end runs
        (``KernelCache.prefetch_support``)."""
        tile = gemm_tile(self.spec())
        return gemm_support(tile.mr, tile.nr)


__all__ = ["CpuTarget"]
