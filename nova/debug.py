"""Inspection helpers: ``nv.debug.dump_ir`` and ``nv.debug.cache_stats``."""
from __future__ import annotations

import copy

from nova.compiler.irgen import build_module
from nova.compiler.passes import simplify
from nova.runtime.cache import CACHE, CacheStats
from nova.tensor.realize import pending_graph
from nova.tensor.tensor import Tensor

STAGES = ("trace", "nova")


def dump_ir(*tensors: Tensor, stage: str = "nova") -> str:
    """The verified ``func.func @step`` that would compute ``tensors``, as MLIR text.

    ``stage="trace"`` is the function exactly as recorded; ``"nova"`` (the default) is
    after CSE and DCE, the form the engines run. Nothing runs. Later stages
    (``"fused"``, ...) arrive with the passes that produce them.
    """
    if stage not in STAGES:
        raise ValueError(f"dump_ir: unknown stage {stage!r}; available stages are {STAGES}")
    if not tensors:
        raise ValueError("dump_ir: give at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"dump_ir: expected tensors, got {type(t).__name__}")
    module = build_module(pending_graph(*tensors))
    return str(module if stage == "trace" else simplify(module))


def cache_stats() -> CacheStats:
    """A snapshot of the executable cache: hits, misses and, per miss, its reason."""
    return copy.deepcopy(CACHE.stats)


def reset_cache() -> None:
    """Forget every compiled step function and the statistics."""
    CACHE.clear()
