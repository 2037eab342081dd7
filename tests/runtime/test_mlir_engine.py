"""The ``mlir`` engine: steps lowered to upstream linalg (``nova.compiler.linalg``) and
run by upstream MLIR's JIT, against Nova's CPU engine -- every op of the dialect, half
floats, the edge cases of sorting and scattering, the run-time checks, and the tiny
and small GPT training steps with dropout. Skipped, with the install line, without the
``mlir`` extra's bindings."""
import numpy as np
import pytest

import nova as nv
from models.gpt import preset
from nova.compiler.linalg import LinalgLoweringError, to_linalg
from nova.runtime import mlir_engine
from tests.compiler.parsing import parse_module
from tests.helpers import COLLECTIVE_STEP, assert_same_outputs
from tests.compiler.test_mlir_interop import _every_op, _gpt_step, _tiny_gpt_step


@pytest.fixture
def bindings():
    why = mlir_engine.unavailable_reason()
    if why:
        pytest.skip(why)
    nv.debug.reset_cache()
    yield
    nv.debug.reset_cache()


def _both(make, seed=0):
    """``make()``'s tensors realized by the mlir engine and by the CPU engine, from the
    same seed."""
    nv.manual_seed(seed)
    with nv.engine("mlir"):
        got = [t.numpy() for t in make()]
    nv.manual_seed(seed)
    want = [t.numpy() for t in make()]
    return got, want


_same = assert_same_outputs


def test_the_lowering_of_a_small_step():
    module = parse_module("""
    builtin.module {
      func.func @step(%x: tensor<3xf32>, %c: tensor<3xi1>) -> tensor<3xf32> {
        %e = nova.exp %x : tensor<3xf32>
        %r = nova.where %c, %e, %x : tensor<3xi1>, tensor<3xf32>
        func.return %r : tensor<3xf32>
      }
    }""")
    # booleans stored as i8 and computed as i1; the last result is the checks' flag
    assert to_linalg(module) == """\
module {
  func.func @step(%arg0: tensor<3xf32> {bufferization.writable = false}, %arg1: tensor<3xi8> {bufferization.writable = false}) -> (tensor<3xf32>, tensor<i8>) attributes {llvm.emit_c_interface} {
    %v1 = tensor.empty() : tensor<3xf32>
    %v2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%arg0 : tensor<3xf32>) outs(%v1 : tensor<3xf32>) {
    ^bb0(%a3: f32, %a4: f32):
      %v5 = math.exp %a3 : f32
      linalg.yield %v5 : f32
    } -> tensor<3xf32>
    %v6 = tensor.empty() : tensor<3xf32>
    %v7 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%arg1, %v2, %arg0 : tensor<3xi8>, tensor<3xf32>, tensor<3xf32>) outs(%v6 : tensor<3xf32>) {
    ^bb0(%a8: i8, %a9: f32, %a10: f32, %a11: f32):
      %v12 = arith.trunci %a8 : i8 to i1
      %v13 = arith.select %v12, %a9, %a10 : f32
      linalg.yield %v13 : f32
    } -> tensor<3xf32>
    %v14 = arith.constant 0 : i8
    %v15 = tensor.empty() : tensor<i8>
    %v16 = linalg.fill ins(%v14 : i8) outs(%v15 : tensor<i8>) -> tensor<i8>
    return %v7, %v16 : tensor<3xf32>, tensor<i8>
  }
}
"""


def test_results_sharing_storage_through_reshapes_are_copied():
    """A result returned with its reshape (or an argument's reshape) would alias
    another out-param: upstream's buffer-results-to-out-params crashed the process
    on it (a segfault). Each later alias is copied."""
    module = parse_module("""
    builtin.module {
      func.func @step(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>, tensor<2x2xf32>) {
        %e = nova.exp %x : tensor<4xf32>
        %r = nova.reshape %e : tensor<4xf32> -> tensor<2x2xf32>
        %b = nova.reshape %r : tensor<2x2xf32> -> tensor<4xf32>
        %a = nova.reshape %x : tensor<4xf32> -> tensor<2x2xf32>
        func.return %e, %r, %b, %a : tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>, tensor<2x2xf32>
      }
    }""")
    text = to_linalg(module)
    copies = [line.split(" = ")[0].strip() for line in text.splitlines() if "copy(" in line]
    assert len(copies) == 3      # the reshape of %e, its reshape back, %x's reshape
    returned = text.splitlines()[-3].split("return ")[1].split(" : ")[0].split(", ")
    assert returned[1:4] == copies and returned[0] not in copies


_ONE_VALUE_TWICE = """
module {
  func.func @step(%arg0: tensor<4xf64> {bufferization.writable = false})
      -> (tensor<4xf64>, tensor<4xf64>) attributes {llvm.emit_c_interface} {
    %e = tensor.empty() : tensor<4xf64>
    %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                         iterator_types = ["parallel"]}
        ins(%arg0 : tensor<4xf64>) outs(%e : tensor<4xf64>) {
    ^bb0(%a: f64, %o: f64):
      %t = arith.addf %a, %a : f64
      linalg.yield %t : f64
    } -> tensor<4xf64>
    return %r, %r : tensor<4xf64>, tensor<4xf64>
  }
}
"""


