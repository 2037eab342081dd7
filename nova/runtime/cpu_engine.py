"""The ``cpu`` engine: a step function fused, lowered, compiled by LLVM and replayed.

``CpuProgram`` turns a verified nova module into a list of compiled kernels with the
slots they read and write. Replay allocates each kernel's output, calls the kernel on
one or more threads, and drops every buffer after its last reader, so peak memory
follows liveness. (Arena planning and donation are the memory-planning issue's.)
"""
from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from nova.compiler.lowering.plan import KernelPlan, plan_kernels
from nova.compiler.passes.fusion import fuse
from nova.runtime import threads
from nova.runtime.buffer_pool import BufferPool
from nova.runtime.memory_report import Buffer, MemoryReport, liveness_report
from nova.runtime.interpreter import InterpreterError, affected_outputs, run_region
from nova.runtime.kernel_cache import KERNELS, KernelFn


# The active ``nv.debug.profile()`` collector, if any: (kernel, description, seconds).
PROFILE: list[list[tuple[str, str, float]]] = []


@dataclass
class Step:
    plan: KernelPlan
    fn: KernelFn
    inputs: tuple[int, ...]
    out: int
    shape: tuple[int, ...]
    np_dtype: np.dtype
    scratch: tuple[tuple[int, ...], np.dtype] | None
    work: int


class CpuProgram:
    """A compiled step: ``run(args) -> outputs`` like the interpreter's Program."""

    def __init__(self, module: ModuleOp):
        self.fused = fuse(module)
        self.plans = plan_kernels(self.fused)
        if os.environ.get("NOVA_DEBUG") == "1":
            self._write_debug(module)
        fn = next(op for op in self.fused.ops if isinstance(op, func.FuncOp))
        slot = {a: i for i, a in enumerate(fn.body.block.args)}
        self.n_args = len(slot)
        self.steps: list[Step] = []
        fusions = [op for op in fn.body.block.ops if op.name == "nova.fusion"]
        for plan, op in zip(self.plans, fusions):
            out = len(slot)
            slot[op.results[0]] = out
            shape, dtype = plan.out
            work = 1
            for n in plan.schedule.loops:
                work *= n
            scratch = (plan.scratch[0], plan.scratch[1].np) if plan.scratch else None
            self.steps.append(Step(plan, KERNELS.get(plan), tuple(slot[v] for v in op.inputs),
                                   out, shape, dtype.np, scratch, work))
        self.outputs = tuple(slot[v] for v in fn.body.block.last_op.operands)
        self._pool = BufferPool()
        last_use: dict[int, int] = {}
        for k, st in enumerate(self.steps):
            for i in st.inputs:
                last_use[i] = k
        keep = set(self.outputs)
        self.release: list[list[int]] = [[] for _ in self.steps]
        for s, k in last_use.items():
            if s not in keep and s >= self.n_args:
                self.release[k].append(s)

    _debug_count = 0

    def _write_debug(self, module: ModuleOp) -> None:
        """NOVA_DEBUG=1: write the nova IR, fused IR and LLVM IR of this step."""
        CpuProgram._debug_count += 1
        root = os.environ.get("NOVA_DEBUG_DIR") or os.path.join(tempfile.gettempdir(),
                                                                "nova-debug")
        directory = os.path.join(root, f"step-{os.getpid()}-{CpuProgram._debug_count}")
        os.makedirs(directory, exist_ok=True)
        plans = "\n".join(f"// {p.describe()}" for p in self.plans)
        for name, text in (("step.nova.mlir", str(module)),
                           ("step.fused.mlir", f"{self.fused}\n{plans}"),
                           ("step.ll", "\n".join(KERNELS.llvm_ir(p) for p in self.plans))):
            with open(os.path.join(directory, name), "w") as f:
                f.write(text)
        print(f"nova: NOVA_DEBUG wrote {directory}", file=sys.stderr)

    def memory_report(self, arg_bytes: Sequence[int]) -> MemoryReport:
        """Peak memory of this step from liveness over its kernels (see memory_report)."""
        steps = [(st.inputs, st.out, Buffer(int(np.prod(st.shape, dtype=np.int64)) *
                                            np.dtype(st.np_dtype).itemsize, st.shape,
                                            np.dtype(st.np_dtype).name,
                                            f"{st.plan.name} ({st.plan.kind})"))
                 for st in self.steps]
        return liveness_report(list(arg_bytes), steps, self.release, self.outputs)

    @property
    def num_kernels(self) -> int:
        return len(self.steps)

    def _call(self, k: int, st: Step, bufs: list[np.ndarray]) -> None:
        ptrs = (ctypes.c_void_p * len(bufs))(*[b.__array_interface__["data"][0] for b in bufs])
        ranges = threads.chunks(st.plan.schedule.parallel_extent, st.work)
        if len(ranges) == 1:
            rc = st.fn(ptrs, 0, ranges[0][1])
        else:
            pool = threads.pool()
            futures = [pool.submit(st.fn, ptrs, a, b) for a, b in ranges[1:]]
            rc = st.fn(ptrs, ranges[0][0], ranges[0][1])
            rc = max([rc] + [f.result() for f in futures])
        if rc:
            affected = affected_outputs([s.inputs for s in self.steps],
                                        [s.out for s in self.steps], self.outputs, k)
            try:  # the interpreter, which defines the ops, says precisely what went wrong
                run_region(st.plan.fusion.body.block, bufs[:len(st.inputs)])
            except InterpreterError as e:
                raise InterpreterError(f"{e} (in kernel {st.plan.name})", affected) from None
            raise InterpreterError(f"kernel {st.plan.name} ({st.plan.kind}) reported an index "
                                   "out of range or an integer division by zero", affected)

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        values: list[np.ndarray | None] = [np.ascontiguousarray(a) for a in args]
        blocks: list[np.ndarray | None] = [None] * len(values)
        keep = set(self.outputs)
        timing = bool(PROFILE)
        pool = self._pool
        for k, st in enumerate(self.steps):
            if st.out in keep:   # results escape to tensors: never recycled
                out, block = np.empty(st.shape, dtype=st.np_dtype), None
            else:
                out, block = pool.take(st.shape, st.np_dtype)
            bufs = [values[i] for i in st.inputs] + [out]
            scratch_block = None
            if st.scratch is not None:
                scratch, scratch_block = pool.take(*st.scratch)
                bufs.append(scratch)
            t0 = time.perf_counter() if timing else 0.0
            self._call(k, st, bufs)
            if timing:
                PROFILE[-1].append((st.plan.name, st.plan.describe(), time.perf_counter() - t0))
            values.append(out)
            blocks.append(block)
            if scratch_block is not None:
                pool.give(scratch_block)
            for i in self.release[k]:
                values[i] = None
                if blocks[i] is not None:
                    pool.give(blocks[i])
                    blocks[i] = None
        return [values[i] for i in self.outputs]
