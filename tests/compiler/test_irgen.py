"""Trace -> nova dialect: the exact IR built for a small pending graph."""
import gc

import numpy as np

import nova as nv

EXPECTED = """\
builtin.module {
  func.func @step(%0: tensor<3xf32>, %1: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>) {
    %2 = nova.broadcast_in_dim %0 dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
    %3 = nova.add %1, %2 : tensor<2x3xf32>
    %4 = nova.constant 0.000000e+00 : f32 : tensor<2x3xf32>
    %5 = nova.compare "le", %3, %4 : tensor<2x3xf32> -> tensor<2x3xi1>
    %6 = nova.constant 0.000000e+00 : f32 : tensor<2x3xf32>
    %7 = nova.where %5, %6, %3 : tensor<2x3xi1>, tensor<2x3xf32>
    %8 = nova.reduce_sum %7 axes = [1] : tensor<2x3xf32> -> tensor<2xf32>
    func.return %7, %8 : tensor<2x3xf32>, tensor<2xf32>
  }
}"""


def test_pending_graph_builds_the_expected_function():
    """Arguments are numbered by first use; broadcasting and scalars are explicit."""
    x = nv.tensor(np.ones((2, 3), np.float32))
    b = nv.tensor(np.ones(3, np.float32))
    h = nv.relu(x + b)
    s = h.sum(1)
    gc.collect()
    assert nv.debug.dump_ir(h, s, stage="trace") == EXPECTED


def test_realized_outputs_pass_arguments_through():
    x = nv.tensor([1.0, 2.0])
    ir = nv.debug.dump_ir(x, x * 2.0)
    assert "func.func @step(%0: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)" in ir
    assert "func.return %0, %2" in ir
