"""Fused attention: the pass that finds the composite (forward and derived backward),
the fused ops' meaning, and the CPU kernels against the composite they replace."""
import math

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova import config
from nova.compiler import dialect as nd
from nova.compiler.irgen import build_module
from nova.compiler.passes import fuse_attention, simplify
from nova.compiler.pipeline import compile_step, front
from nova.tensor.realize import pending_graph

# The differentiated composite of a causal ``scaled_dot_product_attention`` (the pass's
# input: the step after CSE) and the pass's output. If an autograd rule changes, the
# first half of the golden test fails, and the matcher must follow the new rule.
COMPOSITE = """\
builtin.module {
  func.func @step(%0: tensor<1x3x2xf32>, %1: tensor<1x3x2xf32>, %2: tensor<1x3x2xf32>) -> (tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) {
    %3 = nova.transpose %0 perm = [0, 2, 1] : tensor<1x3x2xf32> -> tensor<1x2x3xf32>
    %4 = nova.matmul %1, %3 : tensor<1x3x2xf32>, tensor<1x2x3xf32> -> tensor<1x3x3xf32>
    %5 = nova.constant 0.707106769 : f32 : tensor<1x3x3xf32>
    %6 = nova.mul %4, %5 : tensor<1x3x3xf32>
    %7 = nova.constant true : tensor<3x3xi1>
    %8 = nova.iota dim = 0 : i64 : tensor<3x3xi64>
    %9 = nova.iota dim = 1 : i64 : tensor<3x3xi64>
    %10 = nova.sub %9, %8 : tensor<3x3xi64>
    %11 = nova.constant 1 : i64 : tensor<3x3xi64>
    %12 = nova.compare "ge", %10, %11 : tensor<3x3xi64> -> tensor<3x3xi1>
    %13 = nova.constant false : tensor<3x3xi1>
    %14 = nova.where %12, %7, %13 : tensor<3x3xi1>, tensor<3x3xi1>
    %15 = nova.constant 0xff800000 : f32 : tensor<1x3x3xf32>
    %16 = nova.broadcast_in_dim %14 dims = [1, 2] : tensor<3x3xi1> -> tensor<1x3x3xi1>
    %17 = nova.where %16, %15, %6 : tensor<1x3x3xi1>, tensor<1x3x3xf32>
    %18 = nova.reduce_max %17 axes = [2] : tensor<1x3x3xf32> -> tensor<1x3xf32>
    %19 = nova.reshape %18 : tensor<1x3xf32> -> tensor<1x3x1xf32>
    %20 = nova.broadcast_in_dim %19 dims = [0, 1, 2] : tensor<1x3x1xf32> -> tensor<1x3x3xf32>
    %21 = nova.sub %17, %20 : tensor<1x3x3xf32>
    %22 = nova.exp %21 : tensor<1x3x3xf32>
    %23 = nova.reduce_sum %22 axes = [2] : tensor<1x3x3xf32> -> tensor<1x3xf32>
    %24 = nova.reshape %23 : tensor<1x3xf32> -> tensor<1x3x1xf32>
    %25 = nova.broadcast_in_dim %24 dims = [0, 1, 2] : tensor<1x3x1xf32> -> tensor<1x3x3xf32>
    %26 = nova.div %22, %25 : tensor<1x3x3xf32>
    %27 = nova.matmul %26, %2 : tensor<1x3x3xf32>, tensor<1x3x2xf32> -> tensor<1x3x2xf32>
    %28 = nova.constant 1.000000e+00 : f32 : tensor<f32>
    %29 = nova.broadcast_in_dim %28 dims = [] {nova.backward} : tensor<f32> -> tensor<1x3x2xf32>
    %30 = nova.transpose %2 perm = [0, 2, 1] {nova.backward} : tensor<1x3x2xf32> -> tensor<1x2x3xf32>
    %31 = nova.matmul %29, %30 {nova.backward} : tensor<1x3x2xf32>, tensor<1x2x3xf32> -> tensor<1x3x3xf32>
    %32 = nova.transpose %26 perm = [0, 2, 1] {nova.backward} : tensor<1x3x3xf32> -> tensor<1x3x3xf32>
    %33 = nova.matmul %32, %29 {nova.backward} : tensor<1x3x3xf32>, tensor<1x3x2xf32> -> tensor<1x3x2xf32>
    %34 = nova.div %31, %25 {nova.backward} : tensor<1x3x3xf32>
    %35 = nova.mul %31, %26 {nova.backward} : tensor<1x3x3xf32>
    %36 = nova.div %35, %25 {nova.backward} : tensor<1x3x3xf32>
    %37 = nova.neg %36 {nova.backward} : tensor<1x3x3xf32>
    %38 = nova.reduce_sum %37 axes = [2] {nova.backward} : tensor<1x3x3xf32> -> tensor<1x3xf32>
    %39 = nova.reshape %38 {nova.backward} : tensor<1x3xf32> -> tensor<1x3x1xf32>
    %40 = nova.reshape %39 {nova.backward} : tensor<1x3x1xf32> -> tensor<1x3xf32>
    %41 = nova.broadcast_in_dim %40 dims = [0, 1] {nova.backward} : tensor<1x3xf32> -> tensor<1x3x3xf32>
    %42 = nova.add %34, %41 {nova.backward} : tensor<1x3x3xf32>
    %43 = nova.mul %42, %22 {nova.backward} : tensor<1x3x3xf32>
    %44 = nova.constant 0.000000e+00 : f32 {nova.backward} : tensor<1x3x3xf32>
    %45 = nova.where %16, %44, %43 {nova.backward} : tensor<1x3x3xi1>, tensor<1x3x3xf32>
    %46 = nova.mul %45, %5 {nova.backward} : tensor<1x3x3xf32>
    %47 = nova.transpose %3 perm = [0, 2, 1] {nova.backward} : tensor<1x2x3xf32> -> tensor<1x3x2xf32>
    %48 = nova.matmul %46, %47 {nova.backward} : tensor<1x3x3xf32>, tensor<1x3x2xf32> -> tensor<1x3x2xf32>
    %49 = nova.transpose %1 perm = [0, 2, 1] {nova.backward} : tensor<1x3x2xf32> -> tensor<1x2x3xf32>
    %50 = nova.matmul %49, %46 {nova.backward} : tensor<1x2x3xf32>, tensor<1x3x3xf32> -> tensor<1x2x3xf32>
    %51 = nova.transpose %50 perm = [0, 2, 1] {nova.backward} : tensor<1x2x3xf32> -> tensor<1x3x2xf32>
    func.return %27, %48, %51, %33 : tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>
  }
}"""

