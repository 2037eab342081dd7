"""Common-subexpression and dead-code elimination over the step function.

The trace records what the user (and the autograd rules) asked for, so forward and
backward often rebuild the same value: the same splat constant, the same broadcast of a
mean, the same transpose of a weight. Every nova op except ``rng_uniform`` is ``Pure``,
so two ops with equal names, properties and operands compute the same value and CSE
keeps one; DCE then drops anything whose result is unused.
"""
from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce

from nova.compiler.dialect import BACKWARD_ATTR
from nova.compiler.passes.checks import verified_after_pass


def simplify(module: ModuleOp) -> ModuleOp:
    """CSE then DCE, in place; the module is re-verified.

    The ``nova.backward`` mark does not keep a backward op from merging with its forward
    twin: marks are set aside, and after CSE an op keeps its mark only if it was marked
    (the survivor of a merge is the earliest, so a value computed in the forward stays a
    forward value)."""
    marked = [op for op in module.walk() if BACKWARD_ATTR in op.attributes]
    for op in marked:
        del op.attributes[BACKWARD_ATTR]
    cse(module)
    dce(module)
    for op in marked:
        if op.parent is not None:
            op.attributes[BACKWARD_ATTR] = UnitAttr()
    return verified_after_pass(module)
