"""Fusion: input IR and the fused IR it becomes."""
import pytest

from nova.compiler.lowering import plan_kernels
from nova.compiler.passes.fusion import fuse
from tests.compiler.parsing import parse_module

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


def test_fusion_groups_matmul_epilogue_reduction_and_movement():
    fused = fuse(parse_module(SOURCE))
    assert str(fused) == EXPECTED
    plans = plan_kernels(fused)
    assert [(p.kind, p.schedule.strategy) for p in plans] == [
        ("matmul", "tiled"), ("reduce", "row"), ("elementwise", "elementwise")]
    assert str(parse_module(str(fused))) == str(fused)  # the fused form parses back


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
    fused = str(fuse(parse_module(src)))
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


PARTIAL_SUMS = """\
builtin.module {
  func.func @step(%a: tensor<4x6xf32>, %b: tensor<6x8xf32>, %c: tensor<4x6xf32>, %d: tensor<6x8xf32>, %e: tensor<4x6xf32>, %f: tensor<6x8xf32>) -> tensor<8x4xf32> {
    %p1 = nova.matmul %a, %b : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
    %p2 = nova.matmul %c, %d : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
    %s2 = nova.add %p2, %p1 : tensor<4x8xf32>
    %p3 = nova.matmul %e, %f : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
    %s3 = nova.add %p3, %s2 : tensor<4x8xf32>
    %t = nova.transpose %s3 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    func.return %t : tensor<8x4xf32>
  }
}"""


def _kernels(fused):
    fn = next(iter(fused.ops))
    return [(op.kind.data, [o.name[5:] for o in op.body.block.ops][:-1])
            for op in fn.body.block.ops if op.name == "nova.fusion"]


@pytest.mark.parametrize("read", ["transposed", "by a matmul epilogue"])
def test_each_partial_sum_is_the_epilogue_of_the_product_it_adds(read):
    """A chain ``s_c = p_c + s_{c-1}`` read through a transpose (or by another product's
    epilogue) is not folded into its reader: each add roots a kernel with the product it
    adds, so one partial sum is stored at a time instead of every product until the
    end (row chunking's weight gradients, #24)."""
    src = PARTIAL_SUMS
    if read != "transposed":
        src = src.replace(
            "%t = nova.transpose %s3 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>",
            "%q = nova.matmul %e, %f : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>\n"
            "    %t0 = nova.mul %q, %s3 : tensor<4x8xf32>\n"
            "    %t = nova.transpose %t0 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>")
    kernels = _kernels(fuse(parse_module(src)))
    assert kernels[:3] == [("matmul", ["matmul"]), ("matmul", ["matmul", "add"]),
                           ("matmul", ["matmul", "add"])]
    assert len(kernels) == (4 if read == "transposed" else 5)


def test_an_op_the_epilogue_refuses_still_joins_its_reader():
    """The rule only moves an op into a product's epilogue where the target's policy
    admits it there: the CPU keeps ``exp`` out of GEMM epilogues, so ``exp(p3)`` stays
    in the transposing kernel that reads it and ``p3`` is stored."""
    src = PARTIAL_SUMS.replace("%s3 = nova.add %p3, %s2", "%s3 = nova.add %e2, %s2").replace(
        "%p3 = nova.matmul %e, %f : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>",
        "%p3 = nova.matmul %e, %f : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>\n"
        "    %e2 = nova.exp %p3 : tensor<4x8xf32>")
    kernels = _kernels(fuse(parse_module(src)))
    assert kernels[-2:] == [("matmul", ["matmul"]), ("elementwise", ["exp", "add", "transpose"])]


