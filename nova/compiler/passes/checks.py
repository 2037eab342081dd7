"""When the compiler re-verifies its IR.

The built step is verified once (``irgen.build_module``): that checks the recorded
shapes and dtypes against the dialect's verifiers. Each pass is written to produce
valid IR, and re-verifying the whole module after every pass cost ~0.3 s per pass on
a GPT step (a quarter of a warm-cache first step), so after a pass the module is
verified only with ``NOVA_VERIFY_PASSES=1`` -- which the test suite sets, so a pass
that breaks the IR fails there, at the pass.
"""
from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from nova import config


def verified_after_pass(module: ModuleOp) -> ModuleOp:
    """``module``, verified if ``NOVA_VERIFY_PASSES`` asks for it."""
    if config.VERIFY_PASSES.get():
        module.verify()
    return module
