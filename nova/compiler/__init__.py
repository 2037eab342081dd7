"""The compiler: the nova dialect, IR construction, passes, lowering and codegen.

Also ``torch.compiler``'s questions for user code (``nv.compiler.is_compiling()``,
``nv.compiler.disable``), which read the state ``nv.compile`` keeps in
``nova.core.compiling`` (this package never imports the tensor layer).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from nova.core import compiling as _compiling

__all__ = ["disable", "is_compiling", "is_dynamo_compiling", "is_exporting"]


def is_compiling() -> bool:
    """True while ``nv.compile`` records a call of the function it compiles (inside that
    call, in the calling thread), else False -- ``torch.compiler.is_compiling()``.

    A recorded call is what a replay repeats without its Python, so code can skip
    work there that only eager runs need (``if not nv.compiler.is_compiling():
    print(loss.item())``; a host read while recording would make every call run
    recorded). Replays run no Python, so nothing asks them; a function ``nv.compile``
    gave up on (it runs recorded every call, with a ``RecompileWarning``) runs as plain
    Python, where this is False, as in PyTorch's eager fallback."""
    return _compiling.RECORDING.get() is not None


def is_dynamo_compiling() -> bool:
    """``torch.compiler.is_dynamo_compiling()``: Nova's ``nv.compile`` is the only
    tracer, so this is ``is_compiling()``."""
    return is_compiling()


def is_exporting() -> bool:
    """False: ``nv.export`` writes a realized step's IR; it does not trace Python."""
    return False


def disable(fn: Callable | None = None, recursive: bool = True, *,
            reason: str | None = None) -> Any:
    """``torch.compiler.disable``: ``fn`` runs as Python on every call, never replayed.

    As decorator (``@nv.compiler.disable``, ``@nv.compiler.disable(reason=...)``) or
    call. ``nv.compile`` replays whole functions, so a compiled function that calls a
    disabled one cannot be replayed: its recorded call is refused (naming ``fn`` and
    ``reason``), and it runs recorded every call with one ``RecompileWarning`` --
    ``fullgraph=True`` raises ``CaptureError`` instead, where PyTorch raises at the
    graph break. Inside ``fn``, ``is_compiling()`` is False, as in PyTorch.
    ``recursive=False`` (PyTorch still compiles the functions ``fn`` calls) behaves the
    same: nothing inside ``fn`` is replayed. An ``nn.Module`` gets its ``forward``
    wrapped in place and is returned."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if not callable(fn):
        raise AssertionError(f"A callable function is expected, but {type(fn)} is provided.")
    forward = getattr(fn, "forward", None)
    if isinstance(fn, type) or forward is None or not callable(forward) or \
            not hasattr(fn, "_parameters"):
        return _disabled(fn, reason)
    object.__setattr__(fn, "forward", _disabled(forward, reason))   # a module
    return fn


def _disabled(fn: Callable, reason: str | None) -> Callable:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        refuse = _compiling.RECORDING.get()
        if refuse is None:
            return fn(*args, **kwargs)
        refuse(f"it calls {name}, which nv.compiler.disable keeps out of compiled "
               f"replays" + (f" ({reason})" if reason else ""))
        token = _compiling.RECORDING.set(None)     # eager inside, as in PyTorch
        try:
            return fn(*args, **kwargs)
        finally:
            _compiling.RECORDING.reset(token)

    run._nova_disabled = True          # type: ignore[attr-defined]
    return run
