"""Probe 11: grad-mode decorators (generators, bare and set_grad_enabled forms),
set_materialize_grads, autograd's missing names, and the RNG's Generator/randint/
``nv.random`` parity with PyTorch."""
from __future__ import annotations

import copy
import importlib

import numpy as np
import pytest

import nova as nv


@pytest.fixture
def random_mod():
    return importlib.import_module("nova.random")


# ---------------------------------------------------------------- 1. generators

@pytest.mark.parametrize("deco, inside", [(nv.no_grad(), False), (nv.enable_grad(), True)])
def test_grad_mode_decorator_applies_inside_generator(deco, inside):
    @deco
    def gen():
        yield nv.is_grad_enabled()
        yield nv.is_grad_enabled()

    outside = not inside
    with nv.set_grad_enabled(outside):
        it = gen()
        first = next(it)
        between = nv.is_grad_enabled()     # the caller's mode between yields
        second = next(it)
    assert (first, between, second) == (inside, outside, inside)


def test_no_grad_generator_yields_tensor_without_history():
    w = nv.ones(2, requires_grad=True)

    @nv.no_grad()
    def gen():
        yield w * 2

    (out,) = list(gen())
    assert out.requires_grad is False
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0])


def test_inference_mode_generator_send_throw_close():
    @nv.inference_mode()
    def gen():
        got = yield nv.is_inference_mode_enabled()
        try:
            yield (got, nv.is_grad_enabled())
        except KeyError:
            yield ("thrown", nv.is_inference_mode_enabled())
        finally:
            closed.append(nv.is_inference_mode_enabled())
        return "done"

    closed: list[bool] = []
    it = gen()
    assert next(it) is True
    assert it.send(5) == (5, False)
    assert it.throw(KeyError("k")) == ("thrown", True)
    assert nv.is_inference_mode_enabled() is False and nv.is_grad_enabled() is True
    it.close()
    assert closed == [True]


def test_decorated_generator_return_value():
    @nv.no_grad()
    def gen():
        yield 1
        return 7

    it = gen()
    next(it)
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == 7


# ---------------------------------------------------------------- 2. decorator forms

def test_set_grad_enabled_as_decorator():
    @nv.set_grad_enabled(False)
    def f():
        return nv.is_grad_enabled()

    assert nv.is_grad_enabled() is True        # the decorator line leaves the mode
    assert f() is False
    assert nv.is_grad_enabled() is True


def test_set_grad_enabled_call_form_and_with():
    prev = nv.is_grad_enabled()
    try:
        nv.set_grad_enabled(False)
        assert nv.is_grad_enabled() is False
    finally:
        nv.set_grad_enabled(prev)
    with nv.set_grad_enabled(False):
        assert nv.is_grad_enabled() is False
    assert nv.is_grad_enabled() is True


def test_bare_no_grad_and_enable_grad_decorators():
    @nv.no_grad
    def off():
        return nv.is_grad_enabled()

    @nv.enable_grad
    def on():
        return nv.is_grad_enabled()

    assert off() is False and off.__name__ == "off"
    with nv.no_grad():
        assert on() is True
    assert nv.is_grad_enabled() is True


def test_grad_mode_decorator_rejects_non_callable():
    with pytest.raises(TypeError, match="expected a function"):
        nv.no_grad()(5)


# ---------------------------------------------------------------- 3. materialize grads

class _Two(nv.autograd.Function):
    seen: list[tuple[bool, bool]] = []

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        _Two.seen.append((ga is None, gb is None))
        g = nv.zeros_like(ga if ga is not None else gb)
        if ga is not None:
            g = g + ga * 2
        if gb is not None:
            g = g + gb * 3
        return g


def test_set_materialize_grads_false_passes_none():
    _Two.seen = []
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    a, b = _Two.apply(x)
    a.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    b.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 5.0])
    (a.sum() + b.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [10.0, 10.0])
    assert _Two.seen == [(False, True), (True, False), (False, False)]


def test_materialize_grads_default_gives_zeros():
    seen = []

    class Two(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append(gb.numpy().tolist())
            return ga * 2 + gb * 3

    x = nv.tensor([1.0, 2.0], requires_grad=True)
    a, _ = Two.apply(x)
    a.sum().backward()
    assert seen == [[0.0, 0.0]]


# ---------------------------------------------------------------- 4. autograd names

def _square_once() -> type:
    from nova.autograd.function import once_differentiable

    class SquareOnce(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x
    return SquareOnce


def test_once_differentiable_first_order():
    x = nv.tensor([1.0, 3.0], requires_grad=True)
    _square_once().apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 6.0])


