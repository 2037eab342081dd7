"""Recorded nodes kept as steps and stamped again: what Nova's recording templates share.

Three things record the same nodes over and over while their inputs' values change: a
parameter's optimizer update (``nova.optim.update_template``), a backward pass
(``nova.autograd.backward_template``) and a call of a composite function such as
``layer_norm`` (``nova.tensor.function_template``). Each keeps the nodes of a first
recording as *steps* -- op, attributes, shape, dtype, structural signature and
backward mark, and inputs as earlier steps or numbered *slots* (the nodes the recording
read from outside) -- and later stamps them from new slots, without the op front end:
node by node (``stamp_steps``) where the caller needs the intermediate nodes (a
function's GradFns save them), or as one ``call`` node with a ``call_result`` per kept
value (``CallTemplate``) where it needs only the results (an update, a backward pass).

A step's device is not stored: a stamped node gets its inputs' device as the op front
end gives it (``ops.prim``), and capture refuses a recording in which a node's device
is anything else, so a template captured on one device stamps correctly on another.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any

from nova.core.dtypes import DType, float32
from nova.core.graph import CALL, CALL_RESULT, CallBody, signature_id
from nova.core.graph import signature as trace_signature
from nova.tensor import trace
from nova.tensor.trace import Node

# (op, attrs, shape, dtype, sig, backward mark, inputs). Stamping reads the inputs from
# a pool -- the slots, then the nodes stamped so far -- so ``inputs`` is a position in
# it (one input), or a C-level getter of the tuple (``operator.itemgetter``), or ():
# what costs least per stamped node, where a small GPT step stamps ~2,000.
Step = tuple[str, dict, tuple, DType, int, bool, Any]

_CALL_DTYPE = float32      # (a call is not a value: its shape and dtype are never read)
_NOT_A_STEP = frozenset({"error", CALL, CALL_RESULT})


def derived_device(inputs: tuple[Node, ...]) -> str | None:
    """The device ``ops.prim`` gives a node with ``inputs``: the first input's that has
    one, None when every input follows its consumers (or there are none)."""
    for i in inputs:
        if i.device is not None:
            return i.device
    return None


def capture_steps(finals: list[Node], slot_of: dict[int, int], first: int,
                  n_slots: int, adopt: list[Node] | None = None
                  ) -> tuple[list[Step], dict[int, int], list[Node]] | None:
    """The steps behind ``finals`` back to the slots (``slot_of``: id(node) -> ``-1 - k``,
    ``k`` < ``n_slots``, the number of slots a stamp is given), in creation order, every
    captured node's reference (id(node) -> step index or slot) and the captured nodes
    (by step index); None if a node on the way is neither a slot nor pending and made
    at or after creation number ``first`` (a value from outside), has a device its
    inputs do not give it, or is a ``call`` or ``call_result`` (a body holds primitive
    steps only: a stamped call inside a recording being captured makes it refuse, not
    nest).

    ``adopt``, if given, receives the realized nodes made at or after ``first`` that the
    steps read (buffers the recording made: an optimizer's first step creates its state
    so), numbered as slots after the ``n_slots`` given, instead of refusing them."""
    seen: dict[int, Node] = {}
    slot_of = dict(slot_of)
    stack = [n for n in finals if id(n) not in slot_of]
    while stack:
        n = stack.pop()
        if id(n) in seen or id(n) in slot_of:
            continue
        if n.buffer is not None and adopt is not None and n.seq >= first:
            slot_of[id(n)] = -1 - (n_slots + len(adopt))
            adopt.append(n)
            continue
        if n.buffer is not None or n.seq < first or n.op in _NOT_A_STEP:
            return None
        seen[id(n)] = n
        stack.extend(i for i in n.inputs if id(i) not in slot_of and id(i) not in seen)
    n_slots += len(adopt or ())
    order = sorted(seen.values(), key=lambda n: n.seq)
    index = slot_of
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
    stamp_into(steps, pool)
    return pool[len(slots):]


def stamp_into(steps: list[Step], pool: list[Node]) -> None:
    """``stamp_steps`` for a caller that keeps the pool: ``pool`` holds the slots and
    receives the new nodes after them."""
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


class CallTemplate:
    """Captured steps stamped as ONE ``call`` node, with a ``call_result`` node per
    value the caller keeps (``nova.core.graph``'s calls): what the optimizer's update
    and the backward pass record after their first time.

    Stamping the steps one node each (``stamp_steps``) costs a node's worth of Python
    per step, and every later stage of a recorded step -- extraction, the structural
    key, donation, the forgetting after the run -- pays per node again: an AdamW update
    is ~22 nodes, a medium GPT's backward ~900. A call is one node whatever its body;
    ``PendingGraph.inlined`` puts the body back, in the call's place, for the compiler,
    so the IR is the one the stamped steps would give: the body reads the call's
    inputs -- the slots it uses, in order of first use, as extraction numbers
    arguments -- and a ``call_result`` is the step it names.

    A result's device is the one ``ops.prim`` would have given the stamped step: the
    first device among the slots its derivation reaches, in the order ``derived_device``
    reads them (kept per result in ``kept``), so a template captured on one device
    stamps on another."""

    __slots__ = ("body", "sig", "used", "results", "kept")

    def __init__(self, order: list[Node], index: dict[int, int], refs: list[int]):
        """From ``capture_steps``' captured nodes (``order``) and references
        (``index``), for the results ``refs`` (step or slot references)."""
        used: list[int] = []            # slots the body reads, by first use
        input_of: dict[int, int] = {}
        steps = []
        sigs = []
        for n in order:
            ins = []
            for i in n.inputs:
                r = index[id(i)]
                if r < 0:
                    k = input_of.get(r)
                    if k is None:
                        k = input_of[r] = len(used)
                        used.append(-1 - r)
                    r = -1 - k
                ins.append(r)
            steps.append((n.op, n.attrs, n.shape, n.dtype, n.backward, tuple(ins)))
            sigs.append((trace_signature(n.sig), tuple(ins)))
        kept = sorted({r for r in refs if r >= 0})
        self.body = CallBody(tuple(steps), tuple(kept))
        # (op, attributes, shape, dtype name), as every signature reads
        self.sig = signature_id((CALL, (("steps", tuple(sigs)), ("results", tuple(kept))),
                                 (), "none"))
        self.used = itemgetter(*used) if len(used) > 1 else (
            (lambda pool, k=used[0]: (pool[k],)) if used else (lambda pool: ()))
        position = {r: j for j, r in enumerate(kept)}
        # per result: a slot's number k as k, the kept step at position j as -1 - j
        self.results = tuple([-1 - r if r < 0 else -1 - position[r] for r in refs])
        # per kept step (in step order, as the steps' creation numbers run): its
        # call_result's shape, dtype, signature and the slots whose devices decide its
        # device, in the order derived_device reads them
        reach: list[tuple[int, ...]] = []
        for _, _, _, _, _, ins in steps:
            seq: dict[int, None] = {}
            for r in ins:
                for k in ((used[-1 - r],) if r < 0 else reach[r]):
                    seq.setdefault(k, None)
            reach.append(tuple(seq))
        self.kept = tuple([(order[r].shape, order[r].dtype,
                            signature_id((CALL_RESULT, (("index", j),), order[r].shape,
                                          order[r].dtype.name)), {"index": j}, reach[r])
                           for j, r in enumerate(kept)])

    def stamp(self, slots: list[Node]) -> list[Node]:
        """The results for ``slots`` (a slot itself where the result is one): one
        ``call`` node over the slots the body reads, then one ``call_result`` per kept
        step, in step order (shared by the results that name the same step)."""
        new, count = Node.__new__, trace._seq
        call = new(Node)
        call.op, call.attrs, call.shape, call.dtype = CALL, {"body": self.body}, (), _CALL_DTYPE
        call.sig, call.backward, call.buffer = self.sig, False, None
        inputs = call.inputs = self.used(slots)
        call.device = derived_device(inputs)
        call.seq = next(count)
        made = []
        for shape, dtype, sig, attrs, sources in self.kept:
            n = new(Node)
            n.op, n.attrs, n.inputs, n.shape, n.dtype = CALL_RESULT, attrs, (call,), shape, dtype
            n.sig, n.backward, n.buffer = sig, False, None
            device = None
            for k in sources:
                device = slots[k].device
                if device is not None:
                    break
            n.device = device
            n.seq = next(count)
            made.append(n)
        return [slots[r] if r >= 0 else made[-1 - r] for r in self.results]
