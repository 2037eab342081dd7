"""When the compiler re-verifies its IR.

The built step is verified once (``irgen.build_module``): that checks the recorded
shapes and dtypes against the dialect's verifiers. Each pass is written to produce
valid IR, and re-verifying the whole module after every pass cost ~0.3 s per pass on
a GPT step (a quarter of a warm-cache first step), so after a pass the module is
verified only with ``NOVA_VERIFY_PASSES=1`` -- which the test suite sets, so a pass
that breaks the IR fails there, at the pass.
"""
from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.transforms.dead_code_elimination import dce

from nova import config


def verified_after_pass(module: ModuleOp) -> ModuleOp:
    """``module``, verified if ``NOVA_VERIFY_PASSES`` asks for it."""
    if config.VERIFY_PASSES.get():
        module.verify()
    return module


def replace_each(module: ModuleOp, kind: type,
                 replacement: Callable[[Operation], SSAValue | None]) -> ModuleOp:
    """Each op of type ``kind`` in the step function for which ``replacement`` builds a
    value (inserted before the op; None leaves the op) replaced by it and erased; then
    dead code removed and the module verified as after any pass. Unchanged, the
    module comes back as it was."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    changed = False
    for op in [o for o in fn.body.block.ops if isinstance(o, kind)]:
        value = replacement(op)
        if value is None:
            continue
        op.results[0].replace_all_uses_with(value)
        op.detach()
        op.erase()
        changed = True
    if not changed:
        return module
    dce(module)
    return verified_after_pass(module)