def test_once_differentiable_refuses_double_backward():
    x = nv.tensor([1.0, 3.0], requires_grad=True)
    y = _square_once().apply(x * x)
    go = nv.ones(2, requires_grad=True)
    (g,) = nv.autograd.grad(y, x, go, create_graph=True)
    np.testing.assert_allclose(g.numpy(), 4 * np.array([1.0, 3.0]) ** 3)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_function_vjp_alias():
    assert nv.autograd.Function.vjp is nv.autograd.Function.backward

    class Triple(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def vjp(ctx, g):
            return g * 3

    x = nv.tensor([1.0, 2.0], requires_grad=True)
    Triple.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_function_backward_and_vjp_both_refused():
    class Both(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def vjp(ctx, g):
            return g

    x = nv.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="both 'backward' and 'vjp'"):
        Both.apply(x).sum().backward()


def test_variable_legacy_alias():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    v = nv.autograd.Variable(y)
    assert v.requires_grad is False and v.grad_fn is None
    w = nv.autograd.Variable(y, requires_grad=True)
    assert w.requires_grad and w.is_leaf and y.grad_fn is not None
    np.testing.assert_array_equal(w.numpy(), [2.0, 4.0])
    assert isinstance(x, nv.autograd.Variable)
    assert not isinstance([1.0], nv.autograd.Variable)
    assert nv.autograd.Variable().shape == (0,)
    with pytest.raises(TypeError, match="Variable data has to be a tensor"):
        nv.autograd.Variable([1.0])


def test_autograd_inference_mode_export():
    assert nv.autograd.inference_mode is nv.inference_mode
    with nv.autograd.inference_mode():
        assert nv.is_grad_enabled() is False


def test_gradgradcheck_passes_and_catches_a_wrong_second_derivative():
    x, y = np.array([0.3, 0.7]), np.array([1.2, -0.4])
    assert nv.autograd.gradgradcheck(lambda a, b: a.sin() * b, [x, y])

    class BadSquare(nv.autograd.Function):
        # first derivative right (2x); its gradient detaches x, so its derivative is wrong
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 2 * a.detach()          # drops d/da of the gradient

    assert nv.autograd.gradcheck(lambda a: BadSquare.apply(a), [x])
    with pytest.raises(nv.autograd.GradcheckError):
        nv.autograd.gradgradcheck(lambda a: BadSquare.apply(a), [x])


# ---------------------------------------------------------------- 5. RNG

def test_generator_seed_method_reseeds():
    g = nv.Generator()
    s1 = g.seed()
    assert isinstance(s1, int) and g.initial_seed() == s1
    s2 = g.seed()
    assert s2 != s1 and g.initial_seed() == s2
    a = nv.rand(4, generator=g).numpy()
    g.manual_seed(s2)
    np.testing.assert_array_equal(nv.rand(4, generator=g).numpy(), a)


def test_generator_device_argument():
    g = nv.Generator(device="cpu")
    assert str(g.device) == "cpu" and g.initial_seed() == 0
    assert str(nv.Generator("cpu").device) == "cpu"
    assert nv.Generator(7).initial_seed() == 7
    with pytest.raises(ValueError, match="unknown device type"):
        nv.Generator(device="xpu")
    h = copy.deepcopy(g.manual_seed(3))
    assert h.get_state() == g.get_state() and str(h.device) == "cpu"


def test_randint_bool_dtype():
    nv.manual_seed(0)
    t = nv.randint(0, 2, (64,), dtype=nv.bool)
    a = t.numpy()
    assert t.dtype == nv.bool and a.dtype == np.bool_
    assert 0 < a.sum() < 64
    assert nv.randint(1, 2, (3,), dtype=nv.bool).tolist() == [True, True, True]
    with pytest.raises(ValueError, match="does not fit bool"):
        nv.randint(0, 3, (2,), dtype=nv.bool)


def test_random_module_mirrors_torch_random(random_mod):
    for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
                 "fork_rng"):
        assert callable(getattr(random_mod, name))
    random_mod.manual_seed(11)
    assert random_mod.initial_seed() == 11
    state = random_mod.get_rng_state()
    a = nv.rand(3).numpy()
    random_mod.set_rng_state(state)
    np.testing.assert_array_equal(nv.rand(3).numpy(), a)


def test_fork_rng_restores_state(random_mod):
    nv.manual_seed(5)
    with random_mod.fork_rng():
        inside = nv.rand(3).numpy()
        nv.manual_seed(99)
        nv.rand(3).numpy()
    after = nv.rand(3).numpy()
    np.testing.assert_array_equal(inside, after)
    assert nv.initial_seed() == 5
    nv.manual_seed(5)
    with random_mod.fork_rng(enabled=False):
        first = nv.rand(3).numpy()
    assert not np.array_equal(nv.rand(3).numpy(), first)
    with pytest.raises(ValueError, match="device_type"):
        with random_mod.fork_rng(device_type="tpu"):
            pass
