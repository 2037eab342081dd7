"""How a program (``nova.runtime.program``, either target) plans and reports its memory.

A program turns its fused kernels into steps (each with ``plan``, ``inputs``, ``out``,
``shape``, ``np_dtype``, ``storage``, ``scratch`` and, once planned, ``donate``); from
those this module builds the planner's view (``KernelUse``), runs ``plan_memory``,
reports the plan, allocates the arena and cuts it into views. Targets differ only in
the allocator they pass (and so the array type of the views).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nova import config
from nova.compiler import dialect as nd
from nova.compiler.lowering.plan import KernelPlan, contraction
from nova.runtime.memory_plan import KernelUse, MemoryPlan, NovaOutOfMemoryError, plan_memory
from nova.runtime.memory_report import Buffer, MemoryReport, is_backward, plan_report
from nova.core import dtypes as dt


# The most bytes a step may plan for (None: whatever allocation succeeds); set with
# ``nv.debug.set_memory_limit`` or NOVA_MEMORY_LIMIT_MB.
MEMORY_LIMIT: list[int | None] = [int(config.MEMORY_LIMIT_MB.get() * 2**20)
                                  if config.MEMORY_LIMIT_MB.is_set() else None]


def nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def np_dtype(element_type: Any) -> np.dtype:
    """The numpy dtype of an MLIR element type."""
    return dt.from_mlir(nd.element_name(element_type)).np


def pointwise_inputs(plan: KernelPlan) -> frozenset[int]:
    """Positions of the inputs that a kernel reads only at the output's own index:
    every op downstream of the input is pointwise and shaped like the output. Its result
    may then be written over that input (element i is read before it is written, by the
    same thread, in the same vector lane). Kernels: elementwise ones, and a CPU product
    (``tiled``) whose K fits one block, which writes each element of C once, through its
    epilogue, after the whole product (with more K blocks, C holds partial sums first,
    and an input it overlaid would be lost before the epilogue read it); an input that
    is also an operand of the product is not pointwise (the walk meets the matmul)."""
    s = plan.schedule
    if plan.kind == "collective":     # the library reads and writes each element at its place
        return frozenset({0})
    single_block_product = (plan.kind == "matmul" and s.strategy == "tiled" and
                            len(s.loops) == 3 and s.kc >= s.loops[2])
    if plan.kind != "elementwise" and not single_block_product:
        return frozenset()
    out_type = plan.fusion.outputs[0].type
    found = []
    for i, arg in enumerate(plan.fusion.body.block.args):
        if arg.type != out_type:
            continue
        ok, frontier, seen = True, [u.operation for u in arg.uses], set()
        while frontier and ok:
            op = frontier.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            if isinstance(op, nd.YieldOp):
                continue
            if (not op.has_trait(nd.Elementwise)
                    or op.results[0].type.get_shape() != out_type.get_shape()):
                ok = False
            else:
                frontier += [u.operation for u in op.results[0].uses]
        if ok:
            found.append(i)
    return frozenset(found)


def collective_role(plan: KernelPlan) -> str:
    """"start" or "wait" for a collective kernel (which the schedule orders by it),
    else ""."""
    if plan.kind != "collective":
        return ""
    return "start" if isinstance(contraction(plan.fusion), nd.AllReduceStartOp) else "wait"


def plan_steps(steps: Sequence[Any], n_args: int, arg_types: Sequence[tuple[Any, Any]],
               outputs: tuple[int, ...], reorder: bool = True
               ) -> tuple[MemoryPlan, list[KernelUse]]:
    """The memory plan of ``steps`` (in program order); sets each step's ``donate``."""
    uses = [KernelUse(st.inputs, st.out, nbytes(st.shape, st.np_dtype),
                      nbytes(*st.scratch) if st.scratch else 0,
                      frozenset(st.inputs[i] for i in pointwise_inputs(st.plan)),
                      np.dtype(st.np_dtype).name, collective_role(st.plan))
            for st in steps]
    arg_dtypes = [np.dtype(np_dtype(t)).name for _, t in arg_types]
    arg_nbytes = [nbytes(s, np.dtype(d)) for (s, _), d in zip(arg_types, arg_dtypes)]
    plan = plan_memory(n_args, uses, outputs, arg_nbytes, arg_dtypes, reorder=reorder)
    for k, a in plan.donate.items():
        steps[k].donate = a
    return plan, uses


