"""Vector-Jacobian rules, one row per primitive of DESIGN.md.

Each rule takes the backward context and the upstream gradient ``g`` (a Tensor shaped
like the primitive's output) and returns one gradient per input (None where an input
needs none). Rules are written with the public ops, so the backward pass is recorded
into the same trace as the forward, and with ``create_graph=True`` it is itself
differentiable. Adding a primitive to the dialect means adding a row here (keyed by its
op class) or giving it the ``NonDifferentiable`` trait.

Conventions at non-differentiable points follow PyTorch:
- ``maximum``/``minimum`` split the gradient evenly between tied operands;
- ``reduce_max`` (``amax``/``amin``) splits it evenly among tied maxima (``max(dim)``/
  ``min(dim)`` gather their values at the returned index, which so takes it all, as in
  PyTorch);
- ``atan2`` has gradient 0 at the origin;
- ``relu`` is ``where(x <= 0, 0, x)``, so its gradient at 0 is 0;
- ``abs`` has gradient 0 at 0; ``pow`` gives 0 for the exponent where the base is 0
  and the exponent is >= 0, and 0 for the base where the exponent is 0.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nova.autograd import graph
from nova.compiler import dialect as nd
from nova.core import dtypes as dt
from nova.tensor import ops
from nova.tensor.scan import scan_last
from nova.tensor.tensor import Tensor
from nova.tensor.trace import Node

Grads = tuple[Tensor | None, ...]


class Context:
    """What a rule may read: saved inputs/output as tensors, shapes, attributes."""

    def __init__(self, fn: graph.GradFn, create_graph: bool):
        self.fn = fn
        self.attrs = fn.attrs
        self.create_graph = create_graph
        self.unpacked: dict[int, Node] = {}     # saved-tensor hooks: unpacked once a pass

    def needs(self, i: int) -> bool:
        return self.fn.next[i] is not None

    def _node(self, i: int, saved: Any) -> Any:
        """The trace node of a saved value (``i``: the input, -1 the output), through
        its unpack hook if a saved-tensor hook packed it (``nova.tensor.tape``)."""
        if type(saved) is not graph.SavedValue:
            return saved
        node = self.unpacked.get(i)
        if node is None:
            node = self.unpacked[i] = saved.unpack(self.fn.name())
        return node

    def x(self, i: int) -> Tensor:
        node = self._node(i, self.fn.saved[i])
        if node is None:
            raise RuntimeError(
                f"{self.fn.name()}: trying to backward through the graph a second time (or "
                "to read a value the rule did not save); pass retain_graph=True to the first "
                "backward call")
        edge = self.fn.next[i] if self.create_graph else None
        if edge is None:
            return Tensor._wrap(node)
        if isinstance(edge, graph.GradFn):
            return Tensor._wrap(node, grad_fn=edge)
        if edge.node is node:  # the leaf still holds this value: differentiate into it
            return edge
        return Tensor._wrap(node, grad_fn=graph.alias_fn(edge, node))

    def y(self) -> Tensor:
        node = self._node(-1, self.fn.out_node)
        if node is None:
            raise RuntimeError(f"{self.fn.name()}: trying to backward through the graph a "
                               "second time; pass retain_graph=True to the first backward call")
        return Tensor._wrap(node, grad_fn=self.fn if self.create_graph else None)

    def shape(self, i: int) -> tuple[int, ...]:
        return self.fn.in_shapes[i]


@dataclass(frozen=True)
class Rule:
    vjp: Callable[[Context, Tensor], Grads]
    saves_inputs: tuple[int, ...] = ()
    saves_output: bool = False


def _atan2_back(ctx: Context, g: Tensor) -> Grads:
    """atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2); 0 at the origin,
    where both are undefined (PyTorch's convention; the formula gave 0 * inf = NaN).
    The quotient sees 1 there, so a second derivative is finite too."""
    y, x = ctx.x(0), ctx.x(1)
    origin = ops.logical_and(ops.eq(x, 0), ops.eq(y, 0))
    r2 = ops.where(origin, 1.0, ops.add(ops.mul(x, x), ops.mul(y, y)))
    scale = ops.where(origin, 0.0, ops.div(g, r2))
    return (ops.mul(scale, x) if ctx.needs(0) else None,
            ops.neg(ops.mul(scale, y)) if ctx.needs(1) else None)


def _trunc(x: Tensor) -> Tensor:
    return ops.prim("trunc", [x], {}, x.shape, x.dtype)


def _sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    return ops.prim("reshape", [g], {}, shape, g.dtype) if g.shape != shape else g


def _bcast_back(ctx: Context, g: Tensor) -> Grads:
    """broadcast_in_dim: sum over the new dims and over dims that were size 1."""
    src = ctx.shape(0)
    dims = ctx.attrs["dims"]
    axes = [d for d in range(g.ndim) if d not in dims]
    axes += [d for i, d in enumerate(dims) if src[i] == 1 and g.shape[d] != 1]
    return (_sum_to(ops.sum(g, tuple(sorted(axes))) if axes else g, src),)


def _slice_back(ctx: Context, g: Tensor) -> Grads:
    src = ctx.shape(0)
    start, stride = ctx.attrs["start"], ctx.attrs["stride"]
    if g.numel() == 0:
        return (ops.full_const(0, src, g.dtype),)
    high = tuple(n - (a + (w - 1) * s + 1) for n, a, w, s in zip(src, start, g.shape, stride))
    attrs = {"low": tuple(start), "high": high, "interior": tuple(s - 1 for s in stride)}
    return (ops.prim("pad", [g, ops.full_const(0, (), g.dtype)], attrs, src, g.dtype),)


def _pad_back(ctx: Context, g: Tensor) -> Grads:
    src = ctx.shape(0)
    low, interior = ctx.attrs["low"], ctx.attrs["interior"]
    step = tuple(i + 1 for i in interior)
    limit = tuple(lo + (n - 1) * s + 1 if n else lo for lo, n, s in zip(low, src, step))
    inner = ops.prim("slice", [g], {"start": tuple(low), "limit": limit, "stride": step}, src,
                     g.dtype)
    pad_grad = ops.sub(ops.sum(g), ops.sum(inner)) if ctx.needs(1) else None
    return inner, pad_grad


def _concat_back(ctx: Context, g: Tensor) -> Grads:
    d, out, start = ctx.attrs["dim"], [], 0
    for i in range(len(ctx.fn.in_shapes)):
        n = ctx.shape(i)[d]
        if ctx.needs(i):
            lo = tuple(start if k == d else 0 for k in range(g.ndim))
            hi = tuple(start + n if k == d else g.shape[k] for k in range(g.ndim))
            out.append(ops.prim("slice", [g], {"start": lo, "limit": hi, "stride": (1,) * g.ndim},
                                ctx.shape(i), g.dtype))
        else:
            out.append(None)
        start += n
    return tuple(out)


def _reduce_sum_back(ctx: Context, g: Tensor) -> Grads:
    src, axes = ctx.shape(0), ctx.attrs["axes"]
    kept = tuple(d for d in range(len(src)) if d not in axes)
    return (ops.prim("broadcast_in_dim", [g], {"dims": kept}, src, g.dtype),)


def _reduce_max_back(ctx: Context, g: Tensor) -> Grads:
    x, y = ctx.x(0), ctx.y()
    src, axes = ctx.shape(0), ctx.attrs["axes"]
    kept = tuple(d for d in range(len(src)) if d not in axes)
    spread = lambda t: ops.prim("broadcast_in_dim", [t], {"dims": kept}, src, t.dtype)  # noqa: E731
    # PyTorch's (g / count) * hit: the gradient is shared among the elements equal to
    # the maximum, and a slice whose maximum is NaN (no element equals it, count 0)
    # gets NaN everywhere, not a silent 0
    hit = ops.cast(ops.eq(x, spread(y)), g.dtype)
    return (ops.mul(spread(ops.div(g, ops.sum(hit, axes))), hit),)


def _transpose_back(ctx: Context, g: Tensor) -> Grads:
    perm = ctx.attrs["perm"]
    inv = tuple(perm.index(i) for i in range(len(perm)))
    return (ops.prim("transpose", [g], {"perm": inv}, ctx.shape(0), g.dtype),)


def _matmul_back(ctx: Context, g: Tensor) -> Grads:
    a, b = ctx.x(0), ctx.x(1)
    swap = lambda t: t.transpose(-2, -1)  # noqa: E731
    return (ops.matmul(g, swap(b)) if ctx.needs(0) else None,
            ops.matmul(swap(a), g) if ctx.needs(1) else None)


def _gather_back(ctx: Context, g: Tensor) -> Grads:
    """The input's gradient adds ``g`` at the gathered positions. With one index per
    line along ``dim`` covering the input's other dims (cross_entropy picking each
    row's target), that sum has one term per position: ``g`` where the position along
    ``dim`` is the line's index, else 0 -- a pointwise mask that fusion computes where
    the gradient is read, instead of a scatter into a stored input-sized buffer. The
    mask compares with the index gathered from the positions themselves: the same
    value, but through a gather, whose bounds check fails the step on an index out of
    range as the scatter did (a bare compare would match nothing and give a zero
    gradient; the forward gather may be dead code when only the gradient is asked)."""
    dim, index, shape = ctx.attrs["dim"], ctx.x(1), ctx.shape(0)
    if index.shape[dim] == 1 and all(i == s for d, (i, s) in enumerate(zip(index.shape, shape))
                                     if d != dim):
        positions = ops.prim("iota", [], {"dim": dim}, shape, index.dtype)
        checked = ops.gather(positions, dim, index)
        return ops.where(ops.eq(positions, checked), g, 0.0), None
    zeros = ops.full_const(0, shape, g.dtype)
    return ops.scatter_add(zeros, dim, index, g), None


def _scatter_add_back(ctx: Context, g: Tensor) -> Grads:
    src = ops.gather(g, ctx.attrs["dim"], ctx.x(1)) if ctx.needs(2) else None
    return g, None, src


def _scatter_back(ctx: Context, g: Tensor) -> Grads:
    """Overwriting scatter: the input's gradient is zero where an update landed; an
    update's gradient is ``g`` at its target if it is the one that won (the last in
    index order), else zero -- a value that was overwritten did not reach the output.
    (PyTorch's ``index_put`` backward gives every duplicate the gradient, which finite
    differences contradict.)"""
    d, index = ctx.attrs["dim"], ctx.x(1)
    gx = gsrc = None
    if ctx.needs(0):
        gx = ops.scatter(g, d, index, ops.full_const(0, index.shape, g.dtype))
    if ctx.needs(2):
        order = ops.prim("iota", [], {"dim": d}, index.shape, dt.int64)
        winner = ops.scatter(ops.full_const(-1, ctx.shape(0), dt.int64), d, index, order)
        won = ops.eq(ops.gather(winner, d, index), order)
        gsrc = ops.where(won, ops.gather(g, d, index), 0.0)
    return gx, None, gsrc


def _sign(x: Tensor) -> Tensor:
    return ops.sub(ops.cast(ops.gt(x, 0), x.dtype), ops.cast(ops.lt(x, 0), x.dtype))


def _max_min_back(ctx: Context, g: Tensor, greater: bool) -> Grads:
    a, b = ctx.x(0), ctx.x(1)
    tie = ops.eq(a, b)

    def share(p: Tensor, q: Tensor) -> Tensor:
        wins = ops.gt(p, q) if greater else ops.lt(p, q)
        return ops.where(tie, 0.5, ops.cast(wins, g.dtype))

    return (ops.mul(g, share(a, b)) if ctx.needs(0) else None,
            ops.mul(g, share(b, a)) if ctx.needs(1) else None)


def _pow_back(ctx: Context, g: Tensor) -> Grads:
    a, b = ctx.x(0), ctx.x(1)
    ga = gb = None
    if ctx.needs(0):
        d = ops.mul(b, ops.pow(a, ops.sub(b, 1.0)))
        ga = ops.mul(g, ops.where(ops.eq(b, 0.0), 0.0, d))
    if ctx.needs(1):
        y = ctx.y()
        safe = ops.logical_and(ops.eq(a, 0.0), ops.ge(b, 0.0))
        gb = ops.mul(g, ops.where(safe, 0.0, ops.mul(y, ops.log(a))))
    return ga, gb


def _cast_back(ctx: Context, g: Tensor) -> Grads:
    src = ctx.fn.in_dtypes[0]
    return (ops.cast(g, src) if src.is_floating_point else None,)


def _cumsum_back(ctx: Context, g: Tensor) -> Grads:
    """Each input feeds every prefix from its own position on (before it, with
    ``reverse``): the gradient is the scan of ``g`` in the other direction."""
    return (scan_last("cumsum", g, not ctx.attrs["reverse"]),)


def _cumprod_back(ctx: Context, g: Tensor) -> Grads:
    return (_cumprod_grad(ctx.x(0), ctx.y(), g, bool(ctx.attrs["reverse"]),
                          second_order=ctx.create_graph),)


def _cumprod_grad(x: Tensor, y: Tensor, g: Tensor, reverse: bool,
                  second_order: bool) -> Tensor:
    """Zero-safe: ``dy_j/dx_i`` is the product of ``x_0..x_j`` without ``x_i`` (j >= i).
    Before a row's first zero, that is ``y_j / x_i``, so the gradient is the reverse
    cumsum of ``g * y`` divided by ``x``; at the first zero it is the reverse cumsum
    of ``g`` times the products with that zero taken as 1; after it, every product
    holds the first zero and the gradient is 0. With ``reverse`` every direction
    flips.

    That 0 is ``x_z * h_i`` (``x_z`` the first zero, ``h`` the gradient of the cumprod
    with ``x_z`` taken as 1), whose derivative in ``x_z`` is ``h_i``, not 0. With
    ``second_order`` (``create_graph``) it is written so: as a constant 0 it dropped
    those terms from the second derivative of ``cumprod``/``prod`` at the first zero
    (PyTorch's has them). First-order passes skip the extra scans."""
    zero = ops.eq(x, 0.0)
    zeros_so_far = scan_last("cumsum", ops.cast(zero, dt.int64), reverse)
    before = ops.eq(zeros_so_far, 0)
    first = ops.logical_and(zero, ops.eq(zeros_so_far, 1))
    ahead = lambda t: scan_last("cumsum", t, not reverse)  # noqa: E731
    plain = ops.div(ahead(ops.mul(g, y)), ops.where(before, x, 1.0))
    unzeroed = ops.where(first, 1.0, x)
    skipped = scan_last("cumprod", unzeroed, reverse)
    at_zero = ahead(ops.mul(g, skipped))
    after: Tensor | float = 0.0
    if second_order:
        x_z = ops.sum(ops.where(first, x, 0.0), -1, keepdim=True)
        after = ops.mul(x_z, _cumprod_grad(unzeroed, skipped, g, reverse, second_order=False))
    return ops.where(before, plain, ops.where(first, at_zero, after))


# The vector-Jacobian table, keyed by the dialect's op classes: every op of
# ``nd.OPS_BY_NAME`` has a row here or the ``NonDifferentiable`` trait, never both
# (``coverage_errors``; tests/autograd/test_rule_table.py).
RULES: dict[type, Rule] = {
    nd.NegOp: Rule(lambda c, g: (ops.neg(g),)),
    nd.AbsOp: Rule(lambda c, g: (ops.mul(g, _sign(c.x(0))),), (0,)),
    nd.ExpOp: Rule(lambda c, g: (ops.mul(g, c.y()),), saves_output=True),
    nd.LogOp: Rule(lambda c, g: (ops.div(g, c.x(0)),), (0,)),
    # exp(x), not y + 1: y + 1 cancels where y is near -1 (expm1(-20) + 1 is 0 in
    # float32, the true slope 2e-9; elu/selu/celu's gradients below -17 came out 0)
    nd.Expm1Op: Rule(lambda c, g: (ops.mul(g, ops.exp(c.x(0))),), (0,)),
    nd.Log1pOp: Rule(lambda c, g: (ops.div(g, ops.add(c.x(0), 1.0)),), (0,)),
    # piecewise constant: zero almost everywhere, as PyTorch defines it
    **{op: Rule(lambda c, g: (ops.full_const(0.0, g.shape, g.dtype),))
       for op in (nd.FloorOp, nd.CeilOp, nd.RoundOp, nd.TruncOp)},
    nd.SqrtOp: Rule(lambda c, g: (ops.div(ops.mul(g, 0.5), c.y()),), saves_output=True),
    nd.RsqrtOp: Rule(lambda c, g: (ops.mul(ops.mul(g, -0.5),
                                           ops.mul(ops.mul(c.y(), c.y()), c.y())),),
                     saves_output=True),
    nd.ReciprocalOp: Rule(lambda c, g: (ops.neg(ops.mul(g, ops.mul(c.y(), c.y()))),),
                          saves_output=True),
    nd.SinOp: Rule(lambda c, g: (ops.mul(g, ops.cos(c.x(0))),), (0,)),
    nd.CosOp: Rule(lambda c, g: (ops.neg(ops.mul(g, ops.sin(c.x(0)))),), (0,)),
    nd.TanhOp: Rule(lambda c, g: (ops.mul(g, ops.sub(1.0, ops.mul(c.y(), c.y()))),),
                    saves_output=True),
    nd.ErfOp: Rule(lambda c, g: (ops.mul(g, ops.mul(ops.exp(ops.neg(ops.mul(c.x(0), c.x(0)))),
                                                    2.0 / math.sqrt(math.pi))),), (0,)),
    nd.CastOp: Rule(_cast_back),
    nd.AddOp: Rule(lambda c, g: (g if c.needs(0) else None, g if c.needs(1) else None)),
    nd.SubOp: Rule(lambda c, g: (g if c.needs(0) else None, ops.neg(g) if c.needs(1) else None)),
    nd.MulOp: Rule(lambda c, g: (ops.mul(g, c.x(1)) if c.needs(0) else None,
                                 ops.mul(g, c.x(0)) if c.needs(1) else None), (0, 1)),
    nd.DivOp: Rule(lambda c, g: (ops.div(g, c.x(1)) if c.needs(0) else None,
                                 ops.neg(ops.div(ops.mul(g, c.y()), c.x(1)))
                                 if c.needs(1) else None),
                   (1,), saves_output=True),
    # fmod: d/da = 1, d/db = -trunc(a / b), as PyTorch's
    nd.RemOp: Rule(lambda c, g: (g if c.needs(0) else None,
                                 ops.neg(ops.mul(g, _trunc(ops.div(c.x(0), c.x(1)))))
                                 if c.needs(1) else None), (0, 1)),
    nd.Atan2Op: Rule(_atan2_back, (0, 1)),
    nd.MaximumOp: Rule(lambda c, g: _max_min_back(c, g, True), (0, 1)),
    nd.MinimumOp: Rule(lambda c, g: _max_min_back(c, g, False), (0, 1)),
    nd.PowOp: Rule(_pow_back, (0, 1), saves_output=True),
    nd.WhereOp: Rule(lambda c, g: (None, ops.where(c.x(0), g, 0.0) if c.needs(1) else None,
                                   ops.where(c.x(0), 0.0, g) if c.needs(2) else None), (0,)),
    nd.BroadcastInDimOp: Rule(_bcast_back),
    nd.ReshapeOp: Rule(lambda c, g: (_sum_to(g, c.shape(0)),)),
    nd.TransposeOp: Rule(_transpose_back),
    nd.SliceOp: Rule(_slice_back),
    nd.PadOp: Rule(_pad_back),
    nd.ConcatOp: Rule(_concat_back),
    nd.ReduceSumOp: Rule(_reduce_sum_back),
    nd.ReduceMaxOp: Rule(_reduce_max_back, (0,), saves_output=True),
    nd.MatmulOp: Rule(_matmul_back, (0, 1)),
    nd.GatherOp: Rule(_gather_back, (1,)),
    nd.ScatterAddOp: Rule(_scatter_add_back, (1,)),
    nd.ScatterOp: Rule(_scatter_back, (1,)),
    nd.CumsumOp: Rule(_cumsum_back),
    nd.CumprodOp: Rule(_cumprod_back, (0,), saves_output=True),
}

# The identity record ``graph.alias_fn`` makes (not an op of the dialect: it routes a
# saved value, or a clone, back to the tensor it came from).
ALIAS_RULE = Rule(lambda c, g: (g,))

# The tape keeps, for each op, what its rule reads: registered from this table, so there
# is one source of truth (nova.tensor cannot import autograd; see nova.tensor.tape).
for _op, _rule in RULES.items():
    graph.register_saves(_op, _rule.saves_inputs, _rule.saves_output)


def coverage_errors(ops: Mapping[str, type], rules: Mapping[type, Rule]) -> list[str]:
    """What is wrong with ``rules`` as the table for the dialect's ``ops`` (short name ->
    op class): an op with neither a rule nor the NonDifferentiable trait, an op with
    both, or a rule for a class that is not one of the ops. Empty when consistent."""
    errors = []
    for name, op in sorted(ops.items()):
        inert = op.has_trait(nd.NonDifferentiable)
        if op in rules and inert:
            errors.append(f"nova.{name}: has a vector-Jacobian rule and the "
                          "NonDifferentiable trait")
        elif op not in rules and not inert:
            errors.append(f"nova.{name}: has no vector-Jacobian rule and not the "
                          "NonDifferentiable trait")
    known = set(ops.values())
    errors += [f"{op.__name__}: has a rule but is not an op of the dialect"
               for op in rules if op not in known]
    return errors


# A custom ``nv.autograd.Function``'s record: its rule is the class's backward, which
# the record carries (``nova.autograd.function``).
FUNCTION_RULE = Rule(lambda c, g: c.attrs["apply"](g, c.create_graph))


def rule_for(fn: graph.GradFn) -> Rule:
    """The rule that differentiates ``fn``'s op (looked up by its dialect op class)."""
    if fn.op == graph.ALIAS:
        return ALIAS_RULE
    if fn.op == graph.FUNCTION:
        return FUNCTION_RULE
    op = nd.OPS_BY_NAME.get(fn.op)
    rule = RULES.get(op)
    if rule is None:
        why = ("has the NonDifferentiable trait" if op is not None
               and op.has_trait(nd.NonDifferentiable) else "has no vector-Jacobian rule")
        raise RuntimeError(f"autograd: nova.{fn.op} {why} (shapes {fn.in_shapes}, dtypes "
                           f"{[d.name for d in fn.in_dtypes]})")
    return rule


def vjp(fn: graph.GradFn, g: Tensor, create_graph: bool) -> Grads:
    grads = rule_for(fn).vjp(Context(fn, create_graph), g)
    for i, (gi, shape) in enumerate(zip(grads, fn.in_shapes)):
        if gi is not None and gi.shape != shape:
            raise AssertionError(f"autograd: {fn.name()} produced a gradient of shape "
                                 f"{gi.shape} for input {i} of shape {shape}")
    return grads

