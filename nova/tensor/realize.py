"""Realization: run the pending work that live tensors hold, through the nova dialect.

``realize`` collects every pending node still referenced by a live tensor (plus the
ones asked for), extracts them as one PendingGraph, looks its structural key up in the
executable cache (building, verifying and compiling the nova function on a miss), runs
it on the argument buffers and binds each result to its node. After that, every live
tensor reads a buffer and nothing pending is computed twice.

Each device realizes its own step: the pending outputs are split by device (``cuda``
first, then the CPU; nodes without a device — constants — go with the CPU), and a CUDA
step always runs on the ``cuda`` engine, whose executables are keyed by the device and
its backend as well as the structure.

A failure poisons only what depends on it. If running fails with an error that names
its op (an index out of range), the outputs that depend on that op are marked with the
error, which they re-raise when asked for again. That holds in a step that donates
buffers too (an optimizer writing parameters over their old values), where the run
cannot simply be repeated once a kernel has written over a donated buffer: the values
the run finished before the failure, and that do not depend on it, are kept as it
computed them (``nova.runtime.program.Salvage``), and only a value that would have to
be computed again from a buffer's overwritten old value is lost (see
``_after_failure``). Any other failure of a step with
several outputs (no memory for one huge tensor, a compiler error in one kernel) is
isolated by realizing the outputs again in halves, so the tensors that can be computed
are; the failing ones stay pending (ask again once the cause is gone: a memory limit,
say) but are no longer computed unasked, and ``realize`` raises only if a tensor it was
asked for failed. Ctrl-C during a run abandons the step (its values stay pending and
are computed by the next realization), except in a step that donates buffers: there the
interrupt is held for the whole run and delivered once its results are bound
(``nova.runtime.interrupts``), since a run stopped after its first write over a donated
buffer could be neither resumed nor repeated.
"""
from __future__ import annotations

import contextlib
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from nova.compiler.pipeline import front, fused_attention
from nova.core import dtypes as _dt
from nova.core.graph import PendingGraph
from nova.runtime import cpu_engine, step_cache
from nova.runtime.cache import CACHE
from nova.runtime.engine import get_engine, get_remat
from nova.runtime.executable import Executable, overwrote_donated
from nova.runtime.host_buffers import sole_device_owner, sole_host_owner, upload_packed
from nova.runtime.interpreter import InterpreterError
from nova.runtime.interrupts import deferred_interrupt, raised_by_signal_handler
from nova.runtime.program import salvage_of
from nova.tensor import capture_log
from nova.tensor.tensor import Tensor
from nova.tensor.trace import Node, RealizationError, bind_all, extract, live_pending


def _pending_outputs(requested: tuple[Tensor, ...]) -> list[Node]:
    """The nodes a realization computes: ``requested``'s, every live tensor's and the
    required ones, pending, in creation order."""
    for t in requested:
        if not isinstance(t, Tensor):
            raise TypeError(f"realize: expected tensors, got {type(t).__name__}")
        if t.node.op == "error":
            raise RealizationError(t.node.attrs["message"])
    nodes: dict[int, Node] = {}
    for t in list(live_pending):
        n = t._node if t._view is None else t.node   # (the property: views only)
        if n.buffer is not None or n.op == "error":
            live_pending.discard(t)
        else:
            nodes[id(n)] = n
    for t in requested:
        n = t.node
        if not n.realized:
            nodes[id(n)] = n
    return _with_required(nodes)


def _with_required(nodes: dict[int, Node]) -> list[Node]:
    """``nodes`` (by id) and the pending values every realization computes
    (``live_pending.required``: collectives), in creation order."""
    required = live_pending.required
    if required:
        for n in required:
            if n.buffer is None and n.op != "error":
                nodes[id(n)] = n
        required.clear()
    return sorted(nodes.values(), key=lambda n: n.seq)


def _poison(outputs: list[Node], failed: tuple[int, ...], message: str) -> None:
    """Mark the outputs (by result position) whose value depends on the failure."""
    for pos in failed:
        node = outputs[pos]
        node.op, node.inputs, node.attrs = "error", (), {"message": message}


# What each step input is, for the memory report (``mark_role``): on the node, whose
# value it names (``Node.role``; a WeakKeyDictionary cost ~1 us per parameter and
# state tensor every step).
ROLE_NAMES = ("parameter", "optimizer state", "input")


