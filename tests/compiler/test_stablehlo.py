"""``nv.export.stablehlo``: a step as StableHLO (``nova.compiler.stablehlo``).

The lowering's text for a small function (input IR and output IR), the table's
coverage of the dialect, the refusals; then steps compiled by IREE (the ``iree`` extra;
skipped with the install line without it) against Nova's CPU engine: every op of the
dialect, the edge cases where StableHLO's own semantics differ from Nova's (sort order
with NaN, duplicate scatter indices, integer division, half floats), and the tiny and
small GPT training steps with dropout."""
import numpy as np
import pytest

import nova as nv
from benchmarks.peers import iree_module
from models.gpt import preset
from nova.compiler.stablehlo import StableHLOExportError, to_stablehlo
from tests.compiler.parsing import parse_module
from tests.helpers import COLLECTIVE_STEP, assert_same_outputs
from tests.compiler.test_mlir_interop import _every_op, _gpt_step, _tiny_gpt_step


def test_the_text_of_a_small_step():
    module = parse_module("""
    builtin.module {
      func.func @step(%x: tensor<2x3xf16>, %i: tensor<2xi64>) -> (tensor<2xf16>, tensor<2xi64>) {
        %s = nova.reduce_sum %x axes = [1] : tensor<2x3xf16> -> tensor<2xf16>
        %w = nova.wrap_index %i size = 3 : i64 dim = 0 : i64 : tensor<2xi64>
        func.return %s, %w : tensor<2xf16>, tensor<2xi64>
      }
    }""")
    assert to_stablehlo(module) == """\
module {
  func.func @main(%arg0: tensor<2x3xf16>, %arg1: tensor<2xi64>) -> (tensor<2xf16>, tensor<2xi64>) {
    %v1 = "stablehlo.convert"(%arg0) : (tensor<2x3xf16>) -> tensor<2x3xf32>
    %v2 = "stablehlo.constant"() {value = dense<0x00000000> : tensor<f32>} : () -> tensor<f32>
    %v5 = "stablehlo.reduce"(%v1, %v2) ({
    ^bb0(%r3_0: tensor<f32>, %r3_1: tensor<f32>):
      %v4 = "stablehlo.add"(%r3_0, %r3_1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%v4) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    %v6 = "stablehlo.convert"(%v5) : (tensor<2xf32>) -> tensor<2xf16>
    %v7 = "stablehlo.constant"() {value = dense<0> : tensor<2xi64>} : () -> tensor<2xi64>
    %v8 = "stablehlo.compare"(%arg1, %v7) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>
    %v9 = "stablehlo.constant"() {value = dense<3> : tensor<2xi64>} : () -> tensor<2xi64>
    %v10 = "stablehlo.add"(%arg1, %v9) : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
    %v11 = "stablehlo.select"(%v8, %v10, %arg1) : (tensor<2xi1>, tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
    return %v6, %v11 : tensor<2xf16>, tensor<2xi64>
  }
}
"""


def test_a_step_with_collectives_is_refused_naming_the_op():
    with pytest.raises(StableHLOExportError, match="nova.all_reduce_start exchanges data"):
        to_stablehlo(parse_module(COLLECTIVE_STEP))


def test_attention_is_exported_as_its_composite():
    rng = np.random.default_rng(0)
    q, k, v = (nv.tensor(rng.standard_normal((1, 2, 4, 8)).astype(np.float32))
               for _ in range(3))
    y = nv.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert "nova.attention" in nv.debug.dump_ir(y, stage="nova")
    text = nv.export.stablehlo(y)
    assert '"stablehlo.dot_general"' in text and "attention" not in text


def test_bad_calls_say_what_is_valid():
    with pytest.raises(ValueError, match="at least one tensor"):
        nv.export.stablehlo()
    with pytest.raises(TypeError, match="expected tensors, got int"):
        nv.export.arguments(3)


# ---------------------------------------------------------------- through IREE


def _iree():
    why = iree_module.unavailable_reason()
    if why:
        pytest.skip(why)


def _check(outputs, rtol=1e-5, atol=1e-6) -> None:
    """The step of ``outputs`` through IREE equals Nova's CPU engine (same dtypes,
    values within float32 tolerance; exactly for integers and booleans)."""
    _iree()
    text = nv.export.stablehlo(*outputs)
    args = nv.export.arguments(*outputs)
    want = [t.numpy() for t in outputs]
    assert_same_outputs(iree_module.run(text, args), want, rtol, atol)


def test_every_op_through_iree():
    _check(_every_op())


def test_sorting_with_nan_and_ties_keeps_nova_order():
    x = nv.tensor(np.array([[3.0, np.nan, 1.0, 3.0, -0.0, 0.0, np.nan, -np.inf]],
                           np.float32))
    i = nv.tensor(np.array([[2, -1, 2, 0, -1]], np.int64))
    _check([x.argsort(dim=-1), x.argsort(dim=-1, descending=True),
            i.argsort(dim=-1), i.argsort(dim=-1, descending=True)])


def test_duplicate_scatter_indices_last_wins_bit_for_bit():
    base = nv.zeros(2, 4)
    src = nv.tensor(np.array([[1.0, -0.0, 2.0], [np.nan, 5.0, -3.0]], np.float32))
    index = nv.tensor(np.array([[1, 1, 3], [0, 0, 0]]))
    out = base.scatter(1, index, src)
    _iree()
    got = iree_module.run(nv.export.stablehlo(out), nv.export.arguments(out))[0]
    want = out.numpy()
    assert want[0, 1] == 0.0 and np.signbit(want[0, 1])       # -0.0 won, as written last
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    _check([nv.zeros(2, 4).scatter_add(1, index, src)])


def test_integer_division_power_and_rounding():
    a = nv.tensor(np.array([7, -7, 7, -7, 0], np.int64))
    b = nv.tensor(np.array([2, 2, -2, -2, 3], np.int64))
    x = nv.tensor(np.array([-2.5, -0.3, 0.5, 1.5, 2.5], np.float32))
    # floor division and remainder are Nova's truncating integer div plus corrections
    _check([a // b, a % b, a ** nv.tensor(np.array([0, 1, 2, 3, 2], np.int64)), x.round(),
            x.trunc(), x.floor(), x.ceil(), (x > 0) & (x < 2)])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_other_float_types(dtype):
    rng = np.random.default_rng(3)
    a = nv.tensor(rng.standard_normal((3, 5)).astype(np.float32)).to(getattr(nv, dtype))
    b = nv.tensor(rng.standard_normal((5, 4)).astype(np.float32)).to(getattr(nv, dtype))
    r = nv.nn.functional.dropout(a, 0.5, training=True)
    outputs = [(a @ b).exp(), a.sum(dim=1), a.cumsum(1), nv.softmax(a, dim=-1), r]
    if dtype != "float64":       # IREE's llvm-cpu links no float64 tanh
        outputs.append(a.tanh() * 2 + 1)
    _check(outputs, rtol=1e-2 if dtype != "float64" else 1e-6, atol=1e-2)


def test_tiny_gpt_training_step_through_iree():
    _check(_tiny_gpt_step(), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_small_gpt_training_step_through_iree():
    """The small GPT with dropout: the loss, every gradient and the updated weights."""
    _check(_gpt_step(preset("small", dropout=0.1), 65, 128, batch=4, grads=True),
           rtol=2e-3, atol=2e-5)


def test_the_harness_reports_what_iree_rejects():
    _iree()
    with pytest.raises(RuntimeError, match="iree-compile rejected the module"):
        iree_module.compile_module('module { func.func @main() { "stablehlo.nonsense"() : () '
                                   '-> () return } }')
