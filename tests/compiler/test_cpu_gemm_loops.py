"""A tiled GEMM's code: the kernel's own functions around the shared driver, and the
loops of each -- what the emitter asks of LLVM, and what LLVM makes.

A tiled kernel is an entry that fills the driver's parameter block and calls it, plus
internal callbacks: the fused epilogue and the packing of a computed operand
(``llvm_gemm.TiledKernel``); the blocked product itself is ``GemmDriver``, one function
per register tile for the whole process. The write-back of a tile through the epilogue
is left to LLVM's loop vectorizer for a full tile and kept scalar for an edge tile;
neither is unrolled (``Frame.not_unrolled``): LLVM's unrolling of them cost a third of a
GEMM's compile time. A full tile's loops also declare their iterations independent
(``Frame.independent_iterations``): C may be written over an input its epilogue reads
at the same element, and the vectorizer's run-time overlap check would then send every
tile down the scalar loop. These tests pin the metadata in the emitted IR, its effect
after the pipeline the compile worker runs (one vectorized loop instead of a fully
unrolled tile, no overlap check), and the values, full and edge tiles, every packing
path and computed operands.
"""
import re

import numpy as np
import pytest

import nova as nv
from nova.compiler.targets.cpu.configurator import gemm_tile
from nova.compiler.targets.cpu.device import detect_cpu
from nova.compiler.targets.cpu.llvm_gemm import GEMM_PARAMS, driver_module
from nova.runtime.kernel_cache import KERNELS
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
    # tile; the same kernel without the group is either checked (and, with C written
    # over R, would always take its scalar loop) or not vectorized at all
    plain = re.sub(r", !llvm\.access\.group ![0-9]+", "", text)
    plain = re.sub(r'(![0-9]+) = !\{!"llvm\.loop\.parallel_accesses", ![0-9]+\}',
                   r'\1 = !{!"llvm.loop.unroll.disable"}', plain)
    checks = re.compile(r"diff\.check|vector\.memcheck|conflict\.rdx")
    unsafe = optimized(plain)
    assert checks.search(unsafe) or not re.search(r"store <\d+ x float>", unsafe)
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


def test_values_of_a_shorter_register_tile():
    """Eight (64 x 1024) @ (1024 x 1000) products, 1.05 GFLOP: on an AVX-512 host a
    13-row tile (``configurator.gemm_rows``: 65 rows computed, not 70), its own driver,
    the last row panel 12 rows and the last column panel 8 columns."""
    rng = np.random.default_rng(13)
    a = rng.standard_normal((8, 64, 1024)).astype(np.float32)
    b = rng.standard_normal((8, 1024, 1000)).astype(np.float32)
    ta, tb = nv.tensor(a), nv.tensor(b)
    nv.realize(ta, tb)
    y = ta @ tb
    [text] = kernel_llvm(y, strategy="tiled")
    mr = int(re.search(r'call i32 @"nova_sgemm_(\d+)x\d+"', text).group(1))
    spec = detect_cpu()
    assert mr == gemm_tile(spec, k=1024, m=64, n=1000, batches=8).mr
    if spec.vector_registers == 32:                 # (AVX2's 6-row tile pads 64 to 66)
        assert mr == 13
    np.testing.assert_allclose(y.numpy(), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=2e-5, atol=5e-4)


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


def _driver_text(text: str) -> str:
    """The LLVM IR of the shared driver a kernel's IR ``text`` calls."""
    mr, nr = map(int, re.search(r'call i32 @"nova_sgemm_(\d+)x(\d+)"', text).groups())
    return str(driver_module(mr, nr, KERNELS.jit.triple, KERNELS.jit.data_layout))


def test_a_line_that_is_not_whole_vectors_is_copied_masked_with_512_bit_vectors():
    """A transposed A's packed lines (MR = 14 floats, copied per k) are one masked load
    and store with 16-lane vectors, not a <14 x float> that LLVM splits into 8 + 4 + 2
    lanes; with 8 lanes (AVX2, whose masked stores are slow on AMD) the line stays a
    plain vector. (A line gathered element by element, from a view strided both ways,
    is still stored whole: its 14 scalar loads cost more than the split store.)"""
    jit = KERNELS.jit
    wide = str(driver_module(14, 32, jit.triple, jit.data_layout))
    assert "call void @\"llvm.masked.store.v16f32.p0v16f32\"" in wide
    assert "load <14 x float>" not in wide and wide.count("store <14 x float>") == 1
    narrow = str(driver_module(6, 16, jit.triple, jit.data_layout))
    assert "llvm.masked" not in narrow and "load <6 x float>" in narrow


