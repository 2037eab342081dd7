"""Anomaly detection for the backward pass (``torch.autograd.anomaly_mode``).

With anomaly mode on, the backward engine runs every GradFn's rule as written (never a
backward template) and, with ``check_nan``, realizes the gradients each rule returns
and raises ``RuntimeError("Function 'MulBackward' returned nan values in its 0th
output.")`` at the first that holds a NaN: Nova records the backward pass lazily, so
finding the op to blame means computing as the pass is recorded, one GradFn at a time
(slow, as PyTorch's check is; it is for debugging). A GradFn recorded while the mode is
on remembers the Python stack of the forward call that made it, and an error raised
while its rule runs (the NaN check's or the rule's own) is preceded by a warning
``"Error detected in MulBackward. Traceback of forward call that caused the error:"``
with that stack.

Off (the default) it costs nothing: the engine reads one flag per backward pass, and
the stack recording is installed only while the mode is on (``_install``): around
``GradFn.__init__``, and with function templates bypassed (a stamped call makes its
GradFns without ``__init__``). As in PyTorch the mode is one setting for the whole
process, not per thread.
"""
from __future__ import annotations

import functools
import os
import traceback
import warnings
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from nova.autograd import grad_mode, graph
from nova.autograd.rules import vjp
from nova.tensor import function_template, ops
from nova.tensor.realize import realize

F = TypeVar("F", bound=Callable[..., Any])


class _State:
    """The process-wide setting (``set_anomaly_enabled``)."""

    enabled = False
    check_nan = True


STATE = _State()

# The forward stack of each GradFn recorded while the mode was on.
_FORWARD_STACKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NOVA_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (``torch.is_anomaly_enabled``)."""
    return STATE.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks gradients for NaN
    (``torch.is_anomaly_check_nan_enabled``)."""
    return STATE.check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off (``torch.set_anomaly_enabled``)."""
    STATE.enabled = bool(enabled)
    STATE.check_nan = bool(check_nan)
    _install(STATE.enabled)


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on
    (``torch.autograd.detect_anomaly``): the backward pass names the GradFn whose rule
    failed, with the traceback of the forward call that recorded it, and with
    ``check_nan`` raises at the first gradient holding a NaN. Warns on creation that it
    slows the program down, as PyTorch does."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self._prev: list[tuple[bool, bool]] = []
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the "
                      "runtime and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self) -> None:
        self._prev.append((STATE.enabled, STATE.check_nan))
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *args: object) -> None:
        set_anomaly_enabled(*self._prev.pop())

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)
        return run  # type: ignore[return-value]


class set_detect_anomaly:
    """Set anomaly detection on or off (``torch.autograd.set_detect_anomaly``), at once
    as a function, or for a ``with`` block, restoring the previous setting at its
    end."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = (STATE.enabled, STATE.check_nan)
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *args: object) -> None:
        set_anomaly_enabled(*self.prev)


_GRADFN_INIT = graph.GradFn.__init__
_CALL_KEY = function_template.call_key


def _install(on: bool) -> None:
    """Record forward stacks (``on``) or stop, restoring exactly what was there."""
    graph.GradFn.__init__ = _recording_init if on else _GRADFN_INIT
    function_template.call_key = _no_template if on else _CALL_KEY


def _recording_init(self: graph.GradFn, *args: Any, **kwargs: Any) -> None:
    """``GradFn.__init__`` while the mode is on: the GradFn also remembers the stack
    that recorded it (its innermost frames, inside Nova, left out)."""
    _GRADFN_INIT(self, *args, **kwargs)
    stack = traceback.extract_stack()[:-1]
    while stack and stack[-1].filename.startswith(_NOVA_DIR):
        stack.pop()
    _FORWARD_STACKS[self] = stack


def _no_template(args: tuple, kwargs: dict) -> None:
    """``function_template.call_key`` while the mode is on: no call is stamped, so
    every GradFn is made by ``__init__`` (and records its stack)."""
    return None


def backward_name(fn: graph.GradFn) -> str:
    """The GradFn's name as errors give it: ``GradFn.name`` (PyTorch's, a custom
    Function's its class name and ``Backward``; a sampling op's recorded name already
    ends in it)."""
    return fn.name()


def checked_vjp(fn: graph.GradFn, g: Any, create_graph: bool) -> Any:
    """``rules.vjp`` under anomaly mode: the gradients checked for NaN (when asked),
    and an error on the way preceded by the forward stack's warning."""
    try:
        grads = vjp(fn, g, create_graph)
        if STATE.check_nan:
            _check_nan(fn, grads)
    except Exception:
        _warn_forward_stack(fn)
        raise
    return grads


def _check_nan(fn: graph.GradFn, grads: Any) -> None:
    """Realize ``grads`` (one step for all of them) and raise at the first with a NaN."""
    with grad_mode.no_grad():
        flags = [(i, ops.isnan(gi).any()) for i, gi in enumerate(grads)
                 if gi is not None and gi.dtype.is_floating_point]
    if not flags:
        return
    realize(*[f for _, f in flags])
    for i, flag in flags:
        if flag.item():
            raise RuntimeError(f"Function '{backward_name(fn)}' returned nan values in its "
                               f"{i}th output.")


def _warn_forward_stack(fn: graph.GradFn) -> None:
    stack = _FORWARD_STACKS.get(fn)
    name = backward_name(fn)
    if stack is None:
        warnings.warn(f"Error detected in {name}. No forward pass information available. "
                      "Enable detect anomaly during forward pass for more information.",
                      stacklevel=2)
        return
    warnings.warn(f"Error detected in {name}. Traceback of forward call that caused the "
                  f"error:\n{''.join(traceback.format_list(stack))}", stacklevel=2)


__all__ = ["detect_anomaly", "is_anomaly_check_nan_enabled", "is_anomaly_enabled",
           "set_anomaly_enabled", "set_detect_anomaly"]
