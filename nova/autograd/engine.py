"""The backward engine: walks GradFns from the outputs and appends VJP nodes to the trace.

Nothing runs here. ``backward`` accumulates into ``.grad`` of leaves (and of non-leaves
that called ``retain_grad``); ``grad`` returns gradients for chosen inputs. With
``create_graph=True`` the recorded backward nodes carry their own history, so gradients
can be differentiated again.
"""
from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any

from nova.autograd import anomaly_mode, backward_template, grad_mode, graph, hooks
from nova.autograd.rules import vjp
from nova.tensor import creation, ops, tape
from nova.tensor.tensor import Tensor, unaliased_detach
from nova.tensor.trace import next_seq, recording_backward


def _as_list(x: Any) -> list:
    if x is None:
        return []
    return [x] if isinstance(x, Tensor) else list(x)


def _initial_grads(op: str, outputs: list[Tensor], grad_outputs: list[Any]) -> list[Tensor]:
    if grad_outputs and len(grad_outputs) != len(outputs):
        raise ValueError(f"{op}: got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    result = []
    for k, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(out).__name__}")
        if not out.requires_grad:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not have "
                               "a grad_fn")
        g = grad_outputs[k] if grad_outputs else None
        if g is None:
            if out.numel() != 1:
                raise RuntimeError(f"{op}: grad can be implicitly created only for scalar "
                                   f"outputs (got shape {out.shape}); pass a gradient")
            g = ops.full_const(1.0, out.shape, out.dtype)
        elif not isinstance(g, Tensor):
            g = ops.full_const(g, out.shape, out.dtype)
        elif g.shape != out.shape:
            raise RuntimeError(f"{op}: mismatch in shape: gradient has shape {g.shape} but "
                               f"output {k} has shape {out.shape}")
        if not g.node.realized and g.node.device is None and out.node.device is not None:
            # the seed lives on the output's device, so every gradient (even one that is
            # only constants, like a bias's under sum()) lands on its leaf's device
            g.node.device = out.node.device
        result.append(ops.cast(g, out.dtype))
    return result


def _topological(roots: list[Any]) -> list[graph.GradFn]:
    """GradFns reachable from ``roots``, each before every GradFn it feeds into."""
    GradFn = graph.GradFn
    order: list[GradFn] = []
    seen: set[GradFn] = set()           # GradFns hash by identity
    for root in roots:
        if type(root) is not GradFn or root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(root.next))]
        while stack:
            fn, children = stack[-1]
            for nxt in children:
                if type(nxt) is GradFn and nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, iter(nxt.next)))
                    break
            else:
                stack.pop()
                order.append(fn)
    order.reverse()
    return order


def _discovered(roots: list[Any]) -> dict[graph.GradFn, int]:
    """GradFns reachable from ``roots``, numbered in depth-first discovery order (a dict
    in that order): what a backward template's key lists. Cheaper than the topological
    walk (no iterator per GradFn, no finishing order), which a pass needs only when its
    rules run -- not when it is stamped from a template."""
    GradFn = graph.GradFn
    found: dict[GradFn, int] = {}       # GradFns hash by identity
    stack = [r for r in reversed(roots) if type(r) is GradFn]
    pop, push = stack.pop, stack.append
    k = 0
    while stack:
        fn = pop()
        if fn in found:
            continue
        found[fn] = k
        k += 1
        for nxt in reversed(fn.next):   # (the first edge is walked first)
            if type(nxt) is GradFn and nxt not in found:
                push(nxt)
    return found


def _accumulate(store: dict[int, Tensor], key: int, g: Tensor) -> None:
    prev = store.get(key)
    store[key] = g if prev is None else ops.add(prev, g)


def _owned(g: Tensor, create_graph: bool) -> Tensor:
    """A handle on ``g``'s value that no other tensor is, to become a ``.grad``: a rule
    may pass one gradient to several inputs, and a seed is the caller's tensor, so
    without it two ``.grad`` (or a ``.grad`` and a seed) would be one tensor, and an
    in-place update of one would change the other. With ``create_graph`` it keeps
    ``g``'s history (a clone, as PyTorch's)."""
    if not create_graph:
        return unaliased_detach(g)
    with grad_mode.enable_grad():
        return g.clone()


def _linked(g: Tensor, t: Tensor) -> Tensor:
    """``g`` (a gradient for ``t`` computed with ``create_graph``) as a value whose
    history reaches ``t`` with slope zero: ``where(False, t, g)``, ``g`` bit for bit.

    A gradient that does not depend on ``t`` differentiably -- ``relu``'s is a select by
    ``t > 0``, a comparison, and a linear function's is a constant -- has no history,
    so differentiating it again raised "does not require grad". Its derivative is
    zero: PyTorch gives zeros for its fused piecewise-linear ops (``threshold_backward``
    reads the input with a zero derivative), as JAX does for every function."""
    with grad_mode.enable_grad():
        return ops.with_zero_slope(g, t)


