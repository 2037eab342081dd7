"""torch.func's transforms (``nova.func``): values against closed forms and float64
finite differences, structures and errors as torch.func's."""
import numpy as np
import pytest

import nova as nv
from nova import func


@pytest.fixture(autouse=True)
def interp():
    """The transforms are Python-level: the interpreter runs their ops without compiles."""
    with nv.engine("interp"):
        yield


X = np.array([0.5, -1.25, 2.0], np.float64)


def _f(x):
    return nv.sin(x) * (x * x).sum()


def _numeric_jacobian(f, x, eps=1e-6):
    cols = []
    for k in range(x.size):
        d = np.zeros_like(x)
        d[k] = eps
        cols.append((f(x + d) - f(x - d)) / (2 * eps))
    return np.stack(cols, -1)


def _f_np(x):
    return np.sin(x) * (x * x).sum()


def test_grad_and_value_argnums_pytrees_aux_and_nesting():
    x = nv.tensor(X)
    g = func.grad(lambda t: (t ** 3).sum())(x)
    np.testing.assert_allclose(g.numpy(), 3 * X ** 2)
    assert not g.requires_grad
    (ga, gb), value = func.grad_and_value(lambda a, b: (a * b).sum(), argnums=(0, 1))(
        x, nv.tensor(2 * X))
    np.testing.assert_allclose(ga.numpy(), 2 * X)
    np.testing.assert_allclose(gb.numpy(), X)
    assert value.item() == pytest.approx(float((2 * X * X).sum()))
    tree = func.grad(lambda d: (d["w"] * d["b"][0]).sum())({"w": x, "b": [nv.tensor(3.0)]})
    np.testing.assert_allclose(tree["w"].numpy(), [3.0] * 3)
    assert tree["b"][0].item() == pytest.approx(float(X.sum()))
    g, aux = func.grad(lambda t: ((t * t).sum(), "kept"), has_aux=True)(x)
    np.testing.assert_allclose(g.numpy(), 2 * X)
    assert aux == "kept"
    # torch.func's structure with an aux: (gradient, (value, aux))
    g, (value, aux) = func.grad_and_value(lambda t: ((t * t).sum(), t.mean()),
                                          has_aux=True)(x)
    np.testing.assert_allclose(g.numpy(), 2 * X)
    assert value.item() == pytest.approx(float((X * X).sum()))
    assert aux.item() == pytest.approx(float(X.mean()))
    second = func.grad(func.grad(lambda t: t ** 3))(nv.tensor(2.0, dtype=nv.float64))
    assert second.item() == pytest.approx(12.0)                      # 6 x
    assert func.grad(lambda t, u: u.sum())(x, x).tolist() == [0.0] * 3   # unused: zeros
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, "
                                           "got tensor with 1 dims"):
        func.grad(lambda t: t * 2)(x)
    with pytest.raises(RuntimeError, match="Got argnums=2, but only 1 positional inputs"):
        func.grad(lambda t: t.sum(), argnums=2)(x)