def mark_role(t: Tensor, role: str) -> None:
    """Name what ``t``'s current value is when a step reads it, for the memory report
    (``nv.debug.memory_report``): ``"parameter"``, ``"optimizer state"`` or ``"input"``
    (what an unnamed one is). The optimizer marks its parameters and their state before
    it realizes a step. The name follows the value, not the handle: after an in-place
    update rebinds ``t``, mark it again."""
    if role not in ROLE_NAMES:
        raise ValueError(f"mark_role: role {role!r} is not one of {ROLE_NAMES} "
                         f"(tensor of shape {t.shape}, {t.dtype.name})")
    t.node.role = role


def role_of(t: Tensor) -> str:
    """The role ``mark_role`` gave ``t``'s current value (``"input"`` if none)."""
    return role_of_node(t.node)


def role_of_node(node: Node) -> str:
    """The role ``mark_role`` gave the value ``node`` holds (``"input"`` if none)."""
    return getattr(node, "role", "input")


# A node referenced from one list and the frame that inspects it, beyond its references
# from the graph; measured once, so the check below holds on any CPython (nova.capture
# counts a replay's arguments from it too).
def _baseline_refs() -> int:
    probe = [Node("buffer", (), {}, (), _dt.float32, None)]
    return sys.getrefcount(probe[0])


BASE_NODE_REFS = _baseline_refs()


def donatable(graph: PendingGraph, candidates: frozenset[int],
              outputs: list[Node], device: str = "cpu") -> frozenset[int]:
    """The candidate arguments whose buffers nobody but this graph can read again.

    An argument node is donated when its only references are the inputs of the pending
    nodes this realization computes (so: no tensor handle, no saved value of a retained
    autograd graph, no pending node outside the graph), when no pending node of the graph
    that escapes (is referenced from outside and may be computed again later) depends on
    it, and when its buffer's memory is a writable array nobody else views. Reference
    counts make this exact and cheap; anything unexpected means "not donated". The
    nodes are asked here; the buffers by the runtime (``host_buffers``), which sees only
    arrays."""
    if not candidates:
        return frozenset()
    # References from the graph's own nodes, by canonical number (counted in C).
    in_graph = Counter(graph.flat_inputs)
    owner = sole_host_owner if device == "cpu" else sole_device_owner
    ok = set()
    for a in candidates:
        node = graph.arg_nodes[a]
        # beyond the graph's references: the arg_nodes list and the local ``node``
        if sys.getrefcount(node) - BASE_NODE_REFS - 1 - in_graph[a] == 0 \
                and owner(graph.arg_buffers[a]):
            ok.add(a)
    if not ok:
        return frozenset()
    results = {id(n) for n in outputs}
    escaping, n = [], None
    nodes, first = graph.pending_nodes, len(graph.arg_nodes)
    # beyond the graph's references: the pending_nodes list and the local ``n`` (read
    # by index: enumerate's and zip's reused result tuple would hold one more)
    for k in range(len(nodes)):
        n = nodes[k]
        if id(n) not in results and \
                sys.getrefcount(n) - BASE_NODE_REFS - 1 - in_graph[first + k] > 0:
            escaping.append(n)
    del n
    if escaping:   # a node computed again later must still find its arguments intact
        reach = _arguments_behind(escaping)
        ok = {a for a in ok if id(graph.arg_nodes[a]) not in reach}
    return frozenset(ok)


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


class _StaleGraph(Exception):
    """A graph waiting for the compile lock had a node realized by another thread (a
    pending value both steps compute: binding makes the node a buffer in place); it is
    extracted again (``_run_step``). Building it from the changed nodes raised
    ``KeyError: 'buffer'`` in the IR builder (fuzz_threads)."""


def _compile(graph: PendingGraph, engine: str, remat: str, backend: Any = None,
             label: str = "") -> Executable:
    """The executable of ``graph``; a CPU step comes from the step cache on disk when an
    earlier process compiled the same structure (``nova.runtime.step_cache``)."""
    name = step_cache.digest(graph.key, label) if engine == "cpu" else None
    if name is not None:
        found = step_cache.load(name)
        if found is not None:
            module, lowered = found
            exe = Executable(module, engine, backend, lowered=lowered)
            exe.from_step_cache = True
            return exe
    graph.nodes      # the compiler's snapshot of the pending nodes, then: still pending?
    if any(n.buffer is not None for n in graph.pending_nodes):
        raise _StaleGraph
    if engine == "cpu":
        cpu_engine.anticipate(graph)     # (what the kernels call, ready meanwhile)
    exe = Executable(front(graph, remat, engine), engine, backend)
    if name is not None:
        step_cache.store(name, exe.module, exe.lowered)
    return exe


