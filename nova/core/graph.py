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

    def describe_value(self, i: int) -> str:
        if i < len(self.args):
            shape, dt = self.args[i]
            return f"argument {i} {shape} {dt.name}"
        n = self.nodes[i - len(self.args)]
        return f"value %{i} nova.{n.op} {n.shape} {n.dtype.name}"
