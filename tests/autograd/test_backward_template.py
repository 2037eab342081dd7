"""Backward templates (``nova.autograd.backward_template``): a backward over a structure
seen before is stamped from the first pass's nodes. Every test compares a stamped pass
with the same pass recorded rule by rule (templates cleared or refused), bit for bit,
and checks that the stamp really ran."""
import threading

import numpy as np
import pytest

import nova as nv
from nova.autograd import backward_template as bt
from nova.compiler.irgen import build_module
from nova.runtime.cache import CACHE
from nova.tensor.realize import pending_graph


@pytest.fixture(autouse=True)
def fresh_templates():
    bt.clear()
    yield
    bt.clear()


def _backward_calls(graph) -> int:
    """The graph's ``call`` nodes whose body is a backward pass (its steps marked
    backward; a stamped composite function's, the forward softmax's, are not)."""
    return sum(n.op == "call" and all(step[4] for step in n.attrs["body"].steps)
               for n in graph.pending_nodes)


def _recorded_only(monkeypatch):
    monkeypatch.setattr(bt, "structure", lambda *args: None)


def _mlp_grads(seed: int, shared: bool = True):
    """A two-layer net with a weight used twice (as GPT ties its embedding and head),
    broadcasting, a reduction and a softmax: the gradients' nodes, unrealized."""
    rng = np.random.default_rng(seed)
    w1 = nv.tensor(rng.standard_normal((6, 5)).astype(np.float32), requires_grad=True)
    b1 = nv.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    w2 = nv.tensor(rng.standard_normal((5, 6)).astype(np.float32), requires_grad=True)
    x = nv.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    h = (x @ w1 + b1).tanh()
    out = h @ w2
    if shared:
        out = out + (x @ w2.transpose(0, 1)).sum(-1, keepdim=True)
    loss = (out.softmax(-1) * out).mean() * 3.0
    loss.backward()
    return [w1, b1, w2]


def test_a_stamped_backward_equals_the_recorded_one_bit_for_bit(stamps, monkeypatch):
    first = [p.grad for p in _mlp_grads(0)]          # recorded, kept as a template
    stamped_params = _mlp_grads(1)                   # stamped
    assert stamps[0] == 1
    stamped = [p.grad for p in stamped_params]
    graph = pending_graph(*stamped)
    assert _backward_calls(graph) == 1                 # the pass: one node
    ir_stamped = str(build_module(graph))
    stamped_values = [g.numpy() for g in stamped]
    _recorded_only(monkeypatch)
    recorded = [p.grad for p in _mlp_grads(1)]
    graph = pending_graph(*recorded)
    assert _backward_calls(graph) == 0
    assert str(build_module(graph)) == ir_stamped   # inlined, the call is the recorded pass
    for a, b in zip(stamped_values, recorded):
        assert np.array_equal(a, b.numpy())
    assert all(g.numpy().shape == p.shape for g, p in zip(first, stamped_params))


def test_a_stamped_step_replays_the_recorded_steps_executable(stamps):
    nv.realize(*[p.grad for p in _mlp_grads(0)])        # recorded rule by rule
    for seed in (1, 2):
        grads = [p.grad for p in _mlp_grads(seed)]      # stamped
        hits, misses = CACHE.stats.hits, CACHE.stats.misses
        nv.realize(*grads)
        assert (CACHE.stats.hits, CACHE.stats.misses) == (hits + 1, misses)
    assert stamps[0] == 2


def _two_products(c1, c2, x, w):
    (x * c1).sum().backward()   # one backward per product: two passes of one structure
    (w * c2).sum().backward()


def test_slots_holding_one_node_and_two_nodes_are_different_structures(stamps):
    # A backward in which two GradFns saved the same value, then one in which each saved
    # its own (equal shapes, different values): a template keyed without the aliasing
    # would make the second read the first's value.
    def grads(shared: bool):
        x = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = nv.tensor([4.0, 5.0, 6.0], requires_grad=True)
        c1 = nv.tensor([2.0, 2.0, 2.0])
        c2 = c1 if shared else nv.tensor([5.0, 6.0, 7.0])
        y = (x * c1).sum() + (w * c2).sum()
        y.backward()
        return x.grad.tolist(), w.grad.tolist()
    assert grads(True) == ([2.0, 2.0, 2.0], [2.0, 2.0, 2.0])
    assert grads(False) == ([2.0, 2.0, 2.0], [5.0, 6.0, 7.0])
    assert grads(True) == ([2.0, 2.0, 2.0], [2.0, 2.0, 2.0])
    assert grads(False) == ([2.0, 2.0, 2.0], [5.0, 6.0, 7.0])
    assert stamps[0] == 2


def test_gradients_accumulate_over_stamped_passes(stamps):
    x = nv.tensor([1.0, -2.0, 3.0], requires_grad=True)
    for k in range(1, 5):
        (x * x * 0.5).sum().backward()      # same structure; .grad exists from k = 2
        assert x.grad.tolist() == [k * 1.0, k * -2.0, k * 3.0]
    assert stamps[0] >= 2


def test_a_leaf_given_its_seed_unchanged_gets_it_again(stamps):
    for k in range(3):
        x = nv.tensor([1.0, 2.0], requires_grad=True)
        x.backward(nv.tensor([float(k), 1.0]))   # the seed is the leaf's gradient itself
        assert x.grad.tolist() == [float(k), 1.0]
    assert stamps[0] == 2


