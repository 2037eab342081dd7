"""Rewrites of the nova step function. Each pass consumes and produces valid nova IR
(re-verified after the pass with ``NOVA_VERIFY_PASSES=1``, as in the tests: ``checks``)."""
from nova.compiler.passes.cleanup import simplify
from nova.compiler.passes.remat import rematerialize

__all__ = ["optimize", "rematerialize", "simplify"]


def optimize(module, remat: str = "default"):
    """The engines' pipeline before fusion: CSE/DCE, then rematerialization."""
    return rematerialize(simplify(module), remat)
