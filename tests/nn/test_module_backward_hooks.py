"""Module full backward hooks and pre-hooks with PyTorch's rules (``nova.nn.module``):
what the hooks see (against gradients written out by hand), what their replacements
change, ordering, removal, repeated calls, tuples, inputs without gradients, errors."""
import warnings

import numpy as np
import pytest

import nova as nv
from nova import nn
from nova.runtime.cache import RecompileWarning


def _conv_net() -> nn.Sequential:
    """Conv2d(1->2, 3x3) on a 4x4 image, flattened into Linear(8 -> 1), in float64."""
    nv.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 1)).double()


def _conv_input_grad(go: np.ndarray, w: np.ndarray) -> np.ndarray:
    """d(sum(go * conv(x, w)))/dx for one image, one input channel, no padding."""
    c_out, _, kh, kw = w.shape
    oh, ow = go.shape[-2:]
    gx = np.zeros((oh + kh - 1, ow + kw - 1))
    for c in range(c_out):
        for p in range(oh):
            for q in range(ow):
                gx[p:p + kh, q:q + kw] += go[c, p, q] * w[c, 0]
    return gx


def test_grad_cam_capture_matches_the_analytic_gradients():
    net = _conv_net()
    x = nv.randn(1, 1, 4, 4, dtype=nv.float64, requires_grad=True)
    seen = {}
    net[0].register_full_backward_hook(lambda m, gi, go: seen.update(conv=(gi, go)))
    net[2].register_full_backward_hook(lambda m, gi, go: seen.update(fc=(gi, go)))
    net(x).sum().backward()
    (conv_in,), (conv_out,) = seen["conv"]
    (fc_in,), (fc_out,) = seen["fc"]
    w_fc = net[2].weight.numpy()
    # loss = fc(flatten(conv(x))).sum(): d/d fc_out = 1, d/d flatten = w_fc, so the
    # conv output's gradient is w_fc laid out as the conv output (1, 2, 2, 2)
    nv.realize(conv_in, conv_out, fc_in, fc_out, x.grad)
    np.testing.assert_array_equal(fc_out.numpy(), np.ones((1, 1)))
    np.testing.assert_array_equal(fc_in.numpy(), w_fc)
    np.testing.assert_array_equal(conv_out.numpy(), w_fc.reshape(1, 2, 2, 2))
    expected = _conv_input_grad(w_fc.reshape(2, 2, 2), net[0].weight.numpy())
    np.testing.assert_allclose(conv_in.numpy()[0, 0], expected, rtol=1e-13)
    np.testing.assert_array_equal(x.grad.numpy(), conv_in.numpy())