FUSED = """\
builtin.module {
  func.func @step(%0: tensor<1x3x2xf32>, %1: tensor<1x3x2xf32>, %2: tensor<1x3x2xf32>) -> (tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) {
    %3 = nova.attention %1, %0, %2 scale = 0.70710676908493042 : f64 causal = 1 : i64 : tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32> -> tensor<1x9xf32>
    %4 = nova.slice %3 start = [0, 0] limit = [1, 6] stride = [1, 1] : tensor<1x9xf32> -> tensor<1x6xf32>
    %5 = nova.reshape %4 : tensor<1x6xf32> -> tensor<1x3x2xf32>
    %6 = nova.constant 1.000000e+00 : f32 : tensor<f32>
    %7 = nova.broadcast_in_dim %6 dims = [] {nova.backward} : tensor<f32> -> tensor<1x3x2xf32>
    %8 = nova.attention_grad %1, %0, %2, %3, %7 scale = 0.70710676908493042 : f64 causal = 1 : i64 {nova.backward} : tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x9xf32>, tensor<1x3x2xf32> -> tensor<1x18xf32>
    %9 = nova.slice %8 start = [0, 0] limit = [1, 6] stride = [1, 1] {nova.backward} : tensor<1x18xf32> -> tensor<1x6xf32>
    %10 = nova.reshape %9 {nova.backward} : tensor<1x6xf32> -> tensor<1x3x2xf32>
    %11 = nova.slice %8 start = [0, 6] limit = [1, 12] stride = [1, 1] {nova.backward} : tensor<1x18xf32> -> tensor<1x6xf32>
    %12 = nova.reshape %11 {nova.backward} : tensor<1x6xf32> -> tensor<1x3x2xf32>
    %13 = nova.slice %8 start = [0, 12] limit = [1, 18] stride = [1, 1] {nova.backward} : tensor<1x18xf32> -> tensor<1x6xf32>
    %14 = nova.reshape %13 {nova.backward} : tensor<1x6xf32> -> tensor<1x3x2xf32>
    func.return %5, %10, %12, %14 : tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>
  }
}"""


