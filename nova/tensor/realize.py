"""Realization: run the pending work that live tensors hold, through the nova dialect.

``realize`` collects every pending node still referenced by a live tensor (plus the
ones asked for), extracts them as one PendingGraph, looks its structural key up in the
executable cache (building, verifying and compiling the nova function on a miss), runs
it on the argument buffers and binds each result to its node. After that, every live
tensor reads a buffer and nothing pending is computed twice.

If running fails (say an index out of range), the outputs that depend on the failing op
are marked with the error, which they re-raise when asked for again; the others stay
pending, so one bad tensor does not poison every later realization.
"""
from __future__ import annotations

import sys
import weakref
from functools import partial

import numpy as np

from nova.compiler.irgen import build_module
from nova.compiler.passes import optimize
from nova.runtime.cache import CACHE
from nova.runtime.engine import get_engine, get_remat
from nova.runtime.executable import Executable
from nova.runtime.interpreter import InterpreterError
from nova.tensor import dtypes as _dt
from nova.tensor.tensor import Tensor
from nova.tensor.trace import (
    Node,
    PendingGraph,
    RealizationError,
    extract,
    live_pending,
)


def _pending_outputs(requested: tuple[Tensor, ...]) -> list[Node]:
    for t in requested:
        if not isinstance(t, Tensor):
            raise TypeError(f"realize: expected tensors, got {type(t).__name__}")
        if t.node.op == "error":
            raise RealizationError(t.node.attrs["message"])
    nodes: dict[int, Node] = {}
    for t in list(live_pending):
        n = t.node
        if n.realized or n.op == "error":
            live_pending.discard(t)
        else:
            nodes[id(n)] = n
    for t in requested:
        n = t.node
        if not n.realized:
            nodes[id(n)] = n
    return sorted(nodes.values(), key=lambda n: n.seq)


def _poison(outputs: list[Node], failed: tuple[int, ...], message: str) -> None:
    """Mark the outputs (by result position) whose value depends on the failure."""
    for pos in failed:
        node = outputs[pos]
        node.op, node.inputs, node.attrs = "error", (), {"message": message}


# What each realized node is, for the memory report: the optimizer names its parameters
# and state before it realizes a step. Weak: the registry never keeps a buffer alive.
ROLES: weakref.WeakKeyDictionary[Node, str] = weakref.WeakKeyDictionary()

# A node referenced from one list and the frame that inspects it, beyond its references
# from the graph; measured once, so the check below holds on any CPython.
def _baseline_refs() -> int:
    probe = [Node("buffer", (), {}, (), _dt.float32, None)]
    return sys.getrefcount(probe[0])


_BASE_REFS = _baseline_refs()


def donatable(graph: PendingGraph, candidates: frozenset[int],
              outputs: list[Node]) -> frozenset[int]:
    """The candidate arguments whose buffers nobody but this graph can read again.

    An argument node is donated when its only references are the inputs of the pending
    nodes this realization computes (so: no tensor handle, no saved value of a retained
    autograd graph, no pending node outside the graph), when no pending node of the graph
    that escapes (is referenced from outside and may be computed again later) depends on
    it, and when its buffer's memory is a writable array nobody else views. Reference
    counts make this exact and cheap; anything unexpected means "not donated"."""
    if not candidates:
        return frozenset()
    in_graph = _references_in(graph.pending_nodes)   # (no loop variable left holding one)
    ok = set()
    for a in candidates:
        node = graph.arg_nodes[a]
        # beyond the graph's references: the arg_nodes list and the local ``node``
        if sys.getrefcount(node) - _BASE_REFS - 1 - in_graph.get(id(node), 0) == 0 \
                and _sole_owner(graph.arg_buffers[a]):
            ok.add(a)
    if not ok:
        return frozenset()
    results = {id(n) for n in outputs}
    escaping = [n for n in graph.pending_nodes if id(n) not in results
                and sys.getrefcount(n) - _BASE_REFS - 1 - in_graph.get(id(n), 0) > 0]
    if escaping:   # a node computed again later must still find its arguments intact
        reach = _arguments_behind(escaping)
        ok = {a for a in ok if id(graph.arg_nodes[a]) not in reach}
    return frozenset(ok)


def _references_in(nodes: list[Node]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for n in nodes:
        for i in n.inputs:
            counts[id(i)] = counts.get(id(i), 0) + 1
    return counts


def _sole_owner(buffer: np.ndarray) -> bool:
    """Whether ``buffer`` (a node's read-only view) is the only view of writable memory
    it owns: referenced by the node and the graph's argument list only."""
    if sys.getrefcount(buffer) - _BASE_REFS - 2 != 0:   # + the node, the parameter
        return False
    owner = buffer.base
    return (isinstance(owner, np.ndarray) and owner.base is None and owner.flags.owndata
            and owner.flags.writeable and sys.getrefcount(owner) - _BASE_REFS - 1 == 0)


def _arguments_behind(nodes: list[Node]) -> set[int]:
    seen: set[int] = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        for i in n.inputs:
            if id(i) not in seen:
                seen.add(id(i))
                if not i.realized:
                    stack.append(i)
    return seen


def _compile(graph: PendingGraph, engine: str, remat: str) -> Executable:
    return Executable(optimize(build_module(graph), remat), engine)


def realize(*tensors: Tensor) -> None:
    """Compute all pending work held by live tensors (``nv.realize``)."""
    outputs = _pending_outputs(tensors)
    if not outputs:
        return
    graph = extract(outputs)
    engine, remat = get_engine(), get_remat()
    label = engine if remat == "default" else f"{engine}, remat={remat}"
    exe = CACHE.lookup(graph.key, partial(_compile, graph, engine, remat), label)
    donated = donatable(graph, exe.donation_candidates, outputs)
    roles = [ROLES.get(n, "input") for n in graph.arg_nodes]
    buffers = graph.arg_buffers
    del graph   # the nodes behind it must not outlive the run
    try:
        results = exe.run(buffers, donated, roles)
    except InterpreterError as e:
        failed = e.outputs if e.outputs is not None and not donated else range(len(outputs))
        _poison(outputs, tuple(failed), str(e) + (
            " (every result of the step fails: it had started overwriting donated buffers)"
            if donated else ""))
        raise RealizationError(str(e)) from e
    for node, value in zip(outputs, results):
        value = value.view()
        value.flags.writeable = False
        node.bind(value)
    for t in list(live_pending):
        if t.node.realized:
            live_pending.discard(t)


def pending_graph(*tensors: Tensor) -> PendingGraph:
    """The graph that computes ``tensors`` (for inspection; nothing runs)."""
    return extract([t.node for t in tensors])
