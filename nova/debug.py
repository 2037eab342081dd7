"""Inspection helpers: ``nv.debug.dump_ir`` and ``nv.debug.cache_stats``."""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field

from nova.compiler.mlir_text import generic_text
from nova.compiler.pipeline import STAGES, CompiledStep, compile_step, front, stages
from nova.runtime.cache import CACHE, CacheStats
from nova.runtime.cpu_engine import PROFILE, debug_files
from nova.runtime.debug_dir import (  # noqa: F401 (nv.debug.UnsafeDirectoryError)
    UnsafeDirectoryError, debug_directory, write_debug_file)
from nova.runtime.engine import get_remat
from nova.runtime.launch_graph import COUNTS
from nova.runtime.program import PlannedOnly
from nova.runtime.step_memory import nbytes
from nova.tensor.realize import pending_graph, role_of_node
from nova.tensor.tensor import Tensor


def dump_ir(*tensors: Tensor, stage: str = "nova", generic: bool = False) -> str:
    """The verified ``func.func @step`` that would compute ``tensors``, as MLIR text.

    ``stage="trace"`` is the function exactly as recorded; ``"nova"`` (the default) is
    after CSE, DCE and rematerialization (``nv.set_remat``), the form the engines run;
    ``"fused"`` groups it into the ``nova.fusion`` kernels the cpu engine compiles,
    followed by each kernel's loop plan. The stages are those of
    ``nova.compiler.pipeline``; nothing runs. ``generic=True`` prints MLIR's generic op
    form, which upstream MLIR parses (``nv.export.mlir``; a fused step then has no loop
    plans appended).
    """
    if stage not in STAGES:
        raise ValueError(f"dump_ir: unknown stage {stage!r}; available stages are {STAGES}")
    _check_tensors("dump_ir", tensors)
    for name, result in stages(pending_graph(*tensors), get_remat()):
        if name == stage:
            if generic:
                return generic_text(result.fused if isinstance(result, CompiledStep)
                                    else result)
            return result.text() if isinstance(result, CompiledStep) else str(result)
    raise AssertionError(f"dump_ir: the pipeline has no stage {stage!r}")


def dump(directory: str, *tensors: Tensor) -> list[str]:
    """Write the nova IR, the fused IR with loop plans, and the LLVM IR of every kernel
    of the step that would compute ``tensors`` into ``directory``; returns the paths.
    The directory is created if missing and refused (``UnsafeDirectoryError``) if it is a
    symbolic link or another user's; files replace links planted at their paths."""
    _check_tensors("dump", tensors)
    directory = debug_directory(directory)
    module = front(pending_graph(*tensors), get_remat())
    files = debug_files(module, compile_step(module, "cpu"))
    return [write_debug_file(directory, name, text) for name, text in files.items()]


def _check_tensors(op: str, tensors: tuple) -> None:
    if not tensors:
        raise ValueError(f"{op}: give at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(t).__name__}")


@dataclass
class Profile:
    """Per-kernel times of the steps run inside ``with nv.debug.profile() as p``."""

    steps: list[list[tuple[str, str, float]]] = field(default_factory=list)

    def total(self) -> float:
        return sum(t for step in self.steps for _, _, t in step)

    def report(self, top: int = 15) -> str:
        agg: dict[str, list] = {}
        for step in self.steps:
            for _, desc, t in step:     # by plan: a flat kernel's sizes share its name
                agg.setdefault(desc, [desc, 0.0, 0])
                agg[desc][1] += t
                agg[desc][2] += 1
        rows = sorted(agg.values(), key=lambda r: -r[1])
        total = self.total() or 1.0
        lines = [f"nova profile: {len(self.steps)} step run(s), {total * 1e3:.2f} ms in "
                 f"{sum(len(s) for s in self.steps)} kernel calls"]
        lines += [f"  {t * 1e3:8.3f} ms {100 * t / total:5.1f}%  x{n:<3d} {desc}"
                  for desc, t, n in rows[:top]]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


@contextlib.contextmanager
def profile() -> Iterator[Profile]:
    """Time every compiled kernel run inside the block (cpu engine)."""
    prof = Profile()
    step: list = []
    token = PROFILE.set(step)      # this thread's kernels only
    try:
        yield prof
    finally:
        PROFILE.reset(token)
        if step:
            prof.steps.append(step)


def memory_report(*tensors: Tensor):
    """The memory report of the step realized last (cpu engine): peak bytes, arguments,
    results, live intermediates at the peak and the largest of them.

    With ``tensors``: the report of the step that would compute them (exactly them, as
    ``dump_ir``), planned for the CPU but neither compiled nor run -- what a step needs
    before it exists. Arguments are counted at their current sizes, and every argument
    the step could write its results over is taken as donated, as in a training loop
    that keeps no other reference to its parameters and optimizer state."""
    if tensors:
        _check_tensors("memory_report", tensors)
        graph = pending_graph(*tensors)
        program = PlannedOnly(front(graph, get_remat()))
        arg_bytes = [nbytes(shape, dtype.np) for shape, dtype in graph.args]
        roles = [role_of_node(n) for n in graph.arg_nodes]
        return program.memory_report(arg_bytes, roles, program.donation_candidates)
    if CACHE.last is None:
        raise ValueError("memory_report: nothing has been realized yet")
    return CACHE.last.memory_report()


def set_memory_limit(nbytes: int | None) -> None:
    """Refuse (with ``NovaOutOfMemoryError`` and the plan's report) any step whose planned
    peak exceeds ``nbytes``; ``None`` removes the limit. Applies to steps compiled later
    and to steps that have not run yet."""
    from nova.runtime.step_memory import MEMORY_LIMIT
    if nbytes is not None and (not isinstance(nbytes, int) or nbytes <= 0):
        raise ValueError(f"set_memory_limit: expected a positive number of bytes or None, "
                         f"got {nbytes!r}")
    MEMORY_LIMIT[0] = nbytes


def set_step_cache_limit(nbytes: int) -> None:
    """Bound the memory of the compiled steps kept for replay to ``nbytes``: each step is
    charged its arena, its IR (~4 KB per op) and its kernels' code (~8 KB per kernel);
    the least recently used beyond the limit are dropped -- with them their IR and the
    code of kernels no kept step uses -- and compile again if they come back (their
    kernels from the disk cache when there). The four most recent are always kept.
    Default: ``NOVA_STEP_CACHE_MB`` (1024 MiB). Compiling itself leaves no memory
    behind: LLVM's optimizer runs in a worker process, replaced once it passes
    ``NOVA_COMPILE_WORKER_MB`` (256 MiB); ``NOVA_COMPILE_WORKER=0`` compiles in this
    process, where llvmlite keeps ~100-200 KB per kernel compiled.
    ``cache_stats().bytes`` is what the kept steps are charged."""
    CACHE.set_limit(nbytes)


def cache_stats() -> CacheStats:
    """A snapshot of the executable cache: hits, misses and, per miss, its reason."""
    stats = copy.deepcopy(CACHE.stats)
    stats.graph_captures, stats.graph_replays = COUNTS.captures, COUNTS.replays
    stats.graph_without = list(COUNTS.without)
    return stats


def reset_cache() -> None:
    """Forget every compiled step function and the statistics."""
    CACHE.clear()
    COUNTS.reset()
