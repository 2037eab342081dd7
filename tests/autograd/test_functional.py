"""``nv.autograd.functional``: Jacobians, Hessians and their products against matrices
written out by hand (numpy), PyTorch's return structures, strict mode and errors.

Each test realizes its results once (``nv.realize`` on all of them): every realized
graph compiles."""
import numpy as np
import pytest

import nova as nv
from nova.autograd import functional as F

RNG = np.random.default_rng(7)
X = RNG.uniform(-1.0, 1.0, (2, 3))
W = RNG.uniform(-1.0, 1.0, (3, 4))
B = RNG.uniform(-1.0, 1.0, 4)
P = RNG.uniform(-1.0, 1.0, 3)
Q = RNG.uniform(-1.0, 1.0, 3)


def t(a, **kw):
    return nv.tensor(np.asarray(a, dtype=np.float64), **kw)


def values(*tensors):
    nv.realize(*tensors)
    return [x.numpy() for x in tensors]


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# --- the functions, and their derivatives by hand ---------------------------------------

def poly(x):
    """Elementwise x^3 - 2x^2 + 0.5: a diagonal Jacobian."""
    return x ** 3 - 2 * x * x + 0.5


def poly_jacobian(x):
    return np.diag((3 * x ** 2 - 4 * x).ravel()).reshape(x.shape + x.shape)


def net(x):
    """tanh(x @ W + b), x of shape (2, 3): output (2, 4)."""
    return nv.tanh(x @ t(W) + t(B))


def net_jacobian(x):
    """d y[i, k] / d x[a, j] = [i == a] (1 - y[i, k]^2) W[j, k]."""
    y = np.tanh(x @ W + B)
    return np.einsum("ia,ik,jk->ikaj", np.eye(x.shape[0]), 1 - y ** 2, W)


def scalar2(p, q):
    """sum(exp(p) q) + sum(p^2) sum(q^2): a scalar function of two vectors."""
    return (nv.exp(p) * q).sum() + (p * p).sum() * (q * q).sum()


def scalar2_value(p, q):
    return np.sum(np.exp(p) * q) + np.sum(p * p) * np.sum(q * q)


def scalar2_hessian(p, q):
    """The blocks ((Hpp, Hpq), (Hqp, Hqq))."""
    hpp = np.diag(np.exp(p) * q) + 2 * np.sum(q * q) * np.eye(3)
    hpq = np.diag(np.exp(p)) + 4 * np.outer(p, q)
    return (hpp, hpq), (hpq.T, 2 * np.sum(p * p) * np.eye(3))


def two_outputs(x, p):
    """(x * p, sum of squares of x's rows): two outputs of two inputs."""
    return x * p, (x * x).sum(1)


def two_outputs_jacobian(x, p):
    """((d0/dx, d0/dp), (d1/dx, d1/dp)) with shapes out.shape + in.shape."""
    d0x = np.einsum("ia,jb,j->ijab", np.eye(2), np.eye(3), p)
    d0p = np.einsum("jb,ij->ijb", np.eye(3), x)
    d1x = np.einsum("ia,ib->iab", np.eye(2), 2 * x)
    return (d0x, d0p), (d1x, np.zeros((2, 3)))


# --- values ------------------------------------------------------------------------------

def test_jacobians_match_the_matrices_by_hand():
    jp = F.jacobian(poly, t(X))
    jn = F.jacobian(net, t(X))
    (d0x, d0p), (d1x, d1p) = F.jacobian(two_outputs, (t(X), t(P)))
    # vectorize and forward-mode are computed by the same rows, with the same result
    jv = F.jacobian(net, t(X), vectorize=True)
    jf = F.jacobian(net, t(X), vectorize=True, strategy="forward-mode")
    j32 = F.jacobian(lambda x: nv.tanh(x @ t(W).float() + t(B).float()), t(X).float())
    assert j32.dtype == nv.float32
    assert jn.shape == (2, 4, 2, 3) and d0x.shape == (2, 3, 2, 3) and d1p.shape == (2, 3)
    assert all(j.dtype == nv.float64 and not j.requires_grad for j in (jp, jn, d0x, d1p, jf))
    got = values(jp, jn, d0x, d0p, d1x, d1p, jv, jf, j32)
    close(got[0], poly_jacobian(X))
    close(got[1], net_jacobian(X))
    for g, w in zip(got[2:6], [b for row in two_outputs_jacobian(X, P) for b in row]):
        close(g, w)
    close(got[6], net_jacobian(X))
    close(got[7], net_jacobian(X))
    np.testing.assert_allclose(got[8], net_jacobian(X), rtol=1e-5, atol=1e-6)


