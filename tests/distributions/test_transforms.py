"""``nv.distributions.transforms``, ``biject_to``/``transform_to`` and the matrix and
functor constraints in float64: every transform's forward, inverse (round trip, or the
pseudo-inverse where it is not bijective), ``log_abs_det_jacobian``, shapes,
constraints and attributes; ``TransformedDistribution.log_prob`` and its gradients with
respect to the base's and the transforms' parameters; the SAC policy (a tanh-squashed
Normal scored through the cache).

CI has no torch: there each is checked against numpy (forward formulas, the
log-determinant of a Jacobian by central differences, change of variables for
``log_prob``, gradients by central differences) and the expected attributes are
spelled out. Where torch is installed the same transforms are also compared with
``torch.distributions``.

The interpreter realizes these small graphs (the logic under test is the Python that
records them; the ops are tested with the compiled engine elsewhere)."""
import math
import pickle

import numpy as np
import pytest
from scipy import special, stats

import nova as nv
import nova.distributions as D
from nova.distributions import constraints as C


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _torch():
    """torch and its distributions and constraints modules (the test skips without)."""
    torch = pytest.importorskip("torch")
    return torch, torch.distributions, torch.distributions.constraints


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def t64(a):
    import torch
    return torch.tensor(np.asarray(a, dtype=np.float64))


RNG = np.random.default_rng(7)
VEC = RNG.standard_normal((3, 4))                 # batch 3 of 4-vectors
MAT = RNG.standard_normal((2, 3, 3))              # batch 2 of 3x3 matrices
EXPONENT = np.array([0.5, 2.0, -1.5, 3.0])
LOC, SCALE = RNG.standard_normal(4), np.exp(RNG.standard_normal(4))


def _cases(M, arr):
    """name -> (transform, input x in its domain as numpy), the transforms of ``M``
    (nova.distributions or torch.distributions; ``arr`` makes its float64 tensors)."""
    return {
        "exp": (M.ExpTransform(), VEC),
        "sigmoid": (M.SigmoidTransform(), VEC),
        "tanh": (M.TanhTransform(), VEC),
        "tanh_far": (M.TanhTransform(), np.array([-30.0, -9.0, 8.0, 25.0])),
        "softplus": (M.SoftplusTransform(), VEC * 3),
        "abs": (M.AbsTransform(), VEC),
        "power": (M.PowerTransform(0.5), np.exp(VEC)),   # exact in float32
        "power_tensor": (M.PowerTransform(arr(EXPONENT)), np.exp(VEC)),
        "affine": (M.AffineTransform(arr(LOC), arr(SCALE)), VEC),
        "affine_event": (M.AffineTransform(1.5, -0.5, event_dim=1), VEC),
        "cdf": (M.CumulativeDistributionTransform(M.Normal(0.0, 1.0)), VEC),
        "softmax": (M.SoftmaxTransform(), VEC),
        "stick_breaking": (M.StickBreakingTransform(), VEC),
        "lower_cholesky": (M.LowerCholeskyTransform(), MAT),
        "positive_definite": (M.PositiveDefiniteTransform(), MAT),
        "reshape": (M.ReshapeTransform((3, 4), (2, 6)), VEC),
        "independent": (M.IndependentTransform(M.TanhTransform(), 1), VEC),
        "compose": (M.ComposeTransform([M.AffineTransform(0.5, 2.0), M.ExpTransform(),
                                        M.PowerTransform(0.5)]), VEC),
        "compose_coupled": (M.ComposeTransform([M.TanhTransform(),
                                                M.StickBreakingTransform()]), VEC),
        "identity": (M.identity_transform, VEC),
        "inverse": (M.SigmoidTransform().inv, 1 / (1 + np.exp(-VEC))),
        "cat": (M.CatTransform([M.ExpTransform(), M.TanhTransform(), M.SoftplusTransform()],
                               dim=-1, lengths=[1, 2, 1]), VEC),
        # event_dim 1: the log-determinants of slices inside the event are added, of
        # slices along a batch dim concatenated
        "cat_in_event": (M.CatTransform([M.IndependentTransform(M.ExpTransform(), 1),
                                         M.AffineTransform(0.5, 3.0, event_dim=1)],
                                        dim=-1, lengths=[3, 1]), VEC),
        "cat_in_batch": (M.CatTransform([M.IndependentTransform(M.ExpTransform(), 1),
                                         M.TanhTransform()], dim=0, lengths=[2, 1]), VEC),
        "stack": (M.StackTransform([M.ExpTransform(), M.TanhTransform(),
                                    M.AbsTransform().inv], dim=0), np.abs(VEC)),
    }


def _constraint_name(c):
    """A constraint's class and event dim, comparable across the two libraries."""
    return type(c).__name__, c.event_dim


