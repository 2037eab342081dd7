"""Gradient hooks on tensors (``Tensor.register_hook`` and
``register_post_accumulate_grad_hook``) and on graph nodes (``grad_fn.register_hook``
and ``register_prehook``, on a GradFn or an ``AccumulateGrad``), as PyTorch's.

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

Node hooks: a pre-hook is called ``hook(grad_outputs)`` (a 1-tuple: every Nova record
has one output) after the tensor hooks of the node's output and before its rule, and
may return a replacement tuple; a post hook is called ``hook(grad_inputs,
grad_outputs)`` with the rule's gradients (one per input, None where none flows) and
may return replacements. An ``AccumulateGrad`` node is a view of its leaf
(``nova.tensor.tape``), so its hooks are the leaf's tensor hooks: a pre-hook gets
``(grad,)`` and may replace it, a post hook gets ``((), (grad,))`` before the
gradient is accumulated (PyTorch calls it after; it cannot change anything either way).
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from nova.tensor import capture_log
from nova.tensor.tape import AccumulateGrad, GradFn
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


def _check_callable(op: str, hook: Any) -> None:
    if not callable(hook):
        raise TypeError(f"{op}: hook must be callable, got {type(hook).__name__}")


def _hook_name(hook: Callable) -> str:
    return repr(getattr(hook, "__name__", hook))


def _replacement(owner: str, hook: Callable, got: Any, like: tuple) -> tuple | None:
    """A node hook's result: None, or a tuple as long as ``like`` of tensors shaped as
    its entries (or None)."""
    if got is None:
        return None
    if not isinstance(got, (tuple, list)) or len(got) != len(like):
        raise RuntimeError(f"{owner}: hook {_hook_name(hook)} returned {got!r}; a node hook "
                           f"must return None or a tuple of {len(like)} gradients")
    for new, old in zip(got, like):
        if new is not None and (not isinstance(new, Tensor) or
                                (old is not None and new.shape != old.shape)):
            raise RuntimeError(
                f"{owner}: hook {_hook_name(hook)} returned "
                f"{getattr(new, 'shape', type(new).__name__)} for a gradient of shape "
                f"{getattr(old, 'shape', None)}; it must return None or tensors of those "
                "shapes")
    return tuple(got)


def register_node_prehook(fn: GradFn, hook: Callable[[tuple], tuple | None]
                          ) -> RemovableHandle:
    """``grad_fn.register_prehook``: call ``hook(grad_outputs)`` before this node's rule
    in every later backward through it (see the module docstring)."""
    _check_callable("register_prehook", hook)
    return _add("_node_prehooks", fn, hook)


def register_node_hook(fn: GradFn, hook: Callable[[tuple, tuple], tuple | None]
                       ) -> RemovableHandle:
    """``grad_fn.register_hook``: call ``hook(grad_inputs, grad_outputs)`` after this
    node's rule in every later backward through it (see the module docstring)."""
    _check_callable("register_hook", hook)
    return _add("_node_hooks", fn, hook)


def register_accumulate_prehook(node: AccumulateGrad, hook: Callable[[tuple], tuple | None]
                                ) -> RemovableHandle:
    """``AccumulateGrad.register_prehook``: ``hook((grad,))`` on the gradient about to
    be accumulated into the leaf (a tensor hook of the leaf)."""
    _check_callable("register_prehook", hook)

    def as_tensor_hook(grad: Tensor) -> Tensor | None:
        got = _replacement("AccumulateGrad", hook, hook((grad,)), (grad,))
        return None if got is None else got[0]
    return _add("_grad_hooks", node.variable, as_tensor_hook)


def register_accumulate_hook(node: AccumulateGrad, hook: Callable[[tuple, tuple], None]
                             ) -> RemovableHandle:
    """``AccumulateGrad.register_hook``: ``hook((), (grad,))`` with the gradient the leaf
    receives (an AccumulateGrad has no inputs, so there is nothing to replace)."""
    _check_callable("register_hook", hook)

    def as_tensor_hook(grad: Tensor) -> None:
        if hook((), (grad,)) is not None:
            raise RuntimeError(f"AccumulateGrad: hook {_hook_name(hook)} returned a value; "
                               "an AccumulateGrad node has no inputs whose gradients a "
                               "hook could replace, so its hooks must return None")
    return _add("_grad_hooks", node.variable, as_tensor_hook)


def run_node_prehooks(fn: GradFn, grad: Tensor) -> Tensor:
    """``grad`` (the node's output gradient) through ``fn``'s pre-hooks."""
    hooks = _hooks("_node_prehooks", fn)
    if hooks:
        capture_log.refuse("a grad_fn pre-hook ran during backward (a replay would not run it)")
    for hook in hooks:
        got = _replacement(fn.name(), hook, hook((grad,)), (grad,))
        if got is not None and got[0] is not None:
            grad = got[0]
    return grad


def run_node_hooks(fn: GradFn, grads: tuple, grad: Tensor) -> tuple:
    """The rule's gradients ``grads`` (of ``fn``'s inputs) through its post hooks."""
    hooks = _hooks("_node_hooks", fn)
    if hooks:
        capture_log.refuse("a grad_fn hook ran during backward (a replay would not run it)")
    for hook in hooks:
        got = _replacement(fn.name(), hook, hook(tuple(grads), (grad,)), tuple(grads))
        if got is not None:
            grads = got
    return grads


def any_hooks() -> bool:
    return bool(_OWNERS)


def hooked(owner: Any) -> bool:
    """Whether ``owner`` (a GradFn or a leaf) has a gradient, node or post-accumulate
    hook."""
    return bool(getattr(owner, "_grad_hooks", None) or getattr(owner, "_post_hooks", None)
                or getattr(owner, "_node_prehooks", None) or getattr(owner, "_node_hooks", None))


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
