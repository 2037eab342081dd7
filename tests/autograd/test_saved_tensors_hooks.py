"""Saved-tensor hooks (``nv.autograd.graph``): pack when a GradFn records what its rule
saves, unpack when the rule reads it, the innermost pair only, checks on what unpack
returns, ``save_on_cpu`` and ``disable_saved_tensors_hooks``."""
import numpy as np
import pytest

import nova as nv
from nova.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks

A = np.array([0.3, -1.2, 2.0])
B = np.array([1.5, 0.5, -0.7])


def _leaves():
    return nv.tensor(A, requires_grad=True), nv.tensor(B, requires_grad=True)


def _expected():
    """d/da, d/db of sum(tanh(a * b) * a) (float64, by hand)."""
    t = np.tanh(A * B)
    dt = 1 - t * t
    return dt * B * A + t, dt * A * A


def _loss(a, b):
    return ((a * b).tanh() * a).sum()


def test_counting_hooks_see_each_value_nova_saves_once():
    a, b = _leaves()
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.shape)
        return t

    def unpack(t):
        unpacked.append(t.shape)
        return t

    with saved_tensors_hooks(pack, unpack):
        y = _loss(a, b)
    # mul(a, b) saves a and b; tanh saves its output; mul(tanh, a) saves both inputs
    assert packed == [(3,)] * 5 and unpacked == []
    y.backward()
    assert unpacked == [(3,)] * 5        # once per saved value (tanh's rule reads y twice)
    ga, gb = _expected()
    np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-12)


def test_ops_outside_the_context_and_unsaving_ops_are_not_packed():
    a, b = _leaves()
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        y = a + b                        # add's rule saves nothing
    z = a * b
    assert packed == []
    (y + z).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 1 + B)


def test_a_numpy_copy_round_trip_gives_the_gradients_without_hooks():
    a, b = _leaves()
    with saved_tensors_hooks(lambda t: t.numpy().copy(), lambda x: nv.tensor(x)):
        y = _loss(a, b)
    y.backward()
    ga, gb = _expected()
    np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-12)


def test_what_unpack_returns_is_what_the_rule_reads():
    a, _ = _leaves()
    with saved_tensors_hooks(lambda t: t, lambda t: t * 0 + 2.0):
        y = (a * a).sum()                # d/da = x0 + x1 with both saved values = 2
    y.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 4.0, 4.0])


def test_nesting_uses_the_innermost_pair_only():
    a, b = _leaves()
    calls = []
    outer = saved_tensors_hooks(lambda t: calls.append("outer") or t, lambda t: t)
    inner = saved_tensors_hooks(lambda t: calls.append("inner") or t, lambda t: t)
    with outer:
        with inner:
            (a * b).sum()
        assert calls == ["inner", "inner"]
        (a * b).sum()
    assert calls == ["inner", "inner", "outer", "outer"]


def test_double_backward_through_unpacked_values():
    a, _ = _leaves()
    with saved_tensors_hooks(lambda t: t.numpy().copy(), lambda x: nv.tensor(x)):
        y = (a * a * a).sum()
    (g,) = nv.autograd.grad(y, [a], create_graph=True)
    (gg,) = nv.autograd.grad(g.sum(), [a])
    np.testing.assert_allclose(g.detach().numpy(), 3 * A * A, rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), 6 * A, rtol=1e-12)


def test_unpack_must_return_a_tensor_of_the_saved_shape_and_dtype():
    a, _ = _leaves()
    with saved_tensors_hooks(lambda t: t, lambda t: 3):
        y = a.exp().sum()
    with pytest.raises(TypeError, match="ExpBackward0: output of saved tensor unpack_hook "
                                        "expected to be a Tensor but got result of type int"):
        y.backward()
    for bad, why in [(nv.zeros(5, dtype=nv.float64), r"shape \(5,\) and dtype float64"),
                     (nv.zeros(3, dtype=nv.float32), r"shape \(3,\) and dtype float32")]:
        with saved_tensors_hooks(lambda t: t, lambda t, bad=bad: bad):
            y = a.exp().sum()
        with pytest.raises(RuntimeError, match=f"unpack_hook returned a tensor of {why} for a "
                                               r"value saved with shape \(3,\) and dtype "
                                               "float64"):
            y.backward()