def test_transforms_against_torch():
    """Forward, inverse and log-determinant of every transform to a few ulp of torch's
    (one realization), the inverse a round trip where bijective (and torch's
    pseudo-inverse, with ``t(t.inv(y)) == y``, where not), and the attributes:
    ``bijective``, ``sign``, ``event_dim``, domain and codomain, shapes."""
    torch, TD, _ = _torch()
    cases, theirs = _cases(D, f64), _cases(TD, t64)
    outs = {}
    for name, (t, x) in cases.items():
        xn = f64(x)
        y = t(xn)
        back = t.inv(y)
        outs[name] = [y, back, t(back)]
        if t.bijective:
            outs[name].append(t.log_abs_det_jacobian(xn, y))
    nv.realize(*[o for v in outs.values() for o in v])
    for name, (t, x) in cases.items():
        tt = theirs[name][0]
        xt = t64(x)
        yt = tt(xt)
        y, back, again = (o.numpy() for o in outs[name][:3])
        np.testing.assert_allclose(y, yt.numpy(), rtol=1e-13, atol=1e-15, err_msg=name)
        np.testing.assert_allclose(back, tt.inv(yt).numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)
        np.testing.assert_allclose(again, y, rtol=1e-9, atol=1e-12, err_msg=name)
        if t.bijective:
            if name != "tanh_far":      # there tanh rounds to +-1: atanh gives +-inf
                np.testing.assert_allclose(back, x, rtol=1e-9, atol=1e-12, err_msg=name)
            ladj = outs[name][3].numpy()
            np.testing.assert_allclose(ladj, tt.log_abs_det_jacobian(xt, yt).numpy(),
                                       rtol=1e-12, atol=1e-13, err_msg=name)
            assert np.isfinite(ladj).all(), name
        assert t.bijective == tt.bijective, name
        assert _constraint_name(t.domain) == _constraint_name(tt.domain), name
        assert _constraint_name(t.codomain) == _constraint_name(tt.codomain), name
        assert t.forward_shape(x.shape) == tuple(tt.forward_shape(torch.Size(x.shape))), name
        assert t.inverse_shape(y.shape) == tuple(tt.inverse_shape(torch.Size(y.shape))), name
        for attr in ("sign", "event_dim"):
            try:
                expected = getattr(tt, attr)
            except (NotImplementedError, ValueError) as e:
                with pytest.raises(type(e)):
                    getattr(t, attr)
                continue
            got = getattr(t, attr)
            got = got.numpy() if isinstance(got, nv.Tensor) else got
            np.testing.assert_array_equal(got, expected.numpy() if torch.is_tensor(expected)
                                          else expected, err_msg=f"{name}.{attr}")


# ---------------------------------------------------------------- numpy references


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


def _stick_breaking(x):
    """``y_k = z_k prod_{j<k} (1 - z_j)``, ``z_k = sigmoid(x_k - log(K - k))``, and the
    remainder ``prod (1 - z)`` last."""
    k = x.shape[-1]
    z = _sigmoid(x - np.log(k - np.arange(k)))
    ones = np.ones(x.shape[:-1] + (1,))
    return np.concatenate([z, ones], -1) * np.concatenate([ones, np.cumprod(1 - z, -1)], -1)


def _stick_breaking_inv(y):
    k = y.shape[-1] - 1
    z = y[..., :-1] / (1 - np.concatenate([np.zeros(y.shape[:-1] + (1,)),
                                           np.cumsum(y[..., :-2], -1)], -1))
    return special.logit(z) + np.log(k - np.arange(k))


def _lower_cholesky(x):
    return np.tril(x, -1) + np.eye(x.shape[-1]) * np.exp(np.diagonal(x, 0, -2, -1))[..., None, :]


def _positive_definite(x):
    lower = _lower_cholesky(x)
    return lower @ np.swapaxes(lower, -1, -2)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


NP_FORWARD = {
    "exp": np.exp, "sigmoid": _sigmoid, "tanh": np.tanh, "tanh_far": np.tanh,
    "softplus": _softplus, "abs": np.abs, "power": np.sqrt,
    "power_tensor": lambda x: x ** EXPONENT, "affine": lambda x: LOC + SCALE * x,
    "affine_event": lambda x: 1.5 - 0.5 * x, "cdf": special.ndtr, "softmax": _softmax,
    "stick_breaking": _stick_breaking, "lower_cholesky": _lower_cholesky,
    "positive_definite": _positive_definite,
    "reshape": lambda x: x.reshape(x.shape[:-2] + (2, 6)), "independent": np.tanh,
    "compose": lambda x: np.sqrt(np.exp(0.5 + 2 * x)),
    "compose_coupled": lambda x: _stick_breaking(np.tanh(x)), "identity": lambda x: x,
    "inverse": special.logit,
    "cat": lambda x: np.concatenate([np.exp(x[..., :1]), np.tanh(x[..., 1:3]),
                                     _softplus(x[..., 3:])], -1),
    "cat_in_event": lambda x: np.concatenate([np.exp(x[..., :3]), 0.5 + 3 * x[..., 3:]], -1),
    "cat_in_batch": lambda x: np.concatenate([np.exp(x[:2]), np.tanh(x[2:])], 0),
    "stack": lambda x: np.stack([np.exp(x[0]), np.tanh(x[1]), x[2]], 0),
}

# where not bijective, ``t.inv(t(x))``: the preimage PyTorch's pseudo-inverse picks
NP_PREIMAGE = {
    "abs": np.abs, "softmax": lambda x: x - special.logsumexp(x, -1, keepdims=True),
    "lower_cholesky": lambda x: np.tril(x), "positive_definite": lambda x: np.tril(x),
    "stack": lambda x: x,
}

