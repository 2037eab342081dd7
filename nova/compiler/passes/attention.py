"""Fused attention: find the attention composite and its derived backward, and replace
them by ``nova.attention`` and ``nova.attention_grad``, whose kernels never store the
``L x S`` scores.

``F.scaled_dot_product_attention`` records attention as primitives, and so does the
same code written by hand (``q @ k.transpose(-2, -1) * scale``, a mask, ``softmax``,
``@ v``); ``loss.backward()`` then records their vector-Jacobian products op by op. This
pass runs on the differentiated step (after CSE, before rematerialization) and matches,
strictly, this forward in float32::

    scores = matmul(q, transpose(k)) [* c]          c a splat constant: the scale
    x      = where(mask, -inf, scores) | scores     mask computable at compile time
    e      = exp(x - row_max(x));  p = e / row_sum(e)
    o      = matmul(p, v)

and, when ``p`` feeds the backward, exactly the backward the autograd rules derive
from it for an output gradient ``g`` (dv = p^T g; dp = g v^T; the softmax's rule through
``e / sum``; the mask's ``where``; the scale's ``mul``; dq = ds k; dk = (q^T ds)^T). The
mask must evaluate (it is built from constants and iotas, as ``is_causal`` and ``triu``
build it) to "key j hidden from query i when j > i" -- ``causal`` -- or to nothing
hidden. Every value between the inputs and the outputs must be used only inside the
pattern, so after the rewrite all of it is dead.

Dropout on the probabilities, as ``F.dropout`` records it between the softmax and ``@ v``
(``where(rng_uniform(key) >= rate, p * scale, 0)``, the draw over the probabilities'
shape; in the backward the same ``where`` on the product's gradient, then ``* scale``),
is matched too: the fused ops draw the same numbers from the same key, position by
position, and never store them.

Anything else -- a mask read from a tensor argument, an
additive mask, a probability tensor the step also returns, a backward that asks for some
of the three gradients only -- is left as it is: the composite computes the same values,
only with the scores stored. The rewrite changes what is computed only by float32
rounding (the fused kernels sum in another order) and where a score is NaN or inf: the
fused ops give a hidden key exactly 0 probability, so a NaN row stays NaN over the keys
it sees but no longer spreads, through ``0 * NaN`` at hidden positions, into the other
keys' gradients (``nova.attention``'s definition).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr, ModuleOp, UnitAttr, f64, i64
from xdsl.ir import Operation, SSAValue
from xdsl.transforms.dead_code_elimination import dce

from nova.compiler import dialect as nd
from nova.compiler.dialect import BACKWARD_ATTR
from nova.compiler.passes.checks import verified_after_pass


def _op(v: SSAValue, cls: type) -> Operation | None:
    """``v``'s defining op when it is a ``cls``."""
    owner = v.owner
    return owner if isinstance(owner, cls) else None


def _users(v: SSAValue) -> list[Operation]:
    return [u.operation for u in v.uses]


def _only_used_by(v: SSAValue, *ops: Operation) -> bool:
    """Every use of ``v`` is by one of ``ops``, and each of them uses it."""
    users = _users(v)
    return all(any(u is o for o in ops) for u in users) and \
        all(any(o is u for u in users) for o in ops)


def _splat(v: SSAValue) -> float | None:
    """The float a ``nova.constant`` splat ``v`` holds, else None."""
    c = _op(v, nd.ConstantOp)
    return c.value.value.data if c is not None and isinstance(c.value, FloatAttr) else None


def _row_reduction(v: SSAValue, cls: type) -> Operation | None:
    """The ``cls`` reduction over the last axis that ``v`` broadcasts back along its
    rows (``bcast(reshape(r))`` as keepdim records it, or ``bcast(r)``), else None."""
    b = _op(v, nd.BroadcastInDimOp)
    if b is None:
        return None
    out = nd.shape_of(b.result)
    src = b.input
    dims = tuple(b.dims.get_values())
    n = len(out)
    if (dims, nd.shape_of(src)) not in ((tuple(range(n)), out[:-1] + (1,)),
                                        (tuple(range(n - 1)), out[:-1])):
        return None
    while isinstance(src.owner, nd.ReshapeOp) and \
            nd.shape_of(src.owner.input) in (out[:-1], out[:-1] + (1,)):
        src = src.owner.input
    r = _op(src, cls)
    if r is None or tuple(r.axes.get_values()) != (n - 1,) or \
            nd.shape_of(r.input) != out:
        return None
    return r


