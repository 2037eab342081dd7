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

from nova.compiler.irgen import build_module
from nova.compiler.passes import simplify
from nova.runtime.cache import CACHE
from nova.runtime.engine import get_engine
from nova.runtime.executable import Executable
from nova.runtime.interpreter import InterpreterError
from nova.tensor.tensor import Tensor
from nova.tensor.trace import Node, PendingGraph, RealizationError, extract, live_pending


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


def realize(*tensors: Tensor) -> None:
    """Compute all pending work held by live tensors (``nv.realize``)."""
    outputs = _pending_outputs(tensors)
    if not outputs:
        return
    graph = extract(outputs)
    engine = get_engine()
    exe = CACHE.lookup(graph.key, lambda: Executable(simplify(build_module(graph)), engine),
                       engine)
    try:
        results = exe.run(graph.arg_buffers)
    except InterpreterError as e:
        _poison(outputs, e.outputs if e.outputs is not None else tuple(range(len(outputs))),
                str(e))
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