def report_steps(plan: MemoryPlan, steps: Sequence[Any], arg_types: Sequence[tuple[Any, Any]],
                 outputs: tuple[int, ...], arg_bytes: Sequence[int] | None,
                 roles: Sequence[str] | None, donated: frozenset[int]) -> MemoryReport:
    """The memory report of ``steps`` (in plan order) run with these arguments."""
    if arg_bytes is None:
        arg_bytes = [nbytes(s, np.dtype(np_dtype(t))) for s, t in arg_types]
    buffers = {st.out: Buffer(nbytes(st.shape, st.np_dtype), st.shape,
                              np.dtype(st.np_dtype).name, f"{st.plan.name} ({st.plan.kind})")
               for st in steps}
    return plan_report(plan, list(arg_bytes), list(roles or []), buffers, outputs,
                       {st.out for st in steps if st.donate in donated},
                       [is_backward(st.plan.fusion) for st in steps])


def allocate_arena(plan: MemoryPlan, report: MemoryReport, allocate: Callable[[int], Any],
                   oom_errors: tuple[type[BaseException], ...], what: str) -> Any:
    """``allocate(plan.arena_bytes)``, or ``NovaOutOfMemoryError`` naming the step
    (``what``), its report and the knobs that reduce it, when the planned peak exceeds
    ``MEMORY_LIMIT`` or the allocation fails."""
    limit = MEMORY_LIMIT[0]
    try:
        if limit is not None and report.peak_bytes > limit:
            raise MemoryError
        return allocate(max(plan.arena_bytes, 1))
    except oom_errors:
        where = (f"the memory limit of {limit / 2**20:.1f} MiB (nv.debug.set_memory_limit)"
                 if limit is not None else "the memory available")
        raise NovaOutOfMemoryError(
            f"nova: out of memory: the {what} needs {report.peak_bytes / 2**20:.1f} MiB, "
            f"more than {where}."
            f"\n{report}\nTo use less: nv.set_remat('aggressive') (recompute attention "
            "scores and MLP activations in the backward), a smaller batch or sequence, "
            "or a smaller model.") from None


def cut_arena(arena: Any, plan: MemoryPlan, steps: Sequence[Any]
              ) -> tuple[dict[int, Any], list[Any]]:
    """Each intermediate's view of the arena (by slot, in its step's ``storage`` dtype)
    and each step's scratch view (by position in plan order; None without scratch, an
    empty view for a scratch of no bytes)."""
    views = {st.out: _view(arena, plan.offsets[st.out], st.shape, st.storage)
             for st in steps if st.out in plan.offsets}
    scratch: list[Any] = [None] * len(steps)
    position = {k: p for p, k in enumerate(plan.order)}
    for k, off in plan.scratch_offsets.items():
        p = position[k]
        scratch[p] = _view(arena, off, *steps[p].scratch)
    for p, st in enumerate(steps):
        if st.scratch is not None and scratch[p] is None:
            # a scratch of no bytes (a size-0 dim) has no place in the plan: an empty view
            assert nbytes(*st.scratch) == 0, f"kernel {p}'s scratch has no arena offset"
            scratch[p] = _view(arena, 0, *st.scratch)
    return views, scratch


def _view(arena: Any, offset: int, shape: tuple[int, ...], dtype: Any) -> Any:
    n = nbytes(shape, dtype)
    return arena[offset:offset + n].view(dtype).reshape(shape)