def test_products_agree_with_the_jacobian_and_hessian():
    u = RNG.uniform(-1, 1, (2, 4))      # shaped like net's output
    v = RNG.uniform(-1, 1, (2, 3))      # shaped like its input
    vp, vq = RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, 3)
    out, vjp = F.vjp(net, t(X), t(u))
    out2, jvp = F.jvp(net, t(X), t(v))
    s, (hvp_p, hvp_q) = F.hvp(scalar2, (t(P), t(Q)), (t(vp), t(vq)))
    s2, (vhp_p, vhp_q) = F.vhp(scalar2, (t(P), t(Q)), (t(vp), t(vq)))
    (hpp, hpq), (hqp, hqq) = F.hessian(scalar2, (t(P), t(Q)))
    h_single = F.hessian(lambda p: scalar2(p, t(Q)), t(P))
    got = values(out, vjp, out2, jvp, s, hvp_p, hvp_q, s2, vhp_p, vhp_q,
                 hpp, hpq, hqp, hqq, h_single)
    jn = net_jacobian(X)
    (wpp, wpq), (wqp, wqq) = scalar2_hessian(P, Q)
    close(got[0], np.tanh(X @ W + B))
    close(got[1], np.einsum("ik,ikaj->aj", u, jn))
    close(got[2], np.tanh(X @ W + B))
    close(got[3], np.einsum("ikaj,aj->ik", jn, v))
    close(got[4], scalar2_value(P, Q))
    close(got[5], wpp @ vp + wpq @ vq)
    close(got[6], wqp @ vp + wqq @ vq)
    close(got[7], scalar2_value(P, Q))
    close(got[8], vp @ wpp + vq @ wqp)
    close(got[9], vp @ wpq + vq @ wqq)
    for g, w in zip(got[10:14], (wpp, wpq, wqp, wqq)):
        close(g, w)
    close(got[14], wpp)


def test_records_without_realizing_and_reads_in_one_step():
    before = nv.debug.cache_stats()
    jac = F.jacobian(net, t(X))
    hess = F.hessian(lambda p: (nv.exp(p) * p).sum(), t(P))
    assert not jac.node.realized and not hess.node.realized
    mid = nv.debug.cache_stats()
    assert (mid.hits, mid.misses) == (before.hits, before.misses)
    got = values(jac, hess)
    after = nv.debug.cache_stats()
    assert after.hits + after.misses == mid.hits + mid.misses + 1
    close(got[0], net_jacobian(X))
    close(got[1], np.diag(np.exp(P) * (P + 2)))


def test_create_graph_allows_a_further_gradient():
    x = t(P, requires_grad=True)
    v = t(Q)
    jac = F.jacobian(lambda a: a ** 3, x, create_graph=True)       # diag(3 x^2)
    hess = F.hessian(lambda a: (a ** 4).sum(), x, create_graph=True)  # diag(12 x^2)
    out, vjp = F.vjp(lambda a: a ** 3, x, v, create_graph=True)     # 3 x^2 v
    out2, jvp = F.jvp(lambda a: a ** 3, x, v, create_graph=True)    # 3 x^2 v
    _, hvp = F.hvp(lambda a: (a ** 4).sum(), x, v, create_graph=True)  # 12 x^2 v
    _, vhp = F.vhp(lambda a: (a ** 4).sum(), x, v, create_graph=True)
    results = (jac, hess, out, vjp, out2, jvp, hvp, vhp)
    assert all(r.requires_grad for r in results)
    grads = [nv.autograd.grad(r.sum(), x)[0] for r in (jac * jac, hess, vjp, jvp, hvp, vhp)]
    got = values(*grads)
    close(got[0], 36 * P ** 3)
    close(got[1], 24 * P)
    close(got[2], 6 * P * Q)
    close(got[3], 6 * P * Q)
    close(got[4], 24 * P * Q)
    close(got[5], 24 * P * Q)


def test_unused_inputs_and_outputs_give_zeros():
    x, y = t(P), t(Q)
    jx, jy = F.jacobian(lambda a, b: a * 2, (x, y))
    _, (vx, vy) = F.vjp(lambda a, b: a * a, (x, y), t(Q))
    # an output that does not depend on the inputs at all
    (o1, o2), (j1, j2) = F.jvp(lambda a: (a * a, nv.ones(3, dtype=nv.float64)), x, t(Q))
    (hxx, hxy), (hyx, hyy) = F.hessian(lambda a, b: (a ** 3).sum() + b.sum(), (x, y))
    _, (ux, uy) = F.hvp(lambda a, b: (a ** 3).sum() + b.sum(), (x, y), (t(Q), t(P)))
    got = values(jx, jy, vx, vy, o2, j1, j2, hxx, hxy, hyx, hyy, ux, uy)
    close(got[0], 2 * np.eye(3))
    close(got[2], 2 * P * Q)
    close(got[4], np.ones(3))
    close(got[5], 2 * P * Q)
    close(got[7], np.diag(6 * P))
    close(got[11], 6 * P * Q)
    for k in (1, 3, 6, 8, 9, 10, 12):
        close(got[k], np.zeros(got[k].shape))