def test_vjp_jvp_jacrev_jacfwd_hessian_agree_with_finite_differences():
    x = nv.tensor(X)
    jac = _numeric_jacobian(_f_np, X)
    np.testing.assert_allclose(func.jacrev(_f)(x).numpy(), jac, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(func.jacfwd(_f)(x).numpy(), jac, rtol=1e-6, atol=1e-8)
    out, vjp_fn = func.vjp(_f, x)
    np.testing.assert_allclose(out.numpy(), _f_np(X))
    u = np.array([1.0, -2.0, 0.5])
    for _ in range(2):                                   # callable more than once
        (got,) = vjp_fn(nv.tensor(u))
        np.testing.assert_allclose(got.numpy(), u @ jac, rtol=1e-6)
    v = np.array([0.3, 0.1, -1.0])
    out, pushed = func.jvp(_f, (x,), (nv.tensor(v),))
    np.testing.assert_allclose(pushed.numpy(), jac @ v, rtol=1e-6)
    hess = _numeric_jacobian(lambda t: _numeric_jacobian(lambda s: _f_np(s).sum(), t, 1e-5),
                             X, 1e-5)
    got = func.hessian(lambda t: _f(t).sum())(x)
    assert got.shape == (3, 3)
    np.testing.assert_allclose(got.numpy(), hess, rtol=1e-4, atol=1e-4)
    both = func.jacrev(lambda a, b: (a * b, a.sum()), argnums=(0, 1))(x, nv.tensor(2 * X))
    np.testing.assert_allclose(both[0][0].numpy(), np.diag(2 * X))
    np.testing.assert_allclose(both[0][1].numpy(), np.diag(X))
    np.testing.assert_allclose(both[1][1].numpy(), np.zeros(3))
    with pytest.raises(RuntimeError, match="Mismatch in shape: cotangent has shape \\(2,\\)"):
        vjp_fn(nv.ones(2, dtype=nv.float64))
    with pytest.raises(RuntimeError, match="Expected primals and tangents to be tuples"):
        func.jvp(_f, x, nv.tensor(v))


def test_vmap_maps_dims_and_passes_the_rest_whole():
    a = np.arange(24.0).reshape(2, 3, 4)
    b = np.arange(4.0)
    got = func.vmap(lambda x, y: x @ y, in_dims=(1, None))(nv.tensor(a), nv.tensor(b))
    np.testing.assert_allclose(got.numpy(), np.stack([a[:, k] @ b for k in range(3)]))
    pair = func.vmap(lambda x: (x.sum(), x * 2), out_dims=(0, 1))(nv.tensor(a))
    np.testing.assert_allclose(pair[0].numpy(), a.reshape(2, -1).sum(1))
    np.testing.assert_allclose(pair[1].numpy(), np.moveaxis(2 * a, 0, 1))
    outer = func.vmap(func.vmap(lambda x, y: x * y, in_dims=(None, 0)), in_dims=(0, None))
    np.testing.assert_allclose(outer(nv.tensor(b), nv.tensor(b)).numpy(), np.outer(b, b))
    scaled = func.vmap(lambda x, *, k: x * k)(nv.tensor(b), k=3.0)
    np.testing.assert_allclose(scaled.numpy(), 3 * b)
    empty = func.vmap(lambda x: x * 2)(nv.zeros(0, 3))
    assert empty.shape == (0, 3)
    with pytest.raises(ValueError, match="Expected all tensors to have the same size in the "
                                         "mapped dimension, got sizes \\[2, 4\\]"):
        func.vmap(lambda x, y: x)(nv.zeros(2, 3), nv.zeros(4, 3))
    with pytest.raises(ValueError, match="must only return Tensors, got type int"):
        func.vmap(lambda x: 3)(nv.zeros(2))
    with pytest.raises(ValueError, match="Got in_dim=1 for some input, but that input is a "
                                         "Tensor of dimensionality 1"):
        func.vmap(lambda x: x, in_dims=1)(nv.zeros(2))


def test_vmap_refuses_an_in_place_write_to_an_unmapped_input():
    """Each batch index calls the function again with the unmapped input whole, so an
    in-place write to it was repeated per index (``y.add_(x)`` left ``y`` the sum of the
    batch, and every output mixed): refused, as PyTorch refuses writing a batched value
    into an unbatched tensor. In-place writes to a mapped input's slices stay allowed."""
    x = nv.arange(6.0).reshape(2, 3)
    y = nv.zeros(3)
    with pytest.raises(RuntimeError, match=r"vmap\(<lambda>\): an in-place operation changed "
                                           r"input 1 \(in_dim None, shape \(3,\)\)"):
        func.vmap(lambda a, b: b.add_(a), in_dims=(0, None))(x, y)
    doubled = func.vmap(lambda a: a.mul_(2))(nv.arange(6.0).reshape(2, 3))
    assert doubled.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert func.vmap(lambda a, b: a + b, in_dims=(0, None))(x, nv.ones(3)).tolist() == \
        [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_vmap_randomness_modes():
    x = nv.zeros(3, 4)
    with pytest.raises(RuntimeError, match="vmap: called random operation while in "
                                           "randomness error mode"):
        func.vmap(lambda t: t + nv.rand(4))(x)
    nv.manual_seed(0)
    same = func.vmap(lambda t: t + nv.rand(4), randomness="same")(x).numpy()
    assert (same == same[0]).all()
    different = func.vmap(lambda t: t + nv.rand(4), randomness="different")(x).numpy()
    assert len({tuple(r) for r in different}) == 3


def test_per_sample_gradients_and_ensembles_through_functional_call():
    nv.manual_seed(1)
    m = nv.nn.Linear(3, 1).double()
    params = {k: v.detach() for k, v in m.named_parameters()}
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((5, 3)), rng.standard_normal((5, 1))

    def loss(p, x, y):
        return ((func.functional_call(m, p, (x[None],)) - y) ** 2).sum()

    g = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, nv.tensor(xs), nv.tensor(ys))
    w, b = params["weight"].numpy(), params["bias"].numpy()
    r = xs @ w.T + b - ys                                 # (5, 1) residuals
    np.testing.assert_allclose(g["weight"].numpy(), (2 * r * xs)[:, None, :], rtol=1e-10)
    np.testing.assert_allclose(g["bias"].numpy(), 2 * r, rtol=1e-10)
    models = [nv.nn.Linear(3, 2).double() for _ in range(3)]
    stacked, buffers = func.stack_module_state(models)
    assert stacked["weight"].shape == (3, 2, 3) and stacked["weight"].requires_grad
    assert buffers == {}
    x = nv.tensor(xs)
    out = func.vmap(lambda p: func.functional_call(models[0], p, (x,)))(stacked)
    for k, model in enumerate(models):
        np.testing.assert_allclose(out[k].detach().numpy(), model(x).detach().numpy(),
                                   rtol=1e-12)


def test_linearize_pushes_tangents_through_a_graph_built_once():
    """``func.linearize`` (was missing): ``jvp_fn(t)`` equals the numeric Jacobian times
    ``t``, for several tangents from one linearization (func runs once), over a tuple
    of outputs and two primals, one of them unused; structure and shape errors."""
    calls = []

    def f(x, y):
        calls.append(1)
        return _f(x), (x * 0 + 1).sum() * 3

    x = nv.tensor(X)
    out, jvp_fn = func.linearize(f, x, x)
    np.testing.assert_allclose(out[0].numpy(), _f_np(X))
    jac = _numeric_jacobian(_f_np, X)
    for t in (np.array([1.0, 0.0, 0.0]), np.array([0.5, -2.0, 1.5])):
        got, const = jvp_fn(nv.tensor(t), nv.tensor(t))
        np.testing.assert_allclose(got.numpy(), jac @ t, rtol=1e-6, atol=1e-8)
        assert const.item() == 0.0
    assert len(calls) == 1
    with pytest.raises(RuntimeError, match="structure of the primals"):
        jvp_fn(nv.tensor(X))
    with pytest.raises(RuntimeError, match="tangent of shape"):
        jvp_fn(nv.tensor(X[:2]), nv.tensor(X))
