"""The graph contract between the front end and the compiler: a pending computation in
canonical numbering (``PendingGraph``), as ``nova.tensor.trace.extract`` makes it and
``nova.compiler.irgen`` builds it into the nova dialect, and how device buffers store
each dtype. It lives here, below both, so the compiler and the runtime never import
``nova.tensor``."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nova.core.dtypes import DType


def storage_dtype(np_dtype: Any) -> np.dtype:
    """How a device buffer stores ``np_dtype``: float16 and bfloat16 as their uint16 bits
    (CuPy has no bfloat16; the generated kernels load and convert the bits themselves),
    every other dtype as itself."""
    d = np.dtype(np_dtype)
    return np.dtype(np.uint16) if d.itemsize == 2 and d.kind not in "iu" else d


# ---------------------------------------------------------------- structural keys
#
# A trace node's signature -- (op, attributes, shape, dtype name[, "backward"]) -- is
# interned to a small int when the node is made, and a graph's structural key is built
# from those ints (``StructuralKey``). Why: the executable cache hashes and compares a
# step's key on every realization, and a key of nested tuples (a fresh tuple tree per
# node) cost a small GPT step ~3 ms to build, hash, compare and free; ints are hashed
# and compared in C without recursion. The table is per process and append-only (an id
# is never reused, so a key stays decodable for as long as anything holds it); what
# must mean the same in another process -- the disk cache's entry names -- decodes the
# ids back into signatures (``decoded_key``). It holds one entry per distinct signature
# the process has recorded (shapes included), the same order of size as the keys of
# the cached steps.

SIGNATURE_IDS: dict[tuple, int] = {}
_SIGNATURES: list[tuple] = []
_INTERN_LOCK = threading.Lock()


def signature_id(sig: tuple) -> int:
    """The interned id of node signature ``sig`` (assigned on first sight)."""
    sid = SIGNATURE_IDS.get(sig)
    if sid is None:
        with _INTERN_LOCK:
            sid = SIGNATURE_IDS.get(sig)
            if sid is None:
                sid = len(_SIGNATURES)
                _SIGNATURES.append(sig)      # before the id is visible to other threads
                SIGNATURE_IDS[sig] = sid
    return sid


def signature(sid: int) -> tuple:
    """The node signature interned as ``sid``: (op, attributes, shape, dtype name[,
    "backward"])."""
    return _SIGNATURES[sid]


def split_inputs(flat: tuple[int, ...], arity: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Per node input numbers from the flat ones and each node's count."""
    out, at = [], 0
    for n in arity:
        out.append(flat[at:at + n])
        at += n
    return out


def decoded_key(key: tuple) -> tuple:
    """Structural key ``key`` (see ``PendingGraph.key``) with its signature ids replaced by
    the signatures: the same structure in every process. (argument signatures, ((node
    signature, input numbers), ...), output numbers[, ("device", backend key)])."""
    args, sigs, arity, flat, outputs = key[:5]
    decoded = (tuple([_SIGNATURES[a] for a in args]),
               tuple(zip([_SIGNATURES[s] for s in sigs], split_inputs(flat, arity))),
               outputs)
    return decoded + key[5:]


# ---------------------------------------------------------------- calls
#
# A template stamp (``nova.tensor.node_template.CallTemplate``: an optimizer's update of
# one parameter, a whole backward pass) records ONE ``call`` node over the values it
# reads, and one ``call_result`` node per value it gives back, instead of every node
# of its body: the Python cost of a recorded step -- making, walking, hashing and
# checking ~3,000 nodes a medium GPT step -- then follows the ops the user's code
# calls, not the ops the templates stand for. The body is a fixed list of primitive
# steps (``CallBody``); its structure is the call node's signature, so the step's
# structural key pins it down, and the compiler sees only primitive ops:
# ``PendingGraph.inlined`` expands every call in place (a cache miss, not every step).

CALL = "call"
CALL_RESULT = "call_result"


@dataclass(frozen=True, eq=False)
class CallBody:
    """The primitive nodes a ``call`` stands for.

    ``steps``: (op, attrs, shape, dtype, backward, inputs) in topological order, each
    input a reference: ``-1 - k`` is the call's input ``k``, ``r >= 0`` step ``r``.
    ``results``: the step each ``call_result`` (by its ``index`` attribute) reads."""

    steps: tuple[tuple[str, dict, tuple, DType, bool, tuple[int, ...]], ...]
    results: tuple[int, ...]


