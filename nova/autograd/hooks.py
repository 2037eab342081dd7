"""Gradient hooks on tensors: ``Tensor.register_hook`` and
``register_post_accumulate_grad_hook``, as PyTorch's.

A hook is called with the gradient of its tensor while the backward pass is recorded
(``hook(grad)``; a returned tensor replaces the gradient from there on). For a
non-leaf it sees the total gradient reaching the tensor, before it flows on to the
tensor's inputs; for a leaf, the total this pass delivers, before it is accumulated
into ``.grad`` (so it can rescale or clip what ``.grad`` receives). A post-accumulate
hook is called with the leaf itself once its ``.grad`` holds the pass's sum.

Hooks live on what they hang on -- the tensor's GradFn for a non-leaf, the tensor for
a leaf -- so they keep nothing alive beyond it and cost nothing on the recording path
of programs without hooks. A
backward over hooked tensors is recorded as written (never stamped from a template:
the hooks must run), and inside ``nv.compile`` it makes the call record every time,
since a replay would not run the hooks.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from nova.tensor import capture_log
from nova.tensor.tensor import Tensor
from nova.core.hooks import RemovableHandle

# Hooks live on their owner (``_grad_hooks``/``_post_hooks``: slots of GradFn and
# Tensor, unset until a hook is registered), so a hook that refers to its own tensor
# makes a cycle the collector frees, never a leak through a global table. This table
# only says which owners have had hooks (weakly), for ``any_hooks``.
_OWNERS: dict[int, weakref.ref] = {}


def _add(kind: str, owner: Any, hook: Callable) -> RemovableHandle:
    table = getattr(owner, kind, None)
    if table is None:
        table = {}
        setattr(owner, kind, table)
    key = id(owner)
    if key not in _OWNERS or _OWNERS[key]() is not owner:
        def forget(ref: weakref.ref, key: int = key) -> None:
            if _OWNERS.get(key) is ref:
                del _OWNERS[key]
        _OWNERS[key] = weakref.ref(owner, forget)
    handle = RemovableHandle(lambda hook_id: table.pop(hook_id, None))
    table[handle.id] = hook
    return handle


def _hooks(kind: str, owner: Any) -> list[Callable]:
    table = getattr(owner, kind, None)
    return list(table.values()) if table else []


def register_hook(tensor: Tensor, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
    """``Tensor.register_hook``: call ``hook(grad)`` with this tensor's gradient in every
    later backward through it (see the module docstring)."""
    if not callable(hook):
        raise TypeError(f"register_hook: hook must be callable, got {type(hook).__name__}")
    if not tensor.requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't "
                           "require gradient")
    owner = tensor._grad_fn if tensor._grad_fn is not None else tensor
    return _add("_grad_hooks", owner, hook)


def register_post_accumulate_grad_hook(tensor: Tensor, hook: Callable[[Tensor], None]
                                       ) -> RemovableHandle:
    """``Tensor.register_post_accumulate_grad_hook``: call ``hook(tensor)`` after a
    backward has accumulated into this leaf's ``.grad``."""
    if not callable(hook):
        raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got "
                        f"{type(hook).__name__}")
    if tensor._grad_fn is not None or not tensor.requires_grad:
        raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors that "
                           "require grad take post-accumulate-grad hooks")
    return _add("_post_hooks", tensor, hook)


def any_hooks() -> bool:
    return bool(_OWNERS)


def hooked(owner: Any) -> bool:
    """Whether ``owner`` (a GradFn or a leaf) has a gradient or post-accumulate hook."""
    return bool(getattr(owner, "_grad_hooks", None) or getattr(owner, "_post_hooks", None))


def run_grad_hooks(owner: Any, grad: Tensor) -> Tensor:
    """``grad`` through the hooks on ``owner``, in registration order."""
    hooks = _hooks("_grad_hooks", owner)
    if hooks:
        capture_log.refuse("a tensor hook ran during backward (a replay would not run it)")
    for hook in hooks:
        out = hook(grad)
        if out is not None:
            if not isinstance(out, Tensor) or out.shape != grad.shape:
                raise RuntimeError(
                    f"hook {getattr(hook, '__name__', hook)!r} returned "
                    f"{getattr(out, 'shape', type(out).__name__)} for a gradient of shape "
                    f"{grad.shape}; a hook must return None or a tensor of that shape")
            grad = out
    return grad


def run_post_accumulate_hooks(leaf: Tensor) -> None:
    hooks = _hooks("_post_hooks", leaf)
    if hooks:
        capture_log.refuse("a post-accumulate-grad hook ran during backward")
    for hook in hooks:
        hook(leaf)
