"""``torch.utils.checkpoint``: activation checkpointing, which Nova's compiler does for
the whole step.

PyTorch's ``checkpoint(fn, *args)`` drops ``fn``'s intermediate values in the forward
and recomputes them in the backward, trading compute for memory. Nova compiles the
forward, the backward and the update as one function and chooses what to keep and what
to recompute across all of it (rematerialization: ``nv.set_remat("default" |
"aggressive" | "off")``, README "Memory"), so these functions run ``fn`` as written: the
values and gradients are the same, and the memory is what the step's remat mode makes
of it. ``nv.set_remat("aggressive")`` is the closest to checkpointing every segment.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = None,
               context_fn: Any = None, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` (see the module docstring); PyTorch's keyword
    arguments are accepted."""
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got "
                        f"{type(function).__name__}")
    return function(*args, **kwargs)


def checkpoint_sequential(functions: Any, segments: int, input: Any,
                          use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """The modules (or functions) of ``functions`` applied in order to ``input``
    (``torch.utils.checkpoint.checkpoint_sequential``; ``segments`` must be a positive
    int, as there)."""
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got "
                         f"{segments!r}")
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    out = input
    for fn in functions if isinstance(functions, Sequence) else list(functions):
        out = fn(out)
    return out


__all__ = ["checkpoint", "checkpoint_sequential"]
