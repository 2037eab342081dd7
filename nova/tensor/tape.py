"""The autograd tape: one GradFn per differentiable primitive node, recorded with it.

While grad mode is on, recording a primitive whose inputs require grad also records a
GradFn: the primitive, its attributes, edges to the GradFns (or leaf tensors) of its
inputs, and the forward values its vector-Jacobian rule needs. The values are trace
nodes, never Tensor handles, so later in-place rebinding of a handle cannot change
what the backward pass sees (Nova never needs PyTorch's "modified by an inplace
operation" error). Nothing here computes: the backward engine turns GradFns into more
trace nodes.

The tape lives in ``nova.tensor`` because the op front end writes it on every recorded
op, and ``nova.tensor`` must not import ``nova.autograd`` (autograd sits above tensor:
its rules are written with tensor ops). So the two things tensor needs from autograd
arrive by registration, filled in when ``nova.autograd`` is imported (``import nova``
always imports it):

- which forward values each primitive's rule reads (``register_saves``), so the rule
  table in ``nova.autograd.rules`` stays the single source of truth;
- the backward engine ``Tensor.backward`` calls (``register_backward``).
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Sequence

from nova.tensor.trace import Node

# Which forward values each primitive's VJP rule reads (input indices, the output?),
# keyed like the rule table, by the dialect's op class. Filled only by
# ``register_saves`` (from nova.autograd.rules).
_SAVES: dict[type, tuple[tuple[int, ...], bool]] = {}
# The same entries by the op's short name, as the trace records it: the index a GradFn
# reads on every recorded op (one lookup, not name -> class -> entry).
_SAVES_BY_NAME: dict[str, tuple[tuple[int, ...], bool]] = {}
_NOTHING: tuple[tuple[int, ...], bool] = ((), False)

# The op of the identity record ``alias_fn`` makes (not a primitive of the dialect).
ALIAS = "alias"
# The op of a custom ``nv.autograd.Function``'s record, whose attributes carry its
# backward (and so the ctx with its saved tensors): dropped on release.
FUNCTION = "function"


def register_saves(op: type, inputs: tuple[int, ...], output: bool) -> None:
    """Record that the rule of ``op`` (a dialect op class, e.g. ``ExpOp``) reads inputs
    ``inputs`` (and the output if ``output``): GradFns of it keep those trace nodes
    alive until backward releases them."""
    entry = (tuple(inputs), bool(output))
    _SAVES[op] = entry
    _SAVES_BY_NAME[op.name.removeprefix("nova.")] = entry


def saves(op: type) -> tuple[tuple[int, ...], bool]:
    """(input indices, output?) that GradFns of ``op`` (a dialect op class) keep; nothing
    if its rule reads nothing or it has no rule."""
    return _SAVES.get(op, _NOTHING)


class GradFn:
    """The backward record of one primitive application."""

    # (``_grad_hooks``: set only when a hook is registered, nova.autograd.hooks)
    __slots__ = ("op", "attrs", "sig", "seq", "next", "in_shapes", "in_dtypes", "saved",
                 "out_node", "retained", "released", "_grad_hooks", "__weakref__")

    def __init__(self, op: str, attrs: dict[str, Any], next_: tuple[Any, ...],
                 inputs: Sequence[Node], out_node: Node | None):
        self.op = op
        self.attrs = attrs
        # the forward node's structural signature as recorded (op, attributes, shape,
        # dtype: nova.core.graph.signature_id), what a backward template is keyed by
        self.sig = out_node.sig if out_node is not None else None
        # and its creation number (-1: none), how a function template pairs the two
        self.seq = out_node.seq if out_node is not None else -1
        self.next = next_                       # per input: GradFn, leaf Tensor or None
        # (list comprehensions, not generators: this runs for every recorded op)
        self.in_shapes = tuple([n.shape for n in inputs])
        self.in_dtypes = tuple([n.dtype for n in inputs])
        save_inputs, save_output = _SAVES_BY_NAME.get(op, _NOTHING)
        self.saved = tuple([n if i in save_inputs else None for i, n in enumerate(inputs)]) \
            if save_inputs else (None,) * len(inputs)
        self.out_node = out_node if save_output else None
        self.retained: list[weakref.ref] = []   # non-leaf tensors that asked for .grad
        self.released = False

    def name(self) -> str:
        return f"{self.op.title().replace('_', '')}Backward"

    def release(self) -> None:
        """Drop saved values after a backward pass without ``retain_graph``."""
        self.saved = (None,) * len(self.saved)
        self.out_node = None
        self.released = True
        if self.op == FUNCTION:
            self.attrs = {}

    def __repr__(self) -> str:
        return f"<{self.name()}>"


def alias_fn(leaf: Any, node: Node) -> GradFn:
    """An identity GradFn routing a saved value of a leaf back to that leaf (used when a
    rule needs a leaf's old value with history, i.e. for double backward, and by
    ``clone``)."""
    return GradFn(ALIAS, {}, (leaf,), (node,), None)


# ---------------------------------------------------------------- the backward hook

_backward: Callable[..., None] | None = None


def register_backward(engine: Callable[..., None]) -> None:
    """Install the function ``Tensor.backward`` runs: ``nova.autograd.engine.backward``,
    registered when nova.autograd is imported. A hook rather than an import because
    the engine is written with tensor ops and so sits above ``nova.tensor``; importing
    it from here (even late) would make the two packages import each other."""
    global _backward
    _backward = engine


def run_backward(tensors: Sequence[Any], grad_tensors: Sequence[Any] | None,
                 retain_graph: bool | None, create_graph: bool, inputs: Any) -> None:
    """Run the registered backward engine (``nv.autograd.backward``'s arguments)."""
    if _backward is None:
        raise RuntimeError("backward: no backward engine is registered (nova.autograd "
                           "registers it when imported; `import nova` imports it)")
    _backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
