"""``nv.autograd.functional``: PyTorch's ``torch.autograd.functional`` -- vector-Jacobian,
Jacobian-vector and Hessian products, full Jacobians and Hessians of a function.

Everything is built on ``nv.autograd.grad``: a VJP is one backward; a JVP is the
"double backward trick" (the VJP is linear in its cotangent ``u``, so differentiating
``u -> J^T u`` with respect to ``u`` against ``v`` gives ``J v``), as PyTorch computes it;
``hvp``/``vhp`` differentiate the gradient once more. ``jacobian`` takes one backward per
element of each output (one row of the Jacobian), ``hessian`` is the Jacobian of the
Jacobian. Nova is lazy, so all of that only records: every row and every product lands
in the one pending trace, and the first read of a result (``.numpy()``, ``nv.realize``)
compiles and runs them together as one step. Nothing here realizes.

Return structures, errors and the ``strict``/``create_graph`` semantics follow PyTorch:
a tuple where the inputs (or outputs) were given as a tuple, a single tensor otherwise;
results detached unless ``create_graph=True``; zeros where an output does not depend on
an input, or an error naming that input when ``strict=True``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nova.autograd import grad_mode
from nova.autograd.engine import grad_of
from nova.tensor.creation import tensor, zeros, zeros_like
from nova.tensor.movement import stack
from nova.tensor.tensor import Tensor, unaliased_detach

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

_STRATEGIES = ("forward-mode", "reverse-mode")


def _as_tuple(x: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple[Tensor, ...]]:
    """Whether ``x`` was a tuple, and ``x`` as a tuple of tensors (a list is refused,
    as PyTorch refuses it: only a tuple means "several")."""
    is_tuple = isinstance(x, tuple)
    items = x if is_tuple else (x,)
    for k, el in enumerate(items):
        if not isinstance(el, Tensor):
            which = f"the value at index {k}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but {which} has type {type(el).__name__}.")
    return is_tuple, items


def _tuple_postprocess(res: Any, to_unpack: bool | tuple[bool, bool]) -> Any:
    """Undo ``_as_tuple``: unwrap the single element where the user gave no tuple. A pair
    of flags unwraps a nested result (outer: outputs, inner: inputs)."""
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            res = tuple(el[0] for el in res)
        return res if outer else res[0]
    return res if to_unpack else res[0]


def _grad_preprocess(inputs: tuple[Tensor, ...], create_graph: bool,
                     need_graph: bool) -> tuple[Tensor, ...]:
    """Fresh handles on ``inputs``: differentiable ones (a clone keeps the caller's
    history) where ``create_graph`` and the input requires grad, detached leaves
    requiring grad as ``need_graph`` says otherwise. Always new objects, so gradients
    are taken with respect to the arguments given here, not to the same tensors captured
    by ``func`` from outside."""
    res = []
    for t in inputs:
        if create_graph and t.requires_grad:
            res.append(t.clone())
        else:
            res.append(unaliased_detach(t).requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(res: tuple[Any, ...], create_graph: bool) -> tuple[Any, ...]:
    """Results without history unless ``create_graph`` (nested tuples kept)."""
    if create_graph:
        return res
    return tuple(unaliased_detach(t) if isinstance(t, Tensor) else _grad_postprocess(t, False)
                 for t in res)


def _validate_v(v: tuple[Tensor, ...], other: tuple[Tensor, ...], is_other_tuple: bool) -> None:
    """``v`` must match ``other`` (the outputs for a VJP, the inputs otherwise) in length
    and in every shape."""
    if len(v) != len(other):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for k, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.shape != el_other.shape:
            prefix = f"Entry {k} in " if is_other_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {el_other.shape} but got "
                               f"{el_v.shape}.")


def _v_or_default(v: Any, other: tuple[Tensor, ...], is_other_tuple: bool, create_graph: bool,
                  fn_name: str, what: str) -> tuple[Tensor, ...] | None:
    """``v`` checked against ``other``; ``None`` only where ``other`` is one tensor of
    one element (``what`` names it in the error: "output" or "input")."""
    if v is None:
        if len(other) != 1 or other[0].numel() != 1:
            if what == "output":
                raise RuntimeError("The vector v can only be None if the user-provided function "
                                   "returns a single Tensor with a single element.")
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        return None
    _, vs = _as_tuple(v, "v", fn_name)
    vs = _grad_preprocess(vs, create_graph, need_graph=False)
    _validate_v(vs, other, is_other_tuple)
    return vs


_NOT_DIFFERENTIABLE = {
    "outputs": ("Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."),
    "grad_inputs": ("The gradient with respect to input {i} is independent of the inputs of "
                    "the user-provided function. This is not allowed in strict mode."),
    "jacobian": ("While computing the hessian, found that the jacobian of the user-provided "
                 "function with respect to input {i} is independent of the input. This is not "
                 "allowed in strict mode. You should ensure that your function is twice "
                 "differentiable and that the jacobian depends on the inputs (this would be "
                 "violated by a linear function for example)."),
}


def _check_requires_grad(tensors: tuple[Tensor | None, ...], kind: str, strict: bool) -> None:
    """In strict mode, every one of ``tensors`` must exist and carry history (``kind``,
    a key of ``_NOT_DIFFERENTIABLE``, says what they are, for the message)."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if not t.requires_grad:
            raise RuntimeError(_NOT_DIFFERENTIABLE[kind].format(i=i))


