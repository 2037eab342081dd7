"""Which tensor ``.grad`` is, and whether there is one, as in PyTorch.

- A leaf's gradient accumulates into its existing ``.grad`` in place (one version
  step), so a reference held to it -- a clipping helper's, an optimizer's, a view of
  it -- sees the sum; with ``create_graph`` the sum replaces ``.grad`` instead.
- No two ``.grad`` are one tensor, and none is the caller's seed.
- ``retain_grad`` is idempotent and follows the tensor through in-place ops.
- Ops whose derivative is zero almost everywhere give a tensor of zeros, not None.

Expected values are worked out by hand in each test (the derivative of ``c * x`` is
``c``); every test runs on the compiled and the interpreted engine (conftest).
"""
import math

import numpy as np
import pytest

import nova as nv
from nova.autograd import backward_template as bt


def test_accumulation_adds_into_the_grad_tensor_in_place(stamps):
    bt.clear()
    x = nv.ones(2, requires_grad=True)
    w = nv.tensor([3.0, 4.0])
    (x * w).sum().backward()                 # first pass: .grad is a new tensor
    g = x.grad
    row = g[0:1]                             # a view of .grad sees later updates too
    v = g._version
    (x * w).sum().backward()                 # recorded again, kept as a template
    assert x.grad is g and g._version == v + 1
    (x * w).sum().backward()                 # stamped from the template
    assert stamps[0] == 1
    assert x.grad is g and g._version == v + 2
    nv.realize(g, row)
    assert g.tolist() == [9.0, 12.0] and row.tolist() == [9.0]


def test_hooked_leaf_and_backward_inputs_accumulate_in_place():
    x = nv.ones(2, requires_grad=True)
    x.register_hook(lambda grad: grad * 10)
    (x * 3).sum().backward()
    g = x.grad
    (x * 2).sum().backward()
    y = nv.ones(2, requires_grad=True)
    (y * 3).sum().backward(inputs=[y])
    h = y.grad
    (y * 2).sum().backward(inputs=[y])
    assert x.grad is g and y.grad is h
    nv.realize(g, h)
    assert g.tolist() == [50.0, 50.0] and h.tolist() == [5.0, 5.0]


def test_create_graph_replaces_the_grad_with_the_sum():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    g = x.grad
    (x * x).sum().backward(create_graph=True)     # d/dx = 2x, with history
    assert x.grad is not g and x.grad.requires_grad and not g.requires_grad
    assert g.tolist() == [3.0, 3.0] and x.grad.tolist() == [5.0, 7.0]


def test_an_optimizer_sees_a_grad_rescaled_through_a_held_reference():
    p = nv.nn.Parameter(nv.ones(2))
    opt = nv.optim.SGD([p], lr=0.1)
    (p * 3).sum().backward()
    held = p.grad
    (p * 2).sum().backward()
    with nv.no_grad():
        held.mul_(0.5)                       # what a clipping helper does
    opt.step()
    assert p.tolist() == pytest.approx([1 - 0.1 * 0.5 * 5] * 2)


def test_grads_are_never_the_seed_nor_each_other():
    x = nv.ones(2, requires_grad=True)
    w = nv.ones(2, requires_grad=True)
    (x + w).sum().backward(create_graph=True)     # one gradient for both inputs
    assert x.grad is not w.grad
    seed = nv.ones(2)
    z = nv.ones(2, requires_grad=True)
    z.backward(seed, create_graph=True)           # a leaf's own gradient is the seed
    assert z.grad is not seed
    a, b = x * 1, x * 2
    a.retain_grad()
    b.retain_grad()
    (a + b).sum().backward()
    assert a.grad is not b.grad
    with nv.no_grad():
        x.grad.mul_(5)
        a.grad.mul_(5)
    nv.realize(w.grad, z.grad, seed, b.grad)
    assert w.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [1.0, 1.0]
    assert seed.tolist() == [1.0, 1.0] and z.grad.tolist() == [1.0, 1.0]


def test_retain_grad_twice_keeps_one_gradient_and_accumulates_out_of_place():
    x = nv.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.retain_grad()
    (y * 3).sum().backward(retain_graph=True)
    g = y.grad
    (y * 2).sum().backward()
    assert y.grad is not g                        # PyTorch's retain_grad hook: y.grad + g
    nv.realize(g, y.grad)
    assert g.tolist() == [3.0, 3.0] and y.grad.tolist() == [5.0, 5.0]