def composite_attention():
    """Steps compiled inside keep attention as its composite (NOVA_FUSED_ATTENTION=0)."""
    return config.FUSED_ATTENTION.overridden("0")


def _ones_sdpa_module():
    q, k, v = (nv.tensor(np.ones((1, 3, 2), np.float32), requires_grad=True)
               for _ in range(3))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y.sum().backward()
    return simplify(build_module(pending_graph(y, q.grad, k.grad, v.grad)))


def test_the_pass_turns_the_differentiated_composite_into_the_fused_ops():
    module = _ones_sdpa_module()
    assert str(module) == COMPOSITE
    assert str(fuse_attention(module)) == FUSED


def _ops_of(module) -> list[str]:
    fn = next(op for op in module.ops if op.name == "func.func")
    return [op.name for op in fn.body.block.ops]


def _step_ops(*tensors) -> list[str]:
    return _ops_of(front(pending_graph(*tensors)))


def _qkv(shape=(2, 2, 6, 4), seed=0, grad=True):
    rng = np.random.default_rng(seed)
    return [nv.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)
            for _ in range(3)]


def _hand_written(q, k, v, mask):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
    att = att.masked_fill(mask, float("-inf"))
    return F.softmax(att, dim=-1) @ v


@pytest.mark.parametrize("mask", ["triu", "tril_eq_0", "compare"])
def test_hand_written_attention_is_fused_forward_and_backward(mask):
    q, k, v = _qkv()
    T = q.shape[-2]
    hidden = {"triu": lambda: nv.triu(nv.ones(T, T, dtype=nv.bool), 1),
              "tril_eq_0": lambda: nv.tril(nv.ones(T, T)) == 0,
              "compare": lambda: nv.arange(T).view(1, T) > nv.arange(T).view(T, 1)}[mask]()
    y = _hand_written(q, k, v, hidden)
    (y * y).sum().backward()
    ops = _step_ops(y, q.grad, k.grad, v.grad)
    assert ops.count("nova.attention") == 1 and ops.count("nova.attention_grad") == 1
    assert "nova.reduce_max" not in ops and "nova.matmul" not in ops


def test_unmasked_attention_and_the_forward_alone_are_fused():
    q, k, v = _qkv(grad=False)
    y = F.scaled_dot_product_attention(q, k, v)
    ops = _step_ops(y)
    assert ops.count("nova.attention") == 1 and "nova.attention_grad" not in ops


def _not_fused(ops: list[str]) -> bool:
    return "nova.attention" not in ops and "nova.attention_grad" not in ops


def test_attention_is_left_as_composite_when_its_probabilities_are_used():
    q, k, v = _qkv(grad=False)
    att = F.softmax((q @ k.transpose(-2, -1)) * 0.5, dim=-1)
    assert _not_fused(_step_ops(att @ v, att))


def test_a_mask_that_is_not_causal_or_comes_from_a_tensor_is_not_fused():
    q, k, v = _qkv(grad=False)
    T = q.shape[-2]
    shifted = nv.triu(nv.ones(T, T, dtype=nv.bool), 2)          # not j > i
    assert _not_fused(_step_ops(_hand_written(q, k, v, shifted)))
    buffer = nv.tensor(np.triu(np.ones((T, T), bool), 1))       # data, not a constant
    assert _not_fused(_step_ops(_hand_written(q, k, v, buffer)))
    additive = nv.tensor(np.zeros((T, T), np.float32))
    assert _not_fused(_step_ops(F.scaled_dot_product_attention(q, k, v, attn_mask=additive)))


def _masked_outputs(q, k, v, hidden):
    """The hand-written attention under ``hidden`` fused (if the pass takes it) and as
    the composite, and whether it was fused."""
    def run():
        ts = [nv.tensor(a) for a in (q, k, v)]
        y = _hand_written(*ts, hidden())
        return y.numpy(), "nova.attention" in _step_ops(_hand_written(*ts, hidden()))
    fused, was_fused = run()
    with composite_attention():
        composite, _ = run()
    return fused, composite, was_fused


