"""torch.func's function transforms: ``grad``, ``grad_and_value``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd``, ``hessian``, ``vmap`` and ``stack_module_state``.

The derivatives are Nova's reverse-mode autograd (``nv.autograd.grad``) applied to
fresh handles on the arguments: ``jvp`` is the double-backward trick (the VJP is linear
in its cotangent ``u``; differentiating ``u -> J^T u`` against the tangent gives
``J v``), ``jacrev`` one backward per output element, ``jacfwd`` the same rows (Nova
has no forward-mode AD; the values are the same) and ``hessian`` the Jacobian of the
Jacobian. A transform called inside another (``grad(grad(f))``, ``vmap(grad(f))``)
keeps its graph, so the outer one differentiates through it.
So does one whose result depends on a tensor requiring grad other than the arguments
it differentiates (another argument, a closed-over parameter), as torch.func's: the
caller's autograd differentiates through it (a functorch PINN's residual).

``vmap`` calls the function once per index of the mapped dim and stacks the results:
the same values as a batched evaluation (PyTorch's batching rules), and since Nova
records lazily, every call lands in the one pending trace and compiles as one step.
The cost is recording (and compiling) the function's ops once per batch element, so
it suits the per-sample-gradient and ensembling sizes torch.func is used at, not
batches of thousands. ``randomness='error'`` (PyTorch's default) refuses a function
that draws from the default generator; ``'same'`` gives every element the same draws,
``'different'`` independent ones.

Arguments and results may be pytrees: tensors inside tuples, lists and dicts (a
``dict(model.named_parameters())`` for ``functional_call``); other leaves pass through.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any

from nova.autograd import grad_mode
from nova.autograd.functional import _autograd_grad, _grad_preprocess, _jacobian_rows
from nova.tensor import random as _random
from nova.tensor.creation import zeros_like
from nova.tensor.arrays import movedim
from nova.tensor.movement import stack
from nova.tensor.tensor import Tensor, unaliased_detach

# How many differentiating transforms are running around the current call: inside one,
# results keep their graph so that the outer transform can differentiate through them.
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("nova_func_depth", default=0)


@contextlib.contextmanager
def _level() -> Iterator[None]:
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        yield
    finally:
        _DEPTH.reset(token)


# ---------------------------------------------------------------- pytrees

def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """The leaves of ``tree`` (tensors and anything that is not a tuple, list or dict)
    in order, and a spec ``tree_unflatten`` rebuilds it from."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for item in tree:
            sub, spec = tree_flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for key, item in tree.items():
            sub, spec = tree_flatten(item)
            leaves += sub
            specs.append((key, len(sub), spec))
        return leaves, (dict, specs)
    return [tree], None


def tree_unflatten(spec: Any, leaves: list[Any]) -> Any:
    """The tree of ``spec`` with ``leaves`` in place of its leaves."""
    if spec is None:
        return leaves[0]
    kind, specs = spec
    out, at = [], 0
    if kind is dict:
        items = {}
        for key, n, sub in specs:
            items[key] = tree_unflatten(sub, leaves[at:at + n])
            at += n
        return items
    for n, sub in specs:
        out.append(tree_unflatten(sub, leaves[at:at + n]))
        at += n
    return tuple(out) if kind is tuple else (out if kind is list else kind(out))


