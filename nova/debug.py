"""Inspection helpers: ``nv.debug.dump_ir`` and ``nv.debug.cache_stats``."""
from __future__ import annotations

import copy

from nova.compiler.irgen import build_module
from nova.runtime.cache import CACHE, CacheStats
from nova.tensor.realize import pending_graph
from nova.tensor.tensor import Tensor

STAGES = ("nova",)


def dump_ir(*tensors: Tensor, stage: str = "nova") -> str:
    """The verified ``func.func @step`` that would compute ``tensors``, as MLIR text.

    Nothing runs. Later compiler stages (``stage="fused"``, ...) arrive with the passes
    that produce them.
    """
    if stage not in STAGES:
        raise ValueError(f"dump_ir: unknown stage {stage!r}; available stages are {STAGES}")
    if not tensors:
        raise ValueError("dump_ir: give at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"dump_ir: expected tensors, got {type(t).__name__}")
    return str(build_module(pending_graph(*tensors)))


def cache_stats() -> CacheStats:
    """A snapshot of the executable cache: hits, misses and, per miss, its reason."""
    return copy.deepcopy(CACHE.stats)


def reset_cache() -> None:
    """Forget every compiled step function and the statistics."""
    CACHE.clear()