def test_replacements_flow_on_to_earlier_layers():
    net = _conv_net()
    x = nv.randn(1, 1, 4, 4, dtype=nv.float64)
    net(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    seen = []
    # the pre-hook scales the Linear's output gradient by 4 (which the Linear's own full
    # hook then sees), the full hook doubles what goes on to the conv: powers of two,
    # so the gradients are exactly 8 and 4 times the plain ones
    net[2].register_full_backward_hook(lambda m, gi, go: seen.append(go[0]) or (gi[0] * 2,))
    net[2].register_full_backward_pre_hook(lambda m, go: go[0] * 4)   # one: a Tensor
    net(x).sum().backward()
    grads = [p.grad.numpy() for p in net.parameters()]
    for got, want, factor in zip(grads, plain, [8, 8, 4, 4]):
        np.testing.assert_array_equal(got, want * factor)
    np.testing.assert_array_equal(seen[0].numpy(), np.full((1, 1), 4.0))


def test_order_prepend_and_remove():
    m = nn.Linear(2, 2)
    order = []
    h1 = m.register_full_backward_hook(lambda mod, gi, go: order.append("full"))
    m.register_full_backward_hook(lambda mod, gi, go: order.append("full first"), prepend=True)
    m.register_full_backward_pre_hook(lambda mod, go: order.append("pre"))
    h2 = m.register_full_backward_pre_hook(lambda mod, go: order.append("pre first"),
                                           prepend=True)
    x = nv.ones(1, 2, requires_grad=True)
    m(x).sum().backward()
    assert order == ["pre first", "pre", "full first", "full"]
    order.clear()
    h1.remove()
    with h2:
        pass
    m(x).sum().backward()
    assert order == ["pre", "full first"]
    with pytest.raises(TypeError, match="callable"):
        m.register_full_backward_pre_hook(3)


def test_each_call_of_a_module_fires_once_with_its_own_gradients():
    m = nn.Linear(2, 2, bias=False).double()
    with nv.no_grad():
        m.weight.copy_(nv.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=nv.float64))
    calls = []
    m.register_full_backward_hook(lambda mod, gi, go: calls.append((gi[0], go[0])))
    x = nv.tensor([[1.0, -1.0]], dtype=nv.float64, requires_grad=True)
    (m(m(x)) * nv.tensor([1.0, 10.0], dtype=nv.float64)).sum().backward()
    assert len(calls) == 2              # the outer call's backward runs first
    (gi_outer, go_outer), (gi_inner, go_inner) = calls
    nv.realize(gi_outer, go_outer, gi_inner, go_inner, x.grad)
    w = m.weight.numpy()
    assert go_outer.tolist() == [[1.0, 10.0]]
    np.testing.assert_array_equal(gi_outer.numpy(), np.array([[1.0, 10.0]]) @ w)
    np.testing.assert_array_equal(go_inner.numpy(), gi_outer.numpy())
    np.testing.assert_array_equal(gi_inner.numpy(), np.array([[1.0, 10.0]]) @ w @ w)
    np.testing.assert_array_equal(x.grad.numpy(), gi_inner.numpy())


def test_tuple_outputs_and_inputs_without_gradients_get_none():
    class Two(nn.Module):
        def forward(self, a, b, c, k):
            return a * b, a.sum() + c.sum(), k

    m = Two()
    seen = []
    m.register_full_backward_pre_hook(lambda mod, go: seen.append(go))
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    a = nv.tensor([1.0, 2.0], requires_grad=True)
    b = nv.tensor([3.0, 5.0])
    c = nv.tensor([1.0, 1.0], requires_grad=True)   # not used by the loss below
    y, s, k = m(a, b, c, 7)
    assert k == 7
    (y * nv.tensor([1.0, 10.0])).sum().backward()
    pre, (gi, go) = seen
    nv.realize(pre[0], go[0], gi[0], gi[2])
    assert pre[1:] == (None, None) and go[1:] == (None, None)     # s got no gradient
    assert pre[0].tolist() == [1.0, 10.0] and go[0].tolist() == [1.0, 10.0]
    assert gi[0].tolist() == [3.0, 50.0] and gi[1] is None and gi[3] is None
    assert gi[2].tolist() == [0.0, 0.0]    # c got nothing in this pass: zeros, as PyTorch
    seen.clear()
    y, s, _ = m(a, b, c, 7)
    s.backward()
    _, (gi, go) = seen
    nv.realize(go[1], gi[0], gi[2])
    assert go[0] is None and go[1].item() == 1.0
    assert gi[0].tolist() == [1.0, 1.0] and gi[2].tolist() == [1.0, 1.0]


def test_no_input_requires_grad_fires_on_the_outputs():
    m = nn.Linear(2, 1)
    seen = []
    h = m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go[0].shape)))
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        m(nv.ones(3, 2)).sum().backward()
    assert seen == [((None,), (3, 1))] and m.weight.grad.shape == (1, 2)
    h.remove()
    m.register_full_backward_hook(lambda mod, gi, go: (nv.ones(3, 2),))
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="None for all"):
        m(nv.ones(3, 2)).sum().backward()


