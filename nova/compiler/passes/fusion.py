"""Fusion: group the step function into kernels (``nova.fusion`` ops).

Every op lands in exactly one kernel. Kernels form greedily, walking the function from
its end: an op *joins* the kernel of its consumers when all of them are in that one
kernel and recomputing it there costs nothing extra (it has the kernel's iteration size,
or it is a constant, an iota or a movement op, which only turn into index arithmetic).
Otherwise its value is materialized and it roots a kernel of its own. So:

- chains of elementwise and movement ops become one loop (broadcasts, transposes,
  reshapes and slices become index arithmetic, never copies);
- a reduction absorbs its elementwise producers (computed on the fly while it reads its
  input) and its row-sized elementwise consumers as an epilogue (``mean = sum * 1/n``,
  ``rsqrt(var + eps)``);
- reductions over the trailing axes whose results are broadcast back along their rows
  join the elementwise kernel that uses them as a ``rows`` kernel: softmax, log_softmax
  and layer_norm become one kernel making a few passes over each row;
- a matmul absorbs movement ops on its operands (transposed operands are read in place)
  and its elementwise epilogue (bias, activation, residual, scale), except the ops the
  target's ``FusionPolicy`` keeps out of epilogues (the CPU's: ``Expensive`` ones);
  where the target packs computed operands (the CPU), also the cheap pointwise ops that
  compute its B operand at its own size from one such stored value and feed nothing
  else -- a prologue, evaluated as B is packed (layer norm's scale and shift where the
  backward recomputes it for a weight gradient), so that value is never stored; and
  a stack of windows of one stored value (``_stacked_windows``: a convolution's
  shifted windows) that it packs through a table of offsets, in every product that
  reads it as B;
- a fused attention op roots a kernel of its own, except that it takes over an
  elementwise kernel that only assembles the parts of its packed result (slices,
  reshapes, transposes, zero pads that tile the output, adds): the attention kernel then
  stores each part where the assembly puts it (``lowering.placement``);
- ``scatter_add`` and ``scatter`` are kernels of their own, and a collective
  (``all_reduce_start``/``_wait``) is a kernel of one op (the communication library
  takes whole buffers);
- a cheap pointwise op whose large operands are stored anyway is computed in every
  kernel that reads it instead of being stored (``_repeatable``);
- a pointwise op reading a contraction's result that nothing else reads, where its
  consumers' kernel could not take that contraction (it has one already, or reads the
  op through a transpose), roots a kernel of its own with the contraction, as its
  epilogue (``_roots_own_epilogue``): a chain of partial sums ``acc = p_c + acc``
  then keeps one partial alive at a time, not all of them;
- an op that a kernel would evaluate at more than ``MAX_EVALUATIONS`` distinct indices
  per output element (``_evaluations``: it reaches the root along several paths
  through index-changing movement ops, as a value read shifted by 1, 2, 4, ... in a
  doubling scan) roots a kernel of its own: duplicated, each level of such a chain
  doubles the work and the code of every level below it (``cummax`` over 512
  elements compiled for 96 s).

Each kernel has exactly one output, its root. An op whose consumers are all in kernel K
joins K, so the only value leaving K is the root's; this also makes the kernel graph
acyclic, and ordering kernels by their root keeps the function topologically sorted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.lowering.placement import packed_parts, placements
from nova.compiler.lowering.views import table_view
from nova.compiler.passes.checks import verified_after_pass
from nova.compiler.targets import FusionPolicy, Target, resolve


def _free(op: Operation) -> bool:
    """Recomputing ``op`` in any kernel costs only index arithmetic (a movement op, a
    constant or an iota), so it is duplicated into every kernel that reads it."""
    return op.has_trait(nd.Movement) or op.has_trait(nd.Generator)


def _pointwise(op: Operation) -> bool:
    """``op`` reads its operands at its own index (elementwise) or reads none."""
    return op.has_trait(nd.Elementwise) or op.has_trait(nd.Generator)


def _is_reduction(op: Operation) -> bool:
    return nd.kernel_root_kind(op) == "reduce"


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _numel(v: SSAValue) -> int:
    n = 1
    for s in v.type.get_shape():
        n *= s
    return n


# At most this many evaluations of one op per output element of a kernel (distinct
# indices: a 3x3 window stack reads a computed value at 9, a 4x4 one at 16); past it
# the op is stored and read instead.
MAX_EVALUATIONS = 16


@dataclass
class Kernel:
    kind: str
    root: Operation
    ops: list[Operation] = field(default_factory=list)
    # id(op) -> the distinct indices of op the kernel evaluates per output element
    # (``_evaluations``)
    evaluations: dict[int, frozenset[tuple[int, ...]]] = field(default_factory=dict)
    contraction: Operation | None = None   # the reduce/matmul/scatter op, if any
    row_shape: tuple[int, ...] | None = None   # ``rows`` kernels: the reductions' input
    row_axes: tuple[int, ...] = ()             # ``rows`` kernels: the reduced suffix

    @property
    def numel(self) -> int:
        return _numel(self.root.results[0])


def _row_level(op: Operation, k: Kernel) -> bool:
    """Whether ``op``'s value reaches k only broadcast along trailing dims (a per-row
    value like ``log(sum)`` or ``rsqrt(var + eps)``): computed inside k it is invariant
    in the inner loops, which LLVM hoists, so it costs one evaluation per row."""
    members = {id(m) for m in k.ops}
    frontier = [u.operation for u in op.results[0].uses]
    while frontier:
        c = frontier.pop()
        if id(c) not in members:
            return False
        if isinstance(c, nd.ReshapeOp):
            src, dst = _shape_of(c.operands[0]), _shape_of(c.results[0])
            if [d for d in src if d != 1] != [d for d in dst if d != 1]:
                return False
            frontier += [u.operation for u in c.results[0].uses]
        elif isinstance(c, nd.BroadcastInDimOp):
            src = _shape_of(c.operands[0])
            mapped = [d for i, d in enumerate(c.dims.get_values()) if src[i] != 1]
            if mapped != list(range(len(mapped))):
                return False
        elif _pointwise(c) and _numel(c.results[0]) == _numel(op.results[0]):
            frontier += [u.operation for u in c.results[0].uses]
        else:
            return False
    return True


def _gathered_along_rows(op: Operation, k: Kernel) -> bool:
    """Whether k reads ``op`` only through gathers along the last axis (possibly after
    pointwise ops of the same size): then k computes it only at the gathered positions,
    one per row, as cross_entropy does when it picks the target's log-probability.
    Readers in other kernels do not count (``op`` is then repeated in each,
    ``_repeatable``)."""
    n = _numel(op.results[0])
    members = {id(m) for m in k.ops}
    for use in op.results[0].uses:
        c = use.operation
        if id(c) not in members:
            continue
        if isinstance(c, nd.GatherOp):
            rank = len(_shape_of(c.operands[0]))
            if use.index != 0 or c.dim.value.data != rank - 1:
                return False
        elif not (_pointwise(c) and _numel(c.results[0]) == n and
                  _gathered_along_rows(c, k)):
            return False
    return True


def _picks_rows(op: Operation) -> bool:
    """``op`` gathers along the last axis from an input larger than its result."""
    if not isinstance(op, nd.GatherOp):
        return False
    rank = len(_shape_of(op.operands[0]))
    return op.dim.value.data == rank - 1 and _numel(op.operands[0]) > _numel(op.results[0])


def _can_join(op: Operation, k: Kernel, policy: FusionPolicy) -> bool:
    if k.kind == "collective":
        # the communication library reads and writes whole buffers: nothing fuses in
        return False
    if nd.kernel_root_kind(op) is not None or \
            op.has_trait(nd.CounterRandom) and k.kind != "elementwise":
        return False
    if _free(op):
        return True
    n = _numel(op.results[0])
    if k.kind in ("elementwise", "rows") and _pointwise(op) and n > k.numel and \
            _gathered_along_rows(op, k):
        return True
    if k.kind in ("elementwise", "rows") and _pointwise(op) and n < k.numel and \
            _row_level(op, k):
        return True
    if k.kind == "elementwise":
        return n == k.numel
    if k.kind == "rows":
        n_rows = _prod(k.row_shape[:len(k.row_shape) - len(k.row_axes)])
        return n in (_prod(k.row_shape), n_rows)
    if k.kind == "reduce":
        if _picks_rows(op):
            # one value per row, picked from a wider input (cross_entropy's target
            # log-probability): stored, it roots a kernel that can compute what it picks
            # from -- the log-softmax's row passes -- at the picked positions only,
            # where a reduction would need that whole input stored
            return False
        return n in (k.numel, _numel(k.contraction.operands[0])) if k.contraction else False
    if k.kind in ("sort", "scan"):
        # A sort kernel computes each key once (into its scratch), a scan reads each
        # element once: a same-sized pointwise producer costs what it would cost in a
        # kernel of its own.
        return _pointwise(op) and n == k.numel
    if k.kind == "matmul":
        if k.contraction is None:
            return False
        fed = _operand_fed(op, k)
        if fed is not None:
            return _prologue_admits(op, fed, k, policy) or (
                policy.operand_prologues and fed is k.contraction.operands[1]
                and _stacked_windows(op) and _packs_through_table(k))
        return n == k.numel and policy.epilogue_admits(op)
    return False


def _downstream(k: Kernel, value: SSAValue):
    """The ops of k that (transitively) read ``value``, each once."""
    members = {id(op) for op in k.ops}
    frontier = [u.operation for u in value.uses]
    seen: set[int] = set()
    while frontier:
        op = frontier.pop()
        if id(op) in seen or id(op) not in members:
            continue
        seen.add(id(op))
        yield op
        frontier += [u.operation for u in op.results[0].uses]


def _pointwise_epilogue(k: Kernel, result: SSAValue) -> bool:
    """Whether every op of k downstream of ``result`` reads it at its own index: an
    ``IndexChanging`` op cannot sit between a contraction and the kernel output, because
    the epilogue runs at the contraction's own output index."""
    return not any(op.has_trait(nd.IndexChanging) for op in _downstream(k, result))