def realize(*tensors: Tensor) -> None:
    """Compute all pending work held by live tensors (``nv.realize``).

    Raises if one of ``tensors`` cannot be computed (with the error that stopped it);
    another pending value that fails is poisoned (an op was to blame) or left pending
    (see the module docstring), never the cause of this call's error."""
    if tensors:
        capture_log.host_read(f"realizing {len(tensors)} tensor(s): item(), numpy(), "
                              "print, bool() or nv.realize(t)")
    live_pending.deferred = None      # (a waiting step is computed now with the rest)
    _realize(_pending_outputs(tensors), tensors)


def _realize(outputs: list[Node], tensors: tuple[Tensor, ...], step_ended: str = "") -> None:
    """Compute ``outputs``; raise if one of ``tensors`` failed (``realize``), or, given
    ``step_ended`` (the call that ran a waiting step), if any output failed."""
    if not outputs:
        return
    errors: dict[int, Exception] = {}   # by node id: what failed it, for this call
    on_cuda = [n for n in outputs if n.device == "cuda"]
    if on_cuda:
        # The GPU step first: a constant shared with a CPU result is then still pending
        # (computed by both steps), never a CPU buffer inside the GPU step.
        on_cpu = [n for n in outputs if n.device != "cuda"]
        del outputs
        _isolating(on_cuda, _realize_cuda, errors)
        del on_cuda
        outputs = [n for n in on_cpu if not n.realized and n.op != "error"]
        del on_cpu
    if outputs:
        _isolating(outputs, _realize_cpu, errors)
    del outputs
    _forget_realized(errors)
    for t in tensors:
        n = t.node
        e = errors.get(id(n))
        if n.op == "error":
            if e is None or isinstance(e, InterpreterError):
                raise RealizationError(n.attrs["message"]) from e
            raise e
        if e is not None:    # out of memory: still pending, computed if asked again
            raise e
    if step_ended and errors:
        # The step opt.step() ended failed: say so at the call that ran it, not at some
        # later read (its values stay poisoned or pending as above).
        e = next(iter(errors.values()))
        error = RealizationError(str(e)) if isinstance(e, InterpreterError) else e
        error.add_note(f"nova: raised by {step_ended}, which ran the training step the last "
                       "opt.step() ended")
        if error is e:
            raise error
        raise error from e


def end_of_step() -> None:
    """A training step ends here (``Optimizer.step``): what is pending then is computed
    as one step -- at the next ``zero_grad()``, ``step()`` or read of any value,
    whichever comes first (``realize_deferred``).

    Why wait: a loop clears the gradients right after the step (``zero_grad()``), and
    a gradient still held when the step runs is one of its results: a fresh buffer per
    parameter, bound, then dropped (medium GPT, Python per step 9.4 -> 8.8 ms with
    this, ``benchmarks/results/recorded_step_calls_19.md``; and the memory). Waiting for the ``zero_grad()`` leaves them out, as the return of
    an ``nv.compile``d call does; what is recorded in between (the next forward, in a
    loop that clears gradients after it) is not part of the step: the step computes the
    live tensors of its ``step()`` call, no others.

    Inside a call that ``nv.compile`` records, the call's return is the step boundary
    instead, as in ``torch.compile`` and ``jax.jit``: the call realizes what it left
    pending when it returns (``nova.capture``), and by then what the function only
    held in locals -- a model's ``logits`` -- or dropped -- the gradients
    ``zero_grad()`` set to None -- is no longer referenced, so the step does not
    compute it as a result (at gpt-42m's batch 2: 393 MiB of logits and 160 MiB of
    gradients). Only the call's first boundary waits: a second one in the same call
    realizes everything pending then, as outside a capture, so a call that loops over
    K optimizer steps runs its first two as one step and each later one on its own
    (the steps' graphs do not keep growing with K)."""
    log = capture_log.ACTIVE.get()
    if log is None:     # (Optimizer.step ran a step still waiting before recording)
        live_pending.deferred = live_pending.snapshot()
        return
    if log.deferred_step:
        realize()
    log.deferred_step = True