@pytest.mark.parametrize("kind", ["f32_rounding", "i32_wrapping"])
def test_a_mask_is_evaluated_in_the_types_the_step_computes_it_in(kind):
    """(1 + 2^-24 + 2^-30 >= 1 + 2^-23) holds in float32, not in float64; j * 2^32 > i *
    2^32 is never true in int32 (both wrap to 0), but is "j > i" in int64. The pass must
    read these masks as the step computes them (all hidden; none hidden)."""
    T = 5
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((1, 2, T, 4)).astype(np.float32) for _ in range(3))
    if kind == "f32_rounding":
        def hidden():
            a = nv.full((T, T), 1.0, dtype=nv.float32)
            b = nv.full((T, T), 2.0 ** -24 + 2.0 ** -30, dtype=nv.float32)
            return (a + b) >= nv.full((T, T), 1.0 + 2.0 ** -23, dtype=nv.float32)
    else:
        def hidden():
            i = nv.arange(T, dtype=nv.int32).view(T, 1) * 65536 * 65536
            return nv.arange(T, dtype=nv.int32).view(1, T) * 65536 * 65536 > i
    fused, composite, was_fused = _masked_outputs(q, k, v, hidden)
    assert was_fused == (kind == "i32_wrapping")      # nothing hidden: fused, unmasked
    np.testing.assert_allclose(fused, composite, rtol=0, atol=1e-5)
    assert np.isnan(composite).all() == (kind == "f32_rounding")


def test_a_long_causal_mask_is_read_in_row_blocks_and_checked_to_its_last_row():
    from nova.compiler.passes import attention as pa
    T = 3 * pa.MASK_ROWS + 5
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 1, T, 4)).astype(np.float32) for _ in range(3))
    causal = lambda: nv.triu(nv.ones(T, T, dtype=nv.bool), 1)
    *_, was_fused = _masked_outputs(q, k, v, causal)
    assert was_fused
    # hides one more key, in the last block of rows only: not causal, not fused
    off = np.zeros((T, T), np.float32)
    off[T - 1, 0] = 1.0
    almost = lambda: nv.triu(nv.ones(T, T, dtype=nv.bool), 1) | (
        nv.full((T, T), 0.0) + nv.tensor(off) > 0.5)
    fused, composite, was_fused = _masked_outputs(q, k, v, almost)
    assert not was_fused
    np.testing.assert_allclose(fused, composite, rtol=0, atol=1e-6)


def test_dropout_on_the_probabilities_is_fused_and_draws_nothing_score_sized():
    """SDPA's dropout_p, and nn.Dropout on a hand-written softmax (nanoGPT's manual path):
    both fused, forward and backward, with the draw inside the kernels -- no
    rng_uniform, compare or L x S value is left in the step."""
    q, k, v = _qkv((2, 2, 6, 4))
    nv.manual_seed(0)
    y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, is_causal=True)
    y.sum().backward()
    text = str(front(pending_graph(y, q.grad, k.grad, v.grad)))
    assert text.count("nova.attention ") == 1 and text.count("nova.attention_grad ") == 1
    assert "dropout = 5.000000e-01 : f64 x 2.000000e+00 : f64" in text
    assert "nova.rng_uniform" not in text and "6x6x" not in text and "x6x6x" not in text
    q, k, v = _qkv((2, 2, 6, 4), seed=1)
    T = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * 0.5
    att = att.masked_fill(nv.triu(nv.ones(T, T, dtype=nv.bool), 1), float("-inf"))
    y = nv.nn.Dropout(0.1)(F.softmax(att, dim=-1)) @ v
    (y * y).sum().backward()
    ops = _step_ops(y, q.grad, k.grad, v.grad)
    assert ops.count("nova.attention") == 1 and ops.count("nova.attention_grad") == 1
    assert "nova.rng_uniform" not in ops and "nova.matmul" not in ops


def test_a_dropout_the_pass_does_not_know_is_left_as_composite():
    """A mask drawn over another shape, or a scale that is not a constant, is not
    F.dropout's: the composite stays."""
    q, k, v = _qkv((1, 2, 6, 4), grad=False)
    p = F.softmax((q @ k.transpose(-2, -1)) * 0.5, dim=-1)
    row_mask = nv.rand(1, 2, 6, 1) >= 0.2                           # one draw per row
    assert _not_fused(_step_ops(nv.where(row_mask, p * 1.25, 0.0) @ v))
    scale = nv.tensor(np.float32(1.25))
    assert _not_fused(_step_ops(nv.where(nv.rand(1, 2, 6, 6) >= 0.2, p * scale, 0.0) @ v))


def test_a_backward_asking_for_some_of_the_gradients_is_not_fused():
    q, k, v = _qkv()
    y = F.scaled_dot_product_attention(q, k.detach(), v.detach(), is_causal=True)
    y.sum().backward()
    assert _not_fused(_step_ops(y, q.grad))