def test_hooks_must_be_callable():
    with pytest.raises(TypeError, match="saved_tensors_hooks: unpack_hook must be callable"):
        saved_tensors_hooks(lambda t: t, None)


def test_disable_saved_tensors_hooks_refuses_hooks_with_its_message():
    with disable_saved_tensors_hooks("no packing in this block"):
        with pytest.raises(RuntimeError, match="no packing in this block"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):     # usable again after it
        pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match="hooks are active here"):
            with disable_saved_tensors_hooks("hooks are active here"):
                pass


def test_save_on_cpu_keeps_gradients():
    a, b = _leaves()
    with save_on_cpu(pin_memory=False) as ctx:
        y = _loss(a, b)
    assert isinstance(ctx, saved_tensors_hooks)
    y.backward()
    ga, gb = _expected()
    np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-12)
    with pytest.raises(ValueError, match="save_on_cpu: device_type must be 'cuda'"):
        save_on_cpu(device_type="xpu")


def test_a_packed_pass_runs_its_rules_and_leaves_templates_to_plain_passes(stamps):
    """A template stamps a pass from saved nodes without running rules: a pass over
    packed values must run them (unpacking), and must not take the place of the
    template of the same structure without hooks, which later passes are stamped from."""
    from nova.autograd import backward_template
    backward_template.clear()
    unpacked, grads = [], []
    for k in range(4):
        w = nv.tensor(A + k, requires_grad=True)
        v = nv.tensor(B + k, requires_grad=True)
        if k == 0:
            with saved_tensors_hooks(lambda t: t, lambda t: unpacked.append(1) or t):
                y = (w * v).sum()
        else:
            y = (w * v).sum()
        y.backward()
        grads.append((w.grad.numpy(), v.numpy()))
    assert len(unpacked) == 2
    assert stamps[0] == 2                # passes 3 and 4, from pass 2's template
    for g, want in grads:
        np.testing.assert_allclose(g, want)


def test_stamped_composites_pack_their_saved_values_after_a_template_exists():
    """A composite stamped from its template (gelu, softmax, linear, ...) makes its
    GradFns without the pack hook: under hooks it runs as written, and a first call
    under hooks leaves the structure stampable afterwards."""
    x = nv.tensor(A, requires_grad=True)
    counts = []
    for hooked in (True, False, False, True):
        packed = []
        if hooked:
            with saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
                nv.nn.functional.gelu(x * 1.0)
            counts.append(len(packed))
        else:
            nv.nn.functional.gelu(x * 1.0)
    assert counts[0] == counts[1] > 2


class _Cube(nv.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, None)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        x, none = ctx.saved_tensors
        assert none is None
        return 3 * x * x * g


def test_custom_function_saves_go_through_the_hooks_with_their_history():
    """``ctx.save_for_backward`` packs (PyTorch's does) and ``saved_tensors`` unpacks;
    the unpacked value keeps the saved tensor's gradient edge, so double backward
    through a custom Function still reaches the input."""
    x = nv.tensor(A, requires_grad=True)
    events = []

    def pack(t):
        events.append("pack")
        return t.detach().numpy().copy()

    def unpack(a):
        events.append("unpack")
        return nv.tensor(a)

    z = x * 1.0
    with saved_tensors_hooks(pack, unpack):
        y = _Cube.apply(z)
    assert events == ["pack"]          # x (the None is no tensor), nothing read yet
    (g,) = nv.autograd.grad(y.sum(), [x], create_graph=True)
    assert "unpack" in events
    np.testing.assert_allclose(g.numpy(), 3 * A ** 2, rtol=1e-12)
    (gg,) = nv.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(gg.numpy(), 6 * A, rtol=1e-12)
    # a leaf saved directly routes its second-order gradient back to itself
    with saved_tensors_hooks(lambda t: t * 1.0, lambda t: t):
        y2 = _Cube.apply(x)
    (g2,) = nv.autograd.grad(y2.sum(), [x], create_graph=True)
    (gg2,) = nv.autograd.grad(g2.sum(), [x])
    np.testing.assert_allclose(gg2.numpy(), 6 * A, rtol=1e-12)