def test_mixed_dtype_inputs_keep_their_dtypes_and_values():
    class Mul(nn.Module):
        def forward(self, a, b):
            return a * b

    m = Mul()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi) or (gi[0], gi[1] * 2))
    a = nv.tensor([1.5, -2.0], requires_grad=True)
    b = nv.tensor([0.1, 3.0], dtype=nv.float64, requires_grad=True)
    out = m(a, b)
    assert out.dtype == nv.float64
    out.sum().backward()
    (ga, gb), = seen
    nv.realize(a.grad, b.grad)
    assert ga.dtype == nv.float32 and gb.dtype == nv.float64
    np.testing.assert_array_equal(a.grad.numpy(), np.float32([0.1, 3.0]))
    np.testing.assert_array_equal(b.grad.numpy(), 2 * np.float64([1.5, -2.0]))


def test_errors():
    x = nv.ones(3, 2, requires_grad=True)
    m = nn.Linear(2, 1)
    h = m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="grad_input, got 2, but expected 1"):
        m(x).sum().backward()
    h.remove()
    h = m.register_full_backward_hook(lambda mod, gi, go: (nv.ones(2),))
    with pytest.raises(RuntimeError, match=r"input 0 \(shape \(3, 2\)\) with \(2,\)"):
        m(x).sum().backward()
    h.remove()
    h = m.register_full_backward_hook(lambda mod, gi, go: gi[0])
    with pytest.raises(TypeError, match="tuple of 1 gradients"):
        m(x).sum().backward()
    h.remove()
    m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_output"):
        m(x).sum().backward()
    relu = nn.ReLU(inplace=True)
    relu.register_full_backward_hook(lambda mod, gi, go: None)
    with pytest.raises(RuntimeError, match="ReLU: forward modified its input 0 in place"):
        relu(x * 1)
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        m.register_backward_hook(lambda mod, gi, go: None)
    listed = nn.Module()
    listed.forward = lambda a: [a * 2]
    listed.register_full_backward_hook(lambda mod, gi, go: None)
    with pytest.warns(UserWarning, match="Tensor or a tuple of Tensors but received list"):
        listed(x)


def test_a_compiled_training_step_records_every_call_and_stays_exact():
    def make():
        nv.manual_seed(1)
        return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))

    x, t = nv.randn(5, 3), nv.randn(5, 1)
    results = []
    for compiled in (False, True):
        net = make()
        net[2].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
        opt = nv.optim.SGD(net.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            ((net(x) - t) ** 2).mean().backward()
            opt.step()
        run = nv.compile(step) if compiled else step
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                run()
        if compiled:
            assert any(issubclass(w.category, RecompileWarning) and
                       "_BackwardHookFunction" in str(w.message) for w in caught)
        results.append([p.numpy() for p in net.parameters()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_against_torch():
    torch = pytest.importorskip("torch")
    nets, seen = [], []
    for lib in (torch, nv):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Conv2d(1, 2, 3), lib.nn.Flatten(), lib.nn.Linear(8, 2))
        net = net.double()
        nets.append(net)
        log = []
        seen.append(log)
        net[0].register_full_backward_hook(lambda m, gi, go, log=log: log.extend(gi + go))
        net[2].register_full_backward_pre_hook(lambda m, go, log=log: log.extend(go) or
                                               (go[0] * 2,))
    with torch.no_grad():
        for p, q in zip(nets[0].parameters(), nets[1].parameters()):
            p.copy_(torch.from_numpy(q.numpy()))
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4))
    xt = torch.tensor(x, requires_grad=True)
    xn = nv.tensor(x, requires_grad=True)
    (nets[0](xt) * torch.tensor([1.0, -3.0], dtype=torch.float64)).sum().backward()
    (nets[1](xn) * nv.tensor([1.0, -3.0], dtype=nv.float64)).sum().backward()
    assert len(seen[0]) == len(seen[1]) == 3
    for a, b in zip(*seen):
        np.testing.assert_allclose(b.numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-14)
