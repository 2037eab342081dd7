"""Whether ops record autograd history (``nv.no_grad``, ``nv.enable_grad``)."""
from __future__ import annotations

import functools
from typing import Any, Callable


class _State:
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
