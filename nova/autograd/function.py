"""``nv.autograd.Function``: custom differentiable operations, as ``torch.autograd.Function``.

A subclass defines ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` as static
methods (or, PyTorch 2's form, ``forward(*args)`` and ``setup_context(ctx, inputs,
output)``), and is called through ``apply``. ``forward`` runs under ``no_grad`` on the
arguments as given and records its ops like any code; its outputs are then tied to one
GradFn whose rule is the class's ``backward``, called while the backward pass is
recorded with the upstream gradients of all outputs (zeros for an output that got none,
or None after ``ctx.set_materialize_grads(False)``),
its returned gradients checked against the inputs' shapes (a gradient of a shape the
input broadcasts to is summed down, as PyTorch's; a number is filled in).

Several outputs share one GradFn through one packed value: the outputs are flattened
and concatenated (they must then have one dtype), each output is a slice of it, so the
engine hands the GradFn one gradient -- the slices' gradients, summed in place -- which
``backward`` receives unpacked. One output is its own value.

The backward is Python that may read anything ``ctx`` holds (Python numbers that
differ from call to call), so a pass through a custom Function is recorded as written,
never stamped from a template, and an ``nv.compile`` call that runs one records every
time -- unless the class promises ``pure_backward`` (``Function``), and, for templates,
names what fixes its backward's ops (``Function.template_key``).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from nova.autograd.grad_mode import is_grad_enabled, no_grad
from nova.autograd.graph import FUNCTION
from nova.tensor import capture_log, movement, ops, tape
from nova.tensor.grad_mode import STATE
from nova.tensor.tensor import Tensor


class FunctionCtx:
    """What ``forward`` leaves for ``backward`` (PyTorch's ``ctx``): saved tensors,
    which inputs need a gradient, and any attribute set on it."""

    def __init__(self, needs_input_grad: tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad
        self._saved: tuple[Any, ...] = ()
        self.materialize_grads = True
        self._non_differentiable: set[int] = set()
        self._dirty: tuple[Tensor, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` for ``backward`` as they are now: their values and their
        gradient edges (``_SavedTensor``), so an in-place change after the forward
        does not reach the backward -- the value-semantic answer where PyTorch raises
        (a version-counter error); autograd's own saved values behave so too. Under
        ``saved_tensors_hooks`` each goes through the pack hook now and the unpack
        hook when read."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward: can only save tensors (or None), got "
                                f"{type(t).__name__}")
        saved = _PackedSave if tape.SAVED_HOOKS.stack else _SavedTensor
        self._saved = tuple(None if t is None else saved(t) for t in tensors)

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        return tuple(None if t is None else t.unpack() for t in self._saved)

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        self._non_differentiable.update(id(t) for t in outputs)

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` gets zeros (True, the default) or None (False) for an
        output that got no gradient in the pass, as PyTorch's; call it in ``forward``
        or ``setup_context``."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declare inputs that ``forward`` changed in place, and returns (PyTorch's
        contract): each returned dirty tensor is the input object itself, whose history
        becomes the Function's -- its gradient goes through ``backward`` to what it
        was computed from before the change. Call it in ``forward``."""
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"mark_dirty: expected tensors, got {type(t).__name__}")
        self._dirty = tuple(tensors)


class _SavedTensor:
    """A tensor ``save_for_backward`` kept: its node (the value when saved) and where
    its gradient goes (its GradFn, or the leaf itself). ``unpack`` gives a tensor
    with that value and that history: the leaf itself while it still holds the value,
    as autograd's rules read saved inputs (``rules.Context.x``)."""

    __slots__ = ("node", "edge")

    def __init__(self, t: Tensor):
        self.node = t.node
        self.edge = t._grad_edge()

    def unpack(self) -> Tensor:
        node, edge = self.node, self.edge
        if edge is None:
            return Tensor._wrap(node)
        if isinstance(edge, Tensor):            # a leaf
            return edge if edge.node is node else \
                Tensor._wrap(node, grad_fn=tape.alias_fn(edge, node))
        return Tensor._wrap(node, grad_fn=edge)


