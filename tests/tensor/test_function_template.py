"""Function templates (``nova.tensor.function_template``): a composite function's call
after the first of its structure is stamped -- as one ``call`` node at the top level,
node by node inside another stamped function's recording. Each test compares stamped
calls with the same calls recorded op by op (``stamped`` undone by calling
``__wrapped__``): the same step IR, values and gradients, bit for bit; and checks the
stamp ran."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.tensor import ops
from nova.compiler.irgen import build_module
from nova.core.graph import CALL
from nova.tensor.function_template import FunctionTemplate
from nova.tensor.realize import pending_graph


@pytest.fixture
def stamps(monkeypatch):
    """Stamps so far: ``[all, as calls]``."""
    count = [0, 0]
    for name in ("stamp", "stamp_call"):
        original = getattr(FunctionTemplate, name)

        def counting(self, tensors, original=original, as_call=name == "stamp_call"):
            count[0] += 1
            count[1] += as_call
            return original(self, tensors)
        monkeypatch.setattr(FunctionTemplate, name, counting)
    for f in (F.layer_norm, F.linear, F.scaled_dot_product_attention, ops.softmax,
              ops.log_softmax, ops.gelu):
        f.templates.clear()
    return count


def _block(seed: int, plain: bool = False):
    """layer norm, a linear layer, causal attention and GELU, then a loss; with
    ``plain`` every function recorded op by op. Returns the loss and the leaves."""
    call = (lambda f: f.__wrapped__) if plain else (lambda f: f)
    rng = np.random.default_rng(seed)
    leaf = lambda *s: nv.tensor(rng.standard_normal(s).astype(np.float32),  # noqa: E731
                                requires_grad=True)
    x, w, b, g, beta = leaf(2, 8, 16), leaf(48, 16), leaf(48), leaf(16), leaf(16)
    h = call(F.layer_norm)(x, 16, g, beta, 1e-5)
    q, k, v = call(F.linear)(h, w, b).split(16, dim=2)
    heads = [t.view(2, 8, 2, 8).transpose(1, 2) for t in (q, k, v)]
    y = call(F.scaled_dot_product_attention)(*heads, is_causal=True)
    y = call(ops.gelu)(y.transpose(1, 2).reshape(2, 8, 16))
    loss = call(ops.log_softmax)(y, -1).mean() + call(ops.softmax)(y, 0).sum()
    loss.backward()
    return loss, [x, w, b, g, beta]


def _calls(graph) -> int:
    return sum(n.op == CALL for n in graph.pending_nodes)


def test_stamped_calls_record_the_same_step_as_the_functions_op_by_op(stamps):
    first_loss, first_leaves = _block(0)   # first of each structure: captured, then stamped
    assert stamps == [6, 6]
    first = pending_graph(*([first_loss] + [t.grad for t in first_leaves]))
    loss, leaves = _block(1)                           # stamped
    assert stamps == [12, 12]
    outs = [loss] + [t.grad for t in leaves]
    graph = pending_graph(*outs)
    assert graph.key == first.key                      # every step of a structure: one key
    # the six calls (the backward pass is a call of its own from its second time on)
    assert _calls(graph) == _calls(first) == 7
    ir = str(build_module(graph))
    values = [t.numpy() for t in outs]
    ref_loss, ref_leaves = _block(1, plain=True)
    ref = [ref_loss] + [t.grad for t in ref_leaves]
    reference = pending_graph(*ref)
    assert _calls(reference) < _calls(graph) and str(build_module(reference)) == ir  # one IR
    for a, b in zip(values, ref):
        assert np.array_equal(a, b.numpy())


def test_calls_inside_a_recording_that_captures_nodes_are_stamped_node_by_node(stamps):
    """A backward rule's stamped function, and one a stamped function calls, stamp
    their nodes: the enclosing recording's template captures nodes, not calls."""
    x = nv.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    q = nv.tensor(np.ones((1, 1, 64, 4), np.float32))
    for _ in range(2):
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()   # softmax inside
    assert stamps == [1, 0]
    for k in range(3):
        y = ops.softmax(x, -1)
        (y * y).sum().backward()
    assert stamps[1] == 3 and stamps[0] == 3 + 1
    p = np.exp(x.numpy()) / np.exp(x.numpy()).sum(-1, keepdims=True)
    g = 2 * p * (p - (p * p).sum(-1, keepdims=True))
    np.testing.assert_allclose(x.grad.numpy(), 3 * g, rtol=1e-5, atol=1e-6)