def _accumulate_grad(t: Tensor, g: Tensor, create_graph: bool) -> None:
    """Add the gradient ``g`` into ``t.grad`` as PyTorch's AccumulateGrad does: the first
    gradient becomes ``.grad``; a later one is added into that same tensor in place
    (one version step), so a reference held to ``.grad`` -- a clipping helper's, an
    optimizer's -- sees the sum. With ``create_graph`` the sum replaces ``.grad``
    instead, a new tensor carrying both histories (PyTorch does the same)."""
    prev = t.grad
    if create_graph and not g.requires_grad:
        g = _linked(g, t)
    if prev is None:
        t.grad = _owned(g, create_graph)
    elif create_graph:
        t.grad = ops.add(prev, g)
    else:
        with grad_mode.no_grad():
            prev.add_(g)


def _retain(t: Tensor, g: Tensor, create_graph: bool) -> None:
    """Give a non-leaf that called ``retain_grad`` the gradient ``g``: a tensor of its
    own the first time, then the out-of-place sum, a new tensor (PyTorch's
    ``retain_grad`` hook accumulates so, unlike a leaf's ``.grad``)."""
    t.grad = _owned(g, create_graph) if t.grad is None else ops.add(t.grad, g)


def _run(outputs: list[Tensor], grads: list[Tensor], retain_graph: bool, create_graph: bool,
         capture: list[Tensor] | None, reached: set[int] | None = None) -> dict[int, Tensor]:
    """Propagate; leaf gradients go to ``.grad`` unless ``capture`` names the inputs
    whose gradients are returned instead (keyed by ``id`` of their edge); ``reached``
    collects the ids of the leaves given a gradient. A plain backward (into ``.grad``,
    no ``create_graph``) is stamped from the template of an earlier pass with the same
    structure when there is one (``nova.autograd.backward_template``), and kept as one
    otherwise. Under anomaly mode every pass runs its rules as written, checked
    (``nova.autograd.anomaly_mode``)."""
    roots = [out._grad_fn for out in outputs]
    if capture is not None or create_graph or anomaly_mode.STATE.enabled:
        return _propagate(outputs, grads, _topological(roots), retain_graph, create_graph,
                          capture, reached)
    found = _discovered(roots)
    if (hooks.any_hooks() and _reaches_hooks(outputs, found)) or \
            (tape.packed_any and _reaches_packed(found)):
        return _propagate(outputs, grads, _topological(roots), retain_graph, False, None,
                          reached)
    st = backward_template.structure(outputs, grads, found)
    if st is None:
        return _propagate(outputs, grads, _topological(roots), retain_graph, False, None,
                          reached)
    template = backward_template.lookup(st.key)
    if template:
        with grad_mode.set_grad_enabled(False), recording_backward():
            template.stamp(st, retain_graph, reached)
        return {}
    order = _topological(roots)
    first, ran = next_seq(), []
    _propagate(outputs, grads, order, retain_graph, False, None, reached, ran)
    if template is False:   # first sight of this structure (None: cannot be stamped)
        backward_template.store(st.key, backward_template.BackwardTemplate.capture(
            st, first, [found[order[k]] for k in ran]))
    return {}


def _reaches_hooks(outputs: list[Tensor], found: dict[graph.GradFn, int]) -> bool:
    """Whether a pass over ``found`` meets a hooked GradFn or leaf (it must then run as
    written: a template would skip the hooks)."""
    for fn in found:
        if hooks.hooked(fn) or any(type(e) is not graph.GradFn and e is not None and
                                   hooks.hooked(e) for e in fn.next):
            return True
    return any(out._grad_fn is None and hooks.hooked(out) for out in outputs)


def _reaches_packed(found: dict[graph.GradFn, int]) -> bool:
    """Whether a GradFn of ``found`` holds a value packed by a saved-tensor hook (a
    template reads saved nodes; this pass must run its rules, which unpack)."""
    SavedValue = tape.SavedValue
    return any(type(fn.out_node) is SavedValue or
               any(type(n) is SavedValue for n in fn.saved) for fn in found)


