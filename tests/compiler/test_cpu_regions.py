"""The CPU's elementwise kernels split the innermost loop where a pad or a last-axis
concat changes source (``targets.cpu.llvm._regions``): each piece evaluates only the
operand that is there, instead of selecting among all of them at every element. The
pieces must give exactly what the select gives."""
import re

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from tests.compiler.llvm_ir import elementwise_llvm, kernel_llvm, loop_metadata, optimized


def _both(fn, *arrays):
    out = []
    for engine in ("cpu", "interp"):
        with nv.engine(engine):
            out.append(fn(*(nv.tensor(a) for a in arrays)).numpy())
    return out


def _heads_gradient(g):
    """The qkv gradient of a GPT layer: three (B, H, T, E) slices of one packed tensor,
    transposed back to (B, T, H E) and concatenated by pads (what a split's VJP records)."""
    B, H, n = g.shape
    T, E = 8, 4
    parts = [g[:, :, j * T * E:(j + 1) * T * E].reshape(B, H, T, E).transpose(1, 2)
             .reshape(B, T, H * E) for j in range(3)]
    return sum(F.pad(p, (j * H * E, (2 - j) * H * E))
               for j, p in enumerate(parts))


def test_a_sum_of_pads_is_split_into_one_loop_per_piece_and_matches():
    g = np.random.default_rng(0).standard_normal((2, 3, 3 * 8 * 4)).astype(np.float32)
    with nv.engine("cpu"):
        (text,) = elementwise_llvm(_heads_gradient(nv.tensor(g)))
    assert len(re.findall(r'^"?seg\.head[.0-9]*"?:', text, re.M)) == 3   # three loops
    cpu, interp = _both(_heads_gradient, g)
    assert np.array_equal(cpu, interp)


@pytest.mark.parametrize("case", ["concat", "pad_value", "overlap", "mid"])
def test_pieces_give_what_the_selects_give(case):
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal((5, 3, w)).astype(np.float32) for w in (4, 7, 2))
    fns = {
        "concat": lambda a, b, c: nv.cat([a * 2, b, c + 1], -1),
        "pad_value": lambda a, b, c: F.pad(a, (3, 2), value=-1.5) * 2,
        # two pads whose supports overlap: pieces where both, one and none are there
        "overlap": lambda a, b, c: F.pad(a, (0, 5)) + F.pad(
            b, (2, 0)),
        "mid": lambda a, b, c: F.pad(nv.cat([a, c], -1), (1, 1)).exp(),
    }
    cpu, interp = _both(fns[case], a, b, c)
    np.testing.assert_allclose(cpu, interp, rtol=1e-6, atol=0)
    with nv.engine("cpu"):
        texts = elementwise_llvm(fns[case](*(nv.tensor(x) for x in (a, b, c))))
    assert any("seg.head" in t for t in texts)


