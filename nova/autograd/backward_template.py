"""Record a backward pass once, stamp its nodes after: the backward's recording cost.

A recorded (not ``nv.compile``d) training step runs every GradFn's vector-Jacobian rule
through the op front end: a small GPT's backward is ~390 GradFns and ~610 nodes, ~4.5 ms
of Python per step. Yet a backward over the same structure records the same nodes in
the same order, step after step: a rule reads only its GradFn's op, attributes, input
shapes and dtypes, which inputs need a gradient, and the upstream gradient's shape and
dtype (and the ops it calls read the autocast mode) -- never a value.

So the first backward of a structure is recorded as written and kept as a
:class:`BackwardTemplate`: the nodes it made as steps whose inputs are earlier steps or
*slots* (``nova.tensor.node_template``), and which GradFns it ran.
The slots are the nodes the pass read from outside: the seeds (the outputs' upstream
gradients), the values the GradFns saved, and the leaves' gradients from before the
pass. A later backward with the same :func:`structure` key stamps the nodes directly
from this call's slots as one ``call`` node (``nova.tensor.node_template.CallTemplate``),
gives the leaves' ``.grad`` its results (into an existing ``.grad`` in place, as the
engine accumulates) and releases the GradFns as the rules would have; the first pass's
gradients are rebound to its call's results too, so every pass of a structure gives
the same key. Inlined for the compiler, the call is the nodes the rules record, in the
same order: the step's IR is the recorded pass's.

The key numbers the slots by node identity (first occurrence), so it also pins down
which slots hold one node: a pass in which two GradFns saved the same constant and one
in which each saved its own equal-looking constant are different structures, and a
stamped node always reads the slot the rule read.

Not templated (recorded as written every time): ``create_graph=True`` (the nodes then
carry GradFns of their own), gradients asked for by ``autograd.grad`` or ``inputs=``,
retained non-leaf gradients (``retain_grad``), a GradFn already released (the rule
raises), a custom ``autograd.Function`` unless it promises a pure backward and names
its structure (``Function.template_key``), and any pass whose recording reads a value
outside its slots or places a node on a device its inputs do not give it.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from nova.core.lru import LRU
from nova.tensor import autocast_state
from nova.tensor.node_template import CallTemplate, capture_steps
from nova.tensor.tape import GradFn
from nova.autograd.graph import FUNCTION
from nova.tensor.tensor import Tensor
from nova.tensor.trace import Node, live_pending

# Templates by key, least recently used first; None marks a structure that cannot be
# stamped (recorded as written every time, without trying again). Bounded: a program
# that differentiates ever new shapes (growing sequences) keeps only the recent ones.
MAX_TEMPLATES = 64
_TEMPLATES: LRU[BackwardTemplate | None] = LRU()
_LOCK = threading.Lock()

class Structure:
    """What one backward pass's key walk found: the key, the slots (this call's nodes,
    numbered as the key numbers them), the leaves (tensors whose ``.grad`` the pass may
    set, numbered likewise) and the GradFns, numbered in discovery order."""

    __slots__ = ("key", "slots", "leaves", "found")

    def __init__(self, key: tuple, slots: list[Node], leaves: list[Tensor],
                 found: dict[GradFn, int]):
        self.key, self.slots, self.leaves, self.found = key, slots, leaves, found


def structure(outputs: Sequence[Tensor], grads: Sequence[Tensor],
              found: dict[GradFn, int]) -> Structure | None:
    """The key of a plain backward from ``outputs`` with seeds ``grads`` over the GradFns
    ``found``, with its slots and leaves; None when the pass cannot be a template (a
    GradFn released or with retained gradients).

    ``found``: the GradFns numbered in the order the engine's depth-first walk discovered
    them (``engine._discovered``); the key lists them in that order, each edge to a
    GradFn by that number: a complete description of the graph (two passes with one key
    are the same graph). The walk is deterministic, so GradFns with one number
    correspond too (the template's ``ran``)."""
    slots: list[Node] = []
    slot_of: dict[Node, int] = {}       # nodes hash by identity
    leaves: list[Tensor] = []
    leaf_of: dict[int, int] = {}        # id(leaf tensor) -> leaf number (Tensor's == is
                                        # elementwise: not a key)

    def slot(n: Node) -> int:
        k = slot_of.get(n)
        if k is None:
            k = slot_of[n] = len(slots)
            slots.append(n)
        return k

    def edge(e: Any) -> int | None:
        """A GradFn by its number (>= 0), a leaf tensor as ``-1 - leaf``."""
        if e is None:
            return None
        if type(e) is GradFn:
            return found[e]
        k = leaf_of.get(id(e))
        if k is None:
            k = leaf_of[id(e)] = len(leaves)
            leaves.append(e)
        return -1 - k

    seeds = []
    for out, g in zip(outputs, grads):
        n = g.node
        seeds.append((edge(out._grad_edge()), slot(n), n.shape, n.dtype))
    fns = []
    append, slot_at = fns.append, slot_of.get
    # (edge() and slot() inlined: this loop runs for every GradFn of the pass, ~900 on
    # a medium GPT; leaves and first sightings of a slot take the calls)
    for fn in found:
        if fn.released or fn.retained:
            return None
        if fn.op == FUNCTION:
            # a custom Function's backward is Python: recorded as written, unless the
            # class is pure and keys its structure; its slots are what it reads
            template = fn.attrs.get("template")
            if template is None:
                return None
            append((FUNCTION, template, fn.in_shapes, fn.in_dtypes,
                    tuple([None if e is None else found[e] if type(e) is GradFn else edge(e)
                           for e in fn.next]),
                    tuple([slot(n) for n in fn.attrs["reads"]()]), None))
            continue
        out = fn.out_node
        append((fn.op, fn.sig, fn.in_shapes, fn.in_dtypes,
                tuple([None if e is None else found[e] if type(e) is GradFn else edge(e)
                       for e in fn.next]),
                tuple([None if n is None else k if (k := slot_at(n)) is not None
                       else slot(n) for n in fn.saved]),
                None if out is None else k if (k := slot_at(out)) is not None
                else slot(out)))
    before = []
    for leaf in leaves:
        g = leaf.grad
        if g is None:
            before.append(None)
        else:
            n = g.node
            before.append((slot(n), n.shape, n.dtype))
    key = (autocast_state.LOWER.get(), tuple(seeds), tuple(fns), tuple(before))
    return Structure(key, slots, leaves, found)


def lookup(key: tuple) -> BackwardTemplate | None | bool:
    """The template of ``key``; None if its structure cannot be stamped; False if the
    structure has not been seen."""
    with _LOCK:
        return _TEMPLATES.get(key, False)


def store(key: tuple, template: BackwardTemplate | None) -> None:
    with _LOCK:
        _TEMPLATES[key] = template
        while len(_TEMPLATES) > MAX_TEMPLATES:
            _TEMPLATES.pop_oldest()


def clear() -> None:
    """Forget every template (tests; nothing else needs to)."""
    with _LOCK:
        _TEMPLATES.clear()


class BackwardTemplate:
    """The nodes of one recorded backward pass as a call, which leaves it gives a
    gradient, and the GradFns it ran."""

    __slots__ = ("call", "touched", "ran")

    def __init__(self, call: CallTemplate, touched: tuple[bool, ...], ran: tuple[int, ...]):
        self.call = call         # results: one per touched leaf, its .grad after the pass
        self.touched = touched   # per leaf: whether the pass set its .grad
        self.ran = ran           # numbers (``Structure.found``) of the GradFns whose rule ran

    @staticmethod
    def capture(st: Structure, first: int, ran: list[int]) -> BackwardTemplate | None:
        """The template of the pass just recorded over ``st`` (its nodes numbered from
        ``first`` on; the GradFns numbered ``ran`` ran their rules), or None if it
        read a node that is not a slot or placed one on a device its inputs do not
        give it. With a template, the gradients the pass set are replaced by its
        call's results, so this step has the structure of the stamped ones."""
        slot_of = {id(n): -1 - k for k, n in enumerate(st.slots)}
        results: list[int | None] = []
        finals: list[Node] = []
        for k, leaf in enumerate(st.leaves):
            g = leaf.grad
            before = st.key[3][k]
            if g is None:
                if before is not None:
                    return None     # a gradient removed during the pass
                results.append(None)
                continue
            n = g.node
            if before is not None and slot_of.get(id(n)) == -1 - before[0]:
                results.append(None)    # untouched
                continue
            results.append(0)           # filled below
            finals.append(n)
        captured = capture_steps(finals, slot_of, first, len(st.slots))
        if captured is None:
            return None
        _, index, order = captured
        template = BackwardTemplate(CallTemplate(order, index, [index[id(n)] for n in finals]),
                                    tuple([r is not None for r in results]), tuple(ran))
        template._set_grads(st, None, recorded=True)
        return template

    def stamp(self, st: Structure, retain_graph: bool, reached: set[int] | None) -> None:
        """Record the pass over ``st`` from this template: the same nodes, reading this
        call's slots; set the leaves' gradients and release the GradFns (unless
        ``retain_graph``) as the recorded pass did. ``reached`` receives the ids of the
        leaves given a gradient."""
        self._set_grads(st, reached)
        if not retain_graph:       # (GradFn.release, inlined: ~900 GradFns a pass)
            fns = list(st.found)
            for k in self.ran:
                fn = fns[k]
                fn.saved = (None,) * len(fn.saved)
                fn.out_node = None
                fn.released = True
                if fn.op == FUNCTION:
                    fn.attrs = {}      # (its ctx: the saved tensors, as release drops them)

    def _set_grads(self, st: Structure, reached: set[int] | None,
                   recorded: bool = False) -> None:
        """Give the leaves the pass touches their gradients: the call's results over
        ``st``'s slots (``reached`` receives their ids). A leaf without a ``.grad``
        gets a new tensor; one with a ``.grad`` has it updated in place, as the
        engine's accumulation does (``engine._accumulate_grad``). ``recorded``: the pass
        over ``st`` was just recorded, so those ``.grad`` hold their sums already: each
        is rebound to its call result, the same value, without a second version step
        (one that is a view keeps the sum as recorded: a view re-derives its node)."""
        results = iter(self.call.stamp(st.slots))
        before = st.key[3]
        for k, (leaf, touched) in enumerate(zip(st.leaves, self.touched)):
            if touched:
                node = next(results)
                g = leaf.grad
                if before[k] is None:
                    leaf.grad = Tensor._wrap(node)
                elif not recorded:
                    g._assign(Tensor._wrap(node), "add_")
                elif g._view is None:
                    g._node = node
                    live_pending.add(g)
                if reached is not None:
                    reached.add(id(leaf))