def _propagate(outputs: list[Tensor], grads: list[Tensor], order: list[graph.GradFn],
               retain_graph: bool, create_graph: bool, capture: list[Tensor] | None,
               reached: set[int] | None, ran: list[int] | None = None) -> dict[int, Tensor]:
    """``_run``'s pass as the rules record it, over the GradFns ``order``; ``ran``, if
    given, receives the positions in ``order`` of the GradFns whose rules ran."""
    want = None if capture is None else {id(t._grad_edge()) for t in capture}
    captured: dict[int, Tensor] = {}
    pending: dict[int, Tensor] = {}
    hooking = hooks.any_hooks()
    rule = anomaly_mode.checked_vjp if anomaly_mode.STATE.enabled else vjp
    # hooked leaves' gradients, summed over the pass before their hooks see them
    held: dict[int, tuple[Tensor, Tensor]] = {}

    def deliver(edge: Any, g: Tensor) -> None:
        # (a wanted GradFn's gradient is taken when it is popped, after its hooks)
        if want is not None and id(edge) in want and type(edge) is not graph.GradFn:
            if hooking and hooks.hooked(edge):
                prev = held.get(id(edge))
                held[id(edge)] = (edge, g if prev is None else ops.add(prev[1], g))
            else:
                _accumulate(captured, id(edge), g)
        if isinstance(edge, graph.GradFn):
            _accumulate(pending, id(edge), g)
        elif want is None:  # a leaf: accumulate into .grad
            leaf: Tensor = edge
            if reached is not None:
                reached.add(id(leaf))
            if hooking and hooks.hooked(leaf):
                prev = held.get(id(leaf))
                held[id(leaf)] = (leaf, g if prev is None else ops.add(prev[1], g))
                return
            _accumulate_grad(leaf, g, create_graph)

    # A hooked leaf's hooks run, and its .grad is accumulated, once the last GradFn
    # that can deliver to it has run (PyTorch's AccumulateGrad runs when its inputs are
    # ready): a module backward hook further down the graph sees that .grad set.
    # (Held to the end of the pass, it was still None there.)
    done_after: dict[int, list[int]] = {}
    if hooking:
        last: dict[int, int] = {}
        for k, fn in enumerate(order):
            for e in fn.next:
                if e is not None and not isinstance(e, graph.GradFn) and hooks.hooked(e):
                    last[id(e)] = k
        for key, k in last.items():
            done_after.setdefault(k, []).append(key)

    def release(key: int) -> None:
        entry = held.pop(key, None)
        if entry is None:
            return
        leaf, g = entry
        g = hooks.run_grad_hooks(leaf, g)
        if want is not None:
            captured[id(leaf)] = g
            return
        _accumulate_grad(leaf, g, create_graph)
        hooks.run_post_accumulate_hooks(leaf)

    with grad_mode.set_grad_enabled(create_graph), recording_backward():
        for out, g in zip(outputs, grads):
            deliver(out._grad_edge(), g)
        for k, fn in enumerate(order):
            g = pending.pop(id(fn), None)
            if g is None:
                for key in done_after.get(k, ()):
                    release(key)
                continue
            if hooking:
                g = hooks.run_node_prehooks(fn, hooks.run_grad_hooks(fn, g))
            if want is not None and id(fn) in want:
                captured[id(fn)] = g
            if want is None:
                for ref in fn.retained:
                    t = ref()
                    if t is not None and t._grad_fn is fn:
                        _retain(t, g, create_graph)
            if fn.released:
                raise RuntimeError(f"{fn.name()}: trying to backward through the graph a second "
                                   "time; pass retain_graph=True to the first backward call")
            if ran is not None:
                ran.append(k)
            grads_in = rule(fn, g, create_graph)
            if hooking:
                grads_in = hooks.run_node_hooks(fn, grads_in, g)
            for edge, gi in zip(fn.next, grads_in):
                if edge is not None and gi is not None:
                    deliver(edge, gi)
            if not retain_graph:
                fn.release()
            for key in done_after.get(k, ()):
                release(key)
        for key in list(held):     # leaves reached only from the outputs themselves
            release(key)
    return captured


# Per thread: what a later ``backward`` calls once its gradients are in ``.grad``, by
# key (``after_backward_reaching``).
_AFTER_BACKWARD: contextvars.ContextVar[dict[Any, tuple[frozenset[int], Callable[[], None]]]
                                        | None] = \
    contextvars.ContextVar("nova_after_backward", default=None)


def after_backward_reaching(key: Any, leaves: Sequence[Tensor], fn: Callable[[], None]) -> None:
    """Call ``fn()`` once this thread's next ``backward`` that delivers a gradient to
    one of ``leaves`` has accumulated its gradients (once per ``key``, however often it
    is registered before; a backward that reaches none of them leaves it waiting): how
    ``DistributedDataParallel`` reduces the gradients a forward through it leads to, as
    PyTorch's DDP does from hooks on its parameters' gradients."""
    pending = _AFTER_BACKWARD.get()
    if pending is None:
        pending = {}
        _AFTER_BACKWARD.set(pending)
    pending[key] = (frozenset(id(t) for t in leaves), fn)


def _after_backward(reached: set[int]) -> None:
    pending = _AFTER_BACKWARD.get()
    if pending:
        due = [key for key, (leaves, _) in pending.items() if not leaves.isdisjoint(reached)]
        for key in due:
            _, fn = pending.pop(key)
            fn()


