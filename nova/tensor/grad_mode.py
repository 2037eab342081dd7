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
import inspect
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


def _decorate(fn: Callable, make_ctx: Callable[[], Any]) -> Callable:
    """``fn`` run inside a fresh ``make_ctx()`` on every call. A generator function's
    body runs inside the mode on every resume (``next``/``send``/``throw``/``close``)
    and the caller's mode is back between yields, as ``torch``'s ``_wrap_generator``:
    entering the mode only while the generator object is made would leave its body
    -- which runs later, at each ``next`` -- outside it."""
    if not callable(fn):
        raise TypeError(f"grad mode decorator: expected a function, got "
                        f"{type(fn).__name__} {fn!r}")
    if inspect.isgeneratorfunction(fn):
        return _decorate_generator(fn, make_ctx)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with make_ctx():
            return fn(*args, **kwargs)
    return wrapper


def _decorate_generator(fn: Callable, make_ctx: Callable[[], Any]) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with make_ctx():
            gen = fn(*args, **kwargs)
        try:
            with make_ctx():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with make_ctx():
                        gen.close()
                    raise
                except BaseException as exc:
                    with make_ctx():
                        response = gen.throw(exc)
                else:
                    with make_ctx():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value
    return wrapper


class set_grad_enabled:
    """Context manager (and decorator) setting grad mode, as ``torch.set_grad_enabled``:
    calling it sets the mode at once (``nv.set_grad_enabled(False)`` as a statement), a
    ``with`` block restores the previous mode on exit, and ``@nv.set_grad_enabled(m)``
    restores the mode the call changed and runs the function under ``m`` instead."""

    def __init__(self, mode: bool):
        self.prev = STATE.enabled
        self.mode = bool(mode)
        STATE.enabled = self.mode

    def __enter__(self) -> None:
        STATE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self.prev

    def __call__(self, fn: Callable) -> Callable:
        STATE.enabled = self.prev       # the decorator line must not change the mode
        mode = self.mode
        return _decorate(fn, lambda: _SetGradMode(mode))


class _SetGradMode:
    """``set_grad_enabled``'s mode for one call of a decorated function (entering
    sets it, unlike constructing ``set_grad_enabled``)."""

    def __init__(self, mode: bool):
        self.mode = mode

    def __enter__(self) -> None:
        self.prev = STATE.enabled
        STATE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self.prev


class _GradModeContext:
    """``no_grad``/``enable_grad``: context managers and decorators, with or without
    the call (``@nv.no_grad`` as well as ``@nv.no_grad()``, as torch 2.x)."""

    mode: bool

    def __new__(cls, orig_func: Callable | None = None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)            # bare ``@nv.no_grad``

    def __enter__(self) -> None:
        self.prev = STATE.enabled
        STATE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self.prev

    def __call__(self, fn: Callable) -> Callable:
        return _decorate(fn, type(self))


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
        return object.__new__(cls)

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
        return _decorate(fn, lambda: inference_mode(enabled))


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside an ``inference_mode`` block."""
    return STATE.inference

