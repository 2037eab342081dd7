"""The nova dialect: printing, parsing back, and verifiers."""
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr, f32, i64
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import nova as nv
from nova import config
from nova.compiler import dialect as nd


def _context() -> Context:
    ctx = Context()
    for d in (builtin.Builtin, func.Func, nd.Nova):
        ctx.load_dialect(d)
    return ctx


def _attention_ir() -> str:
    """A realistic graph: causal self-attention with a residual, layer norm and GELU
    (attention kept as its composite: ``_fused_attention_ir`` has the fused ops)."""
    with config.FUSED_ATTENTION.overridden("0"):
        return _composite_attention_ir()


def _fused_attention_ir(dropout: float = 0.0) -> str:
    """Causal attention and its gradients, which the attention pass fuses."""
    rng = np.random.default_rng(1)
    q, k, v = (nv.tensor(rng.standard_normal((2, 2, 5, 4)).astype(np.float32),
                         requires_grad=True) for _ in range(3))
    y = nv.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                      dropout_p=dropout)
    (y * y).sum().backward()
    return nv.debug.dump_ir(y, q.grad, k.grad, v.grad)


def _composite_attention_ir() -> str:
    nv.manual_seed(0)
    x = nv.tensor(np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32))
    wq, wk, wv = (nv.randn(8, 8) for _ in range(3))
    q, k, v = x @ wq, x @ wk, x @ wv
    att = (q @ k.transpose(-2, -1)) * (8 ** -0.5)
    att = att.masked_fill(nv.triu(nv.ones(4, 4, dtype=nv.bool), 1), float("-inf"))
    h = x + att.softmax(-1) @ v
    mu = h.mean(-1, keepdim=True)
    normed = (h - mu) * nv.rsqrt(h.var(-1, keepdim=True, correction=0) + 1e-5)
    out = nv.gelu(normed)[:, 1:, ::2]
    tokens = nv.tensor([[1, 3], [0, 2]])
    picked = out.gather(2, tokens.unsqueeze(1).expand(2, 3, 2))
    return nv.debug.dump_ir(out, picked, nv.cat([out, out], 1).sum())


def test_print_parse_print_is_identical_for_a_realistic_graph():
    text = _attention_ir()
    for op in ("nova.matmul", "nova.transpose", "nova.broadcast_in_dim", "nova.reduce_max",
               "nova.rng_uniform", "nova.where", "nova.slice", "nova.gather", "nova.concat",
               "nova.erf", "nova.rsqrt", "nova.compare", "nova.iota", "nova.constant"):
        assert op in text, op
    module = Parser(_context(), text).parse_module()
    module.verify()
    assert str(module) == text


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_the_fused_attention_ops_print_and_parse_back(dropout):
    text = _fused_attention_ir(dropout)
    assert "nova.attention " in text and "nova.attention_grad " in text
    assert ("dropout = 2.500000e-01 : f64 x 1.3333333730697632 : f64" in text) == bool(dropout)
    module = Parser(_context(), text).parse_module()
    module.verify()
    assert str(module) == text


def test_every_op_round_trips():
    """Each op's custom assembly format parses back, including pad, scatter_add,
    scatter, wrap_index, argsort, the rounding ops, rem, atan2, the bit operations, cumsum, cumprod
    and the collectives."""
    x = nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 1.0                   # pending: a write into a realized tensor is a host copy
    y[:, ::2] = 1.0                                       # pad (interior) + where
    y[nv.tensor([1, 0]), nv.tensor([2, -1])] = 4.0        # wrap_index + scatter
    z = nv.scatter_add(nv.zeros(2, 3), 1, nv.tensor([[0, 0], [2, 1]]), nv.ones(2, 2))
    w = (x.abs().log1p().expm1().log().sqrt().reciprocal().sin().cos().tanh() ** 2).long().float()
    m = nv.maximum(x, 1.0) - nv.minimum(x, 2.0) / 3.0 + x * 2
    r = x.floor() + x.ceil() + x.round() + x.trunc() + nv.fmod(x, 0.75) + nv.atan2(x, 2.0)
    i = x.long()
    bits = ((i & 6) | (i ^ 3)) + ~i
    import nova.distributed as dist
    dist.init_process_group("mpi")          # a world of one: all_reduce_start / _wait
    try:
        text = nv.debug.dump_ir(y, z, w, m, -x, x.argsort(dim=0, descending=True), r,
                                x.cumsum(1), x.cumprod(0), dist.reduced(x, "max"), bits,
                                x.view(nv.int32))
    finally:
        dist.destroy_process_group()
    assert str(Parser(_context(), text).parse_module()) == text
    covered = text + _attention_ir() + _fused_attention_ir()
    missing = [name for name in nd.OPS_BY_NAME if f"nova.{name} " not in covered]
    assert missing == []