def backward(tensors: Sequence[Tensor], grad_tensors: Sequence[Any] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False,
             inputs: Any = None) -> None:
    """``nv.autograd.backward``: accumulate gradients into ``.grad`` of the leaves."""
    reached: set[int] = set()
    _backward(tensors, grad_tensors, retain_graph, create_graph, inputs, reached)
    if _AFTER_BACKWARD.get():
        _after_backward(reached)


def _backward(tensors: Sequence[Tensor], grad_tensors: Sequence[Any] | None,
              retain_graph: bool | None, create_graph: bool, inputs: Any,
              reached: set[int]) -> None:
    outputs = _as_list(tensors)
    grads = _initial_grads("backward", outputs, _as_list(grad_tensors))
    retain = create_graph if retain_graph is None else retain_graph
    if inputs is not None:
        targets = _as_list(inputs)
        got = _run(outputs, grads, retain, create_graph, targets)
        for t in targets:
            g = got.get(id(t._grad_edge()))
            if g is not None:
                reached.add(id(t))
                _accumulate_grad(t, g, create_graph)
                if hooks.any_hooks() and t._grad_fn is None:
                    hooks.run_post_accumulate_hooks(t)
        return
    _run(outputs, grads, retain, create_graph, None, reached)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool | None = None,
         is_grads_batched: bool = False, *,
         materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """``nv.autograd.grad``: gradients of ``outputs`` with respect to ``inputs``.

    An input the outputs do not depend on is an error, or gets None with
    ``allow_unused=True``, or zeros with ``materialize_grads=True`` (which implies
    ``allow_unused``; with ``create_graph`` the zeros require grad), as PyTorch's.
    ``is_grads_batched=True``: dim 0 of each ``grad_outputs`` tensor indexes a batch of
    cotangents, and each gradient gets that leading dim (PyTorch vmaps the backward;
    here it runs once per cotangent, all recorded into the one pending step)."""
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    return grad_of(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                   materialize_grads, linked=True)


def grad_of(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool | None,
            create_graph: bool, allow_unused: bool | None, materialize_grads: bool,
            linked: bool) -> tuple[Tensor | None, ...]:
    """``grad``'s pass; ``linked=False`` leaves a gradient without history as it is
    (``_linked``): ``autograd.functional``'s strict mode tells a linear function by
    its gradient not requiring grad, as PyTorch's does."""
    if materialize_grads and allow_unused is False:
        raise ValueError("grad: expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    outs = _as_list(outputs)
    ins = _as_list(inputs)
    for k, t in enumerate(ins):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(f"grad: input {k} does not require grad")
    grads = _initial_grads("grad", outs, _as_list(grad_outputs))
    retain = create_graph if retain_graph is None else retain_graph
    got = _run(outs, grads, retain, create_graph, ins)
    result = []
    for k, t in enumerate(ins):
        g = got.get(id(t._grad_edge()))
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {k} (shape {t.shape}) was not used to compute the "
                               "outputs; pass allow_unused=True to get None for it")
        if g is None and materialize_grads:
            g = creation.zeros_like(t)
            if create_graph:
                g.requires_grad_()
        elif g is not None and create_graph and linked and not g.requires_grad:
            g = _linked(g, t)
        result.append(g if g is None or create_graph else unaliased_detach(g))
    return tuple(result)


# Tensor.backward reaches the engine through this hook (nova.tensor must not import
# nova.autograd: see nova.tensor.tape).
tape.register_backward(backward)


def _batched_grad(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool | None,
                  create_graph: bool, allow_unused: bool | None,
                  materialize_grads: bool) -> tuple[Tensor | None, ...]:
    """``grad(..., is_grads_batched=True)``: one backward per cotangent along dim 0 of
    ``grad_outputs`` (the graph kept for all but the last), gradients stacked."""
    from nova.tensor.movement import stack
    cots = _as_list(grad_outputs)
    if not cots or any(not isinstance(c, Tensor) or c.ndim == 0 for c in cots):
        raise RuntimeError("grad: is_grads_batched=True needs grad_outputs: one tensor per "
                           "output with a leading batch dim")
    sizes = {c.shape[0] for c in cots}
    if len(sizes) != 1:
        raise RuntimeError(f"grad: is_grads_batched=True needs the same batch size in "
                           f"every grad_outputs tensor, got {sorted(sizes)}")
    (n,) = sizes
    keep = create_graph if retain_graph is None else retain_graph
    rows = [grad(outputs, inputs, [c[b] for c in cots], retain_graph=True if b < n - 1
                 else keep, create_graph=create_graph, allow_unused=allow_unused,
                 materialize_grads=materialize_grads) for b in range(n)]
    return tuple(None if per[0] is None else stack(list(per), 0) for per in zip(*rows))
