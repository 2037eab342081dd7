"""Fusion: input IR and the fused IR it becomes."""
import pytest
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.parser import Parser

from nova.compiler.dialect import Nova
from nova.compiler.lowering import plan_kernels
from nova.compiler.passes.fusion import fuse

SOURCE = """\
builtin.module {
  func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> (tensor<4xf32>, tensor<8x4xf32>) {
    %wt = nova.transpose %w perm = [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
    %mm = nova.matmul %x, %wt : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %bb = nova.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    %h = nova.add %mm, %bb : tensor<4x8xf32>
    %e = nova.exp %h : tensor<4x8xf32>
    %s = nova.reduce_sum %e axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %c = nova.constant 1.250000e-01 : f32 : tensor<4xf32>
    %mean = nova.mul %s, %c : tensor<4xf32>
    %t = nova.transpose %h perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    func.return %mean, %t : tensor<4xf32>, tensor<8x4xf32>
  }
}"""

EXPECTED = """\
builtin.module {
  func.func @step(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>, %2: tensor<8xf32>) -> (tensor<4xf32>, tensor<8x4xf32>) {
    %3 = "nova.fusion"(%1, %0, %2) <{kind = "matmul"}> ({
    ^bb0(%4: tensor<8x8xf32>, %5: tensor<4x8xf32>, %6: tensor<8xf32>):
      %wt = nova.transpose %4 perm = [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
      %mm = nova.matmul %5, %wt : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
      %bb = nova.broadcast_in_dim %6 dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
      %h = nova.add %mm, %bb : tensor<4x8xf32>
      nova.yield %h : tensor<4x8xf32>
    }) : (tensor<8x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %7 = "nova.fusion"(%3) <{kind = "reduce"}> ({
    ^bb0(%8: tensor<4x8xf32>):
      %e = nova.exp %8 : tensor<4x8xf32>
      %s = nova.reduce_sum %e axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
      %c = nova.constant 1.250000e-01 : f32 : tensor<4xf32>
      %mean = nova.mul %s, %c : tensor<4xf32>
      nova.yield %mean : tensor<4xf32>
    }) : (tensor<4x8xf32>) -> tensor<4xf32>
    %9 = "nova.fusion"(%3) <{kind = "elementwise"}> ({
    ^bb0(%10: tensor<4x8xf32>):
      %t = nova.transpose %10 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
      nova.yield %t : tensor<8x4xf32>
    }) : (tensor<4x8xf32>) -> tensor<8x4xf32>
    func.return %7, %9 : tensor<4xf32>, tensor<8x4xf32>
  }
}"""


def _parse(text):
    ctx = Context()
    for d in (builtin.Builtin, func.Func, Nova):
        ctx.load_dialect(d)
    return Parser(ctx, text).parse_module()


def test_fusion_groups_matmul_epilogue_reduction_and_movement():
    fused = fuse(_parse(SOURCE))
    assert str(fused) == EXPECTED
    plans = plan_kernels(fused)
    assert [(p.kind, p.schedule.strategy) for p in plans] == [
        ("matmul", "tiled"), ("reduce", "row"), ("elementwise", "elementwise")]
    assert str(_parse(str(fused))) == str(fused)  # the fused form parses back


def test_shared_constants_are_duplicated_and_shared_values_materialized():
    src = """\
builtin.module {
  func.func @step(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %c = nova.constant 2.000000e+00 : f32 : tensor<8xf32>
    %y = nova.mul %x, %c : tensor<8xf32>
    %e = nova.exp %y : tensor<8xf32>
    %a = nova.add %e, %c : tensor<8xf32>
    %b = nova.sub %e, %c : tensor<8xf32>
    func.return %a, %b : tensor<8xf32>, tensor<8xf32>
  }
}"""
    fused = str(fuse(_parse(src)))
    assert fused.count('"nova.fusion"') == 3           # exp(x*2) once, then a and b
    assert fused.count("nova.constant") == 3           # the constant is recomputed in each


def test_softmax_log_softmax_and_layer_norm_are_one_rows_kernel_each():
    import numpy as np

    import nova as nv
    import nova.nn.functional as F
    x = nv.tensor(np.ones((4, 16), np.float32))
    for y in (x.softmax(-1), x.log_softmax(-1), F.layer_norm(x, (16,))):
        fused = nv.debug.dump_ir(y, stage="fused")
        assert fused.count('"nova.fusion"') == 1 and "rows/rows" in fused


def test_cross_entropy_row_passes_share_one_kernel():
    """Per-row loss: max, sum of exp and the picked log-probability in one kernel; with
    the mean, the row passes stay in one kernel and the rest touch one value per row."""
    import numpy as np

    import nova as nv
    import nova.nn.functional as F
    logits = nv.tensor(np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32))
    target = nv.tensor([1, 0, 9, 3, 3, 7])
    per_row = F.cross_entropy(logits, target, reduction="none")
    fused = nv.debug.dump_ir(per_row, stage="fused")
    assert fused.count('"nova.fusion"') == 1 and "rows/rows" in fused
    mean = F.cross_entropy(logits, target)
    fused = nv.debug.dump_ir(mean, stage="fused")
    plans = [line for line in fused.splitlines() if line.startswith("// ")]
    assert sum("loops=[6, 10]" in p for p in plans) == 1   # one kernel reads the logits
    with nv.engine("interp"):
        expected = F.cross_entropy(logits, target, reduction="none").numpy()
    np.testing.assert_allclose(per_row.numpy(), expected, rtol=1e-6)


def test_transcendental_epilogues_leave_the_cpu_gemm_but_stay_in_the_cuda_one():
    import numpy as np

    import nova as nv
    from nova.compiler.irgen import build_module
    from nova.compiler.passes import simplify
    from nova.tensor.realize import pending_graph
    x = nv.tensor(np.ones((8, 16), np.float32))
    w = nv.tensor(np.ones((16, 32), np.float32))
    b = nv.tensor(np.ones(32, np.float32))
    y = nv.nn.functional.gelu(x @ w + b)

    def kernels(target):
        fused = fuse(simplify(build_module(pending_graph(y))), target)
        return [(op.kind.data, [o.name for o in op.body.block.ops])
                for op in next(iter(fused.ops)).body.block.ops if op.name == "nova.fusion"]
    cpu = kernels("cpu")
    assert [k for k, _ in cpu] == ["matmul", "elementwise"]
    assert "nova.erf" not in cpu[0][1]
    assert "nova.erf" in cpu[1][1] and "nova.add" in cpu[1][1]   # bias + gelu in one pass
    cuda = kernels("cuda")
    assert [k for k, _ in cuda] == ["matmul"] and "nova.erf" in cuda[0][1]
    with pytest.raises(ValueError, match="fuse: unknown target 'tpu'"):
        fuse(simplify(build_module(pending_graph(y))), "tpu")