class _PackedSave:
    """A tensor ``save_for_backward`` kept through the pack hook: what the hook made of
    it and where its gradient goes (its GradFn, or the leaf itself)."""

    __slots__ = ("value", "edge")

    def __init__(self, t: Tensor):
        self.value = tape._pack(t.node)
        self.edge = t._grad_edge()

    def unpack(self) -> Tensor:
        node = self.value.unpack("save_for_backward")
        edge = self.edge
        if edge is None:
            return Tensor._wrap(node)
        if isinstance(edge, Tensor):            # a leaf: route its gradient back to it
            return Tensor._wrap(node, grad_fn=tape.alias_fn(edge, node))
        return Tensor._wrap(node, grad_fn=edge)


class Function:
    """Base class of custom differentiable operations (see the module docstring).

    ``pure_backward``: a promise that ``backward`` only builds Nova ops from what
    ``ctx`` saved and the incoming gradients, with Python values that the call's
    structure fixes (``needs_input_grad``, constants) -- no side effects, no host
    reads. Then a replay of an ``nv.compile`` step, which reuses the ops its recorded
    calls made, computes what calling ``backward`` again would, and the call need not
    be recorded every time. False by default (a user's backward may print, count or
    read values); Nova's own Functions whose backward is such a formula set it."""

    pure_backward: bool = False

    @staticmethod
    def template_key(ctx: FunctionCtx) -> Any:
        """For a ``pure_backward`` class: a hashable value that, with the inputs'
        shapes and dtypes and which of them need a gradient, fixes the ops ``backward``
        records -- what ``forward`` left on ``ctx`` besides the saved tensors, which
        must be all it reads. Then a recorded backward pass through the Function can
        be kept as a template and stamped for later passes of that structure
        (``nova.autograd.backward_template``) instead of being recorded op by op
        every time. None (the default): the pass is always recorded as written."""
        return None

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Function subclasses must implement forward")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple, output: Any) -> None:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("Function subclasses must implement backward to be "
                                  "differentiated")

    # PyTorch's other name for ``backward``: a subclass may define either, not both.
    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        tensor_args = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor)]
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        separate = cls.setup_context is not Function.setup_context
        with no_grad():
            if separate:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        single = isinstance(output, Tensor)
        outputs = (output,) if single else tuple(output)
        _check_dirty_returned(cls, ctx, outputs)
        if not (STATE.enabled and any(needs)):
            return output
        differentiable = [k for k, o in enumerate(outputs) if isinstance(o, Tensor) and
                          id(o) not in ctx._non_differentiable and o.dtype.is_floating_point]
        if not differentiable:
            return output
        wired = _wire(cls, ctx, args, tensor_args, outputs, differentiable)
        return wired[0] if single else type(output)(wired) if isinstance(output, tuple) \
            else list(wired)


