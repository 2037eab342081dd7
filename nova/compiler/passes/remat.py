"""Rematerialization: recompute cheap forward values in the backward instead of saving them.

A training step's forward values that the backward reads ("saved activations") are what
holds memory between the two passes. For each of them there is a choice: keep it, or
recompute it in the backward from other values that are kept. This pass makes that
choice for the whole step at once as a minimum cut, as AOTAutograd's partitioner does:

* every forward value ``v`` is two flow-graph nodes ``v_in -> v_out`` whose capacity is
  the bytes it takes to keep ``v`` (0 for arguments and step results: they are alive for
  the whole step anyway; unbounded for movement ops and constants, which fusion folds
  into index arithmetic and never stores, so keeping them means keeping their source);
* ``u_out -> v_in`` (unbounded) for each operand ``u`` of ``v``;
* ``source -> v_in`` (unbounded) for arguments and for values that may not be recomputed:
  they must come from the forward;
* ``v_out -> sink`` (unbounded) for each forward value the backward reads.

A minimum cut cuts only ``v_in -> v_out`` edges; those values are kept, every other
value the backward needs is recomputed from them by clones of the forward ops placed
just before the backward op that reads it. Elementwise chains are cloned per reader, so
fusion folds each into its reader's kernel (recomputing costs no stored bytes and no
extra kernel); recomputed contractions are shared by their readers. The cut is the
cheapest set of bytes from which the backward can be computed.

What may be recomputed is the mode's choice:

* ``default``: elementwise ops, movement, constants, and counter-based random bits (so a
  dropout mask is recomputed from its (seed, offset) key, bit-identically). Never
  reductions, contractions, gathers or scatters, and never values under
  ``MIN_RECOMPUTE_BYTES`` (keeping those is cheaper than an extra kernel).
* ``aggressive``: also contractions whose result is larger than their operands (the
  attention scores ``q k^T``, the MLP's up projection) — the flash-attention trade: the
  ``T x T`` probabilities are never stored. Reductions stay kept, so recompute chains
  stop at each row statistic and each contracting projection.
* ``off``: nothing is recomputed.

Backward ops are the ones carrying ``nova.backward`` (recorded by ``loss.backward()``)
and everything that depends on them (the optimizer update).
"""
from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Operation, SSAValue
from xdsl.transforms.dead_code_elimination import dce

from nova.compiler import dialect as nd
from nova.compiler.dialect import BACKWARD_ATTR
from nova.compiler.passes import min_cut
from nova.compiler.passes.checks import verified_after_pass
from nova.core import dtypes as dt

MODES = ("off", "default", "aggressive")
_INF = 2**30
_UNIT = 64   # capacities count 64-byte units (``_keep_cost`` breaks ties by one)


def _folded(op: Operation) -> bool:
    """A view or a generator: fusion turns it into its readers' index arithmetic."""
    return op.has_trait(nd.Movement) or op.has_trait(nd.Generator)


def value_nbytes(v: SSAValue) -> int:
    """The bytes of ``v``'s tensor (also the row-chunking pass's measure)."""
    t = v.type
    n = 1
    for d in t.get_shape():
        n *= d
    return n * dt.from_mlir(nd.element_name(t.get_element_type())).np.itemsize


# Values smaller than this are kept rather than recomputed: keeping them costs next to
# nothing, while a recomputation whose reader cannot absorb it (a matmul operand, a
# gather index) costs a kernel launch per reader.
MIN_RECOMPUTE_BYTES = 64 * 1024


def _recomputable(op: Operation, mode: str) -> bool:
    """Movement ops and generators fold into their readers' index arithmetic, so
    recomputing them is free; elementwise ops (and counter-based random draws, which
    recompute bit-identically) are worth recomputing once their value is large."""
    if _folded(op):
        return True
    if value_nbytes(op.results[0]) < MIN_RECOMPUTE_BYTES:
        return False
    if op.has_trait(nd.Elementwise) or op.has_trait(nd.CounterRandom):
        return True
    if mode == "aggressive" and isinstance(op, nd.MatmulOp):
        return value_nbytes(op.results[0]) > sum(value_nbytes(o) for o in op.operands)
    return False