# name -> (bijective, domain, codomain, sign (or the error), event_dim, output shape),
# as torch.distributions has them
ATTRIBUTES = {
    "exp": (True, ("_Real", 0), ("_GreaterThan", 0), 1, 0, (3, 4)),
    "sigmoid": (True, ("_Real", 0), ("_Interval", 0), 1, 0, (3, 4)),
    "tanh": (True, ("_Real", 0), ("_Interval", 0), 1, 0, (3, 4)),
    "tanh_far": (True, ("_Real", 0), ("_Interval", 0), 1, 0, (4,)),
    "softplus": (True, ("_Real", 0), ("_GreaterThan", 0), 1, 0, (3, 4)),
    "abs": (False, ("_Real", 0), ("_GreaterThan", 0), NotImplementedError, 0, (3, 4)),
    "power": (True, ("_GreaterThan", 0), ("_GreaterThan", 0), 1, 0, (3, 4)),
    "power_tensor": (True, ("_GreaterThan", 0), ("_GreaterThan", 0), [1, 1, -1, 1], 0,
                     (3, 4)),
    "affine": (True, ("_Real", 0), ("_Real", 0), [1, 1, 1, 1], 0, (3, 4)),
    "affine_event": (True, ("_IndependentConstraint", 1), ("_IndependentConstraint", 1), -1,
                     1, (3, 4)),
    "cdf": (True, ("_Real", 0), ("_Interval", 0), 1, 0, (3, 4)),
    "softmax": (False, ("_IndependentConstraint", 1), ("_Simplex", 1), NotImplementedError,
                1, (3, 4)),
    "stick_breaking": (True, ("_IndependentConstraint", 1), ("_Simplex", 1),
                       NotImplementedError, 1, (3, 5)),
    "lower_cholesky": (False, ("_IndependentConstraint", 2), ("_LowerCholesky", 2),
                       NotImplementedError, 2, (2, 3, 3)),
    "positive_definite": (False, ("_IndependentConstraint", 2), ("_PositiveDefinite", 2),
                          NotImplementedError, 2, (2, 3, 3)),
    "reshape": (True, ("_IndependentConstraint", 2), ("_IndependentConstraint", 2),
                NotImplementedError, 2, (2, 6)),
    "independent": (True, ("_IndependentConstraint", 1), ("_IndependentConstraint", 1), 1, 1,
                    (3, 4)),
    "compose": (True, ("_Real", 0), ("_GreaterThan", 0), 1, 0, (3, 4)),
    "compose_coupled": (True, ("_IndependentConstraint", 1), ("_Simplex", 1),
                        NotImplementedError, 1, (3, 5)),
    "identity": (True, ("_Real", 0), ("_Real", 0), 1, 0, (3, 4)),
    "inverse": (True, ("_Interval", 0), ("_Real", 0), 1, 0, (3, 4)),
    "cat": (True, ("_Cat", 0), ("_Cat", 0), NotImplementedError, 0, (3, 4)),
    "cat_in_event": (True, ("_Cat", 1), ("_Cat", 1), NotImplementedError, 1, (3, 4)),
    "cat_in_batch": (True, ("_Cat", 1), ("_Cat", 1), NotImplementedError, 1, (3, 4)),
    "stack": (False, ("_Stack", 0), ("_Stack", 0), NotImplementedError, 0, (3, 4)),
}


def _fd_log_abs_det(f, x, event_dim, drop_last=False, h=1e-6):
    """``log |det J|`` of ``f`` at ``x``, for each batch element (the leading dims of x
    but ``event_dim``), J by central differences over the flattened event; with
    ``drop_last`` the last output coordinate (a simplex's, determined by the others)
    is left out so J is square."""
    split = x.ndim - event_dim
    batch, event = x.shape[:split], x.shape[split:]
    columns = []
    for j in range(int(np.prod(event, dtype=int))):
        step = np.zeros(event)
        step.reshape(-1)[j] = h
        column = ((f(x + step) - f(x - step)) / (2 * h)).reshape(batch + (-1,))
        columns.append(column[..., :-1] if drop_last else column)
    return np.linalg.slogdet(np.stack(columns, -1))[1]


def test_transforms_against_numpy():
    """Every transform's forward equals its numpy formula; its inverse is a round trip
    where bijective (else ``t(t.inv(y)) == y``, ``t.inv(t(x))`` the canonical preimage);
    ``log_abs_det_jacobian`` is the log-determinant of the Jacobian by central
    differences (of the event, the simplex's last coordinate left out); x lies in the
    domain and y in the codomain; and the attributes are PyTorch's. One realization."""
    cases = _cases(D, f64)
    assert set(cases) == set(NP_FORWARD) == set(ATTRIBUTES)
    outs = {}
    for name, (t, x) in cases.items():
        xn = f64(x)
        y = t(xn)
        back = t.inv(y)
        if name == "cat_in_batch":
            # a cat constraint of parts with different event dims cannot be checked (the
            # parts' results do not concatenate; torch raises as well)
            checks = [nv.tensor(True), nv.tensor(True)]
        else:
            checks = [t.domain.check(xn), t.codomain.check(y)]
        outs[name] = [y, back, t(back), *checks]
        if t.bijective:
            outs[name].append(t.log_abs_det_jacobian(xn, y))
    nv.realize(*[o for v in outs.values() for o in v])
    for name, (t, x) in cases.items():
        y, back, again, in_domain, in_codomain = (o.numpy() for o in outs[name][:5])
        bijective, domain, codomain, sign, event_dim, shape = ATTRIBUTES[name]
        forward = NP_FORWARD[name]
        np.testing.assert_allclose(y, forward(x), rtol=1e-13, atol=1e-15, err_msg=name)
        np.testing.assert_allclose(again, y, rtol=1e-9, atol=1e-12, err_msg=name)
        assert in_domain.all(), name
        if name != "tanh_far":                  # tanh(25) rounds to 1: not in (-1, 1)
            assert in_codomain.all(), name
        if bijective:
            if name != "tanh_far":              # atanh(1) is inf
                np.testing.assert_allclose(back, x, rtol=1e-9, atol=1e-12, err_msg=name)
            ladj = outs[name][5].numpy()
            assert np.isfinite(ladj).all(), name
            if name == "tanh_far":              # too flat for differences: sech^2 exactly
                expected = np.log(4.0) - 2 * np.logaddexp(x, -x)
                np.testing.assert_allclose(ladj, expected, rtol=1e-13, err_msg=name)
            else:
                expected = _fd_log_abs_det(forward, x, t.domain.event_dim,
                                           drop_last=codomain[0] == "_Simplex")
                assert ladj.shape == expected.shape, name
                np.testing.assert_allclose(ladj, expected, rtol=1e-6, atol=1e-7,
                                           err_msg=name)
        else:
            np.testing.assert_allclose(back, NP_PREIMAGE[name](x), rtol=1e-9, atol=1e-12,
                                       err_msg=name)
        assert t.bijective == bijective, name
        assert _constraint_name(t.domain) == domain, name
        assert _constraint_name(t.codomain) == codomain, name
        assert t.forward_shape(x.shape) == y.shape == shape, name
        assert t.inverse_shape(y.shape) == x.shape, name
        assert t.event_dim == event_dim, name
        if sign is NotImplementedError:
            with pytest.raises(NotImplementedError):
                t.sign
        else:
            got = t.sign
            np.testing.assert_array_equal(got.numpy() if isinstance(got, nv.Tensor) else got,
                                          sign, err_msg=name)


