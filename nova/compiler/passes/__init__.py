"""Rewrites of the nova step function. Each pass consumes and produces valid nova IR
(re-verified after the pass with ``NOVA_VERIFY_PASSES=1``, as in the tests: ``checks``)."""
from nova.compiler.passes.attention import fuse_attention
from nova.compiler.passes.cleanup import simplify
from nova.compiler.passes.remat import rematerialize

__all__ = ["fuse_attention", "optimize", "rematerialize", "simplify"]


def optimize(module, remat: str = "default", attention: bool = True):
    """The engines' pipeline before fusion: CSE/DCE, fused attention (for engines with
    attention kernels: ``attention``), then rematerialization -- after the attention
    rewrite, so no remat mode ever saves the ``L x S`` scores of a fused attention."""
    module = simplify(module)
    if attention:
        module = fuse_attention(module)
    return rematerialize(module, remat)
