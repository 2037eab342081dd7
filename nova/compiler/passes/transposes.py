"""Transposed products: ``transpose(A @ B)`` becomes ``B^T @ A^T``.

Autograd records a weight's gradient in the layout of the product it came from: for
``y = x @ W^T`` it is ``transpose(x^T @ dy)``, the product computed as ``(in, out)`` and
transposed to ``W``'s ``(out, in)``. Fusion turns the transpose into index arithmetic
in whatever reads it -- the optimizer's update, or the add that joins a tied weight's
two gradients -- and that kernel then walks the product with a stride of a whole row
per element: measured on the ``gpt-42m`` step, the ``(50304, 512)`` tied embedding's
``transpose + add`` took 186 ms, as long as ~60% of the GEMM that made its input.

A GEMM reads a transposed operand in place (its packing takes either layout), so the
transpose costs nothing there: this pass rewrites ``transpose(A @ B)`` (the last two
dims swapped, batch dims kept) as ``transpose(B) @ transpose(A)``, folding a transpose
of a transpose away. It also sinks a transpose through elementwise ops whose every
operand is such a product (or a splat constant): the chain of partial sums that row
chunking makes (``acc = p_c + acc``, then transposed) becomes a chain of products
already in the gradient's layout, each add still the epilogue of its product.

A product read by anything but the transpose is left alone (rewriting it would compute
it twice). Values are unchanged: every element of the product is the same sum over
``K`` in the same order, only written at the transposed position.
"""
from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.transforms.dead_code_elimination import dce

from nova.compiler import dialect as nd
from nova.compiler.passes.checks import verified_after_pass


def _sole_reader(v: SSAValue) -> Operation | None:
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


def _absorbs(v: SSAValue) -> bool:
    """Whether the transpose of ``v`` can be pushed into the ops computing it: ``v`` is
    read only by the op being rewritten and is a product, or an elementwise op of equal
    shapes whose operands all absorb it (or are splat constants)."""
    op = v.owner
    if not isinstance(op, Operation) or _sole_reader(v) is None:
        return False
    if isinstance(op, nd.MatmulOp):
        return True
    if not op.has_trait(nd.Elementwise) or op.has_trait(nd.CounterRandom) or \
            any(nd.shape_of(o) != nd.shape_of(v) for o in op.operands):
        return False
    return all(isinstance(o.owner, nd.ConstantOp) or _absorbs(o) for o in op.operands)


def _transposed_type(v: SSAValue):
    shape = list(nd.shape_of(v))
    shape[-2], shape[-1] = shape[-1], shape[-2]
    return nd.tensor_type(shape, nd.element_name(v.type.get_element_type()))


def _transpose(v: SSAValue, before: Operation, like: Operation) -> SSAValue:
    """``v`` with its last two dims swapped, inserted before ``before``: the input of
    ``v`` when ``v`` is itself such a transpose."""
    if nd.swaps_last_two(v.owner):
        return v.owner.input
    r = len(nd.shape_of(v))
    t = nd.TransposeOp.create(operands=[v], result_types=[_transposed_type(v)],
                              properties={"perm": nd.i64_array(
                                  [*range(r - 2), r - 1, r - 2])},
                              attributes=dict(like.attributes))
    before.parent.insert_op_before(t, before)
    return t.result


def _rebuilt_transposed(v: SSAValue) -> SSAValue:
    """The transpose of ``v`` (which ``_absorbs``), computed without a transpose of a
    computed value: products swapped, elementwise ops on transposed operands. Each new
    op goes where the op it replaces stands, so the step's order (and with it what is
    alive when) stays as it was."""
    op = v.owner
    before = op
    if isinstance(op, nd.ConstantOp):
        new = nd.ConstantOp.create(result_types=[_transposed_type(v)],
                                   properties=dict(op.properties),
                                   attributes=dict(op.attributes))
    elif isinstance(op, nd.MatmulOp):
        lhs = _transpose(op.rhs, before, op)
        rhs = _transpose(op.lhs, before, op)
        new = nd.MatmulOp.create(operands=[lhs, rhs], result_types=[_transposed_type(v)],
                                 attributes=dict(op.attributes))
    else:
        operands = [_rebuilt_transposed(o) for o in op.operands]
        new = type(op).create(operands=operands, result_types=[_transposed_type(v)],
                              properties=dict(op.properties), attributes=dict(op.attributes))
    before.parent.insert_op_before(new, before)
    return new.results[0]


def transpose_products(module: ModuleOp) -> ModuleOp:
    """Rewrite every transposed product (module docstring) in place; the module is
    re-verified when anything changed."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    changed = False
    for t in [op for op in fn.body.block.ops if nd.swaps_last_two(op)]:
        if t.parent is None or not _absorbs(t.input):
            continue
        t.result.replace_all_uses_with(_rebuilt_transposed(t.input))
        t.detach()
        t.erase()
        changed = True
    if not changed:
        return module
    dce(module)
    return verified_after_pass(module)
