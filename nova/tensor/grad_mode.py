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
    inference = False       # inside an ``inference_mode`` block


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


class inference_mode(_GradModeContext):
    """``torch.inference_mode``: no autograd history inside (``mode=False``: grad mode
    left as it is). Also a decorator, with or without the call (``@nv.inference_mode``).
    Deviation: Nova's tensors made inside are ordinary tensors (PyTorch's "inference
    tensors" refuse to join autograd later); they cost nothing extra either way, since a
    recorded op without history is all that ``inference_mode`` saves in PyTorch."""

    def __new__(cls, mode: Any = True):
        if callable(mode):                    # bare ``@nv.inference_mode``
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: Any = True):
        self.enabled = bool(mode)

    def __enter__(self) -> None:
        self.prev, self.prev_inference = STATE.enabled, STATE.inference
        if self.enabled:
            STATE.enabled, STATE.inference = False, True

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled, STATE.inference = self.prev, self.prev_inference

    def __call__(self, fn: Callable) -> Callable:
        enabled = self.enabled

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(enabled):
                return fn(*args, **kwargs)
        return wrapper


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside an ``inference_mode`` block."""
    return STATE.inference

