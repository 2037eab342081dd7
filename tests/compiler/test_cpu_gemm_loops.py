"""A tiled GEMM's write-back loops: what the emitter asks of LLVM, and what LLVM makes.

The write-back of a tile (the accumulators through the fused epilogue into C) is left
to LLVM's loop vectorizer for a full tile and kept scalar for an edge tile; neither is
unrolled (``Emitter.not_unrolled``): LLVM's unrolling of them cost a third of a GEMM's
compile time. These tests pin the metadata in the emitted IR, its effect after the
pipeline the compile worker runs (one vectorized loop instead of a fully unrolled tile),
and the values, full and edge tiles both.
"""
import re

import numpy as np
import pytest

import nova as nv
from tests.compiler.llvm_ir import kernel_llvm, loop_metadata, optimized

NOT_UNROLLED = ["llvm.loop.unroll.disable"]
SCALAR = ["llvm.loop.unroll.disable", "llvm.loop.vectorize.enable=0"]


def _gemm_relu(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    ta, tw, tb = nv.tensor(a), nv.tensor(w), nv.tensor(bias)
    nv.realize(ta, tw, tb)
    expected = np.maximum(a.astype(np.float64) @ w.T.astype(np.float64) + bias, 0)
    return (ta @ tw.t() + tb).relu(), expected


def test_write_back_loops_are_not_unrolled_and_edge_tiles_stay_scalar():
    y, _ = _gemm_relu(37, 45, 64)          # 37 x 45: full tiles and edge tiles
    [text] = kernel_llvm(y, strategy="tiled")
    for loop in ("er", "ej"):
        hints = loop_metadata(text, loop)
        assert sorted(map(tuple, hints)) == [tuple(NOT_UNROLLED), tuple(SCALAR)], (loop, hints)


def test_full_tile_write_back_stays_a_vector_loop_after_the_pipeline():
    y, _ = _gemm_relu(64, 64, 64)
    [text] = kernel_llvm(y, strategy="tiled")
    # the same kernel without the write-back loops' metadata, as emitted before
    plain = re.sub(r'(br label %"e[jr]\.head(?:\.[0-9]+)?"), !llvm\.loop ![0-9]+', r"\1", text)
    assert plain != text

    def compares(ir_text):   # the epilogue's relu, in vectors and in scalars
        return (len(re.findall(r"fcmp \w+ <\d+ x float>", ir_text)),
                len(re.findall(r"fcmp \w+ float ", ir_text)))
    vec, scalar = compares(optimized(text))
    vec_plain, scalar_plain = compares(optimized(plain))
    assert vec >= 1                          # still vectorized along the row
    # without the metadata LLVM unrolls the tile (56 vector, 88 scalar compares on an
    # AVX-512 host): with it, one vector loop and the edge tile's scalar loop
    assert vec + scalar < (vec_plain + scalar_plain) / 4, (vec, scalar, vec_plain, scalar_plain)


@pytest.mark.parametrize("m,n,k", [(37, 45, 64), (64, 64, 64), (50, 33, 700)])
def test_values_of_full_and_edge_tiles(m, n, k):
    y, expected = _gemm_relu(m, n, k, seed=m)
    np.testing.assert_allclose(y.numpy(), expected, rtol=2e-5, atol=2e-4)
