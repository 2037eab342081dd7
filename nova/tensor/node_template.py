"""Recorded nodes kept as steps and stamped again: what Nova's recording templates share.

Three things record the same nodes over and over while their inputs' values change: a
parameter's optimizer update (``nova.optim.update_template``), a backward pass
(``nova.autograd.backward_template``) and a call of a composite function such as
``layer_norm`` (``nova.tensor.function_template``). Each keeps the nodes of a first
recording as *steps* -- op, attributes, shape, dtype, structural signature and
backward mark, and inputs as earlier steps or numbered *slots* (the nodes the recording
read from outside) -- and later stamps them from new slots, without the op front end.

A step's device is not stored: a stamped node gets its inputs' device as the op front
end gives it (``ops.prim``), and capture refuses a recording in which a node's device
is anything else, so a template captured on one device stamps correctly on another.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any

from nova.core.dtypes import DType
from nova.tensor import trace
from nova.tensor.trace import Node

# (op, attrs, shape, dtype, sig, backward mark, inputs). Stamping reads the inputs from
# a pool -- the slots, then the nodes stamped so far -- so ``inputs`` is a position in
# it (one input), or a C-level getter of the tuple (``operator.itemgetter``), or ():
# what costs least per stamped node, where a small GPT step stamps ~2,000.
Step = tuple[str, dict, tuple, DType, int, bool, Any]


def derived_device(inputs: tuple[Node, ...]) -> str | None:
    """The device ``ops.prim`` gives a node with ``inputs``: the first input's that has
    one, None when every input follows its consumers (or there are none)."""
    for i in inputs:
        if i.device is not None:
            return i.device
    return None


def capture_steps(finals: list[Node], slot_of: dict[int, int], first: int,
                  n_slots: int) -> tuple[list[Step], dict[int, int], list[Node]] | None:
    """The steps behind ``finals`` back to the slots (``slot_of``: id(node) -> ``-1 - k``,
    ``k`` < ``n_slots``, the number of slots a stamp is given), in creation order, every captured node's reference (id(node) -> step index or
    slot) and the captured nodes (by step index); None if a node on the way is neither a slot nor pending and made at or after
    creation number ``first`` (a value from outside), or has a device its inputs do not
    give it."""
    seen: dict[int, Node] = {}
    stack = [n for n in finals if id(n) not in slot_of]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        if n.buffer is not None or n.seq < first or n.op == "error":
            return None
        seen[id(n)] = n
        stack.extend(i for i in n.inputs if id(i) not in slot_of and id(i) not in seen)
    order = sorted(seen.values(), key=lambda n: n.seq)
    index = dict(slot_of)
    steps: list[Step] = []
    for k, n in enumerate(order):
        if n.device != derived_device(n.inputs):
            return None
        index[id(n)] = k
        pool = [n_slots + r if r >= 0 else -1 - r for r in [index[id(i)] for i in n.inputs]]
        inputs = pool[0] if len(pool) == 1 else itemgetter(*pool) if pool else ()
        steps.append((n.op, n.attrs, n.shape, n.dtype, n.sig, n.backward, inputs))
    return steps, index, order


def stamp_steps(steps: list[Step], slots: list[Node]) -> list[Node]:
    """New pending nodes for ``steps``, reading ``slots``, numbered in order."""
    pool = list(slots)
    first = len(pool)
    new, count, add = Node.__new__, trace._seq, pool.append
    for op, attrs, shape, dtype, sig, backward, get in steps:
        n = new(Node)
        n.op, n.attrs, n.shape, n.dtype, n.sig, n.backward = op, attrs, shape, dtype, sig, \
            backward
        inputs = n.inputs = (pool[get],) if type(get) is int else get(pool) if get else ()
        device = None
        for i in inputs:
            if i.device is not None:
                device = i.device
                break
        n.device = device
        n.buffer = None
        n.seq = next(count)      # (trace.next_seq, without its call)
        add(n)
    return pool[first:]


def resolve(ref: int, made: list[Any], slots: list[Any]) -> Any:
    """What reference ``ref`` names: a stamped step or a slot."""
    return made[ref] if ref >= 0 else slots[-1 - ref]
