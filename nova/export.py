"""``nv.export``: a step's IR for other tools.

``mlir(*tensors)`` is the step that would compute ``tensors`` in MLIR's generic op form
(``nova.compiler.mlir_text``): upstream MLIR (``mlir-opt``, the Python bindings, with
unregistered dialects allowed) parses and verifies it, and ``nova.compiler.mlir_text.
parse`` reads it back. Nothing runs.
"""
from __future__ import annotations

from nova.tensor.tensor import Tensor


def mlir(*tensors: Tensor, stage: str = "nova") -> str:
    """The step computing ``tensors`` as generic-form MLIR text (``stage`` as in
    ``nv.debug.dump_ir``: ``"trace"``, ``"nova"`` or ``"fused"``)."""
    from nova.debug import dump_ir
    return dump_ir(*tensors, stage=stage, generic=True)


__all__ = ["mlir"]