@dataclass(frozen=True)
class GraphNode:
    """A node of a PendingGraph: ``inputs`` are indices into ``PendingGraph.values``."""

    op: str
    attrs: dict[str, Any]
    inputs: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: DType
    backward: bool = False


@dataclass
class PendingGraph:
    """A pending computation in canonical numbering.

    Values ``0 .. len(args)-1`` are the function arguments (realized buffers, in order of
    first use); the following values are ``nodes`` in topological order. ``outputs``
    index into the values. ``key`` is hashable and equal exactly when two graphs have the
    same structure: (argument signature ids, node signature ids, each node's number of
    inputs, all input numbers in node order, output numbers[, ("device", backend
    key)]), signature ids as
    ``signature_id`` interns them (``decoded_key`` spells them out).
    """

    args: list[tuple[tuple[int, ...], DType]]
    outputs: list[int]
    key: tuple
    arg_buffers: list[np.ndarray]
    # The trace nodes behind the numbering, for the donation check at realization (see
    # nova.tensor.realize); dropped once the graph has run.
    arg_nodes: list[Any] = field(default_factory=list)
    pending_nodes: list[Any] = field(default_factory=list)
    # Each pending node's input numbers, flat, and how many each node has: built in C
    # (map over the nodes' inputs) on every realization; per node only when asked.
    flat_inputs: tuple[int, ...] = ()
    arity: tuple[int, ...] = ()
    _nodes: list[GraphNode] | None = None
    _inlined: PendingGraph | None = None

    @property
    def node_inputs(self) -> list[tuple[int, ...]]:
        """Each pending node's input numbers."""
        return split_inputs(self.flat_inputs, self.arity)

    @property
    def nodes(self) -> list[GraphNode]:
        """The pending nodes in canonical numbering. Built on first use (a cache miss or
        an error message), not on every replay; first use must precede the run, which
        turns the pending nodes into buffers."""
        if self._nodes is None:
            self._nodes = [GraphNode(n.op, n.attrs, ins, n.shape, n.dtype, n.backward)
                           for n, ins in zip(self.pending_nodes, self.node_inputs)]
        return self._nodes

    def inlined(self) -> PendingGraph:
        """This graph with every ``call`` expanded into its body's primitive nodes, in
        place of the call (the values the compiler sees: ``irgen`` builds this). The
        arguments, their order, the outputs' positions and the key are unchanged; a
        graph without calls is its own inlined form. Built on first use, before the
        run (which turns the pending nodes into buffers)."""
        if self._inlined is not None:
            return self._inlined
        nodes = self.pending_nodes
        if not any([n.op == CALL for n in nodes]):
            return self     # (not kept: a graph referring to itself would be a cycle,
            #                  and its nodes would outlive the run until a collection)
        n_args = len(self.args)
        where: list[int] = list(range(n_args))   # old value number -> new
        bases: dict[int, tuple[int, CallBody]] = {}   # call's old number -> (base, body)
        out: list[GraphNode] = []
        for k, (n, ins) in enumerate(zip(nodes, self.node_inputs)):
            if n.op == CALL:
                body: CallBody = n.attrs["body"]
                base = n_args + len(out)
                args = [where[i] for i in ins]
                for op, attrs, shape, dtype, backward, refs in body.steps:
                    out.append(GraphNode(op, attrs, tuple([
                        args[-1 - r] if r < 0 else base + r for r in refs]),
                        shape, dtype, backward))
                bases[n_args + k] = (base, body)
                where.append(-1)        # a call is not a value
            elif n.op == CALL_RESULT:
                base, body = bases[ins[0]]
                where.append(base + body.results[n.attrs["index"]])
            else:
                where.append(n_args + len(out))
                out.append(GraphNode(n.op, n.attrs, tuple([where[i] for i in ins]),
                                     n.shape, n.dtype, n.backward))
        flat = tuple(i for g in out for i in g.inputs)
        graph = PendingGraph(self.args, [where[i] for i in self.outputs], self.key,
                             self.arg_buffers, self.arg_nodes, [], flat,
                             tuple(len(g.inputs) for g in out), out)
        self._inlined = graph
        return graph

    def describe_value(self, i: int) -> str:
        """Value ``i`` of the inlined graph (the numbering the compiler's IR uses)."""
        if i < len(self.args):
            shape, dt = self.args[i]
            return f"argument {i} {shape} {dt.name}"
        n = self.inlined().nodes[i - len(self.args)]
        return f"value %{i} nova.{n.op} {n.shape} {n.dtype.name}"