# --- structures (no realization) ---------------------------------------------------------

def test_return_structures_follow_pytorch():
    assert nv.autograd.functional is F
    x, p = t(X), t(P)
    assert isinstance(F.jacobian(poly, x), nv.Tensor)
    j = F.jacobian(lambda a: (a, a * 2), x)                  # tuple out, single in
    assert isinstance(j, tuple) and len(j) == 2 and j[1].shape == (2, 3, 2, 3)
    j = F.jacobian(lambda a, b: a * b, (x, p))               # single out, tuple in
    assert isinstance(j, tuple) and [b.shape for b in j] == [(2, 3, 2, 3), (2, 3, 3)]
    j = F.jacobian(poly, (x,))                               # a 1-tuple stays a tuple
    assert isinstance(j, tuple) and len(j) == 1
    j = F.jacobian(two_outputs, (x, p))
    assert [[b.shape for b in row] for row in j] == [[(2, 3, 2, 3), (2, 3, 3)],
                                                     [(2, 2, 3), (2, 3)]]
    assert F.jacobian(lambda a: a * a, t(2.0)).shape == ()
    # an empty output: the empty Jacobian (PyTorch's stack of no rows raises instead)
    assert F.jacobian(lambda a: a[:, :0], x).shape == (2, 0, 2, 3)
    h = F.hessian(scalar2, (p, t(Q)))
    assert isinstance(h, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in h)
    assert F.hessian(lambda a: (a * a).sum(), x).shape == (2, 3, 2, 3)
    out, res = F.vjp(lambda a: (a, a.sum()), x, (x, t(1.0)))
    assert isinstance(out, tuple) and isinstance(res, nv.Tensor) and res.shape == (2, 3)
    out, res = F.jvp(lambda a, b: a * b, (x, x), (x, x))
    assert isinstance(out, nv.Tensor) and isinstance(res, nv.Tensor)
    out, res = F.vhp(scalar2, (p, t(Q)), (p, p))
    assert isinstance(out, nv.Tensor) and isinstance(res, tuple) and len(res) == 2
    out, res = F.hvp(lambda a: (a ** 3).sum(), t([1.5]))     # v left out: one element
    assert out.shape == () and res.shape == (1,)
    out, res = F.vjp(lambda a: (a * a).sum(), x)
    assert res.shape == (2, 3)
    # detached unless create_graph, even where the input requires grad
    xg = t(X, requires_grad=True)
    out, res = F.vjp(poly, xg, x)
    assert not out.requires_grad and not res.requires_grad
    assert not F.jacobian(poly, xg).requires_grad


# --- errors (raised while recording) -----------------------------------------------------