def test_a_linear_head_with_cross_entropy_stores_only_the_logits_and_their_gradient():
    """Forward and backward of ``cross_entropy(x @ W^T)``: of the values of the logits'
    size, only the logits, the logits' gradient and (where rematerialization saves it
    for the backward) ``exp(logits - max)`` are stored. ``logits - max`` is recomputed
    by each kernel reading it (``_repeatable``), the log-probabilities are computed at
    the picked positions by a kernel that the mean's reduction does not absorb
    (``_picks_rows``), and the gradient of the pick is a mask, not a scatter (#24)."""
    import numpy as np

    import nova as nv
    import nova.nn.functional as F
    N, D, V = 48, 8, 40
    rs = np.random.RandomState(0)
    x = nv.tensor(rs.randn(N, D).astype(np.float32), requires_grad=True)
    w = nv.tensor(rs.randn(V, D).astype(np.float32), requires_grad=True)
    t = nv.tensor(rs.randint(0, V, N))
    loss = F.cross_entropy(x @ w.t(), t)
    loss.backward()
    fused = nv.debug.dump_ir(loss, x.grad, w.grad, stage="fused")
    module = parse_module(fused[:fused.index("\n//")])
    roots = [op.body.block.last_op.operands[0].owner.name
             for op in next(iter(module.ops)).body.block.ops if op.name == "nova.fusion"
             and tuple(op.results[0].type.get_shape()) == (N, V)]
    assert sorted(roots) in (["nova.add", "nova.matmul"],
                             ["nova.add", "nova.exp", "nova.matmul"]), roots
    assert 'kind = "scatter"' not in fused
    got = [v.numpy() for v in (loss, x.grad, w.grad)]
    x64, w64 = x.numpy().astype(np.float64), w.numpy().astype(np.float64)
    z = x64 @ w64.T
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    onehot = np.eye(V)[t.numpy()]
    dz = (p - onehot) / N
    np.testing.assert_allclose(got[0], -np.log(p[np.arange(N), t.numpy()]).mean(), rtol=1e-5)
    np.testing.assert_allclose(got[1], dz @ w64, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[2], dz.T @ x64, rtol=1e-4, atol=1e-6)


# Layer norm's scale and shift (xc * rstd * g) as the B operand of a weight gradient
# (a^T y): a cheap pointwise chain at the operand's own size reading one stored value.
# The same chain as an A operand, an exp (Expensive), a product of two operand-sized
# values and the per-row rsqrt (smaller than the operand: recomputed per element) stay
# out.
PROLOGUE = """\
builtin.module {
  func.func @step(%xc: tensor<64x32xf32>, %r: tensor<64x1xf32>, %g: tensor<32xf32>, %a: tensor<16x64xf32>, %w: tensor<32x16xf32>, %v: tensor<64x32xf32>) -> (tensor<16x32xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) {
    %rb = nova.broadcast_in_dim %r dims = [0, 1] : tensor<64x1xf32> -> tensor<64x32xf32>
    %y = nova.mul %xc, %rb : tensor<64x32xf32>
    %gb = nova.broadcast_in_dim %g dims = [1] : tensor<32xf32> -> tensor<64x32xf32>
    %z = nova.mul %y, %gb : tensor<64x32xf32>
    %mm = nova.matmul %a, %z : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
    %y2 = nova.mul %xc, %rb : tensor<64x32xf32>
    %ma = nova.matmul %y2, %w : tensor<64x32xf32>, tensor<32x16xf32> -> tensor<64x16xf32>
    %e = nova.exp %xc : tensor<64x32xf32>
    %me = nova.matmul %a, %e : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
    %p = nova.mul %xc, %v : tensor<64x32xf32>
    %mp = nova.matmul %a, %p : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
    %rs = nova.rsqrt %r : tensor<64x1xf32>
    %rsb = nova.broadcast_in_dim %rs dims = [0, 1] : tensor<64x1xf32> -> tensor<64x32xf32>
    %mr = nova.matmul %a, %rsb : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
    func.return %mm, %ma, %me, %mp, %mr : tensor<16x32xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  }
}"""


