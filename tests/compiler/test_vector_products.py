"""Vector products as reductions (``nova.compiler.passes.vector_products``): input IR
and the IR it becomes, the values unchanged (to rounding), and what stays a GEMM."""
import numpy as np
import pytest

import nova as nv
from nova.compiler.passes import vector_products
from tests.compiler.parsing import assert_rewrites, parse_module

VECTORS = """\
builtin.module {
  func.func @step(%x: tensor<1x6xf32>, %w: tensor<5x6xf32>, %v: tensor<6x1xf32>, %g: tensor<5x1xf32>) -> (tensor<1x5xf32>, tensor<5x1xf32>, tensor<5x6xf32>) {
    %wt = nova.transpose %w perm = [1, 0] : tensor<5x6xf32> -> tensor<6x5xf32>
    %y = nova.matmul %x, %wt : tensor<1x6xf32>, tensor<6x5xf32> -> tensor<1x5xf32>
    %wv = nova.matmul %w, %v : tensor<5x6xf32>, tensor<6x1xf32> -> tensor<5x1xf32>
    %gw = nova.matmul %g, %x : tensor<5x1xf32>, tensor<1x6xf32> -> tensor<5x6xf32>
    func.return %y, %wv, %gw : tensor<1x5xf32>, tensor<5x1xf32>, tensor<5x6xf32>
  }
}"""

# x @ W^T reads W along K in place; W @ v reads W's rows; g x^T (K = 1) is elementwise
VECTORS_AFTER = """\
builtin.module {
  func.func @step(%x: tensor<1x6xf32>, %w: tensor<5x6xf32>, %v: tensor<6x1xf32>, %g: tensor<5x1xf32>) -> (tensor<1x5xf32>, tensor<5x1xf32>, tensor<5x6xf32>) {
    %0 = nova.broadcast_in_dim %x dims = [0, 1] : tensor<1x6xf32> -> tensor<5x6xf32>
    %1 = nova.mul %w, %0 : tensor<5x6xf32>
    %2 = nova.reduce_sum %1 axes = [1] : tensor<5x6xf32> -> tensor<5xf32>
    %y = nova.reshape %2 : tensor<5xf32> -> tensor<1x5xf32>
    %3 = nova.reshape %v : tensor<6x1xf32> -> tensor<1x6xf32>
    %4 = nova.broadcast_in_dim %3 dims = [0, 1] : tensor<1x6xf32> -> tensor<5x6xf32>
    %5 = nova.mul %w, %4 : tensor<5x6xf32>
    %6 = nova.reduce_sum %5 axes = [1] : tensor<5x6xf32> -> tensor<5xf32>
    %wv = nova.reshape %6 : tensor<5xf32> -> tensor<5x1xf32>
    %7 = nova.broadcast_in_dim %g dims = [0, 1] : tensor<5x1xf32> -> tensor<5x6xf32>
    %8 = nova.broadcast_in_dim %x dims = [0, 1] : tensor<1x6xf32> -> tensor<5x6xf32>
    %gw = nova.mul %7, %8 : tensor<5x6xf32>
    func.return %y, %wv, %gw : tensor<1x5xf32>, tensor<5x1xf32>, tensor<5x6xf32>
  }
}"""

# two rows against a matrix read along K: a reduction over (N, M, K), transposed back;
# five rows stay a GEMM
FEW_ROWS = """\
builtin.module {
  func.func @step(%x: tensor<2x6xf32>, %w: tensor<5x6xf32>, %z: tensor<5x6xf32>) -> (tensor<2x5xf32>, tensor<5x5xf32>) {
    %wt = nova.transpose %w perm = [1, 0] : tensor<5x6xf32> -> tensor<6x5xf32>
    %y = nova.matmul %x, %wt : tensor<2x6xf32>, tensor<6x5xf32> -> tensor<2x5xf32>
    %g = nova.matmul %z, %wt : tensor<5x6xf32>, tensor<6x5xf32> -> tensor<5x5xf32>
    func.return %y, %g : tensor<2x5xf32>, tensor<5x5xf32>
  }
}"""