def test_retain_graph_and_release_follow_the_recorded_pass(stamps):
    for _ in range(3):
        x = nv.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp().sum()
        y.backward(retain_graph=True)
        y.backward()                       # retained: a second pass is allowed
        assert np.allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]))
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()                   # released by the (stamped) pass before
    assert stamps[0] >= 3


def test_retained_and_higher_order_gradients_are_recorded_as_written(stamps):
    for k in range(3):
        x = nv.tensor([1.0, 2.0], requires_grad=True)
        h = x * float(k + 1)
        h.retain_grad()
        (h * h).sum().backward()
        assert h.grad.tolist() == [2.0 * (k + 1), 4.0 * (k + 1)]
        z = nv.tensor([3.0], requires_grad=True)
        (gz,) = nv.autograd.grad((z ** 3).sum(), z, create_graph=True)
        gz.sum().backward()     # a plain pass over the recorded second-order GradFns
        assert z.grad.tolist() == [18.0]
    assert stamps[0] == 2      # the last pass of the 2nd and 3rd rounds; never h's


def test_threads_stamp_one_template_at_once(stamps):
    # (the reference is computed in a thread too: numpy's BLAS, which the interpreter's
    # products use, may sum in another order on the main thread)
    reference = []
    first = threading.Thread(target=lambda: reference.extend(
        p.grad.numpy() for p in _mlp_grads(7)))
    first.start()
    first.join()
    results, errors = {}, []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                results[i] = [p.grad.numpy() for p in _mlp_grads(7)]
        except Exception as e:     # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in results.values():
        assert all(np.array_equal(a, b) for a, b in zip(got, reference))
    assert stamps[0] == 15


def test_a_pass_reading_a_value_outside_its_slots_is_not_a_template():
    # The leaves' gradients from before the pass are slots; anything else a pass reads
    # from outside makes capture refuse (checked on a crafted recording).
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2.0).sum()
    from nova.autograd.engine import _discovered, _initial_grads, _propagate, _topological
    grads = _initial_grads("backward", [y], [])
    order = _topological([y._grad_fn])
    st = bt.structure([y], grads, _discovered([y._grad_fn]))
    first = nv.tensor([0.0]).node.seq + 1
    outside = nv.tensor([5.0, 5.0])           # made before the pass, not a slot
    _propagate([y], grads, order, False, False, None, None, [])
    x.grad = x.grad + outside
    assert bt.BackwardTemplate.capture(st, first, [0]) is None


class _Scaled(nv.autograd.Function):
    """y = x * w * scale with a hand-written backward: pure, keyed by ``scale`` (a
    Python number the ops bake in)."""

    pure_backward = True

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x * w * scale

    @staticmethod
    def template_key(ctx):
        return ctx.scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, (g * x * ctx.scale).sum(0), None


class _Unkeyed(_Scaled):
    template_key = staticmethod(nv.autograd.Function.template_key)


def _function_grads(seed: int, cls=_Scaled, scale: float = 3.0):
    rng = np.random.default_rng(seed)
    x = nv.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    w = nv.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    (cls.apply(x.tanh(), w, scale) ** 2).sum().backward()
    return [x, w]


def test_a_pure_keyed_function_is_stamped_bit_for_bit(stamps, monkeypatch):
    _function_grads(0)                                  # recorded, kept as a template
    stamped = [p.grad for p in _function_grads(1)]
    assert stamps[0] == 1
    assert _backward_calls(pending_graph(*stamped)) == 1
    stamped_values = [g.numpy() for g in stamped]
    _recorded_only(monkeypatch)
    for a, b in zip(stamped_values, [p.grad.numpy() for p in _function_grads(1)]):
        assert np.array_equal(a, b)


def test_a_function_is_stamped_only_for_its_own_key(stamps):
    _function_grads(0, scale=3.0)
    other = [p.grad.numpy() for p in _function_grads(1, scale=5.0)]   # another key
    assert stamps[0] == 0
    rng = np.random.default_rng(1)
    x = np.tanh(rng.standard_normal((4, 3)).astype(np.float32))
    w = rng.standard_normal(3).astype(np.float32)
    y = x * w * 5.0
    np.testing.assert_allclose(other[1], (2 * y * x * 5.0).sum(0), rtol=1e-5)
    _function_grads(2, cls=_Unkeyed)
    _function_grads(3, cls=_Unkeyed)                    # no key: recorded every time
    assert stamps[0] == 0


def test_a_stamped_pass_releases_what_a_function_saved(stamps):
    """As a recorded pass releases a Function's GradFn (its ctx and saved tensors), so
    does a stamped one: a step's intermediate saved by it is freed, not kept alive by
    an output that is (an ``nv.compile`` replay could not rebind it)."""
    import weakref
    _function_grads(0)
    x = nv.tensor(np.ones((4, 3), np.float32), requires_grad=True)
    w = nv.tensor(np.ones(3, np.float32), requires_grad=True)
    h = x.tanh()
    saved = weakref.ref(h)
    y = _Scaled.apply(h, w, 3.0)
    del h
    (y ** 2).sum().backward()
    assert stamps[0] == 1
    assert y.grad_fn is not None and saved() is None