def _verify(op):
    op.verify()


def _collective(op, value, reduction, group=0):
    return op.create(operands=[value], result_types=[value.type],
                     properties={"group": IntegerAttr(group, i64),
                                 "reduction": StringAttr(reduction)})


def _t(*shape, et=f32):
    return builtin.TensorType(et, list(shape))


def _arg(*shape, et=f32):
    block = builtin.Block(arg_types=[_t(*shape, et=et)])
    return block.args[0]


@pytest.mark.parametrize("make,message", [
    (lambda: nd.MatmulOp.create(operands=[_arg(2, 3), _arg(4, 5)], result_types=[_t(2, 5)]),
     r"nova.matmul: \(2, 3\) @ \(4, 5\)"),
    (lambda: nd.TransposeOp.create(operands=[_arg(2, 3)], result_types=[_t(3, 2)],
                                   properties={"perm": nd.i64_array([0, 0])}),
     r"perm \[0, 0\] is not a permutation"),
    (lambda: nd.BroadcastInDimOp.create(operands=[_arg(3)], result_types=[_t(2, 4)],
                                        properties={"dims": nd.i64_array([1])}),
     r"input \(3,\) cannot broadcast to \(2, 4\)"),
    (lambda: nd.SliceOp.create(operands=[_arg(4)], result_types=[_t(2)],
                               properties={"start": nd.i64_array([3]),
                                           "limit": nd.i64_array([6]),
                                           "stride": nd.i64_array([1])}),
     "bad window"),
    (lambda: nd.ReshapeOp.create(operands=[_arg(2, 3)], result_types=[_t(5)]),
     r"\(2, 3\) and \(5,\) differ in size"),
    (lambda: nd.CompareOp.create(operands=[_arg(2), _arg(2)], result_types=[_t(2, et=builtin.i1)],
                                 properties={"direction": StringAttr("lte")}),
     "direction 'lte' not in"),
    (lambda: nd.ReduceSumOp.create(operands=[_arg(2, 3)], result_types=[_t(3)],
                                   properties={"axes": nd.i64_array([1])}),
     r"result \(3,\) != reduced shape \(2,\)"),
    (lambda: nd.ConstantOp.create(result_types=[_t(2, et=i64)],
                                  properties={"value": FloatAttr(1.0, f32)}),
     "does not match element type"),
    (lambda: nd.ExpOp.create(operands=[_arg(2, et=i64)], result_types=[_t(2, et=i64)]),
     "needs a floating-point tensor"),
    (lambda: _collective(nd.AllReduceStartOp, _arg(2), "mean"),
     "reduction 'mean' not in"),
    (lambda: _collective(nd.AllReduceStartOp, _arg(2, et=builtin.i1), "max"),
     "element type i1 cannot be reduced across processes"),
    (lambda: _collective(nd.AllReduceWaitOp,
                         nd.ExpOp.create(operands=[_arg(2)], result_types=[_t(2)]).results[0],
                         "sum"),
     "input must be a nova.all_reduce_start of the same group and reduction"),
    (lambda: nd.GatherOp.create(operands=[_arg(2, 3), _arg(2, 3)], result_types=[_t(2, 3)],
                                properties={"dim": IntegerAttr(0, i64)}),
     "index must be i32 or i64"),
    (lambda: nd.ConcatOp.create(operands=[_arg(2, 3), _arg(2, 4)], result_types=[_t(4, 3)],
                                properties={"dim": IntegerAttr(0, i64)}),
     r"input \(2, 4\) does not match result \(4, 3\) outside dim 0"),
    (lambda: nd.PadOp.create(operands=[_arg(2), _arg()], result_types=[_t(4)],
                             properties={"low": nd.i64_array([1]), "high": nd.i64_array([0]),
                                         "interior": nd.i64_array([0])}),
     r"result \(4,\) != padded shape \(3,\)"),
])
def test_verifier_rejects_invalid_ops(make, message):
    with pytest.raises(VerifyException, match=message):
        _verify(make())


def test_binary_ops_require_identical_operand_types():
    with pytest.raises(VerifyException):
        nd.AddOp.create(operands=[_arg(2, 3), _arg(3)], result_types=[_t(2, 3)]).verify()
