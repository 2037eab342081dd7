"""Flat elementwise kernels: one loop over the output's elements, one compile for every size.

An elementwise kernel whose every value is either shaped like the output and read at the
output's own position (through elementwise ops and reshapes, which keep the row-major
order), or a scalar broadcast to it, or the key of a random draw (whose counter is the
linear position), computes element ``i`` of its output from element ``i`` of its
inputs, whatever the shape. Such a kernel is generated from its *flat form*: the same
ops on 1-D values of ``n`` elements, reshapes dropped, over one loop whose range is the
launch's ``[start, end)`` -- so ``n`` never reaches the code, and the kernel's name
(``body_key`` printing the flat values' types as ``tensor<?x...>``, ``Schedule.code_identity``
leaving out the element count) is the same for every size.

Why: every parameter of a model gets optimizer-update kernels of its own shape (an
AdamW step is three elementwise kernels per parameter shape), and initialization one
normal draw per shape; the small GPT's first step compiled 67 elementwise kernels of
which 23 differ in more than their sizes, at ~25 ms of LLVM each.

Only the CPU target plans flat kernels (``CpuTarget.schedule``); the runtime keeps
reading the plan's original fusion and argument shapes (buffers, memory plan,
interpreter fallback) -- the flat form exists only for code generation
(``flat_plan``), which tests check gives the same IR at every size.
"""
from __future__ import annotations

from dataclasses import replace

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, BlockArgument, Region, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.lowering.plan import KernelPlan, body_key
from nova.core.shapes import numel

# The roles of a flat form's values: shaped like the output (read at its position), a
# 0-d scalar, or a random draw's (seed, offset) key.
FLAT, SCALAR, KEY = "flat", "scalar", "key"


def _roles(fusion: nd.FusionOp) -> dict[SSAValue, str] | None:
    """The role of every value of an elementwise kernel's region, or None when some
    value is read at another position than the output's (a transpose, a slice, a
    broadcast of more than a scalar, an iota, a gather...)."""
    if fusion.kind.data != "elementwise":
        return None
    out_shape = nd.shape_of(fusion.outputs[0])
    n = numel(out_shape)
    if not out_shape or n == 0:
        return None
    block = fusion.body.block
    roles: dict[SSAValue, str] = {}

    def claim(v: SSAValue, role: str) -> bool:
        """``v`` read in ``role``: a block argument takes the role of its first read."""
        if isinstance(v, BlockArgument) and v not in roles:
            shape = nd.shape_of(v)
            if role == FLAT and numel(shape) != n or role == SCALAR and shape != () \
                    or role == KEY and shape != (2,):
                return False
            roles[v] = role
        return roles.get(v) == role

    for op in block.ops:
        if isinstance(op, nd.YieldOp):
            if not claim(op.operands[0], FLAT):
                return None
            continue
        result = op.results[0]
        shape = nd.shape_of(result)
        if isinstance(op, nd.ConstantOp):
            role = SCALAR if shape == () else FLAT if shape == out_shape else None
        elif isinstance(op, nd.RngUniformOp):
            role = FLAT if shape == out_shape and claim(op.operands[0], KEY) else None
        elif isinstance(op, nd.BroadcastInDimOp):
            role = FLAT if shape == out_shape and claim(op.operands[0], SCALAR) else None
        elif isinstance(op, nd.ReshapeOp):
            role = FLAT if numel(shape) == n and claim(op.operands[0], FLAT) else None
        elif op.has_trait(nd.Elementwise):
            role = FLAT if shape == out_shape else SCALAR if shape == () else None
            if role is not None and not all(
                    nd.shape_of(v) == shape and claim(v, role) for v in op.operands):
                role = None
        else:
            role = None
        if role is None:
            return None
        roles[result] = role
    return roles


def is_flat(fusion: nd.FusionOp) -> bool:
    """Whether ``fusion`` is an elementwise kernel with a flat form (module doc)."""
    return _roles(fusion) is not None


def flat_form(fusion: nd.FusionOp) -> tuple[nd.FusionOp, frozenset[SSAValue]] | None:
    """The flat form of ``fusion`` (a new, detached ``nova.fusion`` with no operands:
    its region's 1-D values stand for the kernel's buffers) and its values of ``n``
    elements; None when the kernel has none (``is_flat``)."""
    roles = _roles(fusion)
    if roles is None:
        return None
    n = numel(nd.shape_of(fusion.outputs[0]))

    def flat_type(v: SSAValue):
        return nd.tensor_type((n,), nd.element_name(v.type.element_type)) \
            if roles.get(v) == FLAT else v.type

    old = fusion.body.block
    block = Block(arg_types=[flat_type(a) for a in old.args])
    mapped: dict[SSAValue, SSAValue] = dict(zip(old.args, block.args))
    for op in old.ops:
        if isinstance(op, nd.ReshapeOp):       # row-major order kept: the same values
            mapped[op.results[0]] = mapped[op.operands[0]]
            continue
        new = type(op).create(operands=[mapped[v] for v in op.operands],
                              result_types=[flat_type(r) for r in op.results],
                              properties=dict(op.properties), attributes=dict(op.attributes))
        block.add_op(new)
        mapped.update(zip(op.results, new.results))
    out = block.last_op.operands[0]
    flat = nd.FusionOp.create(result_types=[out.type],
                              properties={"kind": StringAttr("elementwise")},
                              regions=[Region(block)])
    values = frozenset(mapped[v] for v, role in roles.items() if role == FLAT)
    return flat, values


def flat_key(fusion: nd.FusionOp) -> str | None:
    """The structure of ``fusion``'s flat form, or None when it has none: ``body_key``
    of the region with reshapes as aliases and the values shaped like the output
    printed without their shape -- what the flat form consists of, read without
    building it (planning runs on every step that is not cached on disk). Equal keys,
    equal code at any size."""
    roles = _roles(fusion)
    if roles is None:
        return None
    reshapes = [op for op in fusion.body.block.ops if isinstance(op, nd.ReshapeOp)]
    return body_key(fusion, symbolic=frozenset(v for v, r in roles.items() if r == FLAT),
                    aliases=frozenset(reshapes))


def flat_plan(plan: KernelPlan) -> KernelPlan:
    """``plan`` as code generation sees it when its schedule is flat: the flat form as
    the fusion and 1-D argument types (the runtime keeps the original plan)."""
    if not plan.schedule.flat:
        return plan
    form = flat_form(plan.fusion)
    if form is None:
        raise ValueError(f"kernel {plan.name}: a flat schedule for a kernel with no flat "
                         f"form:\n{plan.fusion}")
    flat, _ = form
    block = flat.body.block
    args = [(nd.shape_of(a), t) for a, (_, t) in zip(block.args, plan.arg_types)]
    n = plan.schedule.loops[0]
    return replace(plan, fusion=flat, arg_types=args + [((n,), plan.out[1])])


__all__ = ["flat_form", "flat_key", "flat_plan", "is_flat"]