def _window_gradient(*ts):
    """A 3x3 convolution's input gradient before its slice: nine window gradients, each
    padded back by its kernel offset on both spatial dims, summed."""
    offsets = [(i // 3, i % 3) for i in range(9)]
    return sum(F.pad(t, (kw, 2 - kw, kh, 2 - kh)) for t, (kh, kw) in zip(ts, offsets))


def test_pads_of_outer_dims_too_are_split_and_read_with_vector_loads():
    """A pad that also pads an outer dim is cut along the row like a last-axis one: the
    outer dims' inside-or-not is fixed per row, so each piece reads its sources with
    contiguous vector loads and a row-invariant select. Before, such a sum gathered every
    element (``masked.gather``; a ResNet stage1 input gradient ran at ~5 GB/s)."""
    rng = np.random.default_rng(7)
    parts = [rng.standard_normal((2, 3, 6, 16)).astype(np.float32) for _ in range(9)]
    with nv.engine("cpu"):
        (text,) = elementwise_llvm(_window_gradient(*(nv.tensor(a) for a in parts)))
    # cuts at 1, 2, 16 and 17 of the 18 padded columns: five pieces
    assert len(re.findall(r'^"?seg\.head[.0-9]*"?:', text, re.M)) == 5
    assert "masked.gather" not in optimized(text)
    cpu, interp = _both(_window_gradient, *parts)
    assert np.array_equal(cpu, interp)
    want = np.zeros((2, 3, 8, 18), np.float32)
    for t, (kh, kw) in zip(parts, [(i // 3, i % 3) for i in range(9)]):
        want[:, :, kh:kh + 6, kw:kw + 16] += t
    np.testing.assert_allclose(cpu, want, rtol=1e-6, atol=1e-6)


def test_a_pad_read_through_a_transpose_is_not_split():
    """The root reads the pad at another index than its own: no piece boundary is
    known in the root's loop, so the kernel keeps the selects."""
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    fn = lambda t: F.pad(t, (1, 3)).transpose(0, 1) * 3
    with nv.engine("cpu"):
        texts = elementwise_llvm(fn(nv.tensor(x)))
    assert texts and not any("seg.head" in t for t in texts)
    cpu, interp = _both(fn, x)
    assert np.array_equal(cpu, interp)


@pytest.mark.parametrize("dim,shapes", [
    (0, [(3, 5, 4), (2, 5, 4), (700, 5, 4)]),      # the parallel dim: pieces cut [start, end)
    (1, [(6, 1, 9), (6, 3, 9), (6, 1, 9)]),
    (2, [(4, 3, 2, 5), (4, 3, 1, 5)]),
])
def test_a_concat_along_an_outer_dim_gets_one_loop_nest_per_piece(dim, shapes):
    """``_outer_concat``: the loop nest is cut at the concat's dim, one nest per piece
    (a stack of convolution windows reads one source per element, not a select among
    up to 49), and the pieces give exactly what the interpreter gives."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fn = lambda *ts: nv.cat(list(ts), dim) * 2.0 + 1.0  # noqa: E731
    with nv.engine("cpu"):
        (text,) = elementwise_llvm(fn(*(nv.tensor(a) for a in arrays)))
    assert len(re.findall(r'^"?seg\.head[.0-9]*"?:', text, re.M)) == len(shapes)
    cpu, interp = _both(fn, *arrays)
    assert np.array_equal(cpu, interp)
    np.testing.assert_array_equal(cpu, np.concatenate(arrays, dim) * 2.0 + 1.0)


def test_a_concat_of_many_pieces_keeps_its_outer_loops_rolled():
    """Every piece's segment loop and the outer loops of its nest carry
    ``llvm.loop.unroll.disable`` (the innermost still vectorizes): LLVM unrolled them
    fully, and a 5x5 convolution's window stack, 25 pieces of (3, 1, 4, 16, 16), took
    46 s to compile, 1.7 s since (7x7: over a minute, 2.4 s)."""
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((3, 1, 4, 16, 16)).astype(np.float32) for _ in range(5)]
    fn = lambda *ts: nv.cat(list(ts), 1) * 2.0  # noqa: E731
    with nv.engine("cpu"):
        (text,) = elementwise_llvm(fn(*(nv.tensor(a) for a in arrays)))
    segments = loop_metadata(text, "seg")
    assert len(segments) == 5 and all("llvm.loop.unroll.disable" in h for h in segments)
    for name in ("d0", "d1"):                   # the (4, 16) outer loops of each nest
        hints = loop_metadata(text, name)
        assert len(hints) == 5 and all("llvm.loop.unroll.disable" in h for h in hints)
    innermost = loop_metadata(text, "d2")       # (interleaved and vectorized as before)
    assert len(innermost) == 5 and all("llvm.loop.interleave.count" in h and
                                       "llvm.loop.unroll.disable" not in h for h in innermost)
    np.testing.assert_array_equal(_both(fn, *arrays)[0], np.concatenate(arrays, 1) * 2.0)


def test_a_concat_read_through_a_transpose_keeps_its_selects():
    x, y = (np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
            for _ in range(2))
    fn = lambda a, b: nv.cat([a, b], 0).transpose(0, 1) * 2  # noqa: E731
    with nv.engine("cpu"):
        texts = elementwise_llvm(fn(nv.tensor(x), nv.tensor(y)))
    assert texts and not any("seg.head" in t for t in texts)
    cpu, interp = _both(fn, x, y)
    assert np.array_equal(cpu, interp)


def test_elementwise_loops_are_vectorized_without_a_run_time_overlap_check():
    """An elementwise kernel's iterations are independent (it writes element i at
    iteration i, and reads an input it may share memory with -- written in place, or
    donated -- only there): its buffer accesses carry one access group that the loop
    declares parallel. Without that, LLVM's vectorizer guards the vector loop with a
    check that the output overlaps no input, and a kernel written in place (output ==
    input) always ran its scalar loop (2.7-5x slower, found by review)."""
    x = nv.tensor(np.ones((64, 256), np.float32))
    y = nv.tensor(np.ones((64, 256), np.float32))
    (text,) = elementwise_llvm((x * 3.0 + y).exp() * y)
    assert "distinct !{}" in text and "llvm.loop.parallel_accesses" in text
    accesses = [line for line in text.splitlines()
                if re.search(r"= load float|store float", line)]
    assert accesses and all("!llvm.access.group" in line for line in accesses)
    vectorized = optimized(text)
    assert "<16 x float>" in vectorized or "<8 x float>" in vectorized   # vectorized...
    # ...unguarded: no "output minus input < vector bytes" test before the vector loop
    assert "diff.check" not in vectorized and "vector.memcheck" not in vectorized


def test_rows_kernels_are_vectorized_without_overlap_checks_or_index_division():
    """A rows kernel (layer norm, softmax) declares its passes' accesses independent as
    an elementwise kernel does, and its store pass emits the output at the loops' own
    index (no offset divided back into a row and column): before, LLVM kept a
    udiv/urem by 768 per element of a layer norm's store pass and left that pass and
    softmax's scalar (a 4096 x 4096 softmax took ~120 ms, now ~25)."""
    x = nv.tensor(np.ones((16, 768), np.float32))
    g = nv.tensor(np.ones(768, np.float32))
    for out in (F.layer_norm(x, (768,), g, g), nv.softmax(x, -1)):
        (text,) = kernel_llvm(out, strategy="rows")
        assert "udiv" not in text and "urem" not in text
        assert "llvm.loop.parallel_accesses" in text
        vectorized = optimized(text)
        assert vectorized.count("x float>") > 10     # every pass, not just one
        assert "vector.memcheck" not in vectorized


def test_row_maxima_are_vectorized_and_propagate_nan_as_numpy():
    """The row maximum accumulates with ``maxnum`` (fast-math ``nnan nsz``: a vectorizable
    max) beside a "saw a NaN" flag that makes the result NaN: without the flags LLVM
    kept the loop scalar (W.amax(1) was 8x slower than W.sum(1))."""
    a = np.random.default_rng(0).standard_normal((9, 300)).astype(np.float32)
    a[1, 150], a[2, :], a[3, 299], a[4, 0] = np.nan, -np.inf, np.nan, np.nan
    a[5], a[6, 7], a[7] = np.inf, np.inf, -0.0
    x = nv.tensor(a)
    (text,) = kernel_llvm(x.amax(1), strategy="row")
    assert "x float>" in optimized(text)
    got = x.amax(1).numpy()
    np.testing.assert_array_equal(got, a.max(1))
    assert np.isnan(got[[1, 3, 4]]).all() and got[2] == -np.inf and got[6] == np.inf