def test_a_cheap_pointwise_b_operand_is_the_cpu_gemms_prologue():
    """On the CPU the scale-and-shift chain is computed as the GEMM packs B (one kernel,
    the chain never stored); the rest stay kernels of their own. The CUDA GEMM reads
    stored operands only."""
    module = parse_module(PROLOGUE)
    assert _kernels(fuse(module, "cpu")) == [
        ("matmul", ["broadcast_in_dim", "mul", "broadcast_in_dim", "mul", "matmul"]),
        ("elementwise", ["broadcast_in_dim", "mul"]), ("matmul", ["matmul"]),
        ("elementwise", ["exp"]), ("matmul", ["matmul"]),
        ("elementwise", ["mul"]), ("matmul", ["matmul"]),
        ("elementwise", ["rsqrt"]), ("matmul", ["broadcast_in_dim", "matmul"])]
    cuda = _kernels(fuse(module, "cuda"))
    assert cuda[:2] == [("elementwise", ["broadcast_in_dim", "mul", "broadcast_in_dim", "mul"]),
                        ("matmul", ["matmul"])]


# A doubling scan (Hillis-Steele, as cummax and logcumsumexp build it): level k adds the
# value shifted by 2^k. Fused whole, exp(x) would be evaluated at 32 distinct indices per
# output element (each level doubles the count below it), its code 32 times over.
DOUBLING = """\
builtin.module {
  func.func @step(%x: tensor<32xf32>) -> (tensor<32xf32>) {
    %y0 = nova.exp %x : tensor<32xf32>
    %s0 = nova.slice %y0 start = [0] limit = [31] stride = [1] : tensor<32xf32> -> tensor<31xf32>
    %c0 = nova.constant 0.000000e+00 : f32 : tensor<1xf32>
    %d0 = nova.concat %c0, %s0 dim = 0 : i64 : tensor<1xf32>, tensor<31xf32> -> tensor<32xf32>
    %y1 = nova.add %y0, %d0 : tensor<32xf32>
    %s1 = nova.slice %y1 start = [0] limit = [30] stride = [1] : tensor<32xf32> -> tensor<30xf32>
    %c1 = nova.constant 0.000000e+00 : f32 : tensor<2xf32>
    %d1 = nova.concat %c1, %s1 dim = 0 : i64 : tensor<2xf32>, tensor<30xf32> -> tensor<32xf32>
    %y2 = nova.add %y1, %d1 : tensor<32xf32>
    %s2 = nova.slice %y2 start = [0] limit = [28] stride = [1] : tensor<32xf32> -> tensor<28xf32>
    %c2 = nova.constant 0.000000e+00 : f32 : tensor<4xf32>
    %d2 = nova.concat %c2, %s2 dim = 0 : i64 : tensor<4xf32>, tensor<28xf32> -> tensor<32xf32>
    %y3 = nova.add %y2, %d2 : tensor<32xf32>
    %s3 = nova.slice %y3 start = [0] limit = [24] stride = [1] : tensor<32xf32> -> tensor<24xf32>
    %c3 = nova.constant 0.000000e+00 : f32 : tensor<8xf32>
    %d3 = nova.concat %c3, %s3 dim = 0 : i64 : tensor<8xf32>, tensor<24xf32> -> tensor<32xf32>
    %y4 = nova.add %y3, %d3 : tensor<32xf32>
    %s4 = nova.slice %y4 start = [0] limit = [16] stride = [1] : tensor<32xf32> -> tensor<16xf32>
    %c4 = nova.constant 0.000000e+00 : f32 : tensor<16xf32>
    %d4 = nova.concat %c4, %s4 dim = 0 : i64 : tensor<16xf32>, tensor<16xf32> -> tensor<32xf32>
    %y5 = nova.add %y4, %d4 : tensor<32xf32>
    func.return %y5 : tensor<32xf32>
  }
}"""


def test_an_op_read_at_more_than_max_evaluations_indices_is_stored():
    """The levels' shifted reads of y1 .. y4 stay in one kernel (at most 16 indices
    each), exp(x), read at 32, is stored: cummax over 512 elements compiled for 96 s
    when every level fused into one kernel."""
    import nova.compiler.passes.fusion as fusion
    fused = str(fuse(parse_module(DOUBLING)))
    kernels = fused.split('"nova.fusion"')[1:]
    assert len(kernels) == 2 and "nova.exp" in kernels[0] and "nova.exp" not in kernels[1]
    assert kernels[0].count("nova.") == 2          # exp and its yield
    assert kernels[1].count("nova.add") == 5 and kernels[1].count("nova.concat") == 5
    assert fusion.MAX_EVALUATIONS == 16