@pytest.mark.parametrize("remat", ["off", "default", "aggressive"])
def test_no_score_sized_value_remains_in_any_remat_mode(remat):
    q, k, v = _qkv((2, 3, 16, 8))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (y * y).sum().backward()
    text = str(front(pending_graph(y, q.grad, k.grad, v.grad), remat))
    assert "nova.attention_grad" in text and "16x16x" not in text and "x16x16x" not in text


def _run(q_np, k_np, v_np, g_np, causal, engine="cpu", dropout=0.0):
    """Output and gradients of attention at these inputs on ``engine`` (with dropout:
    the same draws every call, from seed 7)."""
    with nv.engine(engine):
        q, k, v = (nv.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))
        nv.manual_seed(7)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)
        (y * nv.tensor(g_np)).sum().backward()
        return [t.numpy() for t in (y, q.grad, k.grad, v.grad)]


SHAPES = [  # (batch..., L, S, E, Ev, causal): odd sizes, head dims 16..128, L != S
    ((2, 2), 8, 8, 4, 4, True), ((1, 3), 37, 37, 16, 16, True), ((2,), 70, 70, 24, 24, False),
    ((1, 1), 33, 50, 8, 12, False), ((1, 2), 130, 130, 64, 64, True),
    ((1, 1), 65, 65, 128, 128, True), ((3, 1), 20, 47, 32, 16, True),
    # a GPT at length 31 (4 heads of 32): LLVM 22's loop vectorizer failed an assertion
    # compiling this forward (the compile worker died) while the mask was three compares
    # inside the row loops (``Attention.visible_columns``)
    ((1, 4), 31, 31, 32, 32, True)]


@pytest.mark.parametrize("batch,L,S,E,Ev,causal", SHAPES)
def test_the_fused_kernels_match_the_composite(batch, L, S, E, Ev, causal):
    rng = np.random.default_rng(L * S + E)
    q = rng.standard_normal(batch + (L, E)).astype(np.float32)
    k = rng.standard_normal(batch + (S, E)).astype(np.float32)
    v = rng.standard_normal(batch + (S, Ev)).astype(np.float32)
    g = rng.standard_normal(batch + (L, Ev)).astype(np.float32)
    fused = _run(q, k, v, g, causal)
    with composite_attention():
        composite = _run(q, k, v, g, causal)
    for name, a, b in zip(("out", "dq", "dk", "dv"), fused, composite):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-5 * np.abs(b).max(), err_msg=name)


@pytest.mark.parametrize("batch,L,S,E,Ev,causal", [SHAPES[i] for i in (0, 1, 3, 4, 6)])
@pytest.mark.parametrize("dropout", [0.1, 0.6])
def test_the_fused_kernels_with_dropout_match_the_composite(batch, L, S, E, Ev, causal,
                                                            dropout):
    """The same draws as the composite's rng_uniform over (..., L, S), position by
    position: the kept probabilities, their scale, and the gradients through them."""
    rng = np.random.default_rng(L * S + E + 1)
    q = rng.standard_normal(batch + (L, E)).astype(np.float32)
    k = rng.standard_normal(batch + (S, E)).astype(np.float32)
    v = rng.standard_normal(batch + (S, Ev)).astype(np.float32)
    g = rng.standard_normal(batch + (L, Ev)).astype(np.float32)
    fused = _run(q, k, v, g, causal, dropout=dropout)
    with composite_attention():
        composite = _run(q, k, v, g, causal, dropout=dropout)
    undropped = _run(q, k, v, g, causal)
    for name, a, b, c in zip(("out", "dq", "dk", "dv"), fused, composite, undropped):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-5 * np.abs(b).max(), err_msg=name)
        assert np.abs(a - c).max() > 1e-3, name        # the dropout did something
    interp = _run(q, k, v, g, causal, engine="interp", dropout=dropout)
    for name, a, b in zip(("out", "dq", "dk", "dv"), interp, composite):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-5 * np.abs(b).max(), err_msg=name)


