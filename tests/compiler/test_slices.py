"""Slices computed at their own size (``nova.compiler.passes.slices``): input IR, the IR it
becomes, and the values are unchanged (the reference interpreter, before and after)."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.compiler.passes import sink_slices
from tests.compiler.parsing import assert_rewrites

COL2IM = """\
builtin.module {
  func.func @step(%a: tensor<2x3x3xf32>, %b: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
    %z = nova.constant 0.000000e+00 : f32 : tensor<f32>
    %pa = nova.pad %a, %z low = [0, 0, 0] high = [0, 2, 2] interior = [0, 0, 0] : tensor<2x3x3xf32>, tensor<f32> -> tensor<2x5x5xf32>
    %pb = nova.pad %b, %z low = [0, 2, 1] high = [0, 0, 1] interior = [0, 0, 0] : tensor<2x3x3xf32>, tensor<f32> -> tensor<2x5x5xf32>
    %s = nova.add %pa, %pb : tensor<2x5x5xf32>
    %d = nova.slice %s start = [0, 1, 1] limit = [2, 4, 4] stride = [1, 1, 1] : tensor<2x5x5xf32> -> tensor<2x3x3xf32>
    func.return %d : tensor<2x3x3xf32>
  }
}"""

COL2IM_AFTER = """\
builtin.module {
  func.func @step(%a: tensor<2x3x3xf32>, %b: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
    %z = nova.constant 0.000000e+00 : f32 : tensor<f32>
    %0 = nova.slice %a start = [0, 1, 1] limit = [2, 3, 3] stride = [1, 1, 1] : tensor<2x3x3xf32> -> tensor<2x2x2xf32>
    %1 = nova.pad %0, %z low = [0, 0, 0] high = [0, 1, 1] interior = [0, 0, 0] : tensor<2x2x2xf32>, tensor<f32> -> tensor<2x3x3xf32>
    %2 = nova.slice %b start = [0, 0, 0] limit = [2, 2, 3] stride = [1, 1, 1] : tensor<2x3x3xf32> -> tensor<2x2x3xf32>
    %3 = nova.pad %2, %z low = [0, 1, 0] high = [0, 0, 0] interior = [0, 0, 0] : tensor<2x2x3xf32>, tensor<f32> -> tensor<2x3x3xf32>
    %d = nova.add %1, %3 : tensor<2x3x3xf32>
    func.return %d : tensor<2x3x3xf32>
  }
}"""

STRIDED = """\
builtin.module {
  func.func @step(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<2x2xf32> {
    %m = nova.mul %a, %b : tensor<4x8xf32>
    %e = nova.exp %m : tensor<4x8xf32>
    %s1 = nova.slice %e start = [0, 1] limit = [4, 8] stride = [2, 1] : tensor<4x8xf32> -> tensor<2x7xf32>
    %s2 = nova.slice %s1 start = [0, 2] limit = [2, 7] stride = [1, 3] : tensor<2x7xf32> -> tensor<2x2xf32>
    func.return %s2 : tensor<2x2xf32>
  }
}"""

STRIDED_AFTER = """\
builtin.module {
  func.func @step(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<2x2xf32> {
    %0 = nova.slice %a start = [0, 3] limit = [3, 7] stride = [2, 3] : tensor<4x8xf32> -> tensor<2x2xf32>
    %1 = nova.slice %b start = [0, 3] limit = [3, 7] stride = [2, 3] : tensor<4x8xf32> -> tensor<2x2xf32>
    %2 = nova.mul %0, %1 : tensor<2x2xf32>
    %s2 = nova.exp %2 : tensor<2x2xf32>
    func.return %s2 : tensor<2x2xf32>
  }
}"""

ALL_PADDING = """\
builtin.module {
  func.func @step(%a: tensor<2x2xf32>) -> tensor<2x3xf32> {
    %v = nova.constant -1.500000e+00 : f32 : tensor<f32>
    %p = nova.pad %a, %v low = [0, 0] high = [0, 4] interior = [0, 0] : tensor<2x2xf32>, tensor<f32> -> tensor<2x6xf32>
    %d = nova.slice %p start = [0, 3] limit = [2, 6] stride = [1, 1] : tensor<2x6xf32> -> tensor<2x3xf32>
    func.return %d : tensor<2x3xf32>
  }
}"""

ALL_PADDING_AFTER = """\
builtin.module {
  func.func @step(%a: tensor<2x2xf32>) -> tensor<2x3xf32> {
    %v = nova.constant -1.500000e+00 : f32 : tensor<f32>
    %d = nova.broadcast_in_dim %v dims = [] : tensor<f32> -> tensor<2x3xf32>
    func.return %d : tensor<2x3xf32>
  }
}"""

SHARED = """\
builtin.module {
  func.func @step(%a: tensor<4x6xf32>) -> (tensor<2x3xf32>, tensor<4x6xf32>) {
    %e = nova.exp %a : tensor<4x6xf32>
    %d = nova.slice %e start = [1, 0] limit = [3, 6] stride = [1, 2] : tensor<4x6xf32> -> tensor<2x3xf32>
    func.return %d, %e : tensor<2x3xf32>, tensor<4x6xf32>
  }
}"""

STRIDED_PAD = """\
builtin.module {
  func.func @step(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %v = nova.constant 0.000000e+00 : f32 : tensor<f32>
    %p = nova.pad %a, %v low = [0, 1] high = [0, 1] interior = [0, 0] : tensor<2x2xf32>, tensor<f32> -> tensor<2x4xf32>
    %d = nova.slice %p start = [0, 0] limit = [2, 4] stride = [1, 2] : tensor<2x4xf32> -> tensor<2x2xf32>
    func.return %d : tensor<2x2xf32>
  }
}"""

INTERIOR = """\
builtin.module {
  func.func @step(%a: tensor<2x3xf32>, %b: tensor<2x7xf32>) -> tensor<2x4xf32> {
    %z = nova.constant 0.000000e+00 : f32 : tensor<f32>
    %p = nova.pad %a, %z low = [0, 1] high = [0, 1] interior = [0, 1] : tensor<2x3xf32>, tensor<f32> -> tensor<2x7xf32>
    %s = nova.sub %p, %b : tensor<2x7xf32>
    %d = nova.slice %s start = [0, 2] limit = [2, 6] stride = [1, 1] : tensor<2x7xf32> -> tensor<2x4xf32>
    func.return %d : tensor<2x4xf32>
  }
}"""

INTERIOR_AFTER = """\
builtin.module {
  func.func @step(%a: tensor<2x3xf32>, %b: tensor<2x7xf32>) -> tensor<2x4xf32> {
    %z = nova.constant 0.000000e+00 : f32 : tensor<f32>
    %0 = nova.slice %a start = [0, 1] limit = [2, 3] stride = [1, 1] : tensor<2x3xf32> -> tensor<2x2xf32>
    %1 = nova.pad %0, %z low = [0, 1] high = [0, 0] interior = [0, 1] : tensor<2x2xf32>, tensor<f32> -> tensor<2x4xf32>
    %2 = nova.slice %b start = [0, 2] limit = [2, 6] stride = [1, 1] : tensor<2x7xf32> -> tensor<2x4xf32>
    %d = nova.sub %1, %2 : tensor<2x4xf32>
    func.return %d : tensor<2x4xf32>
  }
}"""

KEPT_WHOLE = """\
builtin.module {
  func.func @step(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2x2xf32>, tensor<2x6xf32>) {
    %c = nova.concat %a, %b dim = 1 : i64 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
    %e = nova.exp %c : tensor<2x6xf32>
    %n = nova.neg %c : tensor<2x6xf32>
    %m = nova.mul %e, %c : tensor<2x6xf32>
    %d = nova.slice %m start = [0, 2] limit = [2, 4] stride = [1, 1] : tensor<2x6xf32> -> tensor<2x2xf32>
    func.return %d, %n : tensor<2x2xf32>, tensor<2x6xf32>
  }
}"""


def test_a_slice_of_a_sum_of_pads_becomes_a_sum_of_smaller_pads():
    """A padded input's gradient in miniature: each pad keeps only what of it lies in
    the window, and the sum is computed at the window's size."""
    assert_rewrites(sink_slices, COL2IM, COL2IM_AFTER)


def test_strided_slices_compose_and_reach_the_operands():
    assert_rewrites(sink_slices, STRIDED, STRIDED_AFTER)


def test_a_pad_with_interior_padding_keeps_the_source_elements_in_the_window():
    """Source element ``i`` of an interior-padded pad (a strided slice's VJP) sits at
    ``low + 2 i``: the window [2, 6) holds elements 1 and 2, one padding cell before."""
    assert_rewrites(sink_slices, INTERIOR, INTERIOR_AFTER)


def test_a_window_inside_the_padding_is_the_padding_value():
    assert_rewrites(sink_slices, ALL_PADDING, ALL_PADDING_AFTER)


@pytest.mark.parametrize("text", [SHARED, STRIDED_PAD, KEPT_WHOLE],
                         ids=["read-elsewhere", "strided-pad", "operand-kept-whole"])
def test_what_would_be_computed_twice_or_stored_anew_is_left(text):
    """A value read by more than the slice stays whole (rebuilding it for the slice
    would compute it twice); a strided window of a pad stays a slice of the pad; and a
    product whose operand (a concat read elsewhere too) would have to be read through
    a slice keeps its size: fusion would store that operand for the sliced read."""
    assert_rewrites(sink_slices, text, text)


def test_a_convolution_input_gradient_is_summed_at_the_input_size():
    """The whole step: no kernel of the backward computes the padded-size sum (before,
    10 x 10 sum was stored and copied into its 8 x 8 slice by a kernel of its own), and
    the gradient matches the direct sum over kernel offsets."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    xs = nv.tensor(x, requires_grad=True)
    y = F.conv2d(xs, nv.tensor(w), padding=1)
    (dx,) = nv.autograd.grad(y, [xs], [nv.tensor(g)])
    fused = nv.debug.dump_ir(dx, stage="fused")
    kernels = [line for line in fused.splitlines() if line.startswith("// nova_k_")]
    assert kernels and not any("10, 10]" in k for k in kernels)
    want = np.zeros((2, 3, 10, 10))
    for kh in range(3):
        for kw in range(3):
            want[:, :, kh:kh + 8, kw:kw + 8] += np.einsum("nohw,oc->nchw", g, w[:, :, kh, kw])
    np.testing.assert_allclose(dx.numpy(), want[:, :, 1:9, 1:9], rtol=1e-4, atol=1e-4)