def test_constraints_reject_points_outside():
    """The codomains are not vacuous: points outside are refused."""
    checks = [D.ExpTransform().codomain.check(f64([1.0, 0.0, -1.0])),
              D.SigmoidTransform().codomain.check(f64([0.5, 1.0, 1.5])),
              D.PowerTransform(0.5).domain.check(f64([2.0, 0.0, -1.0])),
              D.StickBreakingTransform().codomain.check(f64([[0.5, 0.5], [0.5, 0.6]])),
              D.LowerCholeskyTransform().codomain.check(f64([[[1.0, 0.0], [1.0, 1.0]],
                                                             [[1.0, 1.0], [0.0, 1.0]]]))]
    nv.realize(*checks)
    assert [c.numpy().tolist() for c in checks] == [
        [True, False, False], [True, True, False],      # unit_interval is closed
        [True, False, False], [True, False], [True, False]]


def test_transform_semantics():
    """Equality, the inverse's identities, caching, ``with_cache``, pickling, reprs and
    the errors (as PyTorch's, with the op named)."""
    tanh = D.TanhTransform()
    assert tanh == D.TanhTransform() and tanh != D.ExpTransform()
    assert tanh.inv.inv is tanh and tanh.inv == D.TanhTransform().inv
    assert tanh.inv.domain is tanh.codomain and tanh.inv.sign == 1
    assert D.PowerTransform(2.0) == D.PowerTransform(f64(2.0))
    assert D.PowerTransform(2.0) != D.PowerTransform(3.0)
    compose = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, -2.0)])
    assert compose == D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, -2.0)])
    assert compose != D.ComposeTransform([D.ExpTransform()]) and compose.sign == -1
    assert compose.inv.inv is compose and compose.inv.parts[0] == compose.parts[1].inv
    assert D.IndependentTransform(tanh, 1) == D.IndependentTransform(D.TanhTransform(), 1)
    assert D.ReshapeTransform((2, 3), (6,)) != D.ReshapeTransform((3, 2), (6,))
    assert D.identity_transform.domain is C.real and D.identity_transform.bijective
    assert isinstance(D.ComposeTransform.domain, C._Dependent)   # dependent on the class

    # caching: the exact x comes back (tanh(20) rounds to 1, whose atanh is inf)
    cached = D.TanhTransform(cache_size=1)
    x = f64([20.0, 0.3])
    y = cached(x)
    assert cached(x) is y and cached.inv(y) is x
    assert math.isinf(D.TanhTransform().inv(y).numpy()[0])
    compose_cached = compose.with_cache(1)
    assert compose_cached is not compose and all(p._cache_size == 1 for p in compose_cached.parts)
    assert compose_cached.with_cache(1) is compose_cached
    assert D.SigmoidTransform().with_cache()._cache_size == 1
    assert D.PowerTransform(2.0).with_cache()._cache_size == 1
    assert tanh.inv.with_cache().inv._cache_size == 1
    restored = pickle.loads(pickle.dumps(compose))
    assert restored == compose and restored.inv.inv is restored
    assert repr(D.IndependentTransform(tanh, 1)) == "IndependentTransform(TanhTransform(), 1)"
    assert repr(tanh.inv) == "_InverseTransform(TanhTransform())"

    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        D.TanhTransform(cache_size=2)
    with pytest.raises(ValueError, match="different numbers of elements"):
        D.ReshapeTransform((2, 3), (5,))
    with pytest.raises(ValueError, match="shape mismatch: expected \\(2, 3\\) but got \\(3, 2\\)"):
        D.ReshapeTransform((2, 3), (6,)).forward_shape((4, 3, 2))
    with pytest.raises(TypeError, match="ComposeTransform: element 1 is a str"):
        D.ComposeTransform([tanh, "exp"])
    with pytest.raises(ValueError, match="CatTransform: 1 lengths for 2 transforms"):
        D.CatTransform([tanh, tanh], lengths=[2])
    with pytest.raises(ValueError, match="StackTransform: x of shape \\(3, 4\\) has size 3"):
        D.StackTransform([tanh, tanh])(f64(VEC))
    with pytest.raises(ValueError, match="too few dimensions"):
        D.StickBreakingTransform().forward_shape(())
    with pytest.raises(ValueError, match="IndependentTransform: too few dimensions"):
        D.IndependentTransform(tanh, 2)(f64(LOC))
    with pytest.raises(NotImplementedError):
        D.AbsTransform().log_abs_det_jacobian(f64(LOC), f64(LOC))
    with pytest.raises(ValueError, match="Please use either .domain.event_dim"):
        D.ReshapeTransform((2, 3), (6,)).event_dim


def _grads(lib, build, params, value):
    """log_prob of ``build(lib, *params)`` at ``value`` and its gradients with respect to
    each parameter, as numpy."""
    if lib is not nv:
        ps = [t64(p).requires_grad_() for p in params]
        lp = build(lib, *ps).log_prob(t64(value))
        grads = lib.autograd.grad(lp.sum(), ps)
        return [lp.detach().numpy()] + [g.numpy() for g in grads]
    ps = [f64(p).requires_grad_() for p in params]
    lp = build(lib, *ps).log_prob(f64(value))
    grads = nv.autograd.grad(lp.sum(), ps)
    nv.realize(lp, *grads)
    return [lp.detach().numpy()] + [g.numpy() for g in grads]


