"""The autograd graph: one GradFn per differentiable primitive node.

While grad mode is on, recording a primitive whose inputs require grad also records a
GradFn: the primitive, its attributes, edges to the GradFns (or leaf tensors) of its
inputs, and the forward values its vector-Jacobian rule needs. The values are trace
nodes, never Tensor handles, so later in-place rebinding of a handle cannot change
what the backward pass sees (Nova never needs PyTorch's "modified by an inplace
operation" error). Nothing here computes: the backward engine turns GradFns into more
trace nodes.
"""
from __future__ import annotations

import weakref
from typing import Any, Sequence

from nova.tensor.trace import Node

# Which forward values each primitive's VJP rule reads: input indices and the output.
# Filled in by nova.autograd.rules (the table of rules is the single source of truth).
SAVES: dict[str, tuple[tuple[int, ...], bool]] = {}


class GradFn:
    """The backward record of one primitive application."""

    __slots__ = ("op", "attrs", "next", "in_shapes", "in_dtypes", "saved", "out_node",
                 "retained", "released", "__weakref__")

    def __init__(self, op: str, attrs: dict[str, Any], next_: tuple[Any, ...],
                 inputs: Sequence[Node], out_node: Node | None):
        self.op = op
        self.attrs = attrs
        self.next = next_                       # per input: GradFn, leaf Tensor or None
        self.in_shapes = tuple(n.shape for n in inputs)
        self.in_dtypes = tuple(n.dtype for n in inputs)
        save_inputs, save_output = SAVES.get(op, ((), False))
        self.saved = tuple(n if i in save_inputs else None for i, n in enumerate(inputs))
        self.out_node = out_node if save_output else None
        self.retained: list[weakref.ref] = []   # non-leaf tensors that asked for .grad
        self.released = False

    def name(self) -> str:
        return f"{self.op.title().replace('_', '')}Backward"

    def release(self) -> None:
        """Drop saved values after a backward pass without ``retain_graph``."""
        self.saved = tuple(None for _ in self.saved)
        self.out_node = None
        self.released = True

    def __repr__(self) -> str:
        return f"<{self.name()}>"


def alias_fn(leaf: Any, node: Node) -> GradFn:
    """An identity GradFn routing a saved value of a leaf back to that leaf (used when a
    rule needs a leaf's old value with history, i.e. for double backward)."""
    return GradFn("alias", {}, (leaf,), (node,), None)