def _autograd_grad(outputs: tuple[Tensor | None, ...], inputs: tuple[Tensor, ...],
                   grad_outputs: tuple[Tensor, ...] | None = None, create_graph: bool = False,
                   retain_graph: bool | None = None) -> tuple[Tensor | None, ...]:
    """``grad`` over the ``outputs`` that exist and carry history (the others contribute
    nothing); ``None`` for an input no output reaches."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    kept = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not kept:
        return (None,) * len(inputs)
    outs, gs = zip(*kept)
    return grad_of(list(outs), list(inputs), list(gs), retain_graph, create_graph,
                   allow_unused=True, materialize_grads=False, linked=False)


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _fill_in_zeros(grads: tuple[Tensor | None, ...], refs: tuple[Tensor, ...], strict: bool,
                   create_graph: bool, stage: str) -> tuple[Tensor, ...]:
    """Zeros shaped like ``refs[i]`` where ``grads[i]`` is missing (the mathematical
    value), or, in strict mode, an error naming ``i`` (``stage``, a key of
    ``_INDEPENDENT``, says which product was taken)."""
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if stage.startswith("double") else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               "create_graph=True.")
        res.append(g)
    return tuple(res)


def vjp(func: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...], v: Any = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``, shaped like
    the inputs. ``v`` is shaped like the outputs; it may be left out when the output is
    one tensor of one element."""
    with grad_mode.enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = _grad_preprocess(ins, create_graph, need_graph=True)
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function",
                                           "vjp")
        _check_requires_grad(outs, "outputs", strict)
        vs = _v_or_default(v, outs, is_outputs_tuple, create_graph, "vjp", "output")
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _autograd_grad(outs, ins, vs, create_graph=create_graph)
        res = _fill_in_zeros(res, ins, strict, create_graph, "back")
    return (_tuple_postprocess(_grad_postprocess(outs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(res, create_graph), is_inputs_tuple))


def jvp(func: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...], v: Any = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(*inputs), J v)``: the Jacobian-vector product at ``inputs``, shaped like
    the outputs. ``v`` is shaped like the inputs; it may be left out when the input is
    one tensor of one element. Computed as PyTorch does, by the double backward trick:
    the backward ``u -> J^T u`` is linear in a cotangent ``u`` (zeros: its value never
    appears in the result), and its own VJP against ``v`` is ``J v``."""
    with grad_mode.enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jvp")
        ins = _grad_preprocess(ins, create_graph, need_graph=True)
        vs = _v_or_default(v, ins, is_inputs_tuple, create_graph, "jvp", "input")
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function",
                                           "jvp")
        _check_requires_grad(outs, "outputs", strict)
        us = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        grad_inputs = _autograd_grad(outs, ins, us, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _autograd_grad(grad_inputs, us, vs, create_graph=create_graph)
        res = _fill_in_zeros(res, outs, strict, create_graph, "back_trick")
    return (_tuple_postprocess(_grad_postprocess(outs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(res, create_graph), is_outputs_tuple))


def _check_strategy(strategy: str, arg_name: str) -> None:
    if strategy not in _STRATEGIES:
        raise ValueError(f"{arg_name}: expected \"forward-mode\" or \"reverse-mode\", got "
                         f"{strategy!r}. Hint: if your function has more outputs than inputs, "
                         "\"forward-mode\" tends to be more performant; otherwise prefer "
                         "\"reverse-mode\".")


def _check_forward_mode(create_graph: bool, strict: bool) -> None:
    """PyTorch's limits on ``strategy="forward-mode"`` that hold before the inputs are
    looked at (``vectorize=True`` is checked after, as there)."""
    if create_graph:
        raise NotImplementedError("jacobian: `create_graph=True` and `strategy=\"forward-mode\"` "
                                  "are not supported together (yet). Please either set "
                                  "`create_graph=False` or `strategy=\"reverse-mode\"`.")
    if strict:
        raise RuntimeError("jacobian: `strict=True` and `strategy=\"forward-mode\"` are not "
                           "supported together (yet). Please either set `strict=False` or "
                           "`strategy=\"reverse-mode\"`.")


def _one_hot(out: Tensor, j: int) -> Tensor:
    """The cotangent selecting element ``j`` of ``out`` (flat order), as a host buffer."""
    e = np.zeros(out.numel())
    e[j] = 1.0
    return tensor(e.reshape(out.shape), dtype=out.dtype, device=out.device)


def _jacobian_rows(out: Tensor, out_index: int, ins: tuple[Tensor, ...], create_graph: bool,
                   strict: bool) -> tuple[Tensor, ...]:
    """The Jacobian of one output with respect to each input, shaped
    ``out.shape + input.shape``: one backward per element of ``out`` (all recorded into
    the pending trace; nothing runs). Each is seeded with a one-hot cotangent held in a
    buffer of its own, not selected by a constant index (PyTorch's ``out.reshape(-1)[j]``):
    the rows' backward graphs are then one structure that differs only in which buffer
    feeds it, so their kernels compile once, not once per row."""
    rows: list[list[Tensor]] = [[] for _ in ins]
    for j in range(out.numel()):
        gs = _autograd_grad((out,), ins, (_one_hot(out, j),), retain_graph=True,
                            create_graph=create_graph)
        for k, (g, inp) in enumerate(zip(gs, ins)):
            if g is None:
                if strict:
                    raise RuntimeError(f"Output {out_index} of the user-provided function is "
                                       f"independent of input {k}. This is not allowed in "
                                       "strict mode.")
                g = zeros_like(inp)
            elif strict and create_graph and not g.requires_grad:
                raise RuntimeError(f"The jacobian of the user-provided function is independent "
                                   f"of input {k}. This is not allowed in strict mode when "
                                   "create_graph=True.")
            rows[k].append(g)
    if out.numel() == 0:    # (PyTorch's stack of no rows fails; the empty Jacobian is exact)
        return tuple(zeros(out.shape + inp.shape, dtype=inp.dtype, device=inp.device)
                     for inp in ins)
    return tuple(stack(r, 0).view(out.shape + inp.shape) for r, inp in zip(rows, ins))


def jacobian(func: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...],
             create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode") -> Any:
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a tensor
    of shape ``outputs[i].shape + inputs[j].shape`` -- one tensor for one input and one
    output, a tuple where one of them was a tuple, a tuple of tuples (``[i][j]``) where
    both were.

    Computed row by row in reverse mode, one backward per output element. Nova has no
    vmap, so ``vectorize=True`` (accepted, with PyTorch's refusal of ``strict=True``) is
    computed the same way, with the same result; all rows are recorded into one pending
    trace and realized together when the result is read. ``strategy="forward-mode"``
    keeps PyTorch's rules (``vectorize=True`` required; no ``create_graph`` nor
    ``strict``) and PyTorch's result (dtype of the outputs, where reverse mode gives
    the inputs'), but is computed by the same reverse-mode rows: Nova has no forward-mode
    AD."""
    _check_strategy(strategy, "jacobian")
    forward = strategy == "forward-mode"
    if forward:
        _check_forward_mode(create_graph, strict)
    with grad_mode.enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
        if forward and not vectorize:
            raise NotImplementedError("jacobian: computing the Jacobian with "
                                      "`strategy=\"forward-mode\"` is only implemented for "
                                      "`vectorize=True`.")
        ins = _grad_preprocess(ins, create_graph, need_graph=True)
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function",
                                           "jacobian")
        _check_requires_grad(outs, "outputs", strict)
        if vectorize and strict:
            raise RuntimeError("jacobian: `strict=True` and `vectorize=True` are not supported "
                               "together. Please either set `strict=False` or "
                               "`vectorize=False`.")
        jac = tuple(_jacobian_rows(out, i, ins, create_graph, strict)
                    for i, out in enumerate(outs))
        if forward:
            jac = tuple(tuple(block.to(out.dtype) for block in row)
                        for row, out in zip(jac, outs))
    return _tuple_postprocess(_grad_postprocess(jac, create_graph),
                              (is_outputs_tuple, is_inputs_tuple))