def _lib(lib):
    return (D, D) if lib is nv else (lib.distributions, lib.distributions.transforms)


P_LOC, P_SCALE = RNG.standard_normal(3) * 0.3, np.exp(RNG.standard_normal(3) * 0.3)
TD_CASES = {
    # SAC's squashed Gaussian
    "tanh": (lambda L, loc, scale: _lib(L)[0].TransformedDistribution(
        _lib(L)[0].Normal(loc, scale), [_lib(L)[1].TanhTransform()]),
        [P_LOC, P_SCALE], np.array([[0.2, -0.7, 0.95], [-0.1, 0.4, -0.99]])),
    "affine_exp_power": (lambda L, loc, scale, a, e: _lib(L)[0].TransformedDistribution(
        _lib(L)[0].Normal(loc, scale), [_lib(L)[1].AffineTransform(a, scale),
                                        _lib(L)[1].ExpTransform(), _lib(L)[1].PowerTransform(e)]),
        [P_LOC, P_SCALE, np.array([0.1, -0.2, 0.3]), np.array([0.5, 1.5, -2.0])],
        np.array([0.7, 1.3, 0.4])),
    "softplus": (lambda L, loc, scale: _lib(L)[0].TransformedDistribution(
        _lib(L)[0].Normal(loc, scale), _lib(L)[1].SoftplusTransform()),
        [P_LOC, P_SCALE], np.array([0.3, 1.2, 2.5])),
    "stick_breaking": (lambda L, loc, scale: _lib(L)[0].TransformedDistribution(
        _lib(L)[0].Normal(loc, scale), [_lib(L)[1].StickBreakingTransform()]),
        [P_LOC, P_SCALE], np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])),
    "independent_reshape": (lambda L, loc, scale: _lib(L)[0].TransformedDistribution(
        _lib(L)[0].Normal(loc.reshape(1, 3).expand(2, 3), scale),
        [_lib(L)[1].IndependentTransform(_lib(L)[1].SigmoidTransform(), 1),
         _lib(L)[1].ReshapeTransform((2, 3), (6,))]),
        [P_LOC, P_SCALE], np.array([0.1, 0.5, 0.9, 0.3, 0.6, 0.2])),
    "cat_stack": (lambda L, loc, scale: _lib(L)[0].TransformedDistribution(
        _lib(L)[0].Normal(loc, scale),
        [_lib(L)[1].CatTransform([_lib(L)[1].ExpTransform(), _lib(L)[1].TanhTransform()],
                                 dim=-1, lengths=[1, 2]),
         _lib(L)[1].StackTransform([_lib(L)[1].AffineTransform(0.0, 2.0),
                                    _lib(L)[1].SoftplusTransform().inv], dim=0)]),
        [P_LOC, P_SCALE], np.array([[1.5, 0.3, -0.8], [0.4, -0.5, 0.2]])),
    "cdf": (lambda L, loc, scale: _lib(L)[0].TransformedDistribution(
        _lib(L)[0].Normal(loc, scale),
        [_lib(L)[1].CumulativeDistributionTransform(_lib(L)[0].Laplace(0.5, scale))]),
        [P_LOC, P_SCALE], np.array([0.2, 0.5, 0.9])),
}


@pytest.mark.parametrize("name", sorted(TD_CASES))
def test_transformed_distribution_log_prob_and_gradients(name):
    """``TransformedDistribution.log_prob`` and its gradients with respect to the base's
    and the transforms' parameters equal torch's; the shapes and the support too."""
    torch, _, _ = _torch()
    build, params, value = TD_CASES[name]
    got, expected = _grads(nv, build, params, value), _grads(torch, build, params, value)
    for g, e in zip(got, expected):
        assert g.shape == e.shape, name
        np.testing.assert_allclose(g, e, rtol=1e-11, atol=1e-12, err_msg=name)
    d, dt = build(nv, *map(f64, params)), build(torch, *map(t64, params))
    assert (d.batch_shape, d.event_shape) == (tuple(dt.batch_shape), tuple(dt.event_shape))
    assert _constraint_name(d.support) == _constraint_name(dt.support)


def _cat_stack(x):
    c = np.concatenate([np.exp(x[..., :1]), np.tanh(x[..., 1:])], -1)
    return np.stack([2 * c[0], np.log(np.expm1(c[1]))], 0)


def _cat_stack_inv(y):
    c = np.stack([y[0] / 2, _softplus(y[1])], 0)
    return np.concatenate([np.log(c[..., :1]), np.arctanh(c[..., 1:])], -1)