FEW_ROWS_AFTER = """\
builtin.module {
  func.func @step(%x: tensor<2x6xf32>, %w: tensor<5x6xf32>, %z: tensor<5x6xf32>) -> (tensor<2x5xf32>, tensor<5x5xf32>) {
    %wt = nova.transpose %w perm = [1, 0] : tensor<5x6xf32> -> tensor<6x5xf32>
    %0 = nova.broadcast_in_dim %w dims = [0, 2] : tensor<5x6xf32> -> tensor<5x2x6xf32>
    %1 = nova.broadcast_in_dim %x dims = [1, 2] : tensor<2x6xf32> -> tensor<5x2x6xf32>
    %2 = nova.mul %0, %1 : tensor<5x2x6xf32>
    %3 = nova.reduce_sum %2 axes = [2] : tensor<5x2x6xf32> -> tensor<5x2xf32>
    %y = nova.transpose %3 perm = [1, 0] : tensor<5x2xf32> -> tensor<2x5xf32>
    %g = nova.matmul %z, %wt : tensor<5x6xf32>, tensor<6x5xf32> -> tensor<5x5xf32>
    func.return %y, %g : tensor<2x5xf32>, tensor<5x5xf32>
  }
}"""

# kept: a row vector times a row-major matrix (a column reduction would walk K with a
# stride), a matrix read transposed times a column, a float16 product, a real GEMM
KEPT = """\
builtin.module {
  func.func @step(%x: tensor<1x6xf32>, %b: tensor<6x5xf32>, %w: tensor<6x5xf32>, %v: tensor<6x1xf32>, %h: tensor<1x6xf16>, %hb: tensor<6x5xf16>, %a: tensor<3x6xf32>) -> (tensor<1x5xf32>, tensor<5x1xf32>, tensor<1x5xf16>, tensor<3x5xf32>) {
    %y = nova.matmul %x, %b : tensor<1x6xf32>, tensor<6x5xf32> -> tensor<1x5xf32>
    %wt = nova.transpose %w perm = [1, 0] : tensor<6x5xf32> -> tensor<5x6xf32>
    %wv = nova.matmul %wt, %v : tensor<5x6xf32>, tensor<6x1xf32> -> tensor<5x1xf32>
    %hy = nova.matmul %h, %hb : tensor<1x6xf16>, tensor<6x5xf16> -> tensor<1x5xf16>
    %ab = nova.matmul %a, %b : tensor<3x6xf32>, tensor<6x5xf32> -> tensor<3x5xf32>
    func.return %y, %wv, %hy, %ab : tensor<1x5xf32>, tensor<5x1xf32>, tensor<1x5xf16>, tensor<3x5xf32>
  }
}"""


def test_matrix_vector_and_outer_products_become_reductions_and_products():
    assert_rewrites(vector_products, VECTORS, VECTORS_AFTER)


def test_a_few_rows_against_a_matrix_read_along_k_become_a_reduction():
    assert_rewrites(vector_products, FEW_ROWS, FEW_ROWS_AFTER)


def test_products_read_against_their_layout_half_floats_and_gemms_stay():
    module = parse_module(KEPT)
    assert str(vector_products(module)) == KEPT


@pytest.mark.parametrize("batch", [(), (3,)])
def test_one_row_linear_dot_and_mv_with_gradients_match_float64(batch):
    """End to end on the cpu engine: the products the pass rewrites (a one-row Linear,
    its weight gradient, dot, mv, a batched row-times-transposed product)."""
    rs = np.random.RandomState(1)
    xs = rs.randn(*batch, 3 if batch else 1, 70).astype(np.float32)   # 3: a few rows
    ws = rs.randn(*batch, 33, 70).astype(np.float32)
    u, v = rs.randn(300).astype(np.float32), rs.randn(300).astype(np.float32)
    m = rs.randn(40, 300).astype(np.float32)
    x, w = nv.tensor(xs, requires_grad=True), nv.tensor(ws, requires_grad=True)
    y = x @ w.transpose(-1, -2)
    (y * y).sum().backward()
    outs = [y, x.grad, w.grad, nv.dot(nv.tensor(u), nv.tensor(v)), nv.mv(nv.tensor(m), nv.tensor(v))]
    nv.realize(*outs)
    x64, w64 = xs.astype(np.float64), ws.astype(np.float64)
    y64 = x64 @ np.swapaxes(w64, -1, -2)
    want = [y64, 2 * y64 @ w64, 2 * np.swapaxes(y64, -1, -2) @ x64,
            u.astype(np.float64) @ v, m.astype(np.float64) @ v]
    for got, ref in zip(outs, want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=2e-5, atol=2e-4)