def _row_chain(v: SSAValue) -> list[Operation]:
    """The broadcast and reshapes between a row reduction and ``v`` (its broadcast)."""
    chain = []
    op = v.owner
    while isinstance(op, (nd.BroadcastInDimOp, nd.ReshapeOp)):
        chain.append(op)
        op = op.operands[0].owner
    return chain


# What the mask's ops mean on the values a mask is built from (the interpreter defines
# them for every dtype; the compiler may not import it), computed in the IR's own type:
# an i32 mask overflows, and an f32 one rounds, as the composite's kernels would (numpy's
# float32 arithmetic is IEEE single precision, like the interpreter's). A mask that
# involves a half float, or an op not listed here, is not evaluated, so not matched.
_COMPARE = {"lt": np.less, "le": np.less_equal, "eq": np.equal, "ne": np.not_equal,
            "gt": np.greater, "ge": np.greater_equal}
_INDEX_TYPES = {"i1": np.bool_, "i8": np.int8, "ui8": np.uint8, "i16": np.int16,
                "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}

# A mask is evaluated in blocks of this many query rows when it is built from (L, S)
# values only (what ``triu``/``tril`` and ``is_causal`` record), so a long context needs
# no L x S array at compile time; any other mask whole, up to MAX_MASK_ELEMENTS
# positions (after batch broadcasts are taken off), beyond which the composite is kept.
MASK_ROWS = 256
MAX_MASK_ELEMENTS = 1 << 24


def _index_type(v: SSAValue):
    return _INDEX_TYPES.get(nd.element_name(v.type.element_type))


def _index_value(op: Operation, args: list[np.ndarray],
                 rows: tuple[int, int] | None = None) -> np.ndarray | None:
    """``op``'s value on index values ``args``, kept at its smallest broadcast shape
    (an iota is an arange along its dim, size 1 elsewhere); None for other ops. With
    ``rows`` = (r0, r1), the op is one of an (L, S) mask's and only its rows r0..r1-1
    are computed."""
    shape = nd.shape_of(op.results[0])
    kind = _index_type(op.results[0])
    if kind is None or any(_index_type(o) is None for o in op.operands):
        return None
    if isinstance(op, nd.ConstantOp):
        return np.full((1,) * len(shape), op.value.value.data).astype(kind)
    if isinstance(op, nd.IotaOp):
        d = op.dim.value.data
        ax = [1] * len(shape)
        ax[d] = -1
        # (counted in int64, then converted: a narrow integer iota wraps, as a cast)
        if rows is not None and d == 0:
            return np.arange(*rows, dtype=np.int64).astype(kind).reshape(ax)
        return np.arange(shape[d], dtype=np.int64).astype(kind).reshape(ax)
    if rows is not None and not op.has_trait(nd.Elementwise):
        return None
    if isinstance(op, nd.BroadcastInDimOp):
        dims = tuple(op.dims.get_values())
        x = args[0]
        return x.reshape([x.shape[dims.index(i)] if i in dims else 1
                          for i in range(len(shape))])
    if isinstance(op, nd.ReshapeOp):
        return np.broadcast_to(args[0], nd.shape_of(op.operands[0])).reshape(shape)
    if isinstance(op, nd.TransposeOp):
        return np.transpose(args[0], tuple(op.perm.get_values()))
    if isinstance(op, nd.CastOp) and not np.issubdtype(args[0].dtype, np.floating) and \
            not np.issubdtype(kind, np.floating):
        # integer/boolean casts only: wrap as the kernels' truncation, bool is "!= 0"
        return args[0] != 0 if kind is np.bool_ else args[0].astype(kind)
    if isinstance(op, nd.CompareOp):
        return _COMPARE[op.direction.data](*args)
    if isinstance(op, nd.WhereOp):
        return np.where(*args)
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(op, nd.AddOp):
            return np.logical_or(*args) if kind is np.bool_ else (args[0] + args[1]).astype(kind)
        if isinstance(op, nd.SubOp) and kind is not np.bool_:
            return (args[0] - args[1]).astype(kind)
        if isinstance(op, nd.MulOp):
            return np.logical_and(*args) if kind is np.bool_ else (args[0] * args[1]).astype(kind)
    return None


def _mask_core(v: SSAValue) -> SSAValue:
    """``v`` with broadcasts over leading (batch) dims taken off: the mask of one batch
    index, when it is the same for all."""
    while isinstance(v.owner, nd.BroadcastInDimOp):
        src = v.owner.input
        n, k = len(nd.shape_of(v)), len(nd.shape_of(src))
        if k < 2 or tuple(v.owner.dims.get_values()) != tuple(range(n - k, n)) or \
                nd.shape_of(src)[-2:] != nd.shape_of(v)[-2:]:
            break
        v = src
    return v


def _evaluate(v: SSAValue, rows: tuple[int, int] | None) -> np.ndarray | None:
    """``v`` computed from constants and iotas only, by the ops
    ``_index_value`` knows (its rows ``rows`` only, when given); else None."""
    memo: dict[SSAValue, np.ndarray | None] = {}

    def value(x: SSAValue) -> np.ndarray | None:
        if x not in memo:
            owner = x.owner
            memo[x] = None
            if isinstance(owner, Operation):
                args = [value(o) for o in owner.operands]
                if all(a is not None for a in args):
                    memo[x] = _index_value(owner, args, rows)
        return memo[x]
    return value(v)


def _mask_blocks(v: SSAValue):
    """``v``'s value as (first row, rows) blocks; a ``None`` block (or value) when it
    is not a constant mask small enough to evaluate (see ``MASK_ROWS``)."""
    shape = nd.shape_of(v)
    if len(shape) == 2 and _evaluate(v, (0, 1)) is not None:
        L, S = shape
        for r0 in range(0, L, MASK_ROWS):
            r1 = min(L, r0 + MASK_ROWS)
            yield r0, np.broadcast_to(_evaluate(v, (r0, r1)), (r1 - r0, S))
        return
    if np.prod(shape, dtype=np.int64) > MAX_MASK_ELEMENTS:
        yield None
        return
    out = _evaluate(v, None)
    yield (0, None if out is None else np.broadcast_to(out, shape))


def _mask_kind(cond: SSAValue, memo: dict) -> int | None:
    """1 when ``cond`` hides key j from query i exactly when j > i (for every batch
    index), 0 when it hides nothing, None otherwise (or when it is not a constant).
    ``memo``: the answers so far by mask value (the layers of a model share theirs)."""
    core = _mask_core(cond)
    if core not in memo:
        memo[core] = _classify_mask(core)
    return memo[core]


def _classify_mask(cond: SSAValue) -> int | None:
    causal, hides = True, False
    for block in _mask_blocks(cond):
        if block is None or block[1] is None or block[1].dtype != np.bool_:
            return None
        r0, m = block
        rows, S = m.shape[-2:]
        want = np.arange(S)[None, :] > np.arange(r0, r0 + rows)[:, None]
        causal = causal and np.array_equal(m, np.broadcast_to(want, m.shape))
        hides = hides or bool(m.any())
        if not causal and hides:
            return None
    return 1 if causal and hides else 0 if not hides else None


@dataclass
class _Forward:
    """A matched forward: its inputs, its result, and every op in between."""

    q: SSAValue
    k: SSAValue
    v: SSAValue
    out: Operation                # matmul(p, v)
    p: SSAValue                   # e / sum
    e: SSAValue                   # exp(x - max)
    sums: SSAValue                # the row sum of e, broadcast back
    mask: SSAValue | None         # the where's condition
    scale_value: SSAValue | None  # the scale's splat constant
    scale: float
    causal: int
    ops: list[Operation]          # the forward ops between the inputs and ``out``
    dropped: SSAValue | None = None   # where(keep, p * c, 0): what ``out`` reads
    drop: _Dropout | None = None


@dataclass
class _Dropout:
    """``F.dropout`` of the probabilities: ``where(u >= rate, p * scale, 0)`` with ``u``
    the ``rng_uniform`` draw of ``key`` over the probabilities' shape."""

    key: SSAValue
    keep: SSAValue                # the compare's result, which the backward reuses
    rate: float
    scale: float
    scale_value: SSAValue         # the scale's splat constant
    ops: list[Operation]          # rng_uniform, compare, mul, where


def _match_dropout(dropped: SSAValue) -> tuple[_Dropout, SSAValue] | None:
    """``dropped`` = ``where(rng_uniform(key) >= rate, p * scale, 0)`` (what ``F.dropout``
    records, the draw over ``p``'s own shape and read by nothing else) as its dropout and
    ``p``; None otherwise."""
    where = _op(dropped, nd.WhereOp)
    if where is None or _splat(where.operands[2]) != 0.0:
        return None
    keep, kept = where.operands[0], where.operands[1]
    cmp = _op(keep, nd.CompareOp)
    mul = _op(kept, nd.MulOp)
    if cmp is None or mul is None or cmp.direction.data != "ge":
        return None
    draw, rate = _op(cmp.operands[0], nd.RngUniformOp), _splat(cmp.operands[1])
    scale = _splat(mul.rhs)
    shape = nd.shape_of(dropped)
    if draw is None or rate is None or scale is None or not 0.0 < rate < 1.0 or \
            nd.shape_of(draw.result) != shape or \
            draw.result.type.element_type != Float32Type() or \
            not _only_used_by(draw.result, cmp):
        return None
    drop = _Dropout(draw.key, keep, rate, scale, mul.rhs, [draw, cmp, mul, where])
    return drop, mul.lhs


def _match_forward(out: Operation, masks: dict) -> _Forward | None:
    """The attention forward whose result is ``out`` (a matmul), or None; ``masks``
    caches mask classifications (``_mask_kind``)."""
    if not isinstance(out, nd.MatmulOp) or out.result.type.element_type != Float32Type():
        return None
    drop, probabilities = None, out.lhs
    if isinstance(out.lhs.owner, nd.WhereOp):
        matched = _match_dropout(out.lhs)
        if matched is None:
            return None
        drop, probabilities = matched
    p = _op(probabilities, nd.DivOp)
    if p is None:
        return None
    e = _op(p.lhs, nd.ExpOp)
    total = _row_reduction(p.rhs, nd.ReduceSumOp)
    if e is None or total is None or total.input is not e.result:
        return None
    shifted = _op(e.input, nd.SubOp)
    if shifted is None:
        return None
    x = shifted.lhs
    peak = _row_reduction(shifted.rhs, nd.ReduceMaxOp)
    if peak is None or peak.input is not x:
        return None
    mask, scores, where = None, x, _op(x, nd.WhereOp)
    if where is not None:
        if _splat(where.operands[1]) != -math.inf:
            return None
        mask, scores = where.operands[0], where.operands[2]
    scale, scale_value, product, mul = 1.0, None, scores, _op(scores, nd.MulOp)
    if mul is not None:
        for a, c in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            if _splat(c) is not None and isinstance(a.owner, nd.MatmulOp):
                scale, scale_value, product = _splat(c), c, a
                break
        else:
            return None
    mm = _op(product, nd.MatmulOp)
    if mm is None or not nd.swaps_last_two(mm.rhs.owner) or \
            0 in nd.shape_of(mm.lhs) + nd.shape_of(out.rhs) + nd.shape_of(mm.rhs):
        return None
    causal = _mask_kind(mask, masks) if mask is not None else 0
    if causal is None:
        return None
    ops = [mm, *([mul] if mul is not None else []), *([where] if where is not None else []),
           peak, *_row_chain(shifted.rhs), shifted, e, total, *_row_chain(p.rhs), p,
           *(drop.ops if drop is not None else [])]
    return _Forward(mm.lhs, mm.rhs.owner.input, out.rhs, out, p.result, e.result,
                    p.rhs, mask, scale_value, scale, causal, ops, out.lhs, drop)


@dataclass
class _Backward:
    grad: SSAValue               # the output gradient g
    dq: SSAValue
    dk: SSAValue
    dv: SSAValue
    ops: list[Operation]         # every op from the pattern's inputs to dq, dk and dv
    first: Operation             # the earliest of them in the block


def _single_user(v: SSAValue) -> Operation | None:
    users = _users(v)
    return users[0] if len(users) == 1 else None


def _match_backward(f: _Forward) -> _Backward | None:
    """The backward the autograd rules derive from ``f``, or None unless it is exactly
    that (see the module docstring); ops are checked operand by operand."""
    drop = f.drop
    dropped_users = [u for u in _users(f.dropped) if u is not f.out]
    pt = next((u for u in dropped_users if nd.swaps_last_two(u)), None)
    p_users = [u for u in _users(f.p) if u is not f.out and u is not pt and
               (drop is None or u is not drop.ops[2])]
    prod = next((u for u in p_users if isinstance(u, nd.MulOp)), None)
    if pt is None or prod is None or len(p_users) != 1 or \
            (drop is not None and len(dropped_users) != 1):
        return None
    dv_mm = _single_user(pt.result)              # dv = dropped(p)^T g
    if not isinstance(dv_mm, nd.MatmulOp) or dv_mm.lhs is not pt.result:
        return None
    g = dv_mm.rhs
    dp = prod.lhs if prod.rhs is f.p else prod.rhs
    ops: list[Operation] = []
    d_dropped = dp
    if drop is not None:                         # dp = where(keep, d(dropped), 0) * scale
        scaled = _op(dp, nd.MulOp)
        w = _op(scaled.lhs, nd.WhereOp) if scaled is not None else None
        if w is None or scaled.rhs is not drop.scale_value or w.operands[0] is not drop.keep \
                or _splat(w.operands[2]) != 0.0 or not _only_used_by(w.result, scaled):
            return None
        d_dropped = w.operands[1]
        ops += [w, scaled]
    dp_mm = _op(d_dropped, nd.MatmulOp)          # d(dropped) = g v^T
    if dp_mm is None or dp_mm.lhs is not g or not nd.swaps_last_two(dp_mm.rhs.owner) or \
            dp_mm.rhs.owner.input is not f.v:
        return None
    # d(e / sum) = dp / sum + bcast(sum over the row of -(dp * p) / sum)
    quot = next((u for u in _users(dp) if isinstance(u, nd.DivOp)), None)
    if quot is None or quot.lhs is not dp or quot.rhs is not f.sums or \
            not _only_used_by(dp, quot, prod):
        return None
    q2 = _single_user(prod.result)
    if not isinstance(q2, nd.DivOp) or q2.lhs is not prod.result or q2.rhs is not f.sums:
        return None
    neg = _single_user(q2.result)
    if not isinstance(neg, nd.NegOp):
        return None
    total = _single_user(neg.result)
    if not isinstance(total, nd.ReduceSumOp):
        return None
    add = _single_user(quot.result)
    if not isinstance(add, nd.AddOp):
        return None
    spread = add.rhs if add.lhs is quot.result else add.lhs
    if _row_reduction(spread, nd.ReduceSumOp) is not total:
        return None
    de = _single_user(add.result)                # d(exp) = d(e) * e
    if not isinstance(de, nd.MulOp) or de.lhs is not add.result or de.rhs is not f.e:
        return None
    ops = [pt, dv_mm, dp_mm, *ops, prod, quot, q2, neg, total, *_row_chain(spread), add, de]
    ds = de.result
    if f.mask is not None:                       # d(where(mask, -inf, s)) for s
        w = _single_user(ds)
        if not isinstance(w, nd.WhereOp) or w.operands[0] is not f.mask or \
                _splat(w.operands[1]) != 0.0 or w.operands[2] is not ds:
            return None
        ds = w.result
        ops.append(w)
    if f.scale_value is not None:                # d(s * c) = ds * c
        m = _single_user(ds)
        if not isinstance(m, nd.MulOp) or m.lhs is not ds or m.rhs is not f.scale_value:
            return None
        ds = m.result
        ops.append(m)
    users = _users(ds)
    dq_mm = next((u for u in users if isinstance(u, nd.MatmulOp) and u.lhs is ds), None)
    dkt_mm = next((u for u in users if isinstance(u, nd.MatmulOp) and u.rhs is ds), None)
    if dq_mm is None or dkt_mm is None or len(users) != 2:
        return None
    # dq = ds @ swap(k^T); dk = swap(swap(q) @ ds)
    kk = dq_mm.rhs.owner
    if not (nd.swaps_last_two(kk) and nd.swaps_last_two(kk.input.owner)
            and kk.input.owner.input is f.k):
        return None
    qt = dkt_mm.lhs.owner
    dk = _single_user(dkt_mm.result)
    if not nd.swaps_last_two(qt) or qt.input is not f.q or not nd.swaps_last_two(dk):
        return None
    ops += [dq_mm, dkt_mm, dk]
    # Every value on the way to dq, dk and dv is read only on the way.
    inside = {id(op) for op in ops}
    for op in ops:
        if any(op is out for out in (dq_mm, dk, dv_mm)):
            continue
        if any(id(u) not in inside for u in _users(op.results[0])):
            return None
    block = f.out.parent
    position = {id(op): i for i, op in enumerate(block.ops)}
    first = min(ops, key=lambda op: position[id(op)])
    return _Backward(g, dq_mm.result, dk.result, dv_mm.result, ops, first)


def _private(f: _Forward, b: _Backward | None) -> bool:
    """Whether every value of the forward pattern is read only by the pattern (its
    forward, its output's matmul and the matched backward), so the rewrite leaves all of
    it dead."""
    inside = {id(op) for op in f.ops} | {id(f.out)}
    if b is not None:
        inside |= {id(op) for op in b.ops}
    return all(id(u) in inside for op in f.ops for u in _users(op.results[0]))


def _props(f: _Forward) -> dict:
    props = {"scale": FloatAttr(f.scale, f64), "causal": IntegerAttr(f.causal, i64)}
    if f.drop is not None:
        props.update(dropout=FloatAttr(f.drop.rate, f64),
                     dropout_scale=FloatAttr(f.drop.scale, f64))
    return props


def _rng(f: _Forward) -> list[SSAValue]:
    return [f.drop.key] if f.drop is not None else []


def _rewrite(f: _Forward, b: _Backward | None) -> None:
    """Insert the fused ops and route the old results' readers to them."""
    block = f.out.parent
    qs, ks, vs = nd.shape_of(f.q), nd.shape_of(f.k), nd.shape_of(f.v)
    batch = qs[:-2]
    n_out, n_lse = nd.attention_parts(qs, vs)
    att = nd.AttentionOp.create(
        operands=[f.q, f.k, f.v, *_rng(f)], result_types=[nd.tensor_type(batch + (n_out + n_lse,),
                                                               "f32")],
        properties=_props(f), attributes=dict(f.out.attributes))
    out = _part(att.result, batch, 0, n_out, f.out.result.type, dict(f.out.attributes))
    block.insert_ops_before([att, *out], f.out)
    f.out.result.replace_all_uses_with(out[-1].result)
    if b is None:
        return
    parts = nd.attention_grad_parts(qs, ks, vs)
    grad = nd.AttentionGradOp.create(
        operands=[f.q, f.k, f.v, att.result, b.grad, *_rng(f)],
        result_types=[nd.tensor_type(batch + (sum(parts),), "f32")],
        properties=_props(f), attributes={BACKWARD_ATTR: UnitAttr()})
    new_ops: list[Operation] = [grad]
    views: list[Operation] = []
    start = 0
    for old, n in zip((b.dq, b.dk, b.dv), parts):
        window = _part(grad.result, batch, start, n, old.type, {BACKWARD_ATTR: UnitAttr()})
        new_ops += window
        views.append(window[-1])
        start += n
    block.insert_ops_before(new_ops, b.first)
    for old, view in zip((b.dq, b.dk, b.dv), views):
        old.replace_all_uses_with(view.result)


def _part(packed: SSAValue, batch: tuple[int, ...], start: int, n: int, shape_type,
          attributes: dict) -> list[Operation]:
    """The slice of each row of ``packed`` at [start, start + n), reshaped to
    ``shape_type``: one of the values a fused op packs into its result."""
    window = nd.SliceOp.create(
        operands=[packed], result_types=[nd.tensor_type(batch + (n,), "f32")],
        properties={"start": nd.i64_array([0] * len(batch) + [start]),
                    "limit": nd.i64_array(list(batch) + [start + n]),
                    "stride": nd.i64_array([1] * (len(batch) + 1))},
        attributes=dict(attributes))
    view = nd.ReshapeOp.create(operands=[window.result], result_types=[shape_type],
                               attributes=dict(attributes))
    return [window, view]


def fuse_attention(module: ModuleOp) -> ModuleOp:
    """Replace every matched attention forward, with its backward when the step has
    one, by the fused ops, in place; dead ops are removed and the module re-verified."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    changed = False
    masks: dict[SSAValue, int | None] = {}
    draws: list[Operation] = []
    for out in [op for op in fn.body.block.ops if isinstance(op, nd.MatmulOp)]:
        if out.parent is None:
            continue
        f = _match_forward(out, masks)
        if f is None:
            continue
        backward = any(u is not f.out for u in _users(f.dropped)) or any(
            u is not f.out and (f.drop is None or u is not f.drop.ops[2]) for u in _users(f.p))
        b = _match_backward(f) if backward else None
        if (backward and b is None) or not _private(f, b):
            continue
        _rewrite(f, b)
        if f.drop is not None:
            draws.append(f.drop.ops[0])
        changed = True
    if changed:
        dce(module)
        for draw in draws:     # not Pure (a draw), so dce keeps it: the fused ops draw now
            if not draw.results[0].uses:
                draw.detach()
                draw.erase()
    return verified_after_pass(module)