# name -> (forward, inverse, event dims of the transforms' domain, whether the codomain
# is a simplex, the base's log density, the log-determinant where given exactly: None
# takes the Jacobian by differences), each given the parameters
TD_REFERENCE = {
    "tanh": (lambda x, loc, scale: np.tanh(x), lambda y, loc, scale: np.arctanh(y), 0, False,
             lambda x, loc, scale: stats.norm.logpdf(x, loc, scale), None),
    "affine_exp_power": (
        lambda x, loc, scale, a, e: np.exp(a + scale * x) ** e,
        lambda y, loc, scale, a, e: (np.log(y) / e - a) / scale, 0, False,
        lambda x, loc, scale, a, e: stats.norm.logpdf(x, loc, scale), None),
    "softplus": (lambda x, loc, scale: _softplus(x), lambda y, loc, scale: np.log(np.expm1(y)),
                 0, False, lambda x, loc, scale: stats.norm.logpdf(x, loc, scale), None),
    "stick_breaking": (lambda x, loc, scale: _stick_breaking(x),
                       lambda y, loc, scale: _stick_breaking_inv(y), 1, True,
                       lambda x, loc, scale: stats.norm.logpdf(x, loc, scale).sum(-1), None),
    "independent_reshape": (
        lambda x, loc, scale: _sigmoid(x).reshape(x.shape[:-2] + (6,)),
        lambda y, loc, scale: special.logit(y).reshape(y.shape[:-1] + (2, 3)), 2, False,
        lambda x, loc, scale: stats.norm.logpdf(x, loc, scale).sum((-2, -1)), None),
    "cat_stack": (lambda x, loc, scale: _cat_stack(x), lambda y, loc, scale: _cat_stack_inv(y),
                  0, False, lambda x, loc, scale: stats.norm.logpdf(x, loc, scale), None),
    # a CDF's derivative is the density (exactly: the value 0.5 sits on the Laplace's
    # kink, where differences are off by ~1e-6)
    "cdf": (lambda x, loc, scale: stats.laplace.cdf(x, 0.5, scale),
            lambda y, loc, scale: stats.laplace.ppf(y, 0.5, scale), 0, False,
            lambda x, loc, scale: stats.norm.logpdf(x, loc, scale),
            lambda x, loc, scale: stats.laplace.logpdf(x, 0.5, scale)),
}


