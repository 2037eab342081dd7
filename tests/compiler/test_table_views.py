"""Window stacks read through a table (``lowering.views.table_view``), fused into the
GEMMs that read them (``passes.fusion``) and packed from the padded input
(``targets.cpu.llvm_gemm.TiledKernel.table_pack_function``): the analysis on IR, the
fused step's kernels, and the products' values against numpy on the edges of the
packing (partial panels, K not a multiple of the vector width)."""
import numpy as np
import pytest
from xdsl.dialects import func

import nova as nv
import nova.nn.functional as F
from nova.compiler.lowering.views import table_view
from tests.compiler.parsing import parse_module

# Two windows of a (2, 3, 10) argument, starts 0 and 4, stacked on dim 2 and merged
# with the channels: the window matrix (2, 1, 6, 5) of a 1-D convolution.
STACK = """\
builtin.module {
  func.func @step(%x: tensor<2x3x10xf32>) -> tensor<2x1x6x5xf32> {
    %a = nova.slice %x start = [0, 0, 0] limit = [2, 3, 5] stride = [1, 1, 1] : tensor<2x3x10xf32> -> tensor<2x3x5xf32>
    %b = nova.slice %x start = [0, 0, 4] limit = [2, 3, 9] stride = [1, 1, 1] : tensor<2x3x10xf32> -> tensor<2x3x5xf32>
    %ra = nova.reshape %a : tensor<2x3x5xf32> -> tensor<2x3x1x5xf32>
    %rb = nova.reshape %b : tensor<2x3x5xf32> -> tensor<2x3x1x5xf32>
    %c = nova.concat %ra, %rb dim = 2 : i64 : tensor<2x3x1x5xf32>, tensor<2x3x1x5xf32> -> tensor<2x3x2x5xf32>
    %m = nova.reshape %c : tensor<2x3x2x5xf32> -> tensor<2x1x6x5xf32>
    %t = nova.transpose %m perm = [0, 1, 3, 2] : tensor<2x1x6x5xf32> -> tensor<2x1x5x6xf32>
    func.return %m : tensor<2x1x6x5xf32>
  }
}"""


def _value(name: str):
    module = parse_module(STACK)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return next(op for op in fn.body.block.ops if op.results and
                op.results[0].name_hint == name).results[0]


def test_a_stack_of_windows_is_a_view_with_a_table_of_their_sums():
    view = table_view(_value("m"))
    # batch stride 30, the unit dim 0, (channel, window) -> 10 c + start, positions 1
    assert view.arg == 0 and view.dims == (30, 0, (0, 4, 10, 14, 20, 24), 1)
    transposed = table_view(_value("t"))
    assert transposed.dims == (30, 0, 1, (0, 4, 10, 14, 20, 24))


def test_the_table_addresses_what_the_ir_computes():
    x = np.arange(60).reshape(2, 3, 10)
    want = np.stack([x[:, :, 0:5], x[:, :, 4:9]], 2).reshape(2, 1, 6, 5)
    view = table_view(_value("m"))
    idx = np.indices(want.shape)
    terms = [np.asarray(t)[i] if isinstance(t, tuple) else i * t
             for t, i in zip(view.dims, idx)]
    np.testing.assert_array_equal(x.reshape(-1)[sum(terms)], want)


def _stack_of(text: str):
    module = parse_module(text)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return next(op for op in fn.body.block.ops if op.results and
                op.results[0].name_hint == "m").results[0]


def test_the_same_window_twice_is_a_table_and_windows_of_two_arguments_are_not():
    twice = STACK.replace("%rb = nova.reshape %b", "%rb = nova.reshape %a")
    assert table_view(_stack_of(twice)).dims == (30, 0, (0, 0, 10, 10, 20, 20), 1)
    mixed = STACK.replace("%b = nova.slice %x", "%b = nova.slice %y").replace(
        "(%x: tensor<2x3x10xf32>)", "(%x: tensor<2x3x10xf32>, %y: tensor<2x3x10xf32>)")
    assert table_view(_stack_of(mixed)) is None


# windows two elements thick along the concat's dim: no one offset per index there
THICK = """\
builtin.module {
  func.func @step(%x: tensor<2x3x10xf32>) -> tensor<2x1x12x5xf32> {
    %ra = nova.reshape %x : tensor<2x3x10xf32> -> tensor<2x3x2x5xf32>
    %rb = nova.reshape %x : tensor<2x3x10xf32> -> tensor<2x3x2x5xf32>
    %c = nova.concat %ra, %rb dim = 2 : i64 : tensor<2x3x2x5xf32>, tensor<2x3x2x5xf32> -> tensor<2x3x4x5xf32>
    %m = nova.reshape %c : tensor<2x3x4x5xf32> -> tensor<2x1x12x5xf32>
    func.return %m : tensor<2x1x12x5xf32>
  }
}"""


def test_windows_thicker_than_one_element_are_not_a_table():
    assert table_view(_stack_of(THICK)) is None


def _conv_step(shape, w_shape, padding, dilation=1):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    xs, ws = nv.tensor(x, requires_grad=True), nv.tensor(w, requires_grad=True)
    conv = F.conv1d if len(shape) == 3 else F.conv2d
    y = conv(xs, ws, padding=padding, dilation=dilation)
    g = rng.standard_normal(y.shape).astype(np.float32)
    dx, dw = nv.autograd.grad(y, [xs, ws], [nv.tensor(g)])
    return x, w, g, (y, dx, dw)


