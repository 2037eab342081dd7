"""Row chunking (``nova.compiler.passes.row_chunks``): a linear layer's wide output, its
cross-entropy and the derived backward, computed a block of rows at a time, give the
unchunked step's values (bit for bit where no sum is regrouped, to float32 rounding for
the weight gradient), and no wide value is left whole unless the step returns it."""
import numpy as np
import pytest
from xdsl.dialects import func

import nova as nv
import nova.nn.functional as F
from nova import config
from nova.compiler import dialect as nd
from nova.compiler.irgen import build_module
from nova.compiler.passes import chunk_rows, simplify
from nova.compiler.passes.row_chunks import chunk_bounds
from nova.debug import pending_graph

N, D, V = 70, 6, 53
WIDE = N * V * 4


def _data():
    rs = np.random.RandomState(0)
    target = rs.randint(0, V, N)
    target[::9] = -100                       # ignored rows
    return (rs.randn(N, D).astype(np.float32), (rs.randn(V, D) * 0.5).astype(np.float32),
            target)


def _step(keep_logits: bool = False):
    x_np, w_np, t_np = _data()
    x = nv.tensor(x_np, requires_grad=True)
    w = nv.tensor(w_np, requires_grad=True)
    logits = (x @ w.t()).view(2, N // 2, V)          # a model's (B, T, V) logits
    loss = F.cross_entropy(logits.view(-1, V), nv.tensor(t_np))
    loss.backward()
    outs = [loss, x.grad, w.grad] + ([logits] if keep_logits else [])
    return outs


def _ops(module):
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return list(fn.body.block.ops)


def test_chunk_bounds_are_aligned_and_cover_the_rows():
    assert chunk_bounds(2048, 393 << 20, 64 << 20) == [
        (r, min(r + 296, 2048)) for r in range(0, 2048, 296)]
    assert chunk_bounds(70, 100, 1000) == [(0, 70)]
    assert chunk_bounds(5, 100, 10) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]


def test_the_pass_leaves_no_wide_value_whole():
    module = simplify(build_module(pending_graph(*_step())))
    before = [nd.shape_of(op.results[0]) for op in _ops(module) if op.results]
    assert before.count((N, V)) >= 4                 # logits, exp, scatter, gradient...
    chunk_rows(module, WIDE // 3)
    module.verify()
    ops = _ops(module)
    shapes = [nd.shape_of(op.results[0]) for op in ops if op.results]
    assert (N, V) not in shapes
    assert (24, V) in shapes and (22, V) in shapes   # chunks of 24, 24 and 22 rows
    assert sum(isinstance(op, nd.ConcatOp) for op in ops) == 2   # nll rows and dx
    # the three weight-gradient partials are added in chunk order
    assert sum(isinstance(op, nd.AddOp) and nd.shape_of(op.result) == (D, V)
               for op in ops) == 2


def test_a_returned_wide_value_stays_whole_and_the_rest_is_chunked():
    module = simplify(build_module(pending_graph(*_step(keep_logits=True))))
    chunk_rows(module, WIDE // 3)
    module.verify()
    ops = _ops(module)
    shapes = [nd.shape_of(op.results[0]) for op in ops if op.results]
    assert (24, V) in shapes
    wide = [op for op in ops if op.results and nd.shape_of(op.results[0]) == (N, V)]
    # the logits' product, and the chunks' view of the returned (B, T, V) logits
    assert [type(op) for op in wide] == [nd.MatmulOp, nd.ReshapeOp]
    product, view = wide
    # the product's only reader is the returned reshape, so fusion writes it straight
    # into the result; the chunks slice a reshape of that result, not a second copy
    (use,) = product.result.uses
    returned = ops[-1].operands
    assert isinstance(use.operation, nd.ReshapeOp) and use.operation.result in returned
    assert view.input is use.operation.result


def test_a_small_step_is_left_alone():
    module = simplify(build_module(pending_graph(*_step())))
    text = str(module)
    chunk_rows(module, WIDE)                         # under two chunks: nothing to gain
    assert str(module) == text


@pytest.mark.parametrize("engine", ["cpu", "interp"])
@pytest.mark.parametrize("keep_logits", [False, True])
def test_chunked_values_match_the_whole_step(engine, keep_logits):
    results = []
    for mb in ("0", str(WIDE / 3 / 2**20)):
        nv.debug.reset_cache()
        with config.ROW_CHUNK_MB.overridden(mb), nv.engine(engine):
            outs = _step(keep_logits)
            nv.realize(*outs)
            results.append([o.numpy() for o in outs])
    whole, chunked = results
    np.testing.assert_array_equal(chunked[0], whole[0])          # the loss
    np.testing.assert_array_equal(chunked[1], whole[1])          # dx: rows, no regrouping
    np.testing.assert_allclose(chunked[2], whole[2], rtol=1e-5, atol=1e-6)   # dW: summed
    if keep_logits:
        np.testing.assert_array_equal(chunked[3], whole[3])
    x_np, w_np, t_np = _data()                                   # and against float64
    z = x_np.astype(np.float64) @ w_np.T.astype(np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    valid = t_np != -100
    loss = (lse - z[np.arange(N), np.where(valid, t_np, 0)])[valid].mean()
    np.testing.assert_allclose(chunked[0], loss, rtol=1e-5)


def test_chunked_head_gradients_match_finite_differences_in_float64():
    """The fused head and loss in float64, chunked by rows, against central differences
    of the loss (#24): the value and both gradients of the whole composite."""
    from nova.autograd.gradcheck import gradcheck
    x_np, w_np, t_np = _data()
    target = nv.tensor(t_np)

    def head(x, w):
        logits = (x @ w.t()).view(2, N // 2, V)
        return F.cross_entropy(logits.view(-1, V), target)
    mb = str(N * V * 8 / 3 / 2**20)                      # three chunks of float64 rows
    with config.ROW_CHUNK_MB.overridden(mb):
        x = nv.tensor(x_np.astype(np.float64), requires_grad=True)
        w = nv.tensor(w_np.astype(np.float64), requires_grad=True)
        head(x, w).backward()
        ir = nv.debug.dump_ir(x.grad, w.grad)
        assert f"tensor<24x{V}xf64>" in ir and f"tensor<{N}x{V}xf64>" not in ir
        assert gradcheck(head, [x_np.astype(np.float64), w_np.astype(np.float64)])