def _row_compatible(k: Kernel, red: Operation) -> bool:
    """Whether reduction ``red`` can join ``k`` as one more pass over each row.

    A ``rows`` kernel computes, per row, its reductions one after another (each a pass
    over the row, reading the earlier ones as row scalars) and then its element-level
    output in a last pass. That is valid when every reduction reduces the same trailing
    axes of the same shape, and every op downstream of a reduction reads it only through
    a broadcast back along the row (or pointwise), so that at any element the value read
    is the scalar of that element's own row.
    """
    if k.kind not in ("elementwise", "rows") or (k.kind == "elementwise" and k.contraction):
        return False
    x = _shape_of(red.operands[0])
    axes = tuple(red.axes.get_values())
    n_kept = len(x) - len(axes)
    # The kernel's output is element-level (softmax) or one value per row (the picked
    # log-probability of cross_entropy).
    if not axes or axes != tuple(range(n_kept, len(x))) or k.numel not in (_prod(x),
                                                                            _prod(x[:n_kept])):
        return False
    if k.kind == "rows" and (k.row_shape != x or k.row_axes != axes):
        return False
    kept = x[:n_kept]
    for op in _downstream(k, red.results[0]):
        if isinstance(op, nd.ReshapeOp):
            src, dst = _shape_of(op.operands[0]), _shape_of(op.results[0])
            if [d for d in src if d != 1] != [d for d in dst if d != 1]:
                return False
        elif isinstance(op, nd.BroadcastInDimOp):
            src, dst = _shape_of(op.operands[0]), _shape_of(op.results[0])
            dims = op.dims.get_values()
            mapped = [dims[i] for i, d in enumerate(src) if d != 1]
            if dst != x or mapped != [p for p in range(n_kept) if kept[p] != 1]:
                return False
        elif _is_reduction(op):
            if _shape_of(op.operands[0]) != x or tuple(op.axes.get_values()) != axes:
                return False
        elif isinstance(op, nd.GatherOp):   # a pick along the row stays in the row
            if _shape_of(op.operands[0]) != x or op.dim.value.data != len(x) - 1 or \
                    _shape_of(op.results[0])[:-1] != kept:
                return False
        elif not _pointwise(op):
            return False
    return True