def _fused_module(q_shape, k_shape, v_shape, causal: bool):
    """A step of one nova.attention and its nova.attention_grad, returning both packed
    results as they are (output and log-sum-exp; dq, dk and dv)."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, f64, i64
    from xdsl.ir import Block, Region
    o_shape = q_shape[:-1] + v_shape[-1:]
    types = [nd.tensor_type(s, "f32") for s in (q_shape, k_shape, v_shape, o_shape)]
    block = Block(arg_types=types)
    q, k, v, g = block.args
    props = {"scale": FloatAttr(0.37, f64), "causal": IntegerAttr(int(causal), i64)}
    batch = q_shape[:-2]
    att = nd.AttentionOp.create(operands=[q, k, v], properties=dict(props), result_types=[
        nd.tensor_type(batch + (sum(nd.attention_parts(q_shape, v_shape)),), "f32")])
    grad = nd.AttentionGradOp.create(
        operands=[q, k, v, att.result, g], properties=dict(props), result_types=[
            nd.tensor_type(batch + (sum(nd.attention_grad_parts(q_shape, k_shape, v_shape)),),
                           "f32")])
    block.add_ops([att, grad, func.ReturnOp(att.result, grad.result)])
    fn = func.FuncOp.from_region("step", types, [att.result.type, grad.result.type],
                                 Region(block))
    module = ModuleOp([fn])
    module.verify()
    return module


@pytest.mark.parametrize("causal", [True, False])
def test_the_kernels_packed_results_match_the_interpreter_lse_included(causal):
    """The CPU kernels' whole results -- the forward's log-sum-exp column included --
    against the interpreter's meaning of the two ops, on a hand-built step."""
    from nova.runtime.executable import Executable
    shapes = ((2, 45, 12), (2, 45, 12), (2, 45, 20))
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    args.append(rng.standard_normal((2, 45, 20)).astype(np.float32))
    cpu = Executable(_fused_module(*shapes, causal), "cpu").run(args)
    interp = Executable(_fused_module(*shapes, causal), "interp").run(args)
    for a, b in zip(cpu, interp):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-5 * np.abs(b).max())
    lse = interp[0][:, 45 * 20:]
    assert np.isfinite(lse).all() and (lse > 0).any()


def test_the_interpreter_defines_the_fused_ops_as_the_composite():
    rng = np.random.default_rng(3)
    q, k, v, g = (rng.standard_normal((2, 3, 9, 5)).astype(np.float32) for _ in range(4))
    interp = _run(q, k, v, g, True, engine="interp")
    with composite_attention():
        composite = _run(q, k, v, g, True, engine="interp")
    for a, b in zip(interp, composite):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * np.abs(b).max())


def test_nan_and_inf_spread_as_the_fused_ops_define():
    """A NaN in a query and an inf in a key. The kernels' NaNs are the interpreter's,
    except that a key block no query of a block sees is skipped, so the definition's
    ``0 * NaN`` there (a hidden pair inside a product) is the exact value instead: the
    kernels' NaNs are a subset, and every finite value agrees. The output and dq have
    the composite's NaNs exactly."""
    rng = np.random.default_rng(4)
    q, k, v, g = (rng.standard_normal((1, 2, 70, 8)).astype(np.float32) for _ in range(4))
    q[0, 0, 3, 2] = np.nan
    k[0, 1, 5, 1] = np.inf
    fused = _run(q, k, v, g, True)
    interp = _run(q, k, v, g, True, engine="interp")
    with composite_attention():
        composite = _run(q, k, v, g, True)
    for name, a, b in zip(("out", "dq", "dk", "dv"), fused, interp):
        assert np.isnan(a).any() and not (np.isnan(a) & ~np.isnan(b)).any(), name
        ok = ~np.isnan(b)
        np.testing.assert_allclose(a[ok], b[ok], rtol=0, atol=2e-5 * np.abs(b[ok]).max())
        if name != "dk":
            assert np.array_equal(np.isnan(a), np.isnan(b)), name
    assert np.isnan(interp[2][0, 0, 69, 2]) and not np.isnan(fused[2][0, 0, 69, 2])
    for name, a, b in zip(("out", "dq"), fused, composite):
        assert np.array_equal(np.isnan(a), np.isnan(b)), name