def realize_deferred(caller: str = "zero_grad()") -> None:
    """Run the step ``end_of_step`` left waiting, if there is one: the values the
    tensors live at its ``step()`` held then, for those tensors still alive (and the
    collectives every step issues) -- not what was recorded since, not what was
    dropped. A tensor updated in place since gets the value it held at the step (the
    update reads it), so a chain of such updates never grows past one step. Inside an
    ``nv.compile`` recording, nothing: the call's end realizes everything. A failure
    of the step is raised here, naming ``caller``, rather than at a later read."""
    snapshot = live_pending.deferred
    if snapshot is None or capture_log.ACTIVE.get() is not None:
        return
    live_pending.deferred = None
    nodes = {id(n): n for r, n in snapshot
             if r() is not None and n.buffer is None and n.op != "error"}
    del snapshot
    outputs = _with_required(nodes)
    del nodes
    _realize(outputs, (), step_ended=caller)


def _isolating(outputs: list[Node], run: Callable[[list[Node]], None],
               errors: dict[int, Exception]) -> None:
    """``run(outputs)`` as one step; if it fails, find the outputs that fail.

    A failure the step attributes (it poisoned the outputs that depend on the failing
    op) leaves the others to run again as one step; an unattributed one (out of memory,
    a compiler error) splits the outputs in halves, down to single outputs, which stay
    pending: the cause may be transient or fixable (a memory limit, a debug directory),
    and a poisoned value -- a parameter, say -- would be lost for good. Splitting stops
    where both halves fail as the whole did (same type, same first line; not out of
    memory, which smaller steps may avoid): that failure is no one output's, and
    halving on would only repeat it, compiling ~2 steps per output (on the first GPU
    run, a kernel loader's error took minutes per training step that way). Each
    failure is recorded in ``errors`` under the ids of the nodes it failed. The happy
    path is one step."""
    try:
        run(outputs)
        return
    except Exception as e:
        if raised_by_signal_handler(e):
            raise           # the program's own exception, not the step's failure
        failure = e
    _split(outputs, failure, run, errors)


