"""The autograd graph: its record types and the saved-tensor hooks
(``nv.autograd.graph``, PyTorch's ``torch.autograd.graph``).

The op front end writes a GradFn for every differentiable primitive it records, so the
record types live in ``nova.tensor.tape`` (``nova.tensor`` must not import
``nova.autograd``); this module names the same objects for the engine, the rules and
users (``Node`` for ``isinstance`` checks, as PyTorch's).

Saved-tensor hooks. ``saved_tensors_hooks(pack_hook, unpack_hook)`` makes every value a
GradFn saves for its backward while the context is active go through
``pack_hook(tensor)`` when the op is recorded (it may return anything), and through
``unpack_hook(packed)`` when the backward rule reads it, which must return a tensor of
the shape and dtype ``pack_hook`` received. The hooks are per thread, and only the
innermost pair is used, as in PyTorch.

What is saved is Nova's: each primitive's vector-Jacobian rule saves what it reads
(``nova.autograd.rules``: ``mul`` its two inputs, ``exp`` its output, ``add``
nothing), and composite ops record several primitives, so the number and the values
the hooks see per op can differ from PyTorch's (``softmax`` saves the values of its
primitives, not its output once). The tensor ``pack_hook`` gets is a handle on the
value without history (not the caller's tensor object); a pack hook that reads it
(``.numpy()``) computes it right there, as PyTorch's would. ``unpack_hook`` runs once
per saved value per backward pass (the rule's reads share it). Inside ``nv.compile``
a hook that runs makes the call record every time (a replay would not run it).
Values saved by a custom ``nv.autograd.Function`` (``ctx.save_for_backward``) are
kept by its ctx and do not go through the hooks.
"""
from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from nova.tensor import tape
from nova.tensor.tape import (
    ALIAS, FUNCTION, AccumulateGrad, GradFn, SavedValue, alias_fn, register_saves, saves,
)
from nova.tensor.tensor import Tensor

__all__ = ["ALIAS", "FUNCTION", "AccumulateGrad", "GradFn", "Node", "SavedValue", "alias_fn",
           "register_saves", "saves", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks"]


class Node(abc.ABC):
    """``torch.autograd.graph.Node``: the type of ``grad_fn`` and of the nodes in
    ``next_functions`` for ``isinstance`` checks (GradFn and AccumulateGrad are
    registered as its subclasses)."""

    @abc.abstractmethod
    def name(self) -> str: ...


Node.register(GradFn)
Node.register(AccumulateGrad)


class saved_tensors_hooks:  # noqa: N801  (PyTorch's name)
    """Context manager: values saved for backward go through ``pack_hook`` when recorded
    and ``unpack_hook`` when read (see the module docstring)."""

    def __init__(self, pack_hook: Callable[[Tensor], Any],
                 unpack_hook: Callable[[Any], Tensor]) -> None:
        for what, hook in (("pack_hook", pack_hook), ("unpack_hook", unpack_hook)):
            if not callable(hook):
                raise TypeError(f"saved_tensors_hooks: {what} must be callable, got "
                                f"{type(hook).__name__}")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> saved_tensors_hooks:
        state = tape.SAVED_HOOKS
        if state.disabled is not None:
            raise RuntimeError(state.disabled)
        state.stack = state.stack + ((self.pack_hook, self.unpack_hook),)
        return self

    def __exit__(self, *exc: Any) -> None:
        state = tape.SAVED_HOOKS
        pair = (self.pack_hook, self.unpack_hook)
        if not state.stack or state.stack[-1] != pair:
            raise RuntimeError("saved_tensors_hooks: exited out of order (the innermost "
                               "saved_tensors_hooks context must be exited first)")
        state.stack = state.stack[:-1]


class save_on_cpu(saved_tensors_hooks):  # noqa: N801  (PyTorch's name)
    """Keep the values saved for backward on the host and move each back to its device
    when the backward reads it (``torch.autograd.graph.save_on_cpu``).

    Nova stores a host tensor where it is, so for values already on the CPU this
    changes nothing; for CUDA tensors it trades device memory for a copy each way.
    ``pin_memory`` is accepted for PyTorch's signature: Nova copies to the GPU from
    wherever a host tensor lives (``Tensor.pin_memory`` returns the tensor), so there
    is nothing to pin. ``device_type`` names the accelerator, "cuda" as PyTorch's."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        if device_type != "cuda":
            raise ValueError(f"save_on_cpu: device_type must be 'cuda' (Nova's only "
                             f"accelerator), got {device_type!r}")

        def pack(tensor: Tensor) -> tuple[Any, Tensor]:
            return tensor.device, tensor.to("cpu")

        def unpack(packed: tuple[Any, Tensor]) -> Tensor:
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack, unpack)
        self.pin_memory = pin_memory
        self.device_type = device_type


class disable_saved_tensors_hooks:  # noqa: N801  (PyTorch's name)
    """Context manager in which entering ``saved_tensors_hooks`` raises
    ``RuntimeError(error_message)``: for code whose saved values must not be packed.
    Entering it while saved-tensor hooks are active raises that error too, as
    PyTorch's."""

    def __init__(self, error_message: str) -> None:
        if not isinstance(error_message, str):
            raise TypeError(f"disable_saved_tensors_hooks: error_message must be a str, got "
                            f"{type(error_message).__name__}")
        self.error_message = error_message

    def __enter__(self) -> None:
        state = tape.SAVED_HOOKS
        if state.stack:
            raise RuntimeError(self.error_message)
        self._prev = state.disabled
        state.disabled = self.error_message

    def __exit__(self, *exc: Any) -> None:
        tape.SAVED_HOOKS.disabled = self._prev
