"""Whether ops record autograd history (``nv.no_grad``, ``nv.enable_grad``).

Grad mode is per thread, as in PyTorch: ``no_grad`` in one thread never turns history
off for ops another thread records, and every new thread starts with history on. It is
a ``threading.local`` (not a ``ContextVar``) because every recorded op reads it:
``STATE.enabled`` is one C-level attribute lookup.

It lives in ``nova.tensor`` (not ``nova.autograd``) because recording reads it: the op
front end decides here whether to keep a tape record, and ``nova.autograd`` sits above
``nova.tensor`` and re-exports these names (``nova.autograd.grad_mode``)."""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable


class _State(threading.local):
    """``STATE.enabled``: this thread's grad mode (the class attribute is every new
    thread's start)."""

    enabled = True


STATE = _State()


def is_grad_enabled() -> bool:
    return STATE.enabled


class set_grad_enabled:
    """Context manager (and decorator) setting grad mode, as ``torch.set_grad_enabled``."""

    def __init__(self, mode: bool):
        self.prev = STATE.enabled
        self.mode = bool(mode)
        STATE.enabled = self.mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self.prev


class _GradModeContext:
    mode: bool

    def __enter__(self) -> None:
        self.prev = STATE.enabled
        STATE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self.prev

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Ops inside record no autograd history (optimizer updates, evaluation)."""

    mode = False


class enable_grad(_GradModeContext):
    """Re-enable history inside a ``no_grad`` block."""

    mode = True