def test_the_key_tells_one_argument_twice_from_two_arguments(stamps):
    w = nv.tensor(np.ones((3, 3), np.float32))
    x = nv.tensor(np.eye(3, dtype=np.float32) * 2)
    for _ in range(2):
        assert F.linear(x, x).tolist() == (np.eye(3) * 4).tolist()
        assert F.linear(x, w).tolist() == np.full((3, 3), 2.0).tolist()
    assert len(F.linear.templates) == 2 and stamps == [4, 4]


def test_grad_mode_and_history_are_part_of_the_key(stamps):
    x = nv.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    for _ in range(2):
        with nv.no_grad():
            assert ops.softmax(x, -1).grad_fn is None
        y = ops.softmax(x, -1)
        assert y.grad_fn is not None
        (y * nv.tensor([[1.0, 0.0, 0.0]])).sum().backward()
    p = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    expected = 2 * (p[0] * (np.eye(3)[0] - p))
    assert np.allclose(x.grad.numpy(), expected[None], atol=1e-6)
    assert stamps[0] == 4       # the first call of each of the two structures too


def test_static_arguments_are_part_of_the_key(stamps):
    x = nv.tensor([[0.0, 1.0], [2.0, 4.0]])
    assert np.allclose(F.layer_norm(x, 2, eps=1e-5).numpy(), [[-1, 1], [-1, 1]], atol=1e-4)
    assert np.allclose(F.layer_norm(x, 2, eps=1.0).numpy(),
                       [[-0.5 / np.sqrt(1.25), 0.5 / np.sqrt(1.25)],
                        [-1 / np.sqrt(2.0), 1 / np.sqrt(2.0)]], atol=1e-6)
    assert len(F.layer_norm.templates) == 2
    assert ops.softmax(x, 0).tolist() == ops.softmax.__wrapped__(x, 0).tolist()
    assert ops.softmax(x, 1).tolist() == ops.softmax.__wrapped__(x, 1).tolist()
    assert len(ops.softmax.templates) == 2
    ops.softmax(x, 1).numpy()
    assert len(ops.softmax.templates) == 2 and stamps == [5, 5]


def test_random_draws_are_never_stamped(stamps):
    q = nv.tensor(np.ones((1, 1, 64, 4), np.float32))
    outs = [F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
            for _ in range(3)]
    # the attention's draw made it refuse a template; the softmax inside it is stamped
    # (node by node: inside another stamped function's recording)
    assert list(F.scaled_dot_product_attention.templates.values()) == [None]
    assert stamps == [2, 0]
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[1], outs[2])


def test_a_view_argument_reads_its_base_after_an_in_place_update(stamps):
    base = nv.tensor(np.zeros((2, 3), np.float32))
    view = base[0]
    first = ops.softmax(view, 0).tolist()
    base.add_(nv.tensor([[0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]))
    second = ops.softmax(view, 0).tolist()
    assert stamps == [2, 2]
    assert first == pytest.approx([1 / 3] * 3)
    e = np.exp([0.0, 0.0, 3.0])
    assert second == pytest.approx((e / e.sum()).tolist(), rel=1e-6)


def test_errors_are_raised_by_every_call_with_bad_arguments(stamps):
    x = nv.tensor(np.ones((2, 4), np.float32))
    for _ in range(2):
        with pytest.raises(ValueError, match="linear: input"):
            F.linear(x, nv.tensor(np.ones((3, 5), np.float32)))
    assert stamps[0] == 0
