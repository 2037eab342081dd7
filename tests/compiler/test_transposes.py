"""Transposed products (``nova.compiler.passes.transposes``): input IR and the IR it
becomes, and the values are unchanged."""
import numpy as np
from xdsl.dialects import func

import nova as nv
from nova.compiler.passes import transpose_products
from nova.runtime.interpreter import compile_function
from tests.compiler.parsing import parse_module


WEIGHT_GRADIENT = """\
builtin.module {
  func.func @step(%x: tensor<6x4xf32>, %dy: tensor<6x5xf32>, %g: tensor<5x4xf32>) -> tensor<5x4xf32> {
    %xt = nova.transpose %x perm = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
    %dwt = nova.matmul %xt, %dy : tensor<4x6xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
    %dw = nova.transpose %dwt perm = [1, 0] : tensor<4x5xf32> -> tensor<5x4xf32>
    %s = nova.add %dw, %g : tensor<5x4xf32>
    func.return %s : tensor<5x4xf32>
  }
}"""

WEIGHT_GRADIENT_AFTER = """\
builtin.module {
  func.func @step(%x: tensor<6x4xf32>, %dy: tensor<6x5xf32>, %g: tensor<5x4xf32>) -> tensor<5x4xf32> {
    %0 = nova.transpose %dy perm = [1, 0] : tensor<6x5xf32> -> tensor<5x6xf32>
    %dw = nova.matmul %0, %x : tensor<5x6xf32>, tensor<6x4xf32> -> tensor<5x4xf32>
    %s = nova.add %dw, %g : tensor<5x4xf32>
    func.return %s : tensor<5x4xf32>
  }
}"""

# row chunking's partial sums of a weight gradient, then the transpose to its layout
PARTIAL_SUMS = """\
builtin.module {
  func.func @step(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4x3xf32>, %d: tensor<3x5xf32>) -> tensor<5x4xf32> {
    %p1 = nova.matmul %a, %b : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
    %p2 = nova.matmul %c, %d : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
    %s = nova.add %p2, %p1 : tensor<4x5xf32>
    %t = nova.transpose %s perm = [1, 0] : tensor<4x5xf32> -> tensor<5x4xf32>
    func.return %t : tensor<5x4xf32>
  }
}"""

PARTIAL_SUMS_AFTER = """\
builtin.module {
  func.func @step(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4x3xf32>, %d: tensor<3x5xf32>) -> tensor<5x4xf32> {
    %0 = nova.transpose %b perm = [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
    %1 = nova.transpose %a perm = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
    %2 = nova.matmul %0, %1 : tensor<5x3xf32>, tensor<3x4xf32> -> tensor<5x4xf32>
    %3 = nova.transpose %d perm = [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
    %4 = nova.transpose %c perm = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
    %5 = nova.matmul %3, %4 : tensor<5x3xf32>, tensor<3x4xf32> -> tensor<5x4xf32>
    %t = nova.add %5, %2 : tensor<5x4xf32>
    func.return %t : tensor<5x4xf32>
  }
}"""


def _values(module, args):
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return compile_function(fn)(args)


def _args(module, seed=0):
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    rs = np.random.RandomState(seed)
    return [rs.randn(*a.type.get_shape()).astype(np.float32) for a in fn.body.block.args]


def test_a_weight_gradient_is_computed_in_its_own_layout():
    module = parse_module(WEIGHT_GRADIENT)
    args = _args(module)
    before = _values(module, args)
    out = transpose_products(module)
    assert str(out) == WEIGHT_GRADIENT_AFTER          # x^T^T folded away: x read as is
    np.testing.assert_array_equal(_values(out, args)[0], before[0])


def test_a_transpose_sinks_through_a_sum_of_products():
    module = parse_module(PARTIAL_SUMS)
    args = _args(module)
    before = _values(module, args)
    out = transpose_products(module)
    assert str(out) == PARTIAL_SUMS_AFTER
    np.testing.assert_array_equal(_values(out, args)[0], before[0])


def test_a_product_read_elsewhere_or_a_partial_permutation_is_left_alone():
    shared = PARTIAL_SUMS.replace("func.return %t : tensor<5x4xf32>",
                                  "func.return %t, %p1 : tensor<5x4xf32>, tensor<4x5xf32>"
                                  ).replace("-> tensor<5x4xf32> {",
                                            "-> (tensor<5x4xf32>, tensor<4x5xf32>) {")
    module = parse_module(shared)
    text = str(module)
    assert str(transpose_products(module)) == text    # p1 is returned as well
    batched = """\
builtin.module {
  func.func @step(%a: tensor<2x4x3xf32>, %b: tensor<2x3x5xf32>) -> tensor<4x2x5xf32> {
    %p = nova.matmul %a, %b : tensor<2x4x3xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
    %t = nova.transpose %p perm = [1, 0, 2] : tensor<2x4x5xf32> -> tensor<4x2x5xf32>
    func.return %t : tensor<4x2x5xf32>
  }
}"""
    module = parse_module(batched)
    assert str(transpose_products(module)) == str(parse_module(batched))


def test_a_linear_layers_weight_gradient_has_no_transposing_kernel():
    """End to end: ``y = x @ W^T`` differentiated; the weight gradient's product writes
    W's layout, so no kernel of the step transposes it afterwards."""
    rs = np.random.RandomState(1)
    x = nv.tensor(rs.randn(64, 32).astype(np.float32))
    w = nv.tensor(rs.randn(48, 32).astype(np.float32), requires_grad=True)
    (x @ w.t()).square().sum().backward()
    fused = nv.debug.dump_ir(w.grad, stage="fused")
    kernels = fused.split('"nova.fusion"')[1:]
    products = [line for k in kernels for line in k.splitlines() if "nova.matmul" in line]
    assert any(line.endswith("-> tensor<48x32xf32>") for line in products)
    assert not any("nova.transpose" in k and "tensor<32x48xf32>" in k.split("\n")[0]
                   for k in kernels)
    got = w.grad.numpy()
    x64, w64 = x.numpy().astype(np.float64), w.numpy().astype(np.float64)
    np.testing.assert_allclose(got, 2 * (x64 @ w64.T).T @ x64, rtol=1e-5, atol=1e-3)