def _shape_of(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def _prologue_admits(op: Operation, fed: SSAValue, k: Kernel, policy: FusionPolicy) -> bool:
    """Whether ``op``, computing the operand ``fed`` of k's matmul, may be evaluated as
    the GEMM packs it: where the target packs computed operands, a cheap pointwise op
    at the operand's own size (a smaller value broadcast into it would be recomputed per
    element) reading at most one operand-sized value (so the chain reads what the
    stored operand would have cost, never more: GELU's final product of x/2 and
    1 + erf, erf stored apart, would read two), and only for B -- the CPU GEMM packs
    B's NR-wide lines along its rows, consecutive elements, which LLVM vectorizes, but
    A's MR-tall lines across rows, element by element (measured on the small GPT: a
    layer norm as A's prologue cost its QKV product 1.4 ms, as B's nothing)."""
    n = _numel(op.results[0])
    wide = sum(1 for v in op.operands if _numel(_source(v)) == n)
    return (policy.operand_prologues and fed is k.contraction.operands[1] and _pointwise(op)
            and n == _numel(fed) and wide <= 1 and policy.epilogue_admits(op))


def _places_parts(k: Kernel, op: Operation) -> bool:
    """Whether elementwise kernel k only assembles the parts of fused attention ``op``'s
    packed result (``lowering.placement``): then the attention kernel stores each part
    where k would have put it, and k's pass over the whole result is gone (a GPT's
    QKV gradient: dq, dk and dv merged from heads into their columns)."""
    return placements(k.root.results[0], op.results[0], packed_parts(op)) is not None


def _stacked_windows(op: Operation) -> bool:
    """``op`` concatenates windows of one stored value, each a movement chain of it one
    element thick along the concat's dim (a convolution's shifted windows,
    ``nn.convolution._shifted_product``): read as a GEMM's B operand it is that value
    through a table of offsets (``lowering.views.table_view``), packed straight from
    it, so each product reading it computes it in its packing instead of it being
    stored. (That value itself is stored: nothing but movement ops joins a GEMM's
    operand at another size.)"""
    if not isinstance(op, nd.ConcatOp):
        return False
    d = op.dim.value.data
    sources = {id(_source(v)) for v in op.operands}
    return len(sources) == 1 and all(_shape_of(v)[d] == 1 for v in op.operands)


def _packs_through_table(k: Kernel) -> bool:
    """Whether the B operand of k's matmul is a view with a table (``table_view``) that
    the CPU GEMM packs directly (``TableView.packs_directly``; anything else would be
    packed element by element through the concat's selects)."""
    b = k.contraction.operands[1]
    view = table_view(b, stored=lambda v: not (isinstance(v.owner, Operation)
                                               and v.owner.has_trait(nd.Movement)))
    return view is not None and view.packs_directly(len(_shape_of(b)) - 2)


def _operand_fed(op: Operation, k: Kernel) -> SSAValue | None:
    """The operand of k's matmul that ``op`` (transitively, within k) computes, if any."""
    members = {id(m) for m in k.ops}
    for operand in k.contraction.operands[:2]:
        frontier = [operand.owner]
        seen: set[int] = set()
        while frontier:
            o = frontier.pop()
            if o is op:
                return operand
            if not isinstance(o, Operation) or id(o) in seen or id(o) not in members:
                continue
            seen.add(id(o))
            frontier += [v.owner for v in o.operands]
    return None


def _source(v: SSAValue) -> SSAValue:
    """``v`` seen through movement ops (what a kernel reading ``v`` loads from)."""
    while isinstance(v.owner, Operation) and v.owner.has_trait(nd.Movement):
        v = v.owner.operands[0]
    return v


def _stored_anyway(v: SSAValue) -> bool:
    """Whether ``v``'s source is an argument of the step or the result of a
    contraction, a scatter or another kernel root kind: a value that is stored whoever
    reads it (a contraction read by several kernels cannot be any one kernel's
    epilogue)."""
    owner = _source(v).owner
    return not isinstance(owner, Operation) or nd.kernel_root_kind(owner) is not None


def _sole_contractions(op: Operation) -> list[Operation]:
    """The contractions (matmul or reduction) among ``op``'s operands whose result has
    ``op``'s size and is read by ``op`` alone: those ``op`` can take as the contraction
    of a kernel it roots, its epilogue."""
    n = _numel(op.results[0])
    return [v.owner for v in op.operands
            if isinstance(v.owner, Operation)
            and nd.kernel_root_kind(v.owner) in ("matmul", "reduce")
            and _numel(v) == n and all(u.operation is op for u in v.uses)]


def _repeatable(op: Operation, homes: list[Kernel]) -> bool:
    """Whether a cheap pointwise ``op`` read by several kernels may be computed in each
    of them instead of stored: its operands read at full size (not broadcast from a
    smaller value) are stored anyway (``_stored_anyway``), and recomputing moves fewer
    bytes than storing. With ``b`` full-size operands and ``h`` reading kernels,
    recomputing reads ``b x h`` values; storing writes one and reads it ``h`` times,
    plus ``b`` reads -- less the one operand that ``op`` would take as its epilogue's
    contraction, which recomputing must store instead (``e``): ``b x h + e`` against
    ``b - e + 1 + h``. The case it is for: ``logits - max`` in cross_entropy, read by
    the sum of its exponentials and by the picked log-probability; stored, it was one
    more logits-sized buffer (393 MiB at gpt-42m's batch 2)."""
    if not op.has_trait(nd.Elementwise) or op.has_trait(nd.Expensive) or \
            op.has_trait(nd.CounterRandom):
        return False
    n = _numel(op.results[0])
    wide = [v for v in op.operands if _numel(_source(v)) == n]
    if not all(_stored_anyway(v) for v in wide):
        return False
    e = len(_sole_contractions(op))
    b, h = len(wide), len(homes)
    return b * h + e < b - e + 1 + h


def _roots_own_epilogue(op: Operation, homes: list[Kernel], policy: FusionPolicy) -> bool:
    """Whether pointwise ``op`` should root its own kernel rather than join ``homes``:
    it reads the result of a contraction (matmul or reduction) of its own size that
    only it reads, which the home kernel could not take as its contraction (it has
    one, or reaches its output through an index-changing op such as a transpose).

    Joining, ``op`` would leave that contraction in a kernel of its own, its result
    materialized and alive until the home kernel runs; rooting, ``op`` becomes the
    contraction's epilogue and the contraction's result is never stored. The count of
    stored values is the same either way (``op``'s result instead of the
    contraction's), but their lifetimes differ: in a chain of partial sums ``acc_c =
    p_c + acc_{c-1}`` (row chunking's weight gradients), joining keeps every ``p_c``
    alive until the chain's last kernel; rooting keeps one accumulator at a time."""
    if len(homes) != 1 or not op.has_trait(nd.Elementwise) or op.has_trait(nd.CounterRandom):
        return False
    home = homes[0]
    if home.kind not in ("elementwise", "matmul"):
        return False
    for c in _sole_contractions(op):
        if nd.kernel_root_kind(c) == "matmul" and not policy.epilogue_admits(op):
            continue
        if home.contraction is not None or not _pointwise_epilogue(home, op.results[0]):
            return True
    return False


def _evaluations(op: Operation, k: Kernel) -> frozenset[tuple[int, ...]]:
    """The distinct indices at which kernel k would evaluate ``op`` per output element
    if ``op`` joined it, each named by the path of movement ops between ``op`` and the
    root that maps the root's index to it: a consumer reading ``op`` at its own index (a
    pointwise op, a reduction) evaluates it at that consumer's indices; any other (a
    slice, a concat, a pad, a transpose, a gather) at indices of its own, one more step
    on each of the consumer's paths. (LLVM shares equal index expressions; a value read
    at j and at j + 8 is computed twice.)"""
    paths: set[tuple[int, ...]] = set()
    for u in op.results[0].uses:
        c = u.operation
        through = k.evaluations.get(id(c))
        if through is None:
            continue
        if _pointwise(c) or _is_reduction(c):
            paths |= through
        else:
            paths |= {p + (id(c),) for p in through}
    return frozenset(paths) if paths else _AT_ROOT


_AT_ROOT = frozenset({()})


def _within_evaluations(op: Operation, homes: list[Kernel]) -> bool:
    """Whether joining ``homes`` keeps ``op`` within ``MAX_EVALUATIONS`` in each (free
    ops, index arithmetic, always are: their paths pass on to what they read)."""
    return _free(op) or all(len(_evaluations(op, h)) <= MAX_EVALUATIONS for h in homes)


def group(fn: func.FuncOp, policy: FusionPolicy) -> list[Kernel]:
    """Assign every op of ``fn`` to kernels; kernels in topological order.

    Constants, iotas and movement ops whose consumers sit in several kernels are
    duplicated into each of them (recomputing them is index arithmetic); any other value
    read by several kernels is materialized. ``policy``: the target's facts that change
    the grouping (which ops a contraction's epilogue may hold).
    """
    ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]
    returned = {id(v) for v in fn.body.block.last_op.operands}
    homes_of: dict[int, list[Kernel]] = {}
    kernels: list[Kernel] = []
    for op in reversed(ops):
        result = op.results[0]
        consumers = [u.operation for u in result.uses]
        homes: list[Kernel] = []
        assigned = all(id(c) in homes_of for c in consumers) and id(result) not in returned
        if assigned:
            for c in consumers:
                for h in homes_of[id(c)]:
                    if all(h is not x for x in homes):
                        homes.append(h)
        kind = nd.kernel_root_kind(op)
        if kind is not None:
            home = homes[0] if len(homes) == 1 else None
            if (home is not None and home.kind == "elementwise" and home.contraction is None
                    and kind in ("reduce", "matmul") and home.numel == _numel(result)
                    and _pointwise_epilogue(home, result)
                    and (kind == "reduce" or all(policy.epilogue_admits(o) for o in home.ops))):
                home.kind, home.contraction = kind, op   # it becomes the epilogue kernel
                joined = [home]
            elif home is not None and kind == "attention" and home.kind == "elementwise" \
                    and home.contraction is None and _places_parts(home, op):
                home.kind, home.contraction = kind, op   # it stores the parts in place
                joined = [home]
            elif home is not None and kind == "reduce" and _row_compatible(home, op):
                home.kind = "rows"                       # one more pass over each row
                home.row_shape = _shape_of(op.operands[0])
                home.row_axes = tuple(op.axes.get_values())
                joined = [home]
            else:
                joined = [Kernel(kind, op, contraction=op)]
                kernels.append(joined[0])
        elif homes and (len(homes) == 1 or _free(op) or _repeatable(op, homes)
                        or _stacked_windows(op)) and \
                all(_can_join(op, h, policy) for h in homes) and \
                not _roots_own_epilogue(op, homes, policy) and \
                _within_evaluations(op, homes):
            joined = homes
        else:
            joined = [Kernel("elementwise", op)]
            kernels.append(joined[0])
        for k in joined:
            k.evaluations[id(op)] = _evaluations(op, k) if k.root is not op else _AT_ROOT
            k.ops.append(op)
        homes_of[id(op)] = joined
    for k in kernels:
        k.ops.reverse()
    position = {id(op): i for i, op in enumerate(ops)}
    kernels.sort(key=lambda k: position[id(k.root)])
    return kernels


