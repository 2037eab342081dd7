"""The step function as upstream MLIR reads it: the generic op form.

Nova's ops print in their own assembly formats (``nova.mul %0, %1 : ...``), which only
a parser that knows the dialect can read. The generic form (``"nova.mul"(%0, %1) :
(...) -> ...``, properties as ``<{...}>``) is MLIR's own syntax for any op, so upstream
MLIR parses and verifies it with unregistered dialects allowed (``verify_upstream``),
and xDSL parses it back into the same module (``parse``). Floats print as exact
literals (hex where decimal would round), so nothing is lost either way.
"""
from __future__ import annotations

import io

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from nova.compiler import dialect as nd

INSTALL = 'pip install -e ".[mlir]"'


def generic_text(module: ModuleOp) -> str:
    """``module`` in MLIR's generic op form."""
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue() + "\n"


def _context() -> Context:
    ctx = Context()
    for dialect in (builtin.Builtin, func.Func, nd.Nova):
        ctx.load_dialect(dialect)
    return ctx


def parse(text: str) -> ModuleOp:
    """A module printed by ``generic_text`` (or by upstream MLIR in generic form), back
    as nova IR, verified."""
    module = Parser(_context(), text).parse_module()
    module.verify()
    return module


def verify_upstream(text: str) -> str:
    """Parse and verify ``text`` with upstream MLIR (the ``mlir`` extra's Python
    bindings), the nova dialect unregistered; returns upstream's generic printing of
    it. Raises ``ImportError`` naming the install line without the bindings, and
    ``ValueError`` with MLIR's diagnostics for IR it rejects."""
    try:
        import mlir.ir as upstream
    except ImportError as e:
        raise ImportError(f"upstream MLIR's Python bindings are not installed ({e}); "
                          f"{INSTALL}") from None
    ctx = upstream.Context()
    ctx.allow_unregistered_dialects = True
    try:
        parsed = upstream.Module.parse(text, ctx)
    except upstream.MLIRError as e:
        raise ValueError(f"upstream MLIR rejects the step: {e}") from None
    if not parsed.operation.verify():
        raise ValueError("upstream MLIR: the step does not verify")
    return parsed.operation.get_asm(print_generic_op_form=True)