def test_retain_grad_follows_in_place_ops():
    """PyTorch moves the retain_grad hook to the tensor's new history: ``.grad`` is the
    gradient of the tensor's value when backward runs, not of the value it replaced."""
    x = nv.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.mul_(2)
    (y * 3).sum().backward()
    assert y.retains_grad and y.grad.tolist() == [3.0, 3.0]

    x = nv.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    z = y * 5                                     # reads the old value: not y's gradient
    y.mul_(2)
    (z + y * 3).sum().backward()
    assert y.grad.tolist() == [3.0, 3.0]

    x = nv.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    y[0].mul_(2)                                  # in place through a view of y
    (y * 3).sum().backward()
    assert y.grad.tolist() == [3.0, 3.0]

    x = nv.ones(2, requires_grad=True)
    y = x * 1
    v = y[0:1]
    v.retain_grad()
    y.mul_(2)                                     # the view re-derives from the new y
    (v * 3).sum().backward()
    assert v.grad.tolist() == [3.0]

    x = nv.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    (y * 3).sum().backward(retain_graph=True)
    y.mul_(2)
    (y * 5).sum().backward()
    assert y.grad.tolist() == [8.0, 8.0]


def test_a_view_reports_the_history_its_base_took_in_place():
    x = nv.ones(2, requires_grad=True)
    base = nv.zeros(2)
    v = base[0:1]
    base.add_(x)
    assert v.requires_grad and not v.is_leaf and v.grad_fn is not None
    y = x * 1
    u = y[0:1]
    before = u.grad_fn
    y.mul_(2)
    assert u.grad_fn is not before


def test_ops_with_a_zero_derivative_give_zero_gradients():
    """floor, ceil, round (also with decimals), trunc: d/dx = 0; frac: d/dx = 1."""
    x = nv.tensor([1.5, -0.7, 2.0], requires_grad=True)
    (x.floor() + x.ceil() + x.round() + x.round(decimals=1) + x.trunc() +
     x.frac() * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


# Where Nova had no gradient and PyTorch has zeros (or ones): ops.zero_gradient_to.
def test_sign_gives_a_zero_gradient():
    x = nv.tensor([1.5, -0.7, 0.0, math.nan], requires_grad=True)
    (nv.sign(x) + nv.sgn(x)).sum().backward()
    assert x.grad.tolist() == [0.0] * 4


def test_copysign_gives_the_sign_operand_a_zero_gradient():
    a = nv.ones(2, requires_grad=True)
    b = nv.tensor([1.0, -1.0], requires_grad=True)
    nv.copysign(a, b).sum().backward()
    assert a.grad.tolist() == [1.0, -1.0] and b.grad.tolist() == [0.0, 0.0]


def test_nextafter_gradients_are_one_and_zero():
    a = nv.tensor([1.0, 2.0], requires_grad=True)
    b = nv.tensor([2.0, 1.0], requires_grad=True)
    nv.nextafter(a, b).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [0.0, 0.0]


def test_a_compiled_step_keeps_accumulating_into_the_same_grad():
    """``nv.compile``: a gradient updated in place is a result the replay rebinds into
    the same tensor, so a held reference follows the replayed calls."""
    rng = np.random.default_rng(0)
    xs = [nv.tensor(rng.standard_normal((3, 2)).astype(np.float32)) for _ in range(5)]
    w0 = rng.standard_normal((2, 2)).astype(np.float32)
    w = nv.tensor(w0, requires_grad=True)

    @nv.compile
    def step(x):
        (x @ w).sum().backward()

    step(xs[0])
    held = w.grad
    for x in xs[1:]:
        step(x)
    assert step.replays > 0 and w.grad is held
    # d/dw sum(x @ w) = x^T 1: each row of the gradient is the sum of x's column
    expected = sum(x.numpy().sum(0) for x in xs)[:, None] * np.ones((1, 2))
    np.testing.assert_allclose(held.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("owner", ["optimizer", "module"])
def test_zero_grad_without_set_to_none_zeroes_the_same_tensor(owner):
    """``zero_grad(set_to_none=False)`` zeroes ``.grad`` in place, as PyTorch: a held
    reference sees the zeros and the next backward accumulates into it."""
    lin = nv.nn.Linear(2, 1)
    opt = nv.optim.SGD(lin.parameters(), lr=0.1)
    x = nv.tensor([[1.0, 2.0]])
    lin(x).sum().backward()
    g = lin.weight.grad
    (opt if owner == "optimizer" else lin).zero_grad(set_to_none=False)
    assert lin.weight.grad is g and g.tolist() == [[0.0, 0.0]]
    lin(x).sum().backward()
    assert lin.weight.grad is g and g.tolist() == [[1.0, 2.0]]


def test_matrix_power_zero_gives_a_zero_gradient():
    """The identity of ``matrix_power(m, 0)`` has derivative zero: ``m.grad`` is zeros
    (PyTorch), not None (an optimizer would skip the parameter)."""
    m = nv.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    out = nv.linalg.matrix_power(m, 0)
    out.sum().backward()
    assert out.tolist() == [[1.0, 0.0], [0.0, 1.0]] and m.grad.tolist() == [[0.0, 0.0]] * 2