# The backward of a doubling scan: each level reads the gradient below it through two
# pointwise ops, one read at j, the other only through a shift (slice and pad): the
# pointwise consumers evaluate it at different indices, which add up.
DOUBLING_BACKWARD = """\
builtin.module {
  func.func @step(%x: tensor<32xf32>) -> (tensor<32xf32>) {
    %g0 = nova.exp %x : tensor<32xf32>
    %z = nova.constant 0.000000e+00 : f32 : tensor<f32>
    %two = nova.constant 2.000000e+00 : f32 : tensor<32xf32>
    %a0 = nova.mul %g0, %two : tensor<32xf32>
    %b0 = nova.add %g0, %two : tensor<32xf32>
    %s0 = nova.slice %b0 start = [1] limit = [32] stride = [1] : tensor<32xf32> -> tensor<31xf32>
    %p0 = nova.pad %s0, %z low = [0] high = [1] interior = [0] : tensor<31xf32>, tensor<f32> -> tensor<32xf32>
    %g1 = nova.add %a0, %p0 : tensor<32xf32>
    %a1 = nova.mul %g1, %two : tensor<32xf32>
    %b1 = nova.add %g1, %two : tensor<32xf32>
    %s1 = nova.slice %b1 start = [2] limit = [32] stride = [1] : tensor<32xf32> -> tensor<30xf32>
    %p1 = nova.pad %s1, %z low = [0] high = [2] interior = [0] : tensor<30xf32>, tensor<f32> -> tensor<32xf32>
    %g2 = nova.add %a1, %p1 : tensor<32xf32>
    %a2 = nova.mul %g2, %two : tensor<32xf32>
    %b2 = nova.add %g2, %two : tensor<32xf32>
    %s2 = nova.slice %b2 start = [4] limit = [32] stride = [1] : tensor<32xf32> -> tensor<28xf32>
    %p2 = nova.pad %s2, %z low = [0] high = [4] interior = [0] : tensor<28xf32>, tensor<f32> -> tensor<32xf32>
    %g3 = nova.add %a2, %p2 : tensor<32xf32>
    %a3 = nova.mul %g3, %two : tensor<32xf32>
    %b3 = nova.add %g3, %two : tensor<32xf32>
    %s3 = nova.slice %b3 start = [8] limit = [32] stride = [1] : tensor<32xf32> -> tensor<24xf32>
    %p3 = nova.pad %s3, %z low = [0] high = [8] interior = [0] : tensor<24xf32>, tensor<f32> -> tensor<32xf32>
    %g4 = nova.add %a3, %p3 : tensor<32xf32>
    %a4 = nova.mul %g4, %two : tensor<32xf32>
    %b4 = nova.add %g4, %two : tensor<32xf32>
    %s4 = nova.slice %b4 start = [16] limit = [32] stride = [1] : tensor<32xf32> -> tensor<16xf32>
    %p4 = nova.pad %s4, %z low = [0] high = [16] interior = [0] : tensor<16xf32>, tensor<f32> -> tensor<32xf32>
    %g5 = nova.add %a4, %p4 : tensor<32xf32>
    func.return %g5 : tensor<32xf32>
  }
}"""


def test_indices_reached_through_different_pointwise_consumers_add_up():
    """logcumsumexp's gradient over 128 elements compiled for 75 s (one kernel of 1.5
    MB), the pointwise consumers' indices taken as one set."""
    kernels = str(fuse(parse_module(DOUBLING_BACKWARD))).split('"nova.fusion"')[1:]
    assert len(kernels) == 2 and "nova.exp" in kernels[0] and "nova.exp" not in kernels[1]
    assert kernels[1].count("nova.pad") == 5