def _argnums(op: str, argnums: Any, nargs: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) and not isinstance(argnums, bool) else argnums
    if not isinstance(nums, tuple) or not nums or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in nums):
        raise RuntimeError(f"{op}: argnums must be an int or a non-empty tuple of ints, got "
                           f"{argnums!r}")
    out = []
    for n in nums:
        if not -nargs <= n < nargs:
            raise RuntimeError(f"{op}: Got argnums={n}, but only {nargs} positional inputs")
        out.append(n % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: argnums must be unique, got {argnums!r}")
    return tuple(out)


def _tensors(op: str, leaves: list[Any], what: str) -> list[Tensor]:
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise ValueError(f"{op}: expected {what} to be Tensors (or tuples, lists and "
                             f"dicts of them), got {type(leaf).__name__}")
    return leaves


def _keep_graph(leaves: list[Tensor], nested: bool) -> bool:
    """Results keep their graph inside another differentiating transform (``nested``:
    read before this one's level is entered), or when an argument already carries one
    (so a caller's autograd sees through the transform)."""
    return nested or any(t.requires_grad for t in leaves)


def _reaches_outer(outputs: list[Tensor], fresh: list[Tensor]) -> bool:
    """Whether the outputs' history reaches a tensor requiring grad other than this
    transform's own handles: a closed-over parameter, or an argument that is not
    differentiated (``grad(u, argnums=1)(params, x)``). torch.func keeps the caller's
    graph through the transform then, so ``u_x`` of a PINN residual is differentiable
    with respect to the parameters (a detached result drops those terms of the loss's
    gradient without an error)."""
    own = {id(t) for t in fresh}
    seen: set[int] = set()
    stack = [o.grad_fn for o in outputs if isinstance(o, Tensor)]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        for e in fn.next:
            if isinstance(e, Tensor):
                if id(e) not in own:
                    return True
            elif e is not None:
                stack.append(e)
    return False


def _fresh(leaves: list[Tensor], keep: bool) -> list[Tensor]:
    return list(_grad_preprocess(tuple(leaves), keep, need_graph=True))


def _out(t: Any, keep: bool) -> Any:
    return t if keep or not isinstance(t, Tensor) else unaliased_detach(t)


def _grads(outputs: list[Tensor], inputs: list[Tensor], cotangents: list[Tensor] | None,
           keep: bool, retain: bool = False) -> list[Tensor]:
    """d(outputs)/d(inputs) against ``cotangents``: zeros for an input the outputs do
    not reach (as torch.func)."""
    got = _autograd_grad(tuple(outputs), tuple(inputs),
                         None if cotangents is None else tuple(cotangents),
                         create_graph=keep, retain_graph=retain or keep)
    return [zeros_like(x) if g is None else _out(g, keep) for g, x in zip(got, inputs)]


def _split_aux(op: str, out: Any, has_aux: bool) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not isinstance(out, tuple) or len(out) != 2:
        raise RuntimeError(f"{op}(f)(*args): output of function f should be a tuple: "
                           "(output, aux) if has_aux is True")
    return out


# ---------------------------------------------------------------- grad, vjp, jvp

def grad_and_value(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """A function returning ``(gradient, value)`` of ``func`` (which must return a 0-d
    tensor, or ``(value, aux)`` with ``has_aux``: then ``(gradient, (value, aux))``, as
    ``torch.func.grad_and_value``)
    with respect to the positional arguments ``argnums`` (an int: that argument's
    structure; a tuple: a tuple of them)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums("grad_and_value", argnums, len(args))
        nested = _DEPTH.get() > 0
        with grad_mode.enable_grad(), _level():
            new_args = list(args)
            specs, fresh = [], []
            keep = False
            flat_args = []
            for n in nums:
                leaves, spec = tree_flatten(args[n])
                flat_args.append((_tensors("grad_and_value", leaves, "the differentiated "
                                           "arguments"), spec))
                keep = keep or _keep_graph(leaves, nested)
            for leaves, spec in flat_args:
                new = _fresh(leaves, keep)
                fresh.append(new)
                specs.append(spec)
            for n, new, spec in zip(nums, fresh, specs):
                new_args[n] = tree_unflatten(spec, new)
            out, aux = _split_aux("grad_and_value", func(*new_args, **kwargs), has_aux)
            if not isinstance(out, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                                   f"Tensor, got {type(out).__name__}")
            if out.ndim != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                                   f"scalar Tensor, got tensor with {out.ndim} dims. Maybe you "
                                   "wanted to use the vjp or jacrev APIs instead?")
            flat = [t for new in fresh for t in new]
            keep = keep or _reaches_outer([out], flat)
            grads = _grads([out], flat, None, keep)
        results, at = [], 0
        for new, spec in zip(fresh, specs):
            results.append(tree_unflatten(spec, grads[at:at + len(new)]))
            at += len(new)
        gradient = results[0] if isinstance(argnums, int) else tuple(results)
        value = _out(out, keep)
        return (gradient, (value, aux)) if has_aux else (gradient, value)
    return wrapper


def grad(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """A function returning the gradient of ``func`` (a 0-d tensor result) with respect
    to its positional arguments ``argnums`` (``torch.func.grad``); with ``has_aux``,
    ``func`` returns ``(value, aux)`` and the result is ``(gradient, aux)``."""
    both = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if has_aux:
            gradient, (_, aux) = both(*args, **kwargs)
            return gradient, aux
        return both(*args, **kwargs)[0]
    return wrapper


def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(func(*primals), vjp_fn)`` (``torch.func.vjp``): ``vjp_fn(cotangents)``, with
    cotangents shaped like the output, returns the vector-Jacobian product for every
    primal, as a tuple in the primals' structure; it may be called repeatedly. With
    ``has_aux``, ``func`` returns ``(output, aux)`` and so does this, ``aux`` last."""
    nested = _DEPTH.get() > 0
    with grad_mode.enable_grad(), _level():
        leaves, spec = tree_flatten(primals)
        _tensors("vjp", leaves, "primals")
        keep = _keep_graph(leaves, nested)
        fresh = _fresh(leaves, keep)
        out, aux = _split_aux("vjp", func(*tree_unflatten(spec, fresh)), has_aux)
        out_leaves, out_spec = tree_flatten(out)
        _tensors("vjp", out_leaves, "the outputs of func")
        keep = keep or _reaches_outer(out_leaves, fresh)

    def vjp_fn(cotangents: Any) -> tuple:
        ct_leaves, ct_spec = tree_flatten(cotangents)
        if len(ct_leaves) != len(out_leaves) or ct_spec != out_spec and not (
                out_spec is None and ct_spec is None):
            raise RuntimeError("vjp_fn: Expected pytree structure of cotangents to be the "
                               "same as pytree structure of outputs to the function")
        for c, o in zip(_tensors("vjp_fn", ct_leaves, "cotangents"), out_leaves):
            if c.shape != o.shape:
                raise RuntimeError(f"vjp_fn: Mismatch in shape: cotangent has shape "
                                   f"{c.shape} and output has shape {o.shape}")
        with grad_mode.enable_grad(), _level():
            grads = _grads(out_leaves, fresh, ct_leaves, keep, retain=True)
        return tree_unflatten(spec, grads)

    result = tree_unflatten(out_spec, [_out(o, keep) for o in out_leaves])
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple:
    """``(func(*primals), J @ tangents)`` (``torch.func.jvp``; ``primals`` and
    ``tangents`` are tuples of the same structure), by the double-backward trick."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                           "tuples")
    leaves, spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if t_spec != spec:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           "the same python structure")
    for p, t in zip(_tensors("jvp", leaves, "primals"), _tensors("jvp", t_leaves, "tangents")):
        if p.shape != t.shape:
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to "
                               f"have the same shape, got {p.shape} and {t.shape}")
    nested = _DEPTH.get() > 0
    with grad_mode.enable_grad(), _level():
        keep = _keep_graph(leaves + t_leaves, nested)
        fresh = _fresh(leaves, True)
        out, aux = _split_aux("jvp", func(*tree_unflatten(spec, fresh)), has_aux)
        out_leaves, out_spec = tree_flatten(out)
        _tensors("jvp", out_leaves, "the outputs of func")
        keep = keep or _reaches_outer(out_leaves, fresh)
        us = [zeros_like(o).requires_grad_(True) for o in out_leaves]
        back = _autograd_grad(tuple(out_leaves), tuple(fresh), tuple(us), create_graph=True)
        pairs = [(g, t) for g, t in zip(back, t_leaves) if g is not None]
        products = _autograd_grad(tuple(g for g, _ in pairs), tuple(us),
                                  tuple(t for _, t in pairs), create_graph=keep)
        tangent_out = [zeros_like(o) if p is None else _out(p, keep)
                       for p, o in zip(products, out_leaves)]
    result = tree_unflatten(out_spec, [_out(o, keep) for o in out_leaves])
    pushed = tree_unflatten(out_spec, [_out(t, keep) for t in tangent_out])
    return (result, pushed, aux) if has_aux else (result, pushed)


def linearize(func: Callable, *primals: Any) -> tuple[Any, Callable]:
    """``(func(*primals), jvp_fn)`` (``torch.func.linearize``): ``jvp_fn(*tangents)``,
    tangents shaped like the primals, is ``J @ tangents`` at ``primals`` -- what ``jvp``
    gives, from a graph built once: ``func`` runs here only, and each call of
    ``jvp_fn`` is one backward pass through the double-backward graph
    (``u -> J^T u`` is linear in ``u``; its gradient with respect to ``u`` against the
    tangents is ``J @ tangents``)."""
    leaves, spec = tree_flatten(primals)
    _tensors("linearize", leaves, "primals")
    nested = _DEPTH.get() > 0
    with grad_mode.enable_grad(), _level():
        keep = _keep_graph(leaves, nested)
        fresh = _fresh(leaves, True)
        out = func(*tree_unflatten(spec, fresh))
        out_leaves, out_spec = tree_flatten(out)
        _tensors("linearize", out_leaves, "the outputs of func")
        keep = keep or _reaches_outer(out_leaves, fresh)
        us = [zeros_like(o).requires_grad_(True) for o in out_leaves]
        back = _autograd_grad(tuple(out_leaves), tuple(fresh), tuple(us), create_graph=True)

    def jvp_fn(*tangents: Any) -> Any:
        t_leaves, t_spec = tree_flatten(tangents)
        if t_spec != spec or len(t_leaves) != len(leaves):
            raise RuntimeError("linearize's jvp_fn: expected tangents with the structure of "
                               f"the primals ({len(leaves)} tensors), got {len(t_leaves)}")
        for p, t in zip(leaves, _tensors("jvp_fn", t_leaves, "tangents")):
            if p.shape != t.shape or p.dtype != t.dtype:
                raise RuntimeError(f"linearize's jvp_fn: expected a tangent of shape "
                                   f"{tuple(p.shape)} and dtype {p.dtype}, got "
                                   f"{tuple(t.shape)} and {t.dtype}")
        pairs = [(g, t) for g, t in zip(back, t_leaves) if g is not None]
        with grad_mode.enable_grad(), _level():
            products = _autograd_grad(tuple(g for g, _ in pairs), tuple(us),
                                      tuple(t for _, t in pairs), retain_graph=True,
                                      create_graph=keep) \
                if pairs else (None,) * len(us)
        pushed = [zeros_like(o) if p is None else _out(p, keep)
                  for p, o in zip(products, out_leaves)]
        return tree_unflatten(out_spec, pushed)

    return tree_unflatten(out_spec, [_out(o, keep) for o in out_leaves]), jvp_fn


# ---------------------------------------------------------------- Jacobians

def _jacobian(op: str, func: Callable, argnums: Any, has_aux: bool) -> Callable:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums(op, argnums, len(args))
        nested = _DEPTH.get() > 0
        with grad_mode.enable_grad(), _level():
            flat_args = [tree_flatten(args[n]) for n in nums]
            all_leaves = [t for leaves, _ in flat_args
                          for t in _tensors(op, leaves, "the differentiated arguments")]
            keep = _keep_graph(all_leaves, nested)
            fresh = [_fresh(leaves, keep) for leaves, _ in flat_args]
            new_args = list(args)
            for n, new, (_, spec) in zip(nums, fresh, flat_args):
                new_args[n] = tree_unflatten(spec, new)
            out, aux = _split_aux(op, func(*new_args, **kwargs), has_aux)
            out_leaves, out_spec = tree_flatten(out)
            _tensors(op, out_leaves, "the outputs of func")
            flat_in = [t for new in fresh for t in new]
            keep = keep or _reaches_outer(out_leaves, flat_in)
            jac_leaves = []
            for o in out_leaves:
                rows = [_out(r, keep) for r in
                        _jacobian_rows(o, 0, tuple(flat_in), keep, strict=False)]
                per_arg, at = [], 0
                for new, (_, spec) in zip(fresh, flat_args):
                    per_arg.append(tree_unflatten(spec, rows[at:at + len(new)]))
                    at += len(new)
                jac_leaves.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        jac = tree_unflatten(out_spec, jac_leaves)
        return (jac, aux) if has_aux else jac
    return wrapper


def jacrev(func: Callable, argnums: Any = 0, *, has_aux: bool = False,
           chunk_size: int | None = None, _preallocate_and_copy: bool = False) -> Callable:
    """A function returning the Jacobian of ``func`` with respect to the arguments
    ``argnums`` (``torch.func.jacrev``): for each output leaf, a tensor of shape
    ``output.shape + argument.shape`` (in the arguments' structure; a tuple of them
    for a tuple of argnums). One backward per output element; ``chunk_size`` is
    accepted and has no effect on the values."""
    return _jacobian("jacrev", func, argnums, has_aux)


def jacfwd(func: Callable, argnums: Any = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """``torch.func.jacfwd``: the same Jacobian as ``jacrev`` (Nova has no forward-mode
    AD, so it is computed in reverse mode; the values agree)."""
    _check_randomness(randomness)
    return _jacobian("jacfwd", func, argnums, has_aux)


def hessian(func: Callable, argnums: Any = 0) -> Callable:
    """The Hessian of a function with a 0-d result (``torch.func.hessian``): the
    Jacobian of its Jacobian, shaped ``argument.shape + argument.shape``."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------- vmap

def _check_randomness(randomness: str) -> None:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def _in_dims_per_leaf(in_dims: Any, args: tuple, name: str) -> list[Any]:
    """The mapped dim (or None) of every leaf of ``args``."""
    if isinstance(in_dims, int) or in_dims is None:
        per_arg = [in_dims] * len(args)
    elif isinstance(in_dims, (tuple, list)):
        if len(in_dims) != len(args):
            raise ValueError(f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>): in_dims is not "
                             f"compatible with the structure of `inputs`. in_dims has "
                             f"{len(in_dims)} elements, but inputs has {len(args)}")
        per_arg = list(in_dims)
    else:
        raise ValueError(f"vmap({name}, in_dims={in_dims!r}, ...): expected `in_dims` to be "
                         f"int or a (potentially nested) tuple matching the structure of "
                         f"inputs, got: {type(in_dims).__name__}.")
    dims = []
    for arg, d in zip(args, per_arg):
        leaves, spec = tree_flatten(arg)
        if isinstance(d, int) or d is None:
            dims += [d] * len(leaves)
        else:
            d_leaves, d_spec = tree_flatten(d)
            if d_spec != spec:
                raise ValueError(f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>): in_dims "
                                 "is not compatible with the structure of `inputs`")
            dims += d_leaves
    return dims


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` mapped over a dim of its inputs (``torch.func.vmap``): ``in_dims`` says
    which dim of each positional argument (an int, None for an argument passed whole,
    or a tuple per argument, nested like it), ``out_dims`` where the mapped dim goes in
    each output. Keyword arguments are passed whole. Computed by calling ``func`` once
    per index and stacking (module docstring); ``chunk_size`` is accepted and has no
    effect on the values."""
    _check_randomness(randomness)
    name = getattr(func, "__name__", repr(func))

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not args:
            raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to "
                             "add inputs, or you are trying to vmap over a function with no "
                             "inputs. The latter is unsupported.")
        leaves, spec = tree_flatten(args)
        dims = _in_dims_per_leaf(in_dims, args, name)
        sizes = []
        for leaf, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(d, int) or isinstance(d, bool):
                raise ValueError(f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>): in_dims "
                                 f"must be an int or None, got {d!r}")
            if not isinstance(leaf, Tensor):
                raise ValueError(f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>): Got "
                                 f"in_dim={d} for an input but the input is of type "
                                 f"{type(leaf).__name__}. We cannot vmap over non-Tensor "
                                 "arguments, please use None as the respective in_dim")
            if not -max(leaf.ndim, 1) <= d < max(leaf.ndim, 1) or leaf.ndim == 0:
                raise ValueError(f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>): Got "
                                 f"in_dim={d} for some input, but that input is a Tensor of "
                                 f"dimensionality {leaf.ndim} so expected in_dim to satisfy "
                                 f"-{leaf.ndim} <= in_dim < {leaf.ndim}.")
            sizes.append(leaf.shape[d % leaf.ndim])
        if not sizes:
            raise ValueError(f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>): at least one "
                             "input must be a Tensor with a mapped dim (in_dims not None)")
        if len(set(sizes)) != 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sizes} for the mapped dimension")
        size = sizes[0]
        gen = _random.default_generator
        start = gen.get_state()
        whole = [(k, leaf, leaf._version) for k, (leaf, d) in enumerate(zip(leaves, dims))
                 if d is None and isinstance(leaf, Tensor)]
        outputs = []
        for b in range(max(size, 1)):        # (a size-0 batch runs once, for the shapes)
            if randomness == "same":
                gen.set_state(start)
            picked = [leaf if d is None else leaf.select(d, b) if size else
                      _empty_slice(leaf, d) for leaf, d in zip(leaves, dims)]
            out = func(*tree_unflatten(spec, picked), **kwargs)
            _check_unbatched_unchanged(name, whole)
            if randomness == "error" and gen.get_state() != start:
                raise RuntimeError("vmap: called random operation while in randomness error "
                                   "mode. Please either use the 'same' or 'different' "
                                   "randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
            outputs.append(out)
        return _stack_outputs(name, outputs, out_dims, size)
    return wrapper


def _check_unbatched_unchanged(name: str, whole: list[tuple[int, Tensor, int]]) -> None:
    """``func`` runs once per batch index, with an argument of in_dim None passed whole
    each time: an in-place write to it would be repeated per index and mix the batch
    items into it (PyTorch's vmap refuses writing a batched value into an unbatched
    tensor). So any write to one is refused, after the first call."""
    for k, leaf, version in whole:
        if leaf._version != version:
            raise RuntimeError(f"vmap({name}): an in-place operation changed input {k} (in_dim "
                               f"None, shape {tuple(leaf.shape)}), which every batch index "
                               f"shares: it would be applied once per index. Use an "
                               f"out-of-place operation (y = y + x, not y.add_(x)), or map "
                               f"over that input too")


def _empty_slice(leaf: Tensor, d: int) -> Tensor:
    """A stand-in element of a size-0 batch (zeros of one element's shape): run once so
    that the outputs' shapes are known."""
    from nova.tensor.creation import zeros
    shape = leaf.shape[:d % leaf.ndim] + leaf.shape[d % leaf.ndim + 1:]
    return zeros(shape, dtype=leaf.dtype, device=leaf.device)


def _stack_outputs(name: str, outputs: list[Any], out_dims: Any, size: int) -> Any:
    first, spec = tree_flatten(outputs[0])
    if isinstance(out_dims, int) or out_dims is None:
        dims = [out_dims] * len(first)
    else:
        d_leaves, d_spec = tree_flatten(out_dims)
        if d_spec != spec and not (isinstance(out_dims, tuple) and len(out_dims) == 1
                                   and spec is None):
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims!r})(<inputs>): out_dims "
                             "is not compatible with the structure of `outputs`")
        dims = d_leaves
    per_call = [tree_flatten(o)[0] for o in outputs]
    stacked = []
    for k, d in enumerate(dims):
        column = [leaves[k] for leaves in per_call]
        if d is None:
            stacked.append(column[0])
            continue
        if not all(isinstance(c, Tensor) for c in column):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                             f"{type(column[0]).__name__}. Did you mean to set out_dims= to "
                             "None for output?")
        whole = stack(column, 0)
        if size == 0:
            whole = whole[:0]
        nd = whole.ndim
        if not -nd <= d < nd:
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims!r}): out_dim {d} is out of "
                             f"range for an output of {nd - 1} dims")
        stacked.append(movedim(whole, 0, d % nd) if d % nd else whole)
    return tree_unflatten(spec, stacked)


# ---------------------------------------------------------------- ensembles

def stack_module_state(models: Any) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The parameters and buffers of ``models`` (modules of one structure) stacked along
    a new leading dim, by name (``torch.func.stack_module_state``): the parameters as
    new leaves that require grad where the originals did, ready for
    ``vmap(functional_call ...)`` ensembling."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not all(m.training == models[0].training for m in models):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    names = [n for n, _ in models[0].named_parameters()]
    for m in models[1:]:
        if [n for n, _ in m.named_parameters()] != names:
            raise RuntimeError("stack_module_state: Expected all models to have the same "
                               "parameters")
    params = {}
    for name in names:
        ps = [dict(m.named_parameters())[name] for m in models]
        leaf = unaliased_detach(stack([unaliased_detach(p) for p in ps], 0))
        params[name] = leaf.requires_grad_(ps[0].requires_grad)
    buffers = {name: stack([dict(m.named_buffers())[name] for m in models], 0)
               for name, _ in models[0].named_buffers()}
    return params, buffers