def test_the_cpu_plan_names_its_blocks_and_the_cuda_target_configures_its_own():
    q, k, v = _qkv((1, 2, 40, 16), grad=False)
    module = front(pending_graph(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
    step = compile_step(module.clone(), "cpu")
    plan = next(p for p in step.plans if p.kind == "attention")
    assert plan.schedule.strategy == "attention" and plan.schedule.blocks[0] == \
        plan.schedule.blocks[1]
    assert "blocks=" in plan.describe() and "BR = BC (causal)" in plan.describe()
    from nova.compiler.targets import get_target
    cuda = get_target("cuda")
    (plan,) = [p for p in compile_step(module, cuda).plans if p.kind == "attention"]
    assert not plan.schedule.blocks          # the GPU's blocks come from its configurator
    cfg = cuda.configure(plan)
    assert cfg.strategy == "attention" and cfg.attention.block in (16, 32, 64)
    assert cfg.block == (2 * cfg.attention.block, 1, 1)      # a warp per 16 rows


def test_the_forward_row_max_is_vector_code_with_no_reduction_left_to_lower():
    """The online softmax's row maximum is written as vector ``maxnum``s (the emitted
    IR) so that, after the pipeline, no ``llvm.vector.reduce.fmax`` is left: x86 lowers
    that reduction, without ``nnan``, as a chain of scalar steps fixing up NaN, which
    was ~16% of the forward kernel's time. (Values, NaN included: the tests above.)"""
    import re

    from tests.compiler.llvm_ir import kernel_llvm, optimized
    q, k, v = _qkv((2, 2, 128, 32), grad=False)
    [text] = kernel_llvm(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                         strategy="attention")
    assert re.search(r"call <\d+ x float> @\"?llvm\.maxnum\.v\d+f32", text)
    assert '"mx.head' not in text                    # no scalar loop for the max
    assert "llvm.vector.reduce.fmax" not in optimized(text)


def test_transposed_packs_are_register_transposes():
    """K^T (and V^T in the backward) are packed as lanes x lanes blocks transposed in
    registers, two-source shuffles, not element by element into strided slots (~8% of
    the medium GPT's attention kernels). Values, with rows and columns past the last
    whole block: the shapes above (E = 24, S = 47, L = 70)."""
    import math
    import re

    from nova.compiler.targets.cpu.device import detect_cpu
    from tests.compiler.llvm_ir import kernel_llvm
    lanes = detect_cpu().lanes(4)
    q, k, v = _qkv((2, 2, 64, 32), grad=False)
    [text] = kernel_llvm(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                         strategy="attention")
    two_source = re.findall(rf'shufflevector <{lanes} x float> %"?[\w.]+"?, '
                            rf'<{lanes} x float> %', text)
    assert len(two_source) >= lanes * int(math.log2(lanes))


@pytest.mark.parametrize("extra", [0, 3])
def test_the_backward_row_sums_of_do_times_o_are_vector_code(extra):
    """D = rowsum(dO * O) reads O, the forward's packed result, by address: whole
    vectors of each row and one horizontal sum, then a scalar loop over the columns
    past the last whole vector only where there are any (Ev = lanes + 3). Through the
    emitter, element by element, it was ~7% of the medium GPT's attention backward."""
    from nova.compiler.targets.cpu.device import detect_cpu
    from tests.compiler.llvm_ir import kernel_llvm
    ev = detect_cpu().lanes(4) + extra
    q, k, v = (nv.tensor(np.ones((1, 2, 40, ev), np.float32), requires_grad=True)
               for _ in range(3))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (y * y).sum().backward()
    [text] = kernel_llvm(q.grad, k.grad, v.grad, strategy="attention_grad")
    assert ('"dd.head' in text) == bool(extra)


def test_every_engine_but_upstream_mlir_fuses_attention():
    from nova.compiler.pipeline import fused_attention
    assert fused_attention("cpu") and fused_attention("interp") and fused_attention("cuda")
    assert not fused_attention("mlir")
    with composite_attention():
        assert not fused_attention("cpu") and not fused_attention("cuda")


def test_a_verifier_rejects_mismatched_attention_operands():
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f64, i64
    from xdsl.ir import Block
    from xdsl.utils.exceptions import VerifyException
    t = nd.tensor_type((2, 5, 4), "f32")
    bad = nd.tensor_type((2, 5, 3), "f32")
    block = Block(arg_types=[t, bad, t])
    op = nd.AttentionOp.create(operands=list(block.args), result_types=[t],
                               properties={"scale": FloatAttr(1.0, f64),
                                           "causal": IntegerAttr(1, i64)})
    with pytest.raises(VerifyException, match="need \\(..., L, E\\)"):
        op.verify()
    key = nd.tensor_type((2,), "i64")
    block = Block(arg_types=[t, t, t, key])
    q, k, v, rng_key = block.args
    props = {"scale": FloatAttr(1.0, f64), "causal": IntegerAttr(1, i64)}
    with pytest.raises(VerifyException, match="an rng key and a dropout scale need a dropout"):
        nd.AttentionOp.create(operands=[q, k, v, rng_key], result_types=[t],
                              properties=dict(props)).verify()
    for rate, operands in ((1.5, [q, k, v, rng_key]), (0.5, [q, k, v])):
        with pytest.raises(VerifyException, match="dropout"):
            nd.AttentionOp.create(operands=operands, result_types=[t], properties={
                **props, "dropout": FloatAttr(rate, f64),
                "dropout_scale": FloatAttr(2.0, f64)}).verify()


def _projected_attention(x_np, w_np, g_np, heads, backward):
    """A GPT's attention from one QKV projection, heads merged back: the output and,
    with ``backward``, the gradients of x and w; and the kernels of the step's
    attention ops (kind, output shape)."""
    x = nv.tensor(x_np, requires_grad=True)
    w = nv.tensor(w_np, requires_grad=True)
    b, t, c = x_np.shape
    q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2)
               for z in (x @ w.t()).split(c, dim=2))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).reshape(b, t, c)
    wanted = [y]
    if backward:
        (y * nv.tensor(g_np)).sum().backward()
        wanted += [x.grad, w.grad]
    step = compile_step(front(pending_graph(*wanted)), "cpu")
    kernels = [(p.schedule.strategy, tuple(p.fusion.outputs[0].type.get_shape()))
               for p in step.plans if p.kind == "attention"]
    return [z.numpy() for z in wanted], kernels


