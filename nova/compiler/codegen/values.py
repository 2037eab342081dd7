"""What both emitters (LLVM, CUDA C) read off an IR value, and the comparison symbols they
share: one definition each, so the two targets cannot drift apart on them."""
from __future__ import annotations

from xdsl.ir import SSAValue

from nova.compiler import dialect as nd
from nova.compiler.dialect import shape_of

__all__ = ["COMPARE", "element_of", "shape_of"]   # shape_of: the dialect's own

# Comparison directions of ``nova.compare`` as C / LLVM predicate symbols.
COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def element_of(v: SSAValue) -> str:
    """The MLIR name of a tensor value's element type ("f32", "i64", ...)."""
    return nd.element_name(v.type.element_type)