def _wire(cls: type, ctx: FunctionCtx, args: tuple, tensor_args: list[tuple[int, Tensor]],
          outputs: tuple, differentiable: list[int]) -> list[Any]:
    """The outputs, the differentiable ones tied to one GradFn over the tensor inputs."""
    diff = [outputs[k] for k in differentiable]
    dtypes = {o.dtype for o in diff}
    if len(diff) > 1 and len(dtypes) > 1:
        raise TypeError(f"{cls.__name__}: differentiable outputs of one Function must share "
                        f"a dtype, got {sorted(d.name for d in dtypes)}")
    if len(diff) == 1:
        packed = Tensor._wrap(diff[0].node)
    else:
        packed = movement.cat([movement.reshape(o, -1) for o in diff], 0)
    inputs = [a for _, a in tensor_args]
    edges = tuple(a._grad_edge() for a in inputs)
    shapes = [o.shape for o in diff]
    # per output, what backward receives: its slice of the packed gradient (by
    # position among the differentiable ones), zeros (a tensor not differentiated),
    # or None (not a tensor)
    layout = [differentiable.index(k) if k in differentiable else
              ((o.shape, o.dtype) if isinstance(o, Tensor) else None)
              for k, o in enumerate(outputs)]

    # Without materialized gradients, backward must tell which outputs the pass
    # reached; the packed gradient cannot (a slice nobody used is zeros in it). Each
    # output then gets a pass-through GradFn that notes its position when the pass
    # crosses it -- always before the head's GradFn, which it feeds.
    received: set[int] | None = None if ctx.materialize_grads else set()

    def run_backward(g: Tensor, create_graph: bool) -> tuple[Tensor | None, ...]:
        got = None if received is None else set(received)
        if received is not None:
            received.clear()
        return _call_backward(cls, ctx, args, tensor_args, shapes, layout, g, got)

    attrs = {"apply": run_backward, "name": cls.__name__}
    key = cls.template_key(ctx) if cls.pure_backward and received is None else None
    if key is not None and not any(type(t) is _PackedSave for t in ctx._saved):
        # what a backward template keys the pass by (``backward_template.structure``):
        # the class and its key, and the nodes backward reads, as the pass finds them
        attrs["template"] = (cls, key)
        attrs["reads"] = lambda: tuple([t.node for t in ctx._saved if t is not None])
    fn = tape.GradFn(FUNCTION, attrs, edges, [a.node for a in inputs], None)
    head = Tensor._wrap(packed.node, grad_fn=fn)
    wired = list(outputs)
    if len(diff) == 1:
        wired[differentiable[0]] = head
    else:
        start = 0
        for pos, (k, shape) in enumerate(zip(differentiable, shapes)):
            n = math.prod(shape)
            wired[k] = movement.reshape(movement.narrow(head, 0, start, n), shape)
            if received is not None:
                wired[k] = _noting(wired[k], pos, received, cls.__name__)
            start += n
    dirty = {id(t) for t in ctx._dirty}
    for k in differentiable:
        if id(outputs[k]) in dirty:
            # the input object takes the Function's history, as an in-place op's
            # result: through its views' bases too (``Tensor._assign``), and a leaf
            # that requires grad refuses, as PyTorch's
            outputs[k]._assign(wired[k], cls.__name__)
            wired[k] = outputs[k]
    return wired


def _check_dirty_returned(cls: type, ctx: FunctionCtx, outputs: tuple) -> None:
    """PyTorch's rule: a tensor ``forward`` marked dirty (changed in place) is one of
    its outputs, the object itself."""
    returned = {id(o) for o in outputs}
    if any(id(t) not in returned for t in ctx._dirty):
        raise RuntimeError(f"{cls.__name__}: some tensors marked dirty in forward "
                           f"(mark_dirty) were not returned as outputs; a Function must "
                           f"return the inputs it modifies in place")


def _noting(out: Tensor, pos: int, received: set[int], name: str) -> Tensor:
    """``out`` behind a GradFn that passes its gradient on and adds ``pos`` to
    ``received`` (the outputs a backward pass reached, for ``set_materialize_grads``)."""
    def note(g: Tensor, create_graph: bool) -> tuple[Tensor]:
        received.add(pos)
        return (g,)

    fn = tape.GradFn(FUNCTION, {"apply": note, "name": name}, (out._grad_edge(),),
                     [out.node], None)
    return Tensor._wrap(out.node, grad_fn=fn)