@pytest.mark.parametrize("backward", [False, True])
def test_attention_stores_its_parts_where_the_heads_are_merged(backward):
    """The forward's output merged from heads (when nothing else reads it), and the
    gradients of q, k and v merged and padded into the QKV projection's gradient, are
    stored so by the attention kernels (``lowering.placement``), with no elementwise
    kernel of their own; odd sizes (3 heads of 5, T = 13), against the composite."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 13, 15)).astype(np.float32)
    w = (rng.standard_normal((45, 15)) * 0.3).astype(np.float32)
    g = rng.standard_normal((2, 13, 15)).astype(np.float32)
    fused, kernels = _projected_attention(x, w, g, 3, backward)
    with composite_attention():
        composite, none = _projected_attention(x, w, g, 3, backward)
    assert none == []
    # the backward also reads the forward's packed result (output and log-sum-exp),
    # so the forward keeps it; the gradient kernel's output is the QKV gradient
    assert kernels == ([("attention", (2, 3, 13 * 5 + 13)), ("attention_grad", (2, 13, 45))]
                       if backward else [("attention", (2, 13, 15))])
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-5 * np.abs(b).max())


def test_gpt_training_with_fused_attention_matches_the_composite():
    from models.gpt import GPT, GPTConfig
    cfg = GPTConfig(vocab=32, block=16, d=32, layers=2, heads=2)
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, 32, (4, 16)), rng.integers(0, 32, (4, 16))) for _ in range(3)]

    def losses():
        nv.manual_seed(0)
        model = GPT(cfg)
        opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
        out = []
        for x, y in batches:
            _, loss = model(nv.tensor(x), nv.tensor(y))
            loss.backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.item())
        return out
    fused = losses()
    with composite_attention():
        composite = losses()
    np.testing.assert_allclose(fused, composite, rtol=1e-5)


def test_gpt_training_with_dropout_in_fused_attention_matches_the_composite():
    """Dropout 0.2 everywhere (attention probabilities included), AdamW, four steps: the
    fused kernels draw what the composite draws, so the losses agree to rounding."""
    from models.gpt import GPT, GPTConfig
    cfg = GPTConfig(vocab=32, block=16, d=32, layers=2, heads=2, dropout=0.2)
    rng = np.random.default_rng(1)
    batches = [(rng.integers(0, 32, (4, 16)), rng.integers(0, 32, (4, 16))) for _ in range(4)]

    def losses():
        nv.manual_seed(0)
        model = GPT(cfg)
        opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
        out = []
        for x, y in batches:
            _, loss = model(nv.tensor(x), nv.tensor(y))
            loss.backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.item())
        return out
    fused = losses()
    with composite_attention():
        composite = losses()
    np.testing.assert_allclose(fused, composite, rtol=1e-5)