def _split(outputs: list[Node], e: Exception, run: Callable[[list[Node]], None],
           errors: dict[int, Exception]) -> None:
    """``_isolating`` after ``run(outputs)`` raised ``e``."""
    rest = _failed_part(outputs, e, errors)
    if not rest:
        return
    if getattr(e, "nova_collective_step", False):
        # no smaller steps: they would issue this rank's collectives again, out of
        # step with the other ranks
        _poison(rest, tuple(range(len(rest))), f"{type(e).__name__}: {e}")
        for n in rest:
            errors[id(n)] = e
        return
    if len(rest) < len(outputs):
        groups = [rest]
    elif len(rest) == 1:
        errors[id(rest[0])] = e     # still pending: see _forget_realized
        return
    else:
        groups = [rest[:len(rest) // 2], rest[len(rest) // 2:]]
    if not isinstance(e, MemoryError):
        # Smaller steps may compile and run where the whole one did not (a compiler
        # bug in a kernel only the whole step has): their values are right, but the
        # failure must not pass unseen.
        warnings.warn(f"nova: a step computing {len(outputs)} values failed "
                      f"({_first_line(e)}); computing them in smaller steps",
                      RuntimeWarning, stacklevel=3)
    del rest
    failed: list[tuple[list[Node], Exception]] = []
    for group in groups:
        try:
            run(group)
        except Exception as g:
            if raised_by_signal_handler(g):
                raise
            failed.append((group, g))
    if len(failed) == 2 and not isinstance(e, MemoryError) and \
            all(_first_line(g) == _first_line(e) for _, g in failed):
        for group, g in failed:        # the whole step's failure, in each half: stop
            for n in _failed_part(group, g, errors):
                errors[id(n)] = g      # still pending
        return
    for group, g in failed:
        _split(group, g, run, errors)


def _failed_part(outputs: list[Node], e: Exception, errors: dict[int, Exception]
                 ) -> list[Node]:
    """The outputs of a failed step that are still pending (``e`` recorded for those
    it poisoned)."""
    for n in outputs:
        if n.op == "error" and id(n) not in errors:
            errors[id(n)] = e
    return [n for n in outputs if not n.realized and n.op != "error"]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def _bind_host(nodes: list[Node], values: list[np.ndarray]) -> None:
    """Bind each node to a read-only view of its result (the engine may write the
    array itself again: an arena slot, a donated buffer's next step)."""
    views = [v.view() for v in values]
    for v in views:
        v.flags.writeable = False
    bind_all(nodes, views)


def _realize_cpu(outputs: list[Node]) -> None:
    _run_step(extract, outputs, get_engine(), "cpu", _bind_host)


def _run_step(graph_of: Callable[[list[Node]], PendingGraph], outputs: list[Node],
              engine: str, device: str, bind: Callable[[list[Node], list[Any]], None],
              backend: Any = None) -> None:
    """Extract the graph of ``outputs`` (``graph_of``), look its executable up
    (compiling on a miss), decide donation, run it and ``bind`` the outputs to their
    results. A graph another thread changed while this one waited to compile it is
    extracted again, from the outputs still pending.

    Nothing may keep the graph: its nodes must not outlive the run. On a failure
    the outputs that depend on it are poisoned (and, once donated buffers have been
    overwritten, the ones computed before it are bound: ``_after_failure``), and the
    error propagates. A step that donates runs and binds with Ctrl-C held back (see the
    module docstring)."""
    remat = get_remat()
    label = engine if remat == "default" else f"{engine}, remat={remat}"
    if not fused_attention(engine):   # NOVA_FUSED_ATTENTION=0
        label += ", composite attention"
    while True:
        graph = graph_of(outputs)
        try:
            exe = CACHE.lookup(graph.key, partial(_compile, graph, engine, remat, backend,
                                                  label), label)
            break
        except _StaleGraph:
            del graph
            outputs = [n for n in outputs if n.buffer is None]
            if not outputs:
                return
    donated = donatable(graph, exe.donation_candidates, outputs, device)
    roles = [getattr(n, "role", "input") for n in graph.arg_nodes]   # (role_of_node)
    buffers = graph.arg_buffers
    # nv.compile: the argument nodes (identities; donation is decided above, so the
    # reference is harmless), kept only while a capture is active.
    arg_nodes = graph.arg_nodes if capture_log.ACTIVE.get() is not None else None
    # where a failed run finds the nodes of the donated arguments it wrote over
    args = graph.arg_nodes if donated else None
    del graph
    collective = exe.has_collectives
    with deferred_interrupt() if donated or collective else contextlib.nullcontext():
        try:
            results = exe.run(buffers, donated, roles)
        except Exception as e:
            if collective:
                _mark_collective(e)
            error = _after_failure(e, outputs, {a: args[a] for a in donated}
                                   if donated and overwrote_donated(e) else {}, bind)
            if collective:
                _mark_collective(error)
            if error is e:
                raise
            raise error from e
        bind(outputs, results)
        if arg_nodes is not None:
            capture_log.step(capture_log.StepRecord(exe, arg_nodes, list(outputs), roles,
                                                    device))


def _after_failure(e: Exception, outputs: list[Node], donated: dict[int, Node],
                   bind: Callable[[list[Node], list[Any]], None]) -> Exception:
    """Mark what the failed run ``e`` leaves of ``outputs``; return the error to raise.

    Outputs that depend on an op the error names are poisoned with it. The others stay
    pending, computed again by a smaller step (``_isolating``) -- unless the run wrote
    over ``donated`` buffers (given only then): their old values are gone, so the run
    cannot be repeated. Then each output the run finished before the failure is bound
    to the value it computed (the runtime's ``Salvage``: a parameter updated in place
    keeps its update, bit for bit as without the failure), and an output still pending
    is poisoned only if computing it again would read an overwritten buffer (it is
    lost: its error says so); the rest stay pending as above.

    Why keep the results rather than prevent the overwrite: a step could run its
    kernels that can fail before any that writes over a donated buffer, or not donate
    when it has such kernels, but both cost every step that might fail (a GPT step's
    embedding backward is a checked scatter after most parameter updates, without
    gradient clipping; on the GPU, kernels report failures only at the step's end, so
    every step with an embedding lookup would stop donating), while keeping the
    results costs nothing until a step fails."""
    attributed = isinstance(e, InterpreterError)
    message = str(e) if attributed else f"{type(e).__name__}: {e}"
    failed = set(range(len(outputs)) if not attributed or e.outputs is None
                 else e.outputs)
    if not donated:
        if not attributed:
            return e
        _poison(outputs, tuple(sorted(failed)), message)
        return RealizationError(message)
    salvage = salvage_of(e)
    kept: dict[int, Any] = {} if salvage is None else salvage.results
    written = set(donated) if salvage is None else salvage.overwritten & set(donated)
    if attributed:
        _poison(outputs, tuple(sorted(failed - set(kept))), message)
    keep = sorted(set(kept) - failed) if attributed else sorted(kept)
    if keep:
        bind([outputs[pos] for pos in keep], [kept[pos] for pos in keep])
    gone = {id(donated[a]) for a in written}
    lost = [pos for pos in _reading(outputs, gone) if outputs[pos].op != "error"]
    why = ("this value does not depend on that failure but is lost with it"
           if attributed else "this value is lost")
    _poison(outputs, tuple(lost),
            f"{message} ({why}: its step failed after writing an in-place update over a "
            "buffer whose old value computing it again would read)")
    return RealizationError(message) if attributed else e


def _reading(outputs: list[Node], gone: set[int]) -> list[int]:
    """The positions of the pending ``outputs`` whose computation reads a node in
    ``gone`` (by id), through pending nodes."""
    memo: dict[int, bool] = {}
    for root in outputs:
        if root.realized or root.op == "error":
            continue
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if id(n) in memo:
                continue
            if expanded:
                memo[id(n)] = any(id(i) in gone or memo.get(id(i), False)
                                  for i in n.inputs)
                continue
            stack.append((n, True))
            stack.extend((i, False) for i in n.inputs
                         if id(i) not in memo and id(i) not in gone
                         and not i.realized and i.op != "error")
    return [pos for pos, n in enumerate(outputs) if memo.get(id(n), False)]


def _mark_collective(error: BaseException) -> None:
    """Mark ``error`` as a failure of a step with collectives (``_isolating`` then
    retries nothing)."""
    try:
        error.nova_collective_step = True
    except AttributeError:     # an exception without a __dict__
        pass


def _forget_realized(failed: dict[int, Exception] | None = None) -> None:
    """Drop realized tensors from the live set, and those whose step failed without an
    op to blame: such a value stays pending (it can be asked for again, say under
    another remat mode or without a memory limit), but later realizations no longer
    compute it unasked, so it cannot make them fail too."""
    for t in list(live_pending):
        n = t._node if t._view is None else t.node
        if n.buffer is not None or (failed and id(n) in failed):
            live_pending.discard(t)


def _upload_host_arguments(graph: PendingGraph) -> PendingGraph:
    """Device-less host arguments (random keys, optimizer scalars such as the learning
    rate) as device copies for this run, all in one host-to-device copy
    (``host_buffers.upload_packed``)."""
    host: list[int] = []
    for a, node in enumerate(graph.arg_nodes):
        if node.device is None:
            host.append(a)
        elif node.device != "cuda":
            raise RuntimeError(f"realize: {graph.describe_value(a)} is on {node.device} but "
                               "the step runs on cuda (move it with .to('cuda'))")
    if not host:
        return graph
    uploaded = upload_packed([graph.arg_buffers[a] for a in host])
    for a, buffer in zip(host, uploaded):
        graph.arg_buffers[a] = buffer
    return graph


def _realize_cuda(outputs: list[Node]) -> None:
    """Run the pending GPU work behind ``outputs`` as one step on the ``cuda`` engine.

    Arguments are device buffers, except device-less host values (random keys), which
    are uploaded for the run. Results are bound as the engine made them: fresh device
    arrays (or a donated argument's memory), owned by their node alone."""
    from nova.runtime import cuda_runtime

    be = cuda_runtime.backend()
    _run_step(lambda nodes: _upload_host_arguments(extract(nodes, "cuda", be.key())), outputs,
              "cuda", "cuda", _bind_device, be)


def _bind_device(nodes: list[Node], values: list[Any]) -> None:
    bind_all(nodes, values, "cuda")


def pending_graph(*tensors: Tensor) -> PendingGraph:
    """The graph that computes ``tensors`` (for inspection; nothing runs)."""
    return extract([t.node for t in tensors])
