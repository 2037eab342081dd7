"""Common-subexpression and dead-code elimination over the step function.

The trace records what the user (and the autograd rules) asked for, so forward and
backward often rebuild the same value: the same splat constant, the same broadcast of a
mean, the same transpose of a weight. Every nova op except ``rng_uniform`` is ``Pure``,
so two ops with equal names, properties and operands compute the same value and CSE
keeps one; DCE then drops anything whose result is unused.
"""
from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce


def simplify(module: ModuleOp) -> ModuleOp:
    """CSE then DCE, in place; the module is re-verified."""
    cse(module)
    dce(module)
    module.verify()
    return module