def fuse(module: ModuleOp, target: Target | str = "cpu") -> ModuleOp:
    """A new module whose step function is a sequence of ``nova.fusion`` kernels for
    ``target`` (a ``Target`` or its name, "cpu" or "cuda"), grouped by its fusion
    policy."""
    policy = resolve(target, "fuse").fusion_policy
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    kernels = group(fn, policy)
    new_fn = func.FuncOp(fn.sym_name.data, fn.function_type)
    mapping: dict[SSAValue, SSAValue] = dict(zip(fn.body.block.args, new_fn.body.block.args))
    for k in kernels:
        members = {id(op) for op in k.ops}
        inputs: list[SSAValue] = []
        for op in k.ops:
            for v in op.operands:
                if (not isinstance(v.owner, Operation) or id(v.owner) not in members) and \
                        v not in inputs:
                    inputs.append(v)
        block = Block(arg_types=[v.type for v in inputs])
        inner: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args))
        for op in k.ops:
            block.add_op(op.clone(value_mapper=inner))
        block.add_op(nd.YieldOp.create(operands=[inner[k.root.results[0]]]))
        fusion = nd.FusionOp.create(operands=[mapping[v] for v in inputs],
                                    result_types=[k.root.results[0].type],
                                    properties={"kind": StringAttr(k.kind)},
                                    regions=[Region(block)])
        new_fn.body.block.add_op(fusion)
        mapping[k.root.results[0]] = fusion.results[0]
    new_fn.body.block.add_op(func.ReturnOp(*[mapping[v] for v in fn.body.block.last_op.operands]))
    out = ModuleOp([new_fn])
    return verified_after_pass(out)
