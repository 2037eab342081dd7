"""``nv.export``: a step's IR for other tools.

``mlir(*tensors)`` is the step that would compute ``tensors`` in MLIR's generic op form
(``nova.compiler.mlir_text``): upstream MLIR (``mlir-opt``, the Python bindings, with
unregistered dialects allowed) parses and verifies it, and ``nova.compiler.mlir_text.
parse`` reads it back. ``stablehlo(*tensors)`` is the same step in StableHLO
(``nova.compiler.stablehlo``), for XLA- and IREE-based tools, and ``arguments(*tensors)``
the values its function takes. Nothing runs.
"""
from __future__ import annotations

import numpy as np

from nova.tensor.tensor import Tensor


def mlir(*tensors: Tensor, stage: str = "nova") -> str:
    """The step computing ``tensors`` as generic-form MLIR text (``stage`` as in
    ``nv.debug.dump_ir``: ``"trace"``, ``"nova"`` or ``"fused"``)."""
    from nova.debug import dump_ir
    return dump_ir(*tensors, stage=stage, generic=True)


def stablehlo(*tensors: Tensor, name: str = "main") -> str:
    """The step computing ``tensors`` as a StableHLO module: its function ``name``
    takes the step's arguments (``arguments(*tensors)``, in order) and returns the
    tensors' values in order. Raises ``StableHLOExportError`` naming an op StableHLO
    cannot express (collectives)."""
    from nova.compiler.irgen import build_module
    from nova.compiler.passes import optimize
    from nova.compiler.stablehlo import to_stablehlo
    from nova.runtime.engine import get_remat
    from nova.tensor.realize import pending_graph
    _check("stablehlo", tensors)
    # the nova stage with attention kept as its composite (StableHLO has no fused
    # attention op; XLA and IREE fuse the composite themselves)
    module = optimize(build_module(pending_graph(*tensors)), get_remat(), False)
    return to_stablehlo(module, name)


def arguments(*tensors: Tensor) -> list[np.ndarray]:
    """The values the exported step of ``tensors`` takes, in order, as host arrays
    (copies: the step still owns its buffers)."""
    from nova.runtime.cuda_runtime import to_host
    from nova.tensor.realize import pending_graph
    _check("arguments", tensors)
    graph = pending_graph(*tensors)
    out = []
    for node, buffer in zip(graph.arg_nodes, graph.arg_buffers):
        out.append(np.array(buffer) if isinstance(buffer, np.ndarray)
                   else to_host(buffer, node.dtype.np))
    return out


def _check(op: str, tensors: tuple) -> None:
    from nova.debug import _check_tensors
    _check_tensors(f"nv.export.{op}", tensors)


__all__ = ["arguments", "mlir", "stablehlo"]