def _keep_cost(op: Operation, v: SSAValue) -> int:
    """The capacity of keeping ``v``: its bytes in ``_UNIT``s, counted two per 2 x
    ``_UNIT`` bytes so that a tie between equal-sized cuts can be broken by one unit:
    an ``Expensive`` elementwise value (an ``exp``, an ``erf``) costs one more.
    Its readers in the forward are usually kernels that compute it on the fly (the sum
    of a softmax's exponentials), so keeping it would store one more buffer, where
    keeping an equal-sized cheap value next to it (``logits - max``, which fusion
    recomputes in each reader from the stored logits) stores nothing new."""
    units = 2 * (value_nbytes(v) // (2 * _UNIT) + 1)
    return units + 1 if op.has_trait(nd.Expensive) else units


def backward_ops(fn: func.FuncOp) -> set[Operation]:
    """Ops marked as backward, and every op that depends on one."""
    result: set[Operation] = set()
    for op in fn.body.block.ops:
        if op is fn.body.block.last_op:
            break
        if BACKWARD_ATTR in op.attributes or any(
                isinstance(o.owner, Operation) and o.owner in result for o in op.operands):
            result.add(op)
    return result


def choose_saved(fn: func.FuncOp, mode: str) -> tuple[set[SSAValue], set[SSAValue]]:
    """(values kept for the backward, forward values the backward reads) by minimum cut.

    Arguments and step results are alive for the whole step, so they are free to read
    and never listed as kept."""
    bwd = backward_ops(fn)
    block = fn.body.block
    ret = block.last_op
    results = set(ret.operands)
    fwd_values: list[SSAValue] = list(block.args)
    fwd_values += [op.results[0] for op in block.ops if op is not ret and op not in bwd]
    needed = {o for op in bwd for o in op.operands
              if isinstance(o.owner, Operation) and o.owner not in bwd}
    if not needed:
        return set(), set()
    index = {v: i for i, v in enumerate(fwd_values)}
    n = len(fwd_values)
    source, sink = 2 * n, 2 * n + 1
    edges: list[tuple[int, int, int]] = []
    for v, i in index.items():
        op = v.owner if isinstance(v.owner, Operation) else None
        if op is None or v in results:
            cap = 0
        elif _folded(op):
            cap = _INF
        else:
            cap = _keep_cost(op, v)
        edges.append((2 * i, 2 * i + 1, cap))
        if op is None or not _recomputable(op, mode):
            edges.append((source, 2 * i, _INF))
        if op is not None:
            for o in op.operands:
                edges.append((2 * index[o] + 1, 2 * i, _INF))
        if v in needed:
            edges.append((2 * i + 1, sink, _INF))
    # Of the minimum cuts, the one nearest the sink: the nodes that still reach the sink
    # through unsaturated edges are on its side. Where a chain of equal-sized values
    # ties (a product and its bias add), this keeps the later value, so the backward
    # recomputes nothing it need not and the forward's product has one reader left, its
    # epilogue (the cut nearest the source kept the bare product, whose two readers
    # then each needed a kernel of their own: the bias add in the forward and again
    # before the backward's reader).
    to_sink = min_cut.sink_side(2 * n + 2, edges, source, sink)
    saved = {v for v, i in index.items() if 2 * i not in to_sink and 2 * i + 1 in to_sink
             and isinstance(v.owner, Operation) and v not in results}
    return saved, needed


def rematerialize(module: ModuleOp, mode: str = "default") -> ModuleOp:
    """Rewrite the step so the backward recomputes what the minimum cut does not keep."""
    if mode not in MODES:
        raise ValueError(f"remat: unknown mode {mode!r}; valid modes are {MODES}")
    if mode == "off":
        return module
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    saved, needed = choose_saved(fn, mode)
    if not needed:
        return module
    bwd = backward_ops(fn)
    block = fn.body.block
    args = set(block.args) | set(block.last_op.operands)   # alive all step anyway
    shared: dict[SSAValue, SSAValue] = {}   # recomputed contractions: once per step

    def available(v: SSAValue, before: Operation, local: dict[SSAValue, SSAValue]
                  ) -> SSAValue:
        """``v`` as the backward op ``before`` may read it: kept, or recomputed by clones
        placed before it. Elementwise clones are made per reader (``local``) so fusion
        folds each chain into its reader's kernel instead of storing it; contractions are
        recomputed once (``shared``)."""
        if v in args or v in saved:
            return v
        if v in local:
            return local[v]
        if v in shared:
            return shared[v]
        op = v.owner
        operands = [available(o, before, local) for o in op.operands]
        if _folded(op) and all(a is b for a, b in zip(operands, op.operands)):
            return v   # a view or constant of kept values: fusion folds it into readers
        clone = op.clone(value_mapper=dict(zip(op.operands, operands)))
        clone.attributes[BACKWARD_ATTR] = UnitAttr()
        block.insert_op_before(clone, before)
        (shared if isinstance(op, nd.MatmulOp) else local)[v] = clone.results[0]
        return clone.results[0]

    for op in list(block.ops):
        if op not in bwd:
            continue
        local: dict[SSAValue, SSAValue] = {}
        new = [available(o, op, local) if o in needed else o for o in op.operands]
        if any(a is not b for a, b in zip(new, op.operands)):
            op.operands = new
    dce(module)   # forward ops that only fed the backward are now dead (no CSE: it
    return verified_after_pass(module)   # would merge the per-reader clones again)