def _reference(x, w, g, padding, dilation=1):
    """conv (cross-correlation) and its gradients by loops over kernel offsets."""
    nd = x.ndim - 2
    pads = [(0, 0), (0, 0)] + [(padding, padding)] * nd
    xp = np.pad(x.astype(np.float64), pads)
    out = g.shape[2:]
    y = np.zeros(g.shape)
    dxp = np.zeros(xp.shape)
    dw = np.zeros(w.shape)
    for k in np.ndindex(*w.shape[2:]):
        window = (slice(None), slice(None)) + tuple(
            slice(ki * dilation, ki * dilation + n) for ki, n in zip(k, out))
        wk = w[(slice(None), slice(None)) + k].astype(np.float64)
        xw = xp[window].reshape(x.shape[0], x.shape[1], -1)
        g2 = g.reshape(g.shape[0], g.shape[1], -1)
        y += np.einsum("oc,ncp->nop", wk, xw).reshape(y.shape)
        dxp[window] += np.einsum("oc,nop->ncp", wk, g2).reshape(xp[window].shape)
        dw[(slice(None), slice(None)) + k] = np.einsum("nop,ncp->oc", g2, xw)
    inner = (slice(None), slice(None)) + tuple(slice(padding, padding + n)
                                               for n in x.shape[2:])
    return y, dxp[inner], dw


@pytest.mark.parametrize("case", [
    ((2, 8, 23, 23), (16, 8, 3, 3), 1, 1),     # 25-wide rows; dW: 2 full panels + edge
    ((1, 4, 30, 26), (16, 4, 2, 3), 0, 1),     # even kernel, no padding
    ((2, 2, 24, 24), (16, 2, 3, 3), 2, 2),     # dilated
    ((2, 5, 700), (16, 5, 3), 1, 1),           # conv1d
], ids=["3x3", "2x3-valid", "dilated", "1d"])
def test_shifted_window_convolutions_fuse_their_stack_and_match_the_reference(case):
    """(16 output channels: with a few, the weight gradient is a row reduction
    (``passes.vector_products``), which reads a stored stack.)"""
    shape, w_shape, padding, dilation = case
    x, w, g, (y, dx, dw) = _conv_step(shape, w_shape, padding, dilation)
    fused = nv.debug.dump_ir(y, dx, dw, stage="fused")
    kernels = [line for line in fused.splitlines() if line.startswith("// nova_k_")]
    # no kernel stores the window stack: its (.., C, K, P') loop nest is gone
    k = int(np.prod(w_shape[2:]))
    assert not any(f"{shape[1]}, {k}, " in line and "elementwise" in line for line in kernels)
    assert sum("matmul/tiled" in line for line in kernels) == 3
    for got, want in zip((y, dx, dw), _reference(x, w, g, padding, dilation)):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("case", [
    ((2, 64, 23, 23), (16, 64, 3, 3), 1, 1),
    ((1, 64, 30, 26), (16, 64, 2, 3), 0, 1),
    ((2, 64, 24, 24), (16, 64, 3, 3), 2, 2),
    ((2, 64, 700), (16, 64, 3), 1, 1),
    ((2, 16, 23, 23), (8, 16, 3, 3), 1, 1),
    ((1, 16, 24, 22), (8, 16, 5, 5), 2, 1),
    ((1, 16, 25, 25), (8, 16, 7, 7), 3, 1),
], ids=["3x3", "2x3-valid", "dilated", "1d", "3x3-16ch", "5x5-16ch", "7x7-16ch"])
def test_wide_convolutions_take_the_input_gradient_as_a_transposed_convolution(case):
    """From ``TRANSPOSED_GRADIENT_MIN_CHANNELS`` input channels the input gradient is
    a product of C_in rows over the output gradient's shifted windows: no product
    makes the (N, 1, C K, P) window gradients, and all three products read table
    views (no stored stack)."""
    shape, w_shape, padding, dilation = case
    x, w, g, (y, dx, dw) = _conv_step(shape, w_shape, padding, dilation)
    n, c = shape[:2]
    k = int(np.prod(w_shape[2:]))
    ir = nv.debug.dump_ir(y, dx, dw)
    products = [line.split("-> ")[-1] for line in ir.splitlines() if "nova.matmul" in line]
    assert len(products) == 3
    assert not any(p.startswith(f"tensor<{n}x1x{c * k}x") for p in products)
    assert sum(p.startswith(f"tensor<{n}x1x{c}x") for p in products) == 1
    kernels = [line for line in nv.debug.dump_ir(y, dx, dw, stage="fused").splitlines()
               if line.startswith("// nova_k_")]
    assert sum("matmul/tiled" in line for line in kernels) == 3
    assert not any(f"{c}, {k}, " in line and "elementwise" in line for line in kernels)
    for got, want in zip((y, dx, dw), _reference(x, w, g, padding, dilation)):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-4, atol=2e-4)


def test_many_offsets_over_few_channels_keep_the_stored_stack():
    """Below ``TRANSPOSED_GRADIENT_MIN_CHANNELS`` a 5 x 5's input gradient would be the
    derived one, 25 shifted sums: the convolution keeps the stored window stack, whose
    (N, 1, C K, P) product is there, and stays right."""
    shape, w_shape = (1, 8, 24, 24), (8, 8, 5, 5)
    x, w, g, (y, dx, dw) = _conv_step(shape, w_shape, 2)
    ir = nv.debug.dump_ir(y, dx, dw)
    products = [line.split("-> ")[-1] for line in ir.splitlines() if "nova.matmul" in line]
    assert any(p.startswith("tensor<1x1x200x576x") for p in products)
    for got, want in zip((y, dx, dw), _reference(x, w, g, 2)):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-4, atol=2e-4)
