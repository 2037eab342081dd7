"""Rewrites of the nova step function. Each pass consumes and produces valid nova IR
(re-verified after the pass with ``NOVA_VERIFY_PASSES=1``, as in the tests: ``checks``)."""
from nova.compiler.passes.attention import fuse_attention
from nova.compiler.passes.cleanup import simplify
from nova.compiler.passes.reduce_layout import reduce_in_layout
from nova.compiler.passes.remat import rematerialize
from nova.compiler.passes.row_chunks import chunk_rows
from nova.compiler.passes.slices import sink_slices
from nova.compiler.passes.transposes import transpose_products
from nova.compiler.passes.vector_products import vector_products

__all__ = ["chunk_rows", "fuse_attention", "optimize", "reduce_in_layout", "rematerialize",
           "simplify", "sink_slices", "transpose_products", "vector_products"]


def optimize(module, remat: str = "default", attention: bool = True):
    """The engines' pipeline before fusion: CSE/DCE, fused attention (for engines with
    attention kernels: ``attention``), row chunking of wide regions (``NOVA_ROW_CHUNK_MB``),
    transposed products computed in the layout they are read in, slices computed at
    their own size (a padded gradient's unpadded part), matrix-vector and
    outer products as reductions and elementwise products, reductions of transposed
    values over what the transpose reads, then rematerialization --
    after the rewrites, so no remat mode ever saves the ``L x S`` scores of a fused
    attention or a whole wide value of a chunked region."""
    module = simplify(module)
    if attention:
        module = fuse_attention(module)
    module = chunk_rows(module)
    module = transpose_products(module)
    module = sink_slices(module)
    module = vector_products(module)
    module = reduce_in_layout(module)
    return rematerialize(module, remat)