def _call_backward(cls: type, ctx: FunctionCtx, args: tuple,
                   tensor_args: list[tuple[int, Tensor]], shapes: list[tuple[int, ...]],
                   layout: list[Any], g: Tensor,
                   got: set[int] | None = None) -> tuple[Tensor | None, ...]:
    """``cls.backward`` on the packed gradient ``g`` (one gradient per output, as
    ``layout`` says), its result as one gradient per tensor input (of the GradFn).
    ``got``: without materialized gradients, the positions (among the differentiable
    outputs) that the pass reached; the others, and outputs not differentiated, get
    None."""
    if not cls.pure_backward:
        capture_log.refuse(f"a custom autograd.Function ({cls.__name__}) ran its backward "
                           "(Python a replay would not run; a backward that only builds "
                           "ops may set pure_backward = True)")
    if len(shapes) == 1:
        pieces = [g]
    else:
        pieces, start = [], 0
        for shape in shapes:
            n = math.prod(shape)
            pieces.append(movement.reshape(movement.narrow(g, 0, start, n), shape))
            start += n
    if ctx.materialize_grads:
        grads_out = [pieces[entry] if isinstance(entry, int) else
                     None if entry is None else ops.full_const(0, entry[0], entry[1])
                     for entry in layout]
    else:
        grads_out = [pieces[entry] if isinstance(entry, int) and
                     (len(shapes) == 1 or got is None or entry in got) else None
                     for entry in layout]
    result = _user_backward(cls)(ctx, *grads_out)
    result = (result,) if not isinstance(result, (tuple, list)) else tuple(result)
    if len(result) < len(args):
        if any(isinstance(a, Tensor) and a.requires_grad for a in args[len(result):]):
            raise RuntimeError(f"{cls.__name__}.backward returned {len(result)} gradients, "
                               f"forward took {len(args)} arguments")
        result = result + (None,) * (len(args) - len(result))
    elif len(result) > len(args) and any(r is not None for r in result[len(args):]):
        raise RuntimeError(f"{cls.__name__}.backward returned {len(result)} gradients, "
                           f"forward took {len(args)} arguments")
    grads = []
    for i, a in tensor_args:
        gi = result[i]
        if gi is None or not a.requires_grad:
            grads.append(None)
            continue
        if not isinstance(gi, Tensor):
            gi = ops.full_const(gi, a.shape, a.dtype)
        if gi.shape != a.shape:
            try:        # a gradient the input broadcasts to is summed down, as PyTorch's
                gi = gi.sum_to_size(a.shape)
            except RuntimeError:
                raise RuntimeError(
                    f"{cls.__name__}.backward: gradient {i} has shape {gi.shape}, not "
                    f"one its input's shape {a.shape} broadcasts to") from None
        grads.append(gi if gi.dtype == a.dtype else ops.cast(gi, a.dtype))
    return tuple(grads)


def _user_backward(cls: type) -> Callable[..., Any]:
    """The subclass's ``backward``, or its ``vjp`` (PyTorch's other name for it)."""
    backward_fn, vjp_fn = cls.backward, cls.vjp
    if backward_fn is not Function.backward and vjp_fn is not Function.vjp:
        raise RuntimeError(f"{cls.__name__}: implementing both 'backward' and 'vjp' for a "
                           "custom Function is not allowed; define only one")
    return vjp_fn if vjp_fn is not Function.vjp else backward_fn


_TWICE = ("trying to differentiate twice a function that was marked with "
          "@once_differentiable")


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator of a Function's ``backward`` that cannot itself be differentiated
    (``torch.autograd.function.once_differentiable``): it runs without recording
    history, and when the backward pass records history (``create_graph=True``) its
    gradients carry a GradFn that raises if a later pass reaches it."""
    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            outputs = fn(ctx, *args)
        if not is_grad_enabled():
            return outputs
        requiring = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        if not requiring:
            return outputs
        if isinstance(outputs, Tensor):
            return _delayed_error(outputs, requiring)
        return type(outputs)(_delayed_error(o, requiring) if isinstance(o, Tensor) else o
                             for o in outputs)
    return wrapper


def _delayed_error(out: Tensor, requiring: list[Tensor]) -> Tensor:
    """``out``, its history a GradFn over ``requiring`` that refuses to be
    differentiated (PyTorch's ``DelayedError``)."""
    if not out.dtype.is_floating_point:
        return out

    def refuse(g: Tensor, create_graph: bool) -> tuple[Tensor | None, ...]:
        raise RuntimeError(_TWICE)

    fn = tape.GradFn(FUNCTION, {"apply": refuse, "name": "DelayedError"},
                     tuple(a._grad_edge() for a in requiring), [a.node for a in requiring],
                     None)
    return Tensor._wrap(out.node, grad_fn=fn)


__all__ = ["Function", "FunctionCtx", "once_differentiable"]
