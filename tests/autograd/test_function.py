"""Custom differentiable operations (``nv.autograd.Function``) with PyTorch's rules:
the backward's gradients reach the inputs, several outputs share one backward, the
ctx carries saved tensors and Python values that differ per call, and the errors."""
import math

import numpy as np
import pytest

import nova as nv
from nova.autograd.gradcheck import gradcheck


class Exp(nv.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class Scaled(nv.autograd.Function):
    """A gradient reversal scaled by a per-call Python number (domain adaptation)."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None


class Pair(nv.autograd.Function):
    """Two outputs, PyTorch 2's forward/setup_context form."""

    @staticmethod
    def forward(x, k):
        return x * k, x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx, ga, gb):
        (x,) = ctx.saved_tensors
        return ga * ctx.k + gb * 2 * x, None


def test_a_custom_backward_is_the_gradient():
    x = np.array([0.3, -1.2, 2.0])
    assert gradcheck(lambda t: Exp.apply(t) * 2, [x])
    t = nv.tensor(x, requires_grad=True)
    y = Exp.apply(t)
    assert y.grad_fn is not None and not y.is_leaf
    y.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.exp(x), rtol=1e-12)


def test_per_call_python_values_reach_every_backward():
    """The backward is never stamped from an earlier pass: ctx.alpha differs per call."""
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    for alpha in (0.5, 2.0, 3.0):
        x.grad = None
        Scaled.apply(x * 3, alpha).sum().backward()
        assert x.grad.tolist() == [-3 * alpha] * 2


def test_several_outputs_share_one_backward_and_an_unused_one_gets_zeros():
    x = nv.tensor([1.0, -2.0, 0.5], requires_grad=True)
    a, b = Pair.apply(x, 4.0)
    assert a.tolist() == [4.0, -8.0, 2.0] and b.tolist() == [1.0, 4.0, 0.25]
    (a.sum() + b[1]).backward()
    assert x.grad.tolist() == [4.0, 4.0 - 4.0, 4.0]
    x.grad = None
    a, _ = Pair.apply(x, 2.0)
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert gradcheck(lambda t: Pair.apply(t, 1.5)[1] + Pair.apply(t, 1.5)[0], [np.array([0.2, 0.7])])


def test_ctx_knows_what_needs_a_gradient_and_marks_outputs():
    seen = {}

    class Probe(nv.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            seen["needs"] = ctx.needs_input_grad
            seen["grad_mode"] = nv.is_grad_enabled()
            idx = a.argmax()
            ctx.mark_non_differentiable(idx)
            return a + b, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            return g, g

    a = nv.tensor([1.0, 3.0], requires_grad=True)
    out, idx = Probe.apply(a, nv.tensor([1.0, 1.0]))
    assert seen == {"needs": (True, False), "grad_mode": False}
    assert idx.grad_fn is None and out.grad_fn is not None
    out.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]
    with nv.no_grad():
        assert Probe.apply(a, nv.tensor([1.0, 1.0]))[0].grad_fn is None


def test_bad_backwards_are_named():
    class Wrong(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g[:1]

    class TooMany(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class Wide(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.expand(3, 2)       # summed down to the input's shape, as PyTorch

    x = nv.tensor([1.0, 2.0], requires_grad=True)
    Wide.apply(x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="Wrong.backward: gradient 0 has shape"):
        Wrong.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match="TooMany.backward returned 2 gradients"):
        TooMany.apply(x).sum().backward()
    y = Exp.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()


class TripleInPlace(nv.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(3)

    @staticmethod
    def backward(ctx, g):
        return g * 3


def test_mark_dirty_gives_the_input_object_the_functions_history():
    """PyTorch's in-place Function: the returned tensor is the input object, its
    gradient goes through ``backward`` to its history before the change -- for a view,
    through its base; a leaf that requires grad refuses."""
    a = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    c = TripleInPlace.apply(b)
    assert c is b and c.tolist() == [6.0, 12.0, 18.0]
    (c * c).sum().backward()
    assert a.grad.tolist() == [72.0, 144.0, 216.0]         # d(6a)^2/da
    w = nv.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    base = w * 1
    assert TripleInPlace.apply(base[1:3]) is not None
    assert base.tolist() == [1.0, 6.0, 9.0, 4.0]
    (base * nv.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert w.grad.tolist() == [1.0, 6.0, 9.0, 4.0]
    with nv.no_grad():
        assert TripleInPlace.apply(nv.ones(2)).tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="TripleInPlace: a leaf tensor that requires grad"):
        TripleInPlace.apply(nv.ones(2, requires_grad=True))

    class Forgets(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x.mul(3)

    with pytest.raises(RuntimeError, match="Forgets: some tensors marked dirty in forward"):
        Forgets.apply(nv.ones(2))
    with pytest.raises(TypeError, match="mark_dirty: expected tensors, got list"):
        nv.autograd.FunctionCtx(()).mark_dirty([nv.ones(1)])


def test_an_nv_compile_call_through_a_custom_function_records_every_time():
    w = nv.tensor([1.0, 2.0], requires_grad=True)

    @nv.compile
    def step(alpha):
        w.grad = None
        Scaled.apply(w * 1.0, alpha).sum().backward()
        return w.grad

    assert [step(a).tolist() for a in (1.0, 2.0, 3.0)] == [[-1.0, -1.0], [-2.0, -2.0],
                                                           [-3.0, -3.0]]
    assert step.replays == 0 and math.isfinite(w.sum().item())


def test_a_released_function_drops_its_saved_tensors():
    import gc
    import weakref
    held = []

    class Keep(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s = x * 5
            held.append(weakref.ref(s))
            ctx.save_for_backward(s)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = nv.ones(3, requires_grad=True)
    y = Keep.apply(x)
    y.sum().backward()
    gc.collect()
    assert held[0]() is None and y.grad_fn.attrs == {}


class Square(nv.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_saved_tensors_keep_their_value_when_changed_in_place_after():
    """A tensor saved by ``save_for_backward`` and then changed in place: backward
    reads the value it had when saved (PyTorch raises a version error; autograd's own
    rules read the saved value, and so does a Function) -- never the new one."""
    x = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 1.0
    y = Square.apply(h)
    h.mul_(10.0)                       # after the forward: not what y was made from
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    leaf = nv.tensor([1.0, 2.0], requires_grad=True)
    z = Square.apply(leaf)
    with nv.no_grad():
        leaf.add_(5.0)
    z.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [2.0, 4.0])


def test_a_saved_leaf_is_the_leaf_for_double_backward():
    x = nv.tensor([1.5, -2.0], requires_grad=True)
    (g,) = nv.autograd.grad(Square.apply(x).sum(), [x], create_graph=True)
    (gg,) = nv.autograd.grad(g.sum(), [x])
    np.testing.assert_array_equal(gg.numpy(), [2.0, 2.0])