def test_strict_mode_errors():
    x, y = t(P), t(Q)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is "
                                           "independent of input 1"):
        F.jacobian(lambda a, b: a * a, (x, y), strict=True)
    with pytest.raises(RuntimeError, match="independent of input 1. This is not allowed in "
                                           "strict mode"):
        F.vjp(lambda a, b: a * a, (x, y), x, strict=True)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.jvp(lambda a, b: a * a, (x, y), (x, y), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not "
                                           "require gradients"):
        F.vjp(lambda a: nv.ones(3, dtype=nv.float64), x, x, strict=True)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is "
                                           "independent of input 0.*create_graph=True"):
        F.jacobian(lambda a: a * 3, x, strict=True, create_graph=True)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with "
                                           "respect to input 1 is independent of the input"):
        F.hessian(lambda a, b: (a ** 3).sum() + b.sum(), (x, y), strict=True)
    with pytest.raises(RuntimeError, match="jacobian .* input 0 is independent"):
        F.hvp(lambda a: a.sum() * 2, x, x, strict=True)
    with pytest.raises(RuntimeError, match="hessian of the user-provided function is "
                                           "independent of input 0"):
        F.vhp(lambda a, b: (a * a).sum() + (a * b).sum(), (x, y), (x, y), strict=True,
              create_graph=True)
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorize=True`"):
        F.jacobian(lambda a: a * a, x, strict=True, vectorize=True)


def test_v_and_argument_errors():
    x = t(P)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be \(3,\) but got "
                                           r"\(2,\)"):
        F.vjp(poly, x, t([1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"Entry 1 in v has invalid size: should be \(3,\)"):
        F.jvp(lambda a, b: a * b, (x, x), (x, t([1.0])))
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be \(3,\)"):
        F.hvp(lambda a: (a ** 3).sum(), x, t([1.0]))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but "
                                           "got 1"):
        F.vjp(lambda a: (a, a), x, (x,))
    with pytest.raises(RuntimeError, match="should contain a single Tensor"):
        F.vjp(poly, x, (x, x))
    with pytest.raises(RuntimeError, match="v can only be None if the user-provided function "
                                           "returns a single Tensor with a single element"):
        F.vjp(poly, x)
    for fn in (F.jvp, F.hvp, F.vhp):
        with pytest.raises(RuntimeError, match="v can only be None if the input to the "
                                               "user-provided function is a single Tensor"):
            fn(lambda a: (a * a).sum(), x)
    with pytest.raises(TypeError, match="The v given to vjp must be either a Tensor or a "
                                        "tuple of Tensors but the given v has type list"):
        F.vjp(poly, x, [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="The inputs given to jacobian .* has type list"):
        F.jacobian(poly, [x])
    with pytest.raises(TypeError, match="the value at index 1 has type float"):
        F.jacobian(lambda a, b: a, (x, 2.0))
    with pytest.raises(TypeError, match="outputs of the user-provided function given to vjp"):
        F.vjp(lambda a: [a], x, x)
    with pytest.raises(RuntimeError, match="function given to hessian should return a single "
                                           "Tensor"):
        F.hessian(lambda a: ((a * a).sum(),), x)
    with pytest.raises(RuntimeError, match=r"given to hvp should contain a single element "
                                           r"\(got shape \(3,\)\)"):
        F.hvp(lambda a: a * a, x, x)
    with pytest.raises(RuntimeError, match="floating point"):
        F.jacobian(lambda a: a * 2, nv.tensor([1, 2]))


def test_strategy_rules_follow_pytorch():
    x = t(P)
    with pytest.raises(ValueError, match="jacobian: expected \"forward-mode\" or "
                                         "\"reverse-mode\", got 'backward'"):
        F.jacobian(poly, x, strategy="backward")
    with pytest.raises(ValueError, match="hessian: expected"):
        F.hessian(lambda a: (a * a).sum(), x, outer_jacobian_strategy="sideways")
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        F.jacobian(poly, x, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match="`create_graph=True` and "
                                                  "`strategy=\"forward-mode\"`"):
        F.jacobian(poly, x, strategy="forward-mode", vectorize=True, create_graph=True)
    with pytest.raises(RuntimeError, match="`strict=True` and `strategy=\"forward-mode\"`"):
        F.jacobian(poly, x, strategy="forward-mode", vectorize=True, strict=True)
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        F.hessian(lambda a: (a * a).sum(), x, outer_jacobian_strategy="forward-mode")
    # forward mode gives the outputs' dtype (reverse mode: the inputs')
    assert F.jacobian(lambda a: a.double(), x.float(), vectorize=True,
                      strategy="forward-mode").dtype == nv.float64
    assert F.jacobian(lambda a: a.double(), x.float()).dtype == nv.float32


# --- against PyTorch, where it is installed ----------------------------------------------

def test_matches_torch():
    torch = pytest.importorskip("torch")
    TF = torch.autograd.functional
    xt, pt, qt = (torch.tensor(a, requires_grad=True) for a in (X, P, Q))
    xn, pn, qn = (t(a, requires_grad=True) for a in (X, P, Q))
    wt, bt = torch.tensor(W), torch.tensor(B)

    def net_t(x):
        return torch.tanh(x @ wt + bt)

    def scalar2_t(p, q):
        return (torch.exp(p) * q).sum() + (p * p).sum() * (q * q).sum()

    cases = [
        (F.jacobian(net, xn, create_graph=True), TF.jacobian(net_t, xt, create_graph=True)),
        (F.hessian(scalar2, (pn, qn)), TF.hessian(scalar2_t, (pt, qt))),
        (F.jvp(net, xn, t(X), create_graph=True), TF.jvp(net_t, xt, torch.tensor(X),
                                                          create_graph=True)),
        (F.hvp(scalar2, (pn, qn), (t(Q), t(P))), TF.hvp(scalar2_t, (pt, qt),
                                                        (torch.tensor(Q), torch.tensor(P)))),
        (F.vjp(lambda a, b: (a * b, a), (pn, qn), (t(P), t(Q)), create_graph=True),
         TF.vjp(lambda a, b: (a * b, a), (pt, qt), (torch.tensor(P), torch.tensor(Q)),
                create_graph=True)),
    ]

    def flat(n, w, pairs):
        if isinstance(w, tuple):
            assert isinstance(n, tuple) and len(n) == len(w)
            for a, b in zip(n, w):
                flat(a, b, pairs)
        else:
            assert n.shape == tuple(w.shape) and n.requires_grad == w.requires_grad
            pairs.append((n, w))

    pairs = []
    for n, w in cases:
        flat(n, w, pairs)
    got = values(*[n for n, _ in pairs])
    for g, (_, w) in zip(got, pairs):
        close(g, w.detach().numpy())