def hessian(func: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...],
            create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of the scalar function ``func`` at ``inputs``: the Jacobian of its
    Jacobian. One tensor of shape ``inputs.shape * 2`` for one input; for a tuple, a
    tuple of tuples whose ``[i][j]`` has shape ``inputs[i].shape + inputs[j].shape``.
    ``vectorize`` and ``outer_jacobian_strategy`` are as ``jacobian``'s ``vectorize`` and
    ``strategy`` (the outer Jacobian's; the inner one is reverse mode)."""
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "hessian")
    _check_strategy(outer_jacobian_strategy, "hessian")

    def scalar_func(*inp: Tensor) -> Tensor:
        out = func(*inp)
        is_out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(outs, "outputs", strict)
        if is_out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               f"contain a single element (got shape {out.shape})")
        return out.squeeze()

    def jac_func(*inp: Tensor) -> tuple[Tensor, ...]:
        jac = jacobian(scalar_func, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(jac_func, ins, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(func: Callable[..., Any], ins: tuple[Tensor, ...], strict: bool,
                   fn_name: str) -> Tensor:
    """``func(*ins)``, which must be one tensor of one element (``hvp``, ``vhp``)."""
    is_out_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function", fn_name)
    _check_requires_grad(outs, "outputs", strict)
    if is_out_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                           f"contain a single element (got shape {outs[0].shape})")
    return outs[0]


def vhp(func: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...], v: Any = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(*inputs), v^T H)``: the vector-Hessian product of the scalar function
    ``func`` at ``inputs``, shaped like the inputs (``v`` too; it may be left out when
    the input is one tensor of one element). A backward of the gradient against ``v``."""
    with grad_mode.enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "vhp")
        ins = _grad_preprocess(ins, create_graph, need_graph=True)
        vs = _v_or_default(v, ins, is_inputs_tuple, create_graph, "vhp", "input")
        out = _scalar_output(func, ins, strict, "vhp")
        jac = _autograd_grad((out,), ins, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _autograd_grad(jac, ins, vs, create_graph=create_graph)
        res = _fill_in_zeros(res, ins, strict, create_graph, "double_back")
    return (out if create_graph else unaliased_detach(out),
            _tuple_postprocess(_grad_postprocess(res, create_graph), is_inputs_tuple))


def hvp(func: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...], v: Any = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(*inputs), H v)``: the Hessian-vector product of the scalar function
    ``func`` at ``inputs``, shaped like the inputs (``v`` too; it may be left out when
    the input is one tensor of one element). By the double backward trick on the
    gradient's VJP, as PyTorch does; where ``func`` is twice continuously differentiable
    ``H`` is symmetric and ``vhp`` gives the same values with one backward less."""
    with grad_mode.enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "hvp")
        ins = _grad_preprocess(ins, create_graph, need_graph=True)
        vs = _v_or_default(v, ins, is_inputs_tuple, create_graph, "hvp", "input")
        out = _scalar_output(func, ins, strict, "hvp")
        jac = _autograd_grad((out,), ins, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        us = tuple(zeros_like(t).requires_grad_(True) for t in ins)
        double_back = _autograd_grad(jac, ins, us, create_graph=True)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _autograd_grad(double_back, us, vs, create_graph=create_graph)
        res = _fill_in_zeros(res, ins, strict, create_graph, "double_back_trick")
    return (out if create_graph else unaliased_detach(out),
            _tuple_postprocess(_grad_postprocess(res, create_graph), is_inputs_tuple))
