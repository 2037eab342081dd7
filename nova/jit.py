"""``torch.jit``'s decorators, for code that applies them: Nova compiles whole training
steps (``nv.compile``), so ``script`` and ``trace`` return what they are given, and the
markers (``ignore``, ``unused``, ``export``) leave functions as they are.
``is_scripting()`` and ``is_tracing()`` are False, as in eager PyTorch. Saving a
TorchScript archive (``save``, ``load``) is not provided: save a ``state_dict``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def script(obj: Any, *args: Any, **kwargs: Any) -> Any:
    return obj


def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    return func


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """``@ignore`` or ``@ignore(drop=True)``: the function unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    return fn


def export(fn: Callable) -> Callable:
    return fn


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def save(*args: Any, **kwargs: Any) -> None:
    raise NotImplementedError("jit.save: Nova has no TorchScript archives; save the "
                              "state_dict with nv.save(model.state_dict(), path)")


def load(*args: Any, **kwargs: Any) -> None:
    raise NotImplementedError("jit.load: Nova has no TorchScript archives; load a "
                              "state_dict with nv.load(path)")


__all__ = ["script", "trace", "ignore", "unused", "export", "is_scripting", "is_tracing",
           "save", "load"]