@pytest.mark.parametrize("name", sorted(TD_CASES))
def test_transformed_distribution_log_prob_against_numpy(name):
    """``log_prob(y) = base.log_prob(x) - log |det dy/dx|`` at ``x = inverse(y)`` (numpy
    inverse, the base's density from scipy, the Jacobian by central differences); the
    gradients with respect to every parameter equal the central differences of
    log_prob along a random direction."""
    build, params, value = TD_CASES[name]
    forward, inverse, event_dim, simplex, base_logpdf, exact = TD_REFERENCE[name]
    x = inverse(value, *params)
    np.testing.assert_allclose(forward(x, *params), value, rtol=1e-12, err_msg=name)
    ladj = exact(x, *params) if exact else _fd_log_abs_det(
        lambda a: forward(a, *params), x, event_dim, drop_last=simplex)
    expected = base_logpdf(x, *params) - ladj
    got = _grads(nv, build, params, value)
    assert got[0].shape == expected.shape, name
    np.testing.assert_allclose(got[0], expected, rtol=1e-7, atol=1e-7, err_msg=name)

    h, rng = 1e-6, np.random.default_rng(9)
    directions = [rng.standard_normal(np.shape(p)) for p in params]
    shifted = []
    for i, d in enumerate(directions):
        for sign in (1, -1):
            moved = [p + sign * h * d if j == i else p for j, p in enumerate(params)]
            shifted.append(build(nv, *map(f64, moved)).log_prob(f64(value)).sum())
    nv.realize(*shifted)
    for i, (d, g) in enumerate(zip(directions, got[1:])):
        slope = (shifted[2 * i].item() - shifted[2 * i + 1].item()) / (2 * h)
        np.testing.assert_allclose((g * d).sum(), slope, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{name}: parameter {i}")
    d = build(nv, *map(f64, params))
    assert d.batch_shape + d.event_shape == value.shape[value.ndim - len(
        d.batch_shape + d.event_shape):]
    assert d.support.check(f64(value)).numpy().all()


def _sac_policy():
    """The SAC policy's action and its score, and the gradients of ``sum(logp + 2 *
    action)`` with respect to loc and scale, with the noise the policy drew."""
    loc_np, scale_np = np.array([0.3, -1.0, 25.0]), np.array([0.5, 2.0, 0.1])
    nv.manual_seed(5)
    eps = nv.randn(3, dtype=nv.float64).numpy()
    nv.manual_seed(5)
    loc, scale = f64(loc_np).requires_grad_(), f64(scale_np).requires_grad_()
    policy = D.TransformedDistribution(D.Normal(loc, scale), [D.TanhTransform(cache_size=1)])
    action = policy.rsample()
    logp = policy.log_prob(action)
    loss = (logp + action * 2.0).sum()
    grads = nv.autograd.grad(loss, [loc, scale])
    nv.realize(action, logp, *grads)
    return loc_np, scale_np, eps, action.numpy(), logp.numpy(), [g.numpy() for g in grads]


def test_sac_policy_rsample_through_the_cache():
    """A tanh-squashed Normal (``TanhTransform(cache_size=1)``): ``rsample`` is
    ``tanh(loc + scale * eps)``, its score goes through the cached pre-tanh value
    ``x`` (``normal.logpdf(x) - log sech^2 x``, finite where tanh rounds to 1), and the
    gradients are the closed form: d/dx of the loss is ``2 tanh x + 2 sech^2 x``, the
    base's term contributes ``-1/scale`` to the scale's only."""
    loc, scale, eps, action, logp, (g_loc, g_scale) = _sac_policy()
    x = loc + scale * eps
    np.testing.assert_allclose(action, np.tanh(x), rtol=1e-14)
    assert action[2] == 1.0                    # tanh(25 + ...) rounds to 1
    log_sech2 = np.log(4.0) - 2 * np.logaddexp(x, -x)
    np.testing.assert_allclose(logp, stats.norm.logpdf(x, loc, scale) - log_sech2,
                               rtol=1e-12)
    d_x = 2 * np.tanh(x) + 2 * np.exp(log_sech2)
    np.testing.assert_allclose(g_loc, d_x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g_scale, d_x * eps - 1 / scale, rtol=1e-12, atol=1e-14)


def test_sac_policy_against_torch():
    """The same, equal to torch's for the same noise."""
    torch, TD, _ = _torch()
    loc_np, scale_np, eps, action, logp, grads = _sac_policy()
    tloc, tscale = t64(loc_np).requires_grad_(), t64(scale_np).requires_grad_()
    tpolicy = TD.TransformedDistribution(TD.Normal(tloc, tscale),
                                         [TD.TanhTransform(cache_size=1)])
    x = tloc + tscale * t64(eps)
    ta = tpolicy.transforms[0](x)
    tlogp = tpolicy.log_prob(ta)
    tgrads = torch.autograd.grad((tlogp + ta * 2.0).sum(), [tloc, tscale])
    np.testing.assert_allclose(action, ta.detach().numpy(), rtol=1e-14)
    assert np.isfinite(logp).all()
    np.testing.assert_allclose(logp, tlogp.detach().numpy(), rtol=1e-12)
    for g, t in zip(grads, tgrads):
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- biject_to / transform_to

BOUND = np.array([0.5, -1.0, 2.0, 0.0])


def _registry_cases(K, arr):
    """name -> (constraint of ``K`` (Nova's or torch's constraints module), input in the
    reals as numpy)."""
    return {
        "real": (K.real, VEC),
        "real_vector": (K.real_vector, VEC),
        "positive": (K.positive, VEC),
        "nonnegative": (K.nonnegative, VEC),
        "greater_than": (K.greater_than(arr(BOUND)), VEC),
        "greater_than_eq": (K.greater_than_eq(-2.0), VEC),
        "less_than": (K.less_than(1.5), VEC),
        "unit_interval": (K.unit_interval, VEC),
        "interval": (K.interval(-1.0, arr(BOUND + 3)), VEC),
        "half_open_interval": (K.half_open_interval(2.0, 5.0), VEC),
        "simplex": (K.simplex, VEC),
        "independent_positive": (K.independent(K.positive, 2), VEC),
        "lower_cholesky": (K.lower_cholesky, MAT),
        "positive_definite": (K.positive_definite, MAT),
        "positive_semidefinite": (K.positive_semidefinite, MAT),
        "cat": (K.cat([K.positive, K.interval(0.0, 2.0)], dim=-1, lengths=[3, 1]), VEC),
        "stack": (K.stack([K.real, K.positive, K.less_than(0.0)], dim=0), VEC),
    }


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_constraint_registries_against_torch(registry):
    """For every constraint Nova has, ``biject_to``/``transform_to`` give the transform
    torch's give (the same class; the same values, inside the constraint; the same
    log-determinant for ``biject_to``), or the same NotImplementedError."""
    _, TD, TC = _torch()
    ours, theirs = getattr(D, registry), getattr(TD, registry)
    torch_cases = _registry_cases(TC, t64)
    checked = 0
    outs = {}
    for name, (c, x) in _registry_cases(C, f64).items():
        try:
            tt = theirs(torch_cases[name][0])
        except NotImplementedError:
            with pytest.raises(NotImplementedError, match=f"Cannot transform {type(c).__name__} "):
                ours(c)
            continue
        t = ours(c)
        assert type(t).__name__ == type(tt).__name__, name
        y = t(f64(x))
        outs[name] = [y, c.check(y)]
        if registry == "biject_to":
            outs[name].append(t.log_abs_det_jacobian(f64(x), y))
    nv.realize(*[o for v in outs.values() for o in v])
    for name, (c, x) in _registry_cases(C, f64).items():
        if name not in outs:
            continue
        tt = theirs(torch_cases[name][0])
        yt = tt(t64(x))
        np.testing.assert_allclose(outs[name][0].numpy(), yt.numpy(), rtol=1e-13, err_msg=name)
        assert outs[name][1].numpy().all(), name
        if registry == "biject_to":
            np.testing.assert_allclose(outs[name][2].numpy(),
                                       tt.log_abs_det_jacobian(t64(x), yt).numpy(),
                                       rtol=1e-12, atol=1e-13, err_msg=name)
        checked += 1
    assert checked >= (12 if registry == "biject_to" else 16)


# the class of the transform each registry gives (None: NotImplementedError), as torch's
REGISTRY_CLASSES = {
    "real": ("ComposeTransform", "ComposeTransform"),
    "real_vector": ("IndependentTransform", "IndependentTransform"),
    "positive": ("ComposeTransform", "ComposeTransform"),
    "nonnegative": ("ComposeTransform", "ComposeTransform"),
    "greater_than": ("ComposeTransform", "ComposeTransform"),
    "greater_than_eq": ("ComposeTransform", "ComposeTransform"),
    "less_than": ("ComposeTransform", "ComposeTransform"),
    "unit_interval": ("SigmoidTransform", "SigmoidTransform"),
    "interval": ("ComposeTransform", "ComposeTransform"),
    "half_open_interval": ("ComposeTransform", "ComposeTransform"),
    "simplex": ("StickBreakingTransform", "SoftmaxTransform"),
    "independent_positive": ("IndependentTransform", "IndependentTransform"),
    "lower_cholesky": (None, "LowerCholeskyTransform"),
    "positive_definite": (None, "PositiveDefiniteTransform"),
    "positive_semidefinite": (None, "PositiveDefiniteTransform"),
    "cat": ("CatTransform", "CatTransform"),
    "stack": ("StackTransform", "StackTransform"),
}


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_constraint_registries(registry):
    """``biject_to``/``transform_to`` give PyTorch's transform class for each constraint
    (or its NotImplementedError); the image of the reals lies inside the constraint;
    a ``biject_to`` transform inverts exactly and its log-determinant is that of the
    Jacobian of the transform itself by central differences."""
    which = ["biject_to", "transform_to"].index(registry)
    cases = _registry_cases(C, f64)
    assert set(cases) == set(REGISTRY_CLASSES)
    outs, transforms = {}, {}
    for name, (c, x) in cases.items():
        expected = REGISTRY_CLASSES[name][which]
        if expected is None:
            with pytest.raises(NotImplementedError, match=f"Cannot transform {type(c).__name__} "):
                getattr(D, registry)(c)
            continue
        t = transforms[name] = getattr(D, registry)(c)
        assert type(t).__name__ == expected, name
        y = t(f64(x))
        outs[name] = [y, c.check(y)]
        if registry == "biject_to":
            outs[name] += [t.inv(y), t.log_abs_det_jacobian(f64(x), y)]
    nv.realize(*[o for v in outs.values() for o in v])
    for name, out in outs.items():
        assert out[1].numpy().all(), name
        if registry == "biject_to":
            t, x = transforms[name], cases[name][1]
            np.testing.assert_allclose(out[2].numpy(), x, rtol=1e-9, atol=1e-12, err_msg=name)
            expected = _fd_log_abs_det(lambda a, t=t: t(f64(a)).numpy(), x,
                                       t.domain.event_dim,
                                       drop_last=type(t.codomain).__name__ == "_Simplex")
            np.testing.assert_allclose(out[3].numpy(), expected, rtol=1e-6, atol=1e-7,
                                       err_msg=name)
    assert len(outs) == (14 if registry == "biject_to" else 17)


def test_registry_registration_and_errors():
    class Odd(C.Constraint):
        pass

    registry = D.constraint_registry.ConstraintRegistry()
    with pytest.raises(NotImplementedError, match="Cannot transform Odd constraints"):
        registry(Odd())
    registry.register(Odd, lambda c: D.ExpTransform())
    assert registry(Odd()) == D.ExpTransform()

    @registry.register(C.positive)            # a singleton registers its class
    def _softplus(constraint):
        return D.SoftplusTransform()

    assert registry(C.greater_than(0.0)) == D.SoftplusTransform()
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        registry.register(int, lambda c: D.ExpTransform())
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        D.biject_to(C.boolean)
    # the optimization idiom: a constrained parameter from an unconstrained one
    u = f64([-1.0, 0.0, 2.0])
    scale = D.transform_to(D.Normal.arg_constraints["scale"])(u)
    np.testing.assert_allclose(scale.numpy(), np.exp([-1.0, 0.0, 2.0]), rtol=1e-15)


# ---------------------------------------------------------------- the new constraints


def _matrix_cases(K):
    """(constraint of ``K`` (Nova's or torch's constraints module), values) pairs."""
    a = np.random.default_rng(11).standard_normal((3, 3))
    pd = a @ a.T + np.eye(3)
    psd = np.diag([2.0, 0.0, 1.0])          # eigenvalue 0, exactly in any LAPACK
    indefinite = np.diag([1.0, -2.0, 3.0])
    asymmetric = pd + np.triu(np.ones((3, 3)), 1)
    mats = np.stack([pd, psd, indefinite, asymmetric])
    vec = np.array([[1.0, 0.5, -0.2, 3.0], [-1.0, 0.1, -0.5, 0.0]])
    return [
        (K.square, mats), (K.square, np.zeros((2, 3, 4))),
        (K.symmetric, mats),
        (K.positive_definite, mats[:3]),
        (K.positive_definite, mats[2:]),
        (K.positive_semidefinite, mats[:3]),
        (K.cat([K.positive, K.real], dim=-1, lengths=[2, 2]), vec),
        (K.stack([K.real, K.positive], dim=0), vec),
        (K.stack([K.simplex, K.real_vector], dim=0),
         np.abs(vec) / np.abs(vec).sum(-1, keepdims=True)),
    ]


# what each of _matrix_cases checks to, and its (event_dim, is_discrete)
MATRIX_EXPECTED = [
    ([True, True, True, True], (2, False)), ([False, False], (2, False)),
    ([True, True, True, False], (2, False)),
    ([True, False, False], (2, False)),
    ([False, False], (2, False)),           # torch gives [True, False] here
    ([True, True, False], (2, False)),
    ([[True, True, True, True], [False, True, True, True]], (0, False)),
    ([[True, True, True, True], [False, True, False, False]], (0, False)),
    ([True, True], (1, False)),
]


def test_matrix_and_functor_constraints():
    """``square``, ``symmetric``, ``positive_definite``, ``positive_semidefinite``,
    ``cat`` and ``stack`` check a Nova tensor (lazily but for the semidefinite one) and
    a numpy array (what validation reads); each matrix of a batch judged on its own."""
    cases = _matrix_cases(C)
    checks = [c.check(f64(v)) for c, v in cases]
    nv.realize(*checks)
    for (c, v), got, (expected, (event_dim, discrete)) in zip(cases, checks, MATRIX_EXPECTED):
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=repr(c))
        np.testing.assert_array_equal(c.check(v), expected, err_msg=repr(c))
        assert (c.event_dim, c.is_discrete) == (event_dim, discrete), repr(c)
    assert C.stack([C.simplex], dim=-1).event_dim == 1
    with pytest.raises(TypeError, match="constraints.cat: element 0 of cseq is a int"):
        C.cat([1])
    with pytest.raises(IndexError, match="constraints.stack: dim 3 is out of range"):
        C.stack([C.real], dim=3).check(np.zeros((2, 4)))


def test_matrix_and_functor_constraints_against_torch():
    """The same checks as torch's, but where torch's positive_definite judges a batch
    by its asymmetric member."""
    _, _, TC = _torch()
    for (c, v), (tc, _), got in zip(_matrix_cases(C), _matrix_cases(TC), MATRIX_EXPECTED):
        expected = tc.check(t64(v)).numpy()
        if type(c).__name__ == "_PositiveDefinite" and v.shape[0] == 2:
            expected = np.array([False, False])   # torch gives [True, False] here
        np.testing.assert_array_equal(got[0], expected, err_msg=repr(c))
        assert c.event_dim == tc.event_dim and c.is_discrete == tc.is_discrete, repr(c)
    assert C.stack([C.simplex], dim=-1).event_dim == TC.stack([TC.simplex], dim=-1).event_dim