def test_one_buffer_returned_as_two_results_survives_the_pipeline(bindings, tmp_path):
    """Fusion can make two results of a step one value after Nova's lowering (two
    equal outputs: a tensor written over in place with an autograd link to its old
    value); upstream's ``buffer-results-to-out-params{hoist-static-allocs}`` then
    segfaulted the process. The pipeline copies results into the out-parameters
    instead. Run in a subprocess, so a crash is a failure, not a dead worker."""
    import subprocess
    import sys
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "import mlir.ir as ir, mlir.passmanager as pm, mlir.execution_engine as ee\n"
        "from nova.runtime.mlir_engine import PIPELINE, OPT_LEVEL\n"
        "with ir.Context():\n"
        "    m = ir.Module.parse(open(sys.argv[1]).read())\n"
        "    pm.PassManager.parse(PIPELINE).run(m.operation)\n"
        "    ee.ExecutionEngine(m, opt_level=OPT_LEVEL)\n"
        "print('ok')\n")
    module = tmp_path / "step.mlir"
    module.write_text(_ONE_VALUE_TWICE)
    done = subprocess.run([sys.executable, str(script), str(module)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_write_through_a_window_with_gradients_matches_the_cpu_engine(bindings):
    """The step that crashed it: a write into an unfold window of a tensor with history,
    differentiated (tests/tensor/test_more_ops.py's overlapping-unfold trial 4)."""
    def make():
        x = nv.tensor(np.arange(4.0), requires_grad=True)
        y = nv.tensor(1.5, dtype=nv.float64, requires_grad=True)
        w = (x * 1).unfold(0, 1, 1)
        w[1].mul_(y)
        loss = (w * 2).sum()
        loss.backward()
        return [loss, x.grad, y.grad]
    got, want = _both(make)
    _same(got, want)


def test_a_result_and_its_reshapes_run(bindings):
    def make():
        x = nv.arange(6.0).reshape(2, 3)
        return [x, x.reshape(6), nv.tensor([1.0, 2.0]).reshape(2, 1)]
    got, want = _both(make)
    _same(got, want)


def test_collectives_are_refused_naming_the_op():
    with pytest.raises(LinalgLoweringError, match="nova.all_reduce_start exchanges data"):
        to_linalg(parse_module(COLLECTIVE_STEP))


def test_every_op_matches_the_cpu_engine(bindings):
    _same(*_both(_every_op))


def test_half_floats_compute_in_float32_and_round_per_op(bindings):
    def make():
        rng = np.random.default_rng(3)
        out = []
        for dtype in (nv.float16, nv.bfloat16):
            a = nv.tensor(rng.standard_normal((3, 5)).astype(np.float32)).to(dtype)
            b = nv.tensor(rng.standard_normal((5, 4)).astype(np.float32)).to(dtype)
            out += [a @ b, a.sum(dim=1), a.cumsum(1), nv.softmax(a, dim=-1).float(),
                    nv.nn.functional.dropout(a, 0.5, training=True), (a > 0).half()]
        return out
    _same(*_both(make), rtol=1e-2, atol=1e-2)


def test_sorting_and_scattering_keep_nova_order(bindings):
    def make():
        x = nv.tensor(np.array([[3.0, np.nan, 1.0, 3.0, -0.0, 0.0, np.nan, -np.inf]],
                               np.float32))
        i = nv.tensor(np.array([[2, -1, 2, 0, -1]], np.int64))
        src = nv.tensor(np.array([[1.0, -0.0, 2.0], [np.nan, 5.0, -3.0]], np.float32))
        index = nv.tensor(np.array([[1, 1, 3], [0, 0, 0]]))
        return [x.argsort(dim=-1), x.argsort(dim=-1, descending=True), i.argsort(dim=-1),
                i.argsort(dim=-1, descending=True), nv.zeros(2, 4).scatter(1, index, src),
                nv.zeros(2, 4).scatter_add(1, index, src), x.cumsum(-1), x.flip(-1)]
    got, want = _both(make)
    _same(got, want)
    np.testing.assert_array_equal(got[4].view(np.uint32), want[4].view(np.uint32))  # -0.0


def test_an_index_out_of_range_raises_as_on_the_cpu_engine(bindings):
    table = nv.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))

    def computed(values):            # unknown until the step runs: checked by the step
        return nv.tensor(np.array(values)) * 1
    with nv.engine("mlir"):
        out = (table[computed([0, 7])] * 2).sum()
        with pytest.raises(nv.RealizationError, match="out of bounds|out of range"):
            out.item()
        good = (table[computed([0, 3])] * 2).sum()
        assert good.item() == 2 * (0 + 1 + 2 + 9 + 10 + 11)
        a = nv.tensor(np.array([4, 5], np.int64))
        with pytest.raises(nv.RealizationError, match="division by zero"):
            (a // nv.tensor(np.array([1, 0], np.int64))).numpy()


def test_tiny_gpt_training_step_matches_the_cpu_engine(bindings):
    _same(*_both(_tiny_gpt_step), rtol=1e-4, atol=1e-5)


def test_small_gpt_training_step_matches_the_cpu_engine(bindings):
    """The small GPT with dropout: the loss, every gradient and the updated weights."""
    _same(*_both(lambda: _gpt_step(preset("small", dropout=0.1), 65, 128, grads=True)),
          rtol=2e-3, atol=2e-5)


def test_set_engine_names_the_engines():
    with pytest.raises(ValueError, match=r"valid engines are \('cpu', 'interp', 'mlir'\)"):
        nv.set_engine("linalg")


def test_empty_parts_and_inputs_are_never_read(bindings):
    """A concat with an empty part, a pad of an empty tensor, gathers and scatters on
    empty tensors: no read of a zero-size buffer (clamping alone would read index -1)."""
    def make():
        a = nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)) * 1
        e = nv.zeros(2, 0) * 1
        none = nv.tensor(np.zeros((2, 0), np.int64)) * 1
        return [nv.cat([a, e, a], 1), nv.cat([e, a], 1),
                nv.nn.functional.pad(e, (1, 2), value=3.0), e.gather(1, none),
                e.scatter_add(1, none, e), a.gather(1, none), a.scatter(1, none, e),
                e.argsort(dim=-1)]
    _same(*_both(make))
