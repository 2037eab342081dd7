"""A tiled GEMM's write-back loops: what the emitter asks of LLVM, and what LLVM makes.

The write-back of a tile (the accumulators through the fused epilogue into C) is left
to LLVM's loop vectorizer for a full tile and kept scalar for an edge tile; neither is
unrolled (``Emitter.not_unrolled``): LLVM's unrolling of them cost a third of a GEMM's
compile time. A full tile's loops also declare their iterations independent
(``Emitter.independent_iterations``): C may be written over an input its epilogue reads
at the same element, and the vectorizer's run-time overlap check would then send every
tile down the scalar loop. These tests pin the metadata in the emitted IR, its effect
after the pipeline the compile worker runs (one vectorized loop instead of a fully
unrolled tile, no overlap check), and the values, full and edge tiles both.
"""
import re

import numpy as np
import pytest

import nova as nv
from tests.compiler.llvm_ir import kernel_llvm, loop_metadata, optimized

NOT_UNROLLED = ["llvm.loop.unroll.disable"]
INDEPENDENT = ["llvm.loop.parallel_accesses", "llvm.loop.unroll.disable"]
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
        assert sorted(map(tuple, hints)) == [tuple(INDEPENDENT), tuple(SCALAR)], (loop, hints)


def _gemm_plus(m, n, k, seed=0):
    """``A @ B + R``: an epilogue reading another buffer of C's shape."""
    rng = np.random.default_rng(seed)
    a, b, r = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    ta, tb, tr = nv.tensor(a), nv.tensor(b), nv.tensor(r)
    nv.realize(ta, tb, tr)
    return ta @ tb + tr


def test_full_tile_write_back_has_no_run_time_overlap_check():
    [text] = kernel_llvm(_gemm_plus(64, 64, 64), strategy="tiled")
    # every access of the full tile's write-back is in the loops' access group...
    group = re.search(r'!"llvm\.loop\.parallel_accesses", (![0-9]+)', text).group(1)
    tagged = re.findall(rf"(?:load|store) .*!llvm\.access\.group {group}\b", text)
    assert len(tagged) >= 3                  # the tile, R and C
    # ...so the vectorized loop runs without first checking that C misses R and the
    # tile; the same kernel without the group is checked (and, with C written over
    # R, would always take its scalar loop)
    plain = re.sub(r", !llvm\.access\.group ![0-9]+", "", text)
    plain = re.sub(r'(![0-9]+) = !\{!"llvm\.loop\.parallel_accesses", ![0-9]+\}',
                   r'\1 = !{!"llvm.loop.unroll.disable"}', plain)
    checks = re.compile(r"diff\.check|vector\.memcheck|conflict\.rdx")
    assert checks.search(optimized(plain))
    done = optimized(text)
    assert not checks.search(done) and re.search(r"store <\d+ x float>", done)


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


def _product(m, n, k, a_transposed, b_transposed, seed=0):
    """``A @ B`` with each operand stored as given or transposed (packed row by row, or
    through the in-register transposes), and the float64 product."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if a_transposed else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if b_transposed else (k, n)).astype(np.float32)
    ta, tb = nv.tensor(a), nv.tensor(b)
    nv.realize(ta, tb)
    a64 = (a.T if a_transposed else a).astype(np.float64)
    b64 = (b.T if b_transposed else b).astype(np.float64)
    return (ta.t() if a_transposed else ta) @ (tb.t() if b_transposed else tb), a64 @ b64


@pytest.mark.parametrize("a_transposed", [False, True], ids=["A", "At"])
@pytest.mark.parametrize("b_transposed", [False, True], ids=["B", "Bt"])
@pytest.mark.parametrize("m,n,k", [(37, 45, 77), (64, 64, 64), (19, 70, 300)])
def test_values_of_every_packing_path(m, n, k, a_transposed, b_transposed):
    """Each operand packed as a copy (unit stride along the micro-panel), through the
    transposes with the last ``k mod lanes`` values of k gathered by a loop, and edge
    panels (past M or N) gathered by a loop with zeros beyond the operand."""
    y, expected = _product(m, n, k, a_transposed, b_transposed, seed=m + k)
    np.testing.assert_allclose(y.numpy(), expected, rtol=2e-5, atol=2e-4)


def test_edge_panels_and_transpose_remainders_are_loops_not_unrolled_gathers():
    """The packing's slivers (the edge panel, the last few k of a transposing pack) are
    gathered by a scalar loop over the panel's width: unrolled, they were half of a
    tiled GEMM's IR and of its compile time."""
    y, _ = _product(37, 45, 77, True, True)
    [text] = kernel_llvm(y, strategy="tiled")
    hints = loop_metadata(text, "pu")
    assert hints and all(h == SCALAR for h in hints), hints
    assert len(text.splitlines()) < 2000
