"""Reductions of transposed values (``nova.compiler.passes.reduce_layout``): input IR and
the IR it becomes, the values unchanged (to rounding), and what is left alone."""
import numpy as np

import nova as nv
from nova.compiler.passes import reduce_in_layout
from tests.compiler.parsing import assert_rewrites, parse_module

TRANSPOSED = """\
builtin.module {
  func.func @step(%w: tensor<4x6xf32>, %x: tensor<6x1xf32>, %a: tensor<2x3x5xf32>) -> (tensor<4xf32>, tensor<6xf32>, tensor<5x2xf32>) {
    %wt = nova.transpose %w perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
    %xb = nova.broadcast_in_dim %x dims = [0, 1] : tensor<6x1xf32> -> tensor<6x4xf32>
    %p = nova.mul %wt, %xb : tensor<6x4xf32>
    %s = nova.reduce_sum %p axes = [0] : tensor<6x4xf32> -> tensor<4xf32>
    %wt2 = nova.transpose %w perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
    %m = nova.reduce_max %wt2 axes = [1] : tensor<6x4xf32> -> tensor<6xf32>
    %at = nova.transpose %a perm = [2, 1, 0] : tensor<2x3x5xf32> -> tensor<5x3x2xf32>
    %r = nova.reduce_sum %at axes = [1] : tensor<5x3x2xf32> -> tensor<5x2xf32>
    func.return %s, %m, %r : tensor<4xf32>, tensor<6xf32>, tensor<5x2xf32>
  }
}"""

# (W^T * x).sum(0) reads W's rows (the column x transposed to a row first), W^T's row
# maxima are W's column maxima, and a 3-d reduction transposes its (small) result
TRANSPOSED_AFTER = """\
builtin.module {
  func.func @step(%w: tensor<4x6xf32>, %x: tensor<6x1xf32>, %a: tensor<2x3x5xf32>) -> (tensor<4xf32>, tensor<6xf32>, tensor<5x2xf32>) {
    %0 = nova.transpose %x perm = [1, 0] : tensor<6x1xf32> -> tensor<1x6xf32>
    %1 = nova.broadcast_in_dim %0 dims = [0, 1] : tensor<1x6xf32> -> tensor<4x6xf32>
    %2 = nova.mul %w, %1 : tensor<4x6xf32>
    %s = nova.reduce_sum %2 axes = [1] : tensor<4x6xf32> -> tensor<4xf32>
    %m = nova.reduce_max %w axes = [0] : tensor<4x6xf32> -> tensor<6xf32>
    %3 = nova.reduce_sum %a axes = [1] : tensor<2x3x5xf32> -> tensor<2x5xf32>
    %r = nova.transpose %3 perm = [1, 0] : tensor<2x5xf32> -> tensor<5x2xf32>
    func.return %s, %m, %r : tensor<4xf32>, tensor<6xf32>, tensor<5x2xf32>
  }
}"""

# left alone: a transposed value read twice (rewriting would compute it twice), and a
# reduction of an untransposed value
KEPT = """\
builtin.module {
  func.func @step(%w: tensor<4x6xf32>) -> (tensor<4xf32>, tensor<6x4xf32>, tensor<4xf32>) {
    %wt = nova.transpose %w perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
    %e = nova.exp %wt : tensor<6x4xf32>
    %s = nova.reduce_sum %e axes = [0] : tensor<6x4xf32> -> tensor<4xf32>
    %c = nova.reduce_sum %w axes = [1] : tensor<4x6xf32> -> tensor<4xf32>
    func.return %s, %e, %c : tensor<4xf32>, tensor<6x4xf32>, tensor<4xf32>
  }
}"""


def test_reductions_of_transposed_values_reduce_what_the_transpose_reads():
    assert_rewrites(reduce_in_layout, TRANSPOSED, TRANSPOSED_AFTER)


def test_a_transposed_value_read_twice_and_plain_reductions_are_left_alone():
    assert str(reduce_in_layout(parse_module(KEPT))) == KEPT


def test_reductions_over_transposed_views_end_to_end_with_gradients():
    """On the cpu engine: sums, means and maxima of transposed and permuted views and
    of a transposed product with a column, and their gradients, against numpy."""
    rs = np.random.RandomState(2)
    wn, xn, an = rs.randn(37, 50), rs.randn(37), rs.randn(3, 7, 11)
    w = nv.tensor(wn, requires_grad=True)
    a = nv.tensor(an, requires_grad=True)
    x = nv.tensor(xn)
    outs = [w.T.sum(0), w.T.sum(1), (w.T * x[None]).sum(1), w.T.amax(0),
            a.transpose(1, 2).mean(-1), a.permute(2, 0, 1).sum((1, 2))]
    (sum((o * o).sum() for o in outs)).backward()
    nv.realize(*outs, w.grad, a.grad)
    want = [wn.sum(1), wn.sum(0), wn.T @ xn, wn.max(1), an.mean(1), an.sum((0, 1))]
    for got, ref in zip(outs, want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10)
    gw = (2 * wn.sum(1)[:, None] + 2 * wn.sum(0)[None, :] + 2 * np.outer(xn, wn.T @ xn)
          + 2 * wn.max(1)[:, None] * (wn == wn.max(1)[:, None]))
    ga = np.broadcast_to(2 * an.mean(1)[:, None, :] / 7 + 2 * an.sum((0, 1))[None, None, :],
                         an.shape)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-10)
    np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-10)
