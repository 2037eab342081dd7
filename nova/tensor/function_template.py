"""Record a composite function once per structure, stamp its nodes after.

A recorded (not ``nv.compile``d) training step calls the same composite functions with
the same shapes every step: a small GPT's forward makes 9 ``layer_norm`` calls of ~10
ops each, 17 ``linear`` and 4 ``scaled_dot_product_attention`` calls, ~3 ms of the
forward's ~4.5 ms of Python, almost all of it in the op front end (argument checks,
promotion, broadcasting, views, a Tensor per intermediate value) rather than in the
nodes it makes. What such a function records depends only on its tensors' shapes,
dtypes, devices and whether they carry autograd history, on its other arguments, and on
the grad and autocast modes -- never on a value.

``@stamped`` functions keep the nodes and GradFns of the first call of each structure as
a :class:`FunctionTemplate`; a later call with the same :func:`call_key` stamps them
(``nova.tensor.node_template``) from this call's tensors and returns a result with the
same node, the same autograd record and the same structural signatures, so the step's
key -- and its executable -- are the same. The key numbers the tensor arguments by node
and by autograd edge identity, so ``f(x, x)`` and ``f(x, y)`` are different structures.

Only functions whose recording reads nothing else may be decorated: no random draws or
other values made outside their arguments (those make capture refuse: a node the
recording read is neither an argument nor made by it), no host reads of a tensor's
buffer (``indexing``'s fast path for realized tensors), no global state beyond the modes
in the key. A call with an argument the key cannot describe (an object, a list of
tensors), one that changes an argument in place, or one whose result is not a fresh
plain tensor is recorded as written.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from operator import itemgetter
from typing import Any, TypeVar

from nova.core.lru import LRU
from nova.core import dtypes as dt
from nova.tensor import autocast_state, grad_mode, tape
from nova.tensor.node_template import CallTemplate, Step, capture_steps, stamp_into
from nova.tensor.tape import GradFn
from nova.tensor.tensor import Tensor
from nova.tensor.trace import Node, _recording_backward, canonical_attr, next_seq

# Per decorated function, templates by key (least recently used first; None: the
# structure cannot be stamped). Bounded like the backward's.
MAX_TEMPLATES = 64

_PLAIN = (type(None), bool, int, float, str)

F = TypeVar("F", bound=Callable[..., Any])


def _static(v: Any) -> Any:
    """A non-tensor argument as an exact, hashable key part; raises TypeError for one
    the key cannot describe."""
    if type(v) in _PLAIN:
        return (type(v), canonical_attr(v))
    if type(v) is tuple or type(v) is list:
        return (type(v), tuple([_static(x) for x in v]))
    raise TypeError(type(v).__name__)


def call_key(args: tuple, kwargs: dict) -> tuple[tuple, list[Tensor]] | None:
    """The structure of a call with ``args``/``kwargs``, and its tensor arguments in
    order; None if an argument is something the key cannot describe."""
    tensors: list[Tensor] = []
    node_of: dict[int, int] = {}
    edge_of: dict[int, int] = {}
    parts = []
    try:
        for v in (*args, *[kwargs[k] for k in sorted(kwargs)]):
            if isinstance(v, Tensor):
                n = v.node                  # (a view derives its node first)
                e = v._grad_edge()
                k = len(tensors)
                tensors.append(v)
                parts.append((n.shape, n.dtype, n.device,
                              node_of.setdefault(id(n), k),
                              None if e is None else edge_of.setdefault(id(e), k),
                              type(e) is GradFn))
            else:
                parts.append(_static(v))
    except TypeError:
        return None
    # (the default float dtype decides what integer inputs compute in)
    key = (tuple(sorted(kwargs)), tuple(parts), grad_mode.STATE.enabled,
           autocast_state.LOWER.get(), _recording_backward.get(), dt.DEFAULT_FLOAT)
    return key, tensors


# A template GradFn: (its node's step, op, attrs, sig, in_shapes, in_dtypes, next, saved,
# out_node). ``next``: per input None, a template GradFn by its node's step (>= 0), or
# the edge of tensor argument ``k`` as ``-1 - k``; ``saved`` and ``out_node``: node
# references as in Step (None: not kept).
FnSpec = tuple[int, str, dict, Any, tuple, tuple, tuple, tuple, Any]


def _getter(positions: tuple[int, ...]) -> Callable[[list], tuple]:
    """``lambda pool: tuple(pool[i] for i in positions)``, in C where it can be
    (``operator.itemgetter``): a stamp reads ~18 references per GradFn this way."""
    if len(positions) > 1:
        return itemgetter(*positions)
    if positions:
        i = positions[0]
        return lambda pool: (pool[i],)
    return lambda pool: ()


class FunctionTemplate:
    """The nodes and GradFns of one call, and which of them is the result.

    A stamp reads everything from two pools: the nodes (the arguments' nodes, then the
    stamped steps, then None) and the edges (the arguments' autograd edges, then None,
    then each GradFn as it is made), by positions worked out here once (``made``)."""

    __slots__ = ("steps", "result", "result_fn", "made", "call", "exposed")

    def __init__(self, steps: list[Step], fns: list[FnSpec], result: int,
                 result_fn: int | None, n_slots: int, call: CallTemplate,
                 exposed: tuple[int, ...]):
        self.steps = steps
        self.result = result          # the result's step
        self.result_fn = result_fn    # its GradFn's position in ``fns`` (None: none)
        # The steps as one ``call`` (``stamp_call``) and the steps it returns a node for:
        # the result and every node a GradFn saves or keeps, in step order.
        self.call = call
        self.exposed = exposed
        no_node = n_slots + len(steps)          # the node pool's None
        no_edge = n_slots                       # the edge pool's None

        def node(r: int | None) -> int:
            return no_node if r is None else n_slots + r if r >= 0 else -1 - r

        def edge(e: int | None) -> int:
            return no_edge if e is None else no_edge + 1 + e if e >= 0 else -1 - e

        # per GradFn: its node's position in the node pool, op, attrs, sig, input shapes
        # and dtypes, getters of its next edges and saved nodes, its kept output's position
        self.made = tuple([(n_slots + k, op, attrs, sig, in_shapes, in_dtypes,
                            _getter(tuple([edge(e) for e in nxt])),
                            _getter(tuple([node(r) for r in saved])), node(kept))
                           for k, op, attrs, sig, in_shapes, in_dtypes, nxt, saved, kept
                           in fns])

    @staticmethod
    def capture(out: Any, tensors: list[Tensor], before: list[tuple[Node, int]],
                first: int) -> FunctionTemplate | None:
        """The template of the call just recorded (its nodes and GradFns made from
        creation number ``first`` on; ``before``: each tensor argument's node and
        version before the call), or None if it cannot be stamped (see the module
        docstring)."""
        if type(out) is not Tensor or out._view is not None or out._requires_grad:
            return None
        if any(t._node is not n or t._version != v for t, (n, v) in zip(tensors, before)):
            return None             # an argument changed in place
        slot_of: dict[int, int] = {}
        edge_of: dict[int, int] = {}
        for k, (t, (n, _)) in enumerate(zip(tensors, before)):
            slot_of.setdefault(id(n), -1 - k)
            e = t._grad_edge()
            if e is not None:
                edge_of.setdefault(id(e), -1 - k)
        node = out._node
        if id(node) in slot_of or node.buffer is not None:
            return None             # the result is an argument, or already computed
        captured = capture_steps([node], slot_of, first, len(before))
        if captured is None:
            return None
        steps, index, order = captured
        step_of_seq = {n.seq: k for k, n in enumerate(order)}
        # The GradFns behind the result's, back to the arguments' edges.
        fns: dict[int, GradFn] = {}          # by their node's step
        stack = [out._grad_fn] if out._grad_fn is not None else []
        while stack:
            fn = stack.pop()
            k = step_of_seq.get(fn.seq)
            if k is None or fn.seq < first:
                return None         # a GradFn from outside the call that is no argument's
            if k in fns:
                continue
            fns[k] = fn
            for e in fn.next:
                if e is None or id(e) in edge_of:
                    continue
                if type(e) is not GradFn:
                    return None     # a leaf that is not an argument
                stack.append(e)
        position = {k: p for p, k in enumerate(sorted(fns))}
        specs: list[FnSpec] = []
        try:
            for k in sorted(fns):
                fn = fns[k]
                nxt = tuple([None if e is None else edge_of[id(e)] if id(e) in edge_of
                             else position[step_of_seq[e.seq]] for e in fn.next])
                saved = tuple([None if n is None else index[id(n)] for n in fn.saved])
                kept = None if fn.out_node is None else index[id(fn.out_node)]
                specs.append((k, fn.op, fn.attrs, fn.sig, fn.in_shapes, fn.in_dtypes, nxt,
                              saved, kept))
        except KeyError:
            return None             # a saved value that is neither captured nor an argument
        result = index[id(node)]
        result_fn = None if out._grad_fn is None else position[step_of_seq[out._grad_fn.seq]]
        exposed = sorted({result} | {r for spec in specs for r in (*spec[7], spec[8])
                                     if r is not None and r >= 0})
        call = CallTemplate(order, index, exposed)
        return FunctionTemplate(steps, specs, result, result_fn, len(before), call,
                                tuple(exposed))

    def stamp(self, tensors: list[Tensor]) -> Tensor:
        """The call's result from this template, reading ``tensors``' nodes and edges:
        its nodes stamped one by one (what a recording that captures templates itself
        needs: an enclosing function's, a backward pass's)."""
        nodes = [t.node for t in tensors]
        stamp_into(self.steps, nodes)           # the pool: slots, then the new nodes
        nodes.append(None)
        return self._with_grad_fns(tensors, nodes, None)

    def stamp_call(self, tensors: list[Tensor]) -> Tensor:
        """``stamp`` as one ``call`` node (``CallTemplate``) with a ``call_result`` for
        each exposed step -- the result and the nodes the GradFns save -- instead of a
        node per step: what every later stage of a recorded step (extraction, its key,
        the forgetting after the run) then pays per node is paid per call. The GradFns
        are the same; they read the exposed nodes."""
        slots = [t.node for t in tensors]
        n_slots = len(slots)
        made = self.call.stamp(slots)
        pool = slots + [None] * (len(self.steps) + 1)
        for k, n in zip(self.exposed, made):
            pool[n_slots + k] = n
        return self._with_grad_fns(tensors, pool, -1)

    def _with_grad_fns(self, tensors: list[Tensor], nodes: list[Node | None],
                       seq: int | None) -> Tensor:
        """The result, with this call's GradFns made over the node pool ``nodes``
        (slots, a node or None per step, then None). ``seq``: every GradFn's creation
        number, or None for its node's (a GradFn without its node, as ``stamp_call``
        makes them, gets -1: no function template pairs it with a node, so a recording
        that would capture it refuses instead)."""
        n_slots = len(tensors)
        edges = [t._grad_edge() for t in tensors]
        edges.append(None)
        new, add = GradFn.__new__, edges.append
        for at, op, attrs, sig, in_shapes, in_dtypes, next_of, saved_of, kept in self.made:
            fn = new(GradFn)
            fn.op, fn.attrs, fn.sig = op, attrs, sig
            fn.seq = nodes[at].seq if seq is None else seq
            fn.next = next_of(edges)
            fn.in_shapes, fn.in_dtypes = in_shapes, in_dtypes
            fn.saved = saved_of(nodes)
            fn.out_node = nodes[kept]
            fn.retained, fn.released = [], False
            add(fn)
        return Tensor._wrap(nodes[n_slots + self.result], None,
                            None if self.result_fn is None else edges[n_slots + 1 + self.result_fn])


class _Depth(threading.local):
    """How many ``@stamped`` functions this thread is inside (their recordings)."""

    value = 0


_DEPTH = _Depth()


def stamped(fn: F) -> F:
    """Decorate a composite function whose recording depends only on what ``call_key``
    describes (see the module docstring): calls after the first of each structure are
    stamped from its template.

    A call outside any other stamped function's recording and outside a backward pass
    is stamped as one ``call`` node (``FunctionTemplate.stamp_call``), the first of its
    structure included (recorded, captured, then replaced by its stamp, so every step
    of a structure has the same key); inside them its nodes are stamped one by one,
    since the enclosing recording's own template (a function's, a backward pass's)
    captures nodes, not calls."""
    templates: LRU[FunctionTemplate | None] = LRU()
    lock = threading.Lock()

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        found = call_key(args, kwargs)
        if found is None or tape.SAVED_HOOKS.stack:
            # saved-tensor hooks pack what a GradFn saves as it is made: a stamp makes
            # GradFns without them, and a capture would find packed values
            return fn(*args, **kwargs)
        key, tensors = found
        as_call = _DEPTH.value == 0 and not key[4]      # (key[4]: recording a backward)
        with lock:
            template = templates.get(key, False)
        if template:
            return template.stamp_call(tensors) if as_call else template.stamp(tensors)
        before = [(t._node, t._version) for t in tensors]
        first = next_seq()
        _DEPTH.value += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            _DEPTH.value -= 1
        if template is False:       # first sight (None: cannot be stamped)
            captured = FunctionTemplate.capture(out, tensors, before, first)
            with lock:
                templates[key] = captured
                while len(templates) > MAX_TEMPLATES:
                    templates.pop_oldest()
            if captured is not None and as_call:
                return captured.stamp_call(tensors)
        return out

    wrapper.templates = templates   # (tests)
    return wrapper  # type: ignore[return-value]