def test_edge_panels_and_transpose_remainders_are_loops_not_unrolled_gathers():
    """The packing's slivers (the edge panel, the last few k of a transposing pack) are
    gathered by a scalar loop over the panel's width: unrolled, they were half of a
    tiled GEMM's IR and of its compile time."""
    y, _ = _product(37, 45, 77, True, True)
    [text] = kernel_llvm(y, strategy="tiled")
    hints = loop_metadata(_driver_text(text), "pu")
    assert hints and all(h == SCALAR for h in hints), hints


def test_a_tiled_kernel_is_its_epilogue_around_a_call_of_the_shared_driver():
    """The kernel's IR holds no blocked loops: one call of the driver with a filled
    parameter block, and the epilogue as an internal function (the object defines the
    kernel's symbol only). Products of other shapes and layouts call the same driver
    (where their rows pad no better with a shorter tile: 40 and 27 rows, see
    ``configurator.gemm_rows``)."""
    y, _ = _gemm_relu(40, 45, 64)
    [text] = kernel_llvm(y, strategy="tiled")
    calls = re.findall(r'call i32 @"(nova_sgemm_\d+x\d+)"\(i64\* %"?[\w.]+"?\)', text)
    assert len(calls) == 1
    assert re.search(rf'%"?[\w.]+"? = alloca i64, i64 {len(GEMM_PARAMS)}', text)
    assert re.search(r'define internal i32 @"nova_k_\w+\.epilogue"', text)
    assert len(re.findall(r"^define ", text, re.M)) == 2
    for loop in ("jc", "pc", "ic", "jr", "ir", "k"):                 # the BLIS loops...
        assert f'"{loop}.head"' not in text and f'"{loop}.head"' in _driver_text(text)
    assert len(text.splitlines()) < 400
    other, _ = _product(27, 70, 300, True, False)
    [other_text] = kernel_llvm(other, strategy="tiled")
    assert re.findall(r'call i32 @"(nova_sgemm_\d+x\d+)"', other_text) == calls
    # C is the product itself: no epilogue, the entry alone
    [direct] = kernel_llvm(_product(40, 40, 40, False, False)[0], strategy="tiled")
    assert ".epilogue" not in direct and len(re.findall(r"^define ", direct, re.M)) == 1


def _computed(batch, m, n, k, seed=0):
    """``A @ B`` whose A is ``X^T`` reshaped across its strides: not a view, so the
    kernel packs it through a callback (``TiledKernel.pack_function``)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*batch, 3, m, k // 3)).astype(np.float32)
    w = rng.standard_normal((*batch, k, n)).astype(np.float32)
    tx, tw = nv.tensor(x), nv.tensor(w)
    nv.realize(tx, tw)
    a = tx.transpose(-3, -2).reshape(*batch, m, k)
    a64 = np.swapaxes(x, -3, -2).reshape(*batch, m, k).astype(np.float64)
    return a, tw, a64, w.astype(np.float64)


@pytest.mark.parametrize("batch,m,n,k", [((), 37, 45, 60), ((2,), 20, 33, 129),
                                         ((2, 3), 3, 40, 18), ((), 64, 64, 66)])
def test_values_of_computed_operands_packed_by_the_kernel(batch, m, n, k):
    """A computed operand, as A and (transposed) as B, edge panels included: the
    kernel's pack callback lays the micro-panels out as the driver would."""
    a, w, a64, w64 = _computed(batch, m, n, k, seed=m)
    y = (a @ w).relu()
    [text] = kernel_llvm(y, strategy="tiled")
    assert ".pack_a" in text and ".pack_b" not in text
    np.testing.assert_allclose(y.numpy(), np.maximum(a64 @ w64, 0), rtol=2e-5, atol=2e-4)
    a, w, a64, w64 = _computed(batch, m, n, k, seed=m)    # (the first step realized a)
    yt = w.transpose(-1, -2) @ a.transpose(-1, -2)
    [text] = kernel_llvm(yt, strategy="tiled")
    assert ".pack_b" in text and ".pack_a" not in text
    np.testing.assert_allclose(yt.numpy(), np.swapaxes(w64, -1, -2) @ np.swapaxes(a64, -1, -2),
                               rtol=2e-5, atol=2e-4)
