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

A GradFn also answers PyTorch's introspection of the graph (``next_functions``,
``name()``, ``metadata``; ``register_hook``/``register_prehook`` are attached by
``nova.autograd.hooks``), and the saved-tensor hooks of
``nv.autograd.graph.saved_tensors_hooks`` pack what a GradFn saves when it is recorded
(their per-thread state, ``SAVED_HOOKS``, lives here because recording reads it).
"""
from __future__ import annotations

import threading
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


# ---------------------------------------------------------------- saved-tensor hooks

class _SavedHooks(threading.local):
    """This thread's saved-tensor hooks (``nv.autograd.graph.saved_tensors_hooks``):
    ``stack`` holds (pack, unpack) pairs, innermost last (only the innermost is used,
    as PyTorch's); ``disabled`` is the message of an enclosing
    ``disable_saved_tensors_hooks``, or None. A ``threading.local`` as grad mode is:
    every recorded op that saves a value reads ``SAVED_HOOKS.stack`` (one attribute
    lookup) and the hooks are per thread in PyTorch too."""

    stack: tuple[tuple[Callable[[Any], Any], Callable[[Any], Any]], ...] = ()
    disabled: str | None = None


SAVED_HOOKS = _SavedHooks()
# Whether any value has ever been packed in this process: the backward engine looks for
# packed values (which its templates cannot stamp) only once this is set.
packed_any = False


class SavedValue:
    """A value a GradFn saved while saved-tensor hooks were active: what ``pack``
    returned, with the ``unpack`` of the same pair and the shape and dtype the value had,
    which what ``unpack`` returns must have (the rules are written for them)."""

    __slots__ = ("packed", "unpack_hook", "shape", "dtype")

    def __init__(self, packed: Any, unpack_hook: Callable[[Any], Any], node: Node):
        self.packed = packed
        self.unpack_hook = unpack_hook
        self.shape = node.shape
        self.dtype = node.dtype

    def unpack(self, owner: str) -> Node:
        """The trace node of ``unpack_hook(packed)``, checked (``owner``: the GradFn's
        name, for the error)."""
        from nova.tensor import capture_log
        from nova.tensor.tensor import Tensor
        capture_log.refuse("a saved-tensor unpack hook ran during backward (a replay would "
                           "not run it)")
        out = self.unpack_hook(self.packed)
        if not isinstance(out, Tensor):
            raise TypeError(f"{owner}: output of saved tensor unpack_hook expected to be a "
                            f"Tensor but got result of type {type(out).__name__}")
        if out.shape != self.shape or out.dtype != self.dtype:
            raise RuntimeError(
                f"{owner}: saved tensor unpack_hook returned a tensor of shape "
                f"{tuple(out.shape)} and dtype {out.dtype.name} for a value saved with shape "
                f"{self.shape} and dtype {self.dtype.name}; unpack_hook must return a tensor "
                f"of the shape and dtype pack_hook received")
        return out.node


def _pack(node: Node) -> SavedValue:
    """``node`` through this thread's innermost pack hook. The hook gets a tensor
    without history on the value (a pack hook usually copies or moves it), and runs with
    no hooks active, so what it records saving is not packed again."""
    global packed_any
    from nova.tensor import capture_log
    from nova.tensor.tensor import Tensor
    capture_log.refuse("a saved-tensor pack hook ran (a replay would not run it)")
    state = SAVED_HOOKS
    stack = state.stack
    pack, unpack = stack[-1]
    state.stack = ()
    try:
        packed = pack(Tensor._wrap(node))
    finally:
        state.stack = stack
    packed_any = True
    return SavedValue(packed, unpack, node)


# ---------------------------------------------------------------- the records

def _camel(op: str) -> str:
    return op.title().replace("_", "")


def _matmul_name(fn: GradFn) -> str:
    return "MmBackward0" if all(len(s) == 2 for s in fn.in_shapes) else "BmmBackward0"


def _reduce_sum_name(fn: GradFn) -> str:
    # torch: SumBackward0 for sum() over everything, SumBackward1 for sum(dim)
    whole = len(fn.attrs.get("axes", ())) == len(fn.in_shapes[0])
    return "SumBackward0" if whole else "SumBackward1"


def _transpose_name(fn: GradFn) -> str:
    perm = fn.attrs["perm"]
    moved = [i for i, p in enumerate(perm) if i != p]
    return "TransposeBackward0" if len(moved) == 2 else "PermuteBackward0"


# Nova's primitives named as PyTorch names the autograd node of the corresponding op
# (``type(y.grad_fn).__name__`` there): a fixed name, or a function of the record.
# A primitive not listed is ``<CamelCase>Backward0``, which is PyTorch's name for its
# op too (``ExpBackward0``, ``Log1PBackward0``, ``Atan2Backward0``...). PyTorch's
# trailing digit is the overload: pow/fmod with a tensor exponent/divisor are "1".
_TORCH_NAMES: dict[str, str | Callable[[GradFn], str]] = {
    "reduce_sum": _reduce_sum_name,
    "reduce_max": "AmaxBackward0",
    "matmul": _matmul_name,
    "reshape": "ViewBackward0",
    "broadcast_in_dim": "ExpandBackward0",
    "transpose": _transpose_name,
    "concat": "CatBackward0",
    "cast": "ToCopyBackward0",
    "pad": "ConstantPadNdBackward0",
    "rem": lambda fn: "FmodBackward0" if fn.next[1] is None else "FmodBackward1",
    "pow": lambda fn: "PowBackward0" if fn.next[1] is None else "PowBackward1",
    ALIAS: "AliasBackward0",
}


def _node_metadata(node: Any) -> dict:
    """A node's ``metadata`` dict (PyTorch's ``Node.metadata``: the user's notes, kept
    while the node is held), made on first read."""
    try:
        return node._metadata
    except AttributeError:
        node._metadata = {}
        return node._metadata


class GradFn:
    """The backward record of one primitive application.

    Its PyTorch surface: ``name()`` (PyTorch's node name for the op, see
    ``_TORCH_NAMES``), ``next_functions``, ``metadata``, and ``register_hook`` /
    ``register_prehook`` (attached by ``nova.autograd``). Nova records one GradFn per
    *primitive*, so a composite op (``mean``, ``relu``, ``softmax``...) shows the
    GradFn of its last primitive (``MulBackward0``, ``WhereBackward0``,
    ``DivBackward0``), not PyTorch's ``MeanBackward0``, and a walk of the graph meets
    the composite's primitives."""

    # (``_grad_hooks``: set only when a hook is registered, nova.autograd.hooks;
    # ``_node_prehooks``/``_node_hooks``: the same for ``register_prehook``/
    # ``register_hook``; ``_metadata``: made on first read of ``metadata``)
    __slots__ = ("op", "attrs", "sig", "seq", "next", "in_shapes", "in_dtypes", "saved",
                 "out_node", "retained", "released", "_grad_hooks", "_node_prehooks",
                 "_node_hooks", "_metadata", "__weakref__")

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
        if (save_inputs or save_output) and SAVED_HOOKS.stack:
            self._pack_saved()

    def _pack_saved(self) -> None:
        """Replace the saved nodes by what this thread's pack hook makes of them."""
        self.saved = tuple([None if n is None else _pack(n) for n in self.saved])
        if self.out_node is not None:
            self.out_node = _pack(self.out_node)

    def name(self) -> str:
        """PyTorch's name for this node (``MulBackward0``; a custom Function's is
        ``<ClassName>Backward``, as PyTorch's)."""
        if self.op == FUNCTION:
            base = self.attrs.get("name", "Function")
            return base if base.endswith("Backward") else f"{base}Backward"
        named = _TORCH_NAMES.get(self.op)
        if named is None:
            return f"{_camel(self.op)}Backward0"
        return named if isinstance(named, str) else named(self)

    @property
    def next_functions(self) -> tuple[tuple[Any, int], ...]:
        """Per input, ``(node, 0)``: the input's GradFn, an ``AccumulateGrad`` for a
        leaf that requires grad (the same object while it is held, as PyTorch's), or
        None for an input without history. (Every Nova record has one output, so the
        index is always 0.)"""
        return tuple([(e if e is None or type(e) is GradFn else accumulate_grad(e), 0)
                      for e in self.next])

    metadata = property(_node_metadata)

    def release(self) -> None:
        """Drop saved values after a backward pass without ``retain_graph``."""
        self.saved = (None,) * len(self.saved)
        self.out_node = None
        self.released = True
        if self.op == FUNCTION:
            self.attrs = {}

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad:
    """The node PyTorch puts where a leaf that requires grad enters the graph
    (``next_functions`` shows it): ``variable`` is the leaf. Nova's records point at
    the leaf itself, so these are made on demand; ``accumulate_grad`` hands out the same
    one for a leaf while it is held, so identity-based walks (torchviz's) see one node
    per leaf. Hooks registered on it live on the leaf (``nova.autograd.hooks``)."""

    __slots__ = ("variable", "_metadata", "__weakref__")

    def __init__(self, variable: Any):
        self.variable = variable

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    @property
    def next_functions(self) -> tuple:
        return ()

    metadata = property(_node_metadata)

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


# id(leaf) -> its AccumulateGrad, while something holds that node (which holds the leaf,
# so the id cannot be reused meanwhile).
_ACCUMULATORS: weakref.WeakValueDictionary[int, AccumulateGrad] = \
    weakref.WeakValueDictionary()


def accumulate_grad(leaf: Any) -> AccumulateGrad:
    """The ``AccumulateGrad`` node of ``leaf`` (one per leaf while it is held)."""
    node = _ACCUMULATORS.get(id(leaf))
    if node is None or node.variable is not leaf:
        node = _ACCUMULATORS[id(leaf)] = AccumulateGrad(leaf)
    return node


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
