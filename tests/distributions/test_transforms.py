"""``nv.distributions.transforms``, ``biject_to``/``transform_to`` and the matrix and
functor constraints against ``torch.distributions`` in float64: every transform's
forward, inverse (round trip, or torch's pseudo-inverse where it is not bijective),
``log_abs_det_jacobian``, shapes, constraints and attributes; the gradients of
``TransformedDistribution.log_prob`` with respect to the base's and the transforms'
parameters; the SAC policy (a tanh-squashed Normal scored through the cache).

The interpreter realizes these small graphs (the logic under test is the Python that
records them; the ops are tested with the compiled engine elsewhere)."""
import math
import pickle

import numpy as np
import pytest

import nova as nv
import nova.distributions as D
from nova.distributions import constraints as C

torch = pytest.importorskip("torch")
TD = torch.distributions
TC = TD.constraints


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def t64(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


RNG = np.random.default_rng(7)
VEC = RNG.standard_normal((3, 4))                 # batch 3 of 4-vectors
MAT = RNG.standard_normal((2, 3, 3))              # batch 2 of 3x3 matrices
EXPONENT = np.array([0.5, 2.0, -1.5, 3.0])
LOC, SCALE = RNG.standard_normal(4), np.exp(RNG.standard_normal(4))


def _cases():
    """name -> (nova transform, torch transform, input x in its domain)."""
    n01 = (D.Normal(0.0, 1.0), TD.Normal(0.0, 1.0))
    return {
        "exp": (D.ExpTransform(), TD.ExpTransform(), VEC),
        "sigmoid": (D.SigmoidTransform(), TD.SigmoidTransform(), VEC),
        "tanh": (D.TanhTransform(), TD.TanhTransform(), VEC),
        "tanh_far": (D.TanhTransform(), TD.TanhTransform(), np.array([-30.0, -9.0, 8.0, 25.0])),
        "softplus": (D.SoftplusTransform(), TD.SoftplusTransform(), VEC * 3),
        "abs": (D.AbsTransform(), TD.AbsTransform(), VEC),
        "power": (D.PowerTransform(0.5), TD.PowerTransform(0.5), np.exp(VEC)),   # exact in float32
        "power_tensor": (D.PowerTransform(f64(EXPONENT)), TD.PowerTransform(t64(EXPONENT)),
                         np.exp(VEC)),
        "affine": (D.AffineTransform(f64(LOC), f64(SCALE)),
                   TD.AffineTransform(t64(LOC), t64(SCALE)), VEC),
        "affine_event": (D.AffineTransform(1.5, -0.5, event_dim=1),
                         TD.AffineTransform(1.5, -0.5, event_dim=1), VEC),
        "cdf": (D.CumulativeDistributionTransform(n01[0]),
                TD.CumulativeDistributionTransform(n01[1]), VEC),
        "softmax": (D.SoftmaxTransform(), TD.SoftmaxTransform(), VEC),
        "stick_breaking": (D.StickBreakingTransform(), TD.StickBreakingTransform(), VEC),
        "lower_cholesky": (D.LowerCholeskyTransform(), TD.LowerCholeskyTransform(), MAT),
        "positive_definite": (D.PositiveDefiniteTransform(), TD.PositiveDefiniteTransform(), MAT),
        "reshape": (D.ReshapeTransform((3, 4), (2, 6)), TD.ReshapeTransform((3, 4), (2, 6)), VEC),
        "independent": (D.IndependentTransform(D.TanhTransform(), 1),
                        TD.IndependentTransform(TD.TanhTransform(), 1), VEC),
        "compose": (D.ComposeTransform([D.AffineTransform(0.5, 2.0), D.ExpTransform(),
                                        D.PowerTransform(0.5)]),
                    TD.ComposeTransform([TD.AffineTransform(0.5, 2.0), TD.ExpTransform(),
                                         TD.PowerTransform(0.5)]), VEC),
        "compose_coupled": (D.ComposeTransform([D.TanhTransform(), D.StickBreakingTransform()]),
                            TD.ComposeTransform([TD.TanhTransform(), TD.StickBreakingTransform()]),
                            VEC),
        "identity": (D.identity_transform, TD.identity_transform, VEC),
        "inverse": (D.SigmoidTransform().inv, TD.SigmoidTransform().inv,
                    1 / (1 + np.exp(-VEC))),
        "cat": (D.CatTransform([D.ExpTransform(), D.TanhTransform(), D.SoftplusTransform()],
                               dim=-1, lengths=[1, 2, 1]),
                TD.CatTransform([TD.ExpTransform(), TD.TanhTransform(), TD.SoftplusTransform()],
                                dim=-1, lengths=[1, 2, 1]), VEC),
        # event_dim 1: the log-determinants of slices inside the event are added, of
        # slices along a batch dim concatenated
        "cat_in_event": (D.CatTransform([D.IndependentTransform(D.ExpTransform(), 1),
                                         D.AffineTransform(0.5, 3.0, event_dim=1)],
                                        dim=-1, lengths=[3, 1]),
                         TD.CatTransform([TD.IndependentTransform(TD.ExpTransform(), 1),
                                          TD.AffineTransform(0.5, 3.0, event_dim=1)],
                                         dim=-1, lengths=[3, 1]), VEC),
        "cat_in_batch": (D.CatTransform([D.IndependentTransform(D.ExpTransform(), 1),
                                         D.TanhTransform()], dim=0, lengths=[2, 1]),
                         TD.CatTransform([TD.IndependentTransform(TD.ExpTransform(), 1),
                                          TD.TanhTransform()], dim=0, lengths=[2, 1]), VEC),
        "stack": (D.StackTransform([D.ExpTransform(), D.TanhTransform(), D.AbsTransform().inv],
                                   dim=0),
                  TD.StackTransform([TD.ExpTransform(), TD.TanhTransform(), TD.AbsTransform().inv],
                                    dim=0), np.abs(VEC)),
    }


def _constraint_name(c):
    """A constraint's class and event dim, comparable across the two libraries."""
    return type(c).__name__, c.event_dim


def test_transforms_against_torch():
    """Forward, inverse and log-determinant of every transform to a few ulp of torch's
    (one realization), the inverse a round trip where bijective (and torch's
    pseudo-inverse, with ``t(t.inv(y)) == y``, where not), and the attributes:
    ``bijective``, ``sign``, ``event_dim``, domain and codomain, shapes."""
    cases = _cases()
    outs = {}
    for name, (t, _, x) in cases.items():
        xn = f64(x)
        y = t(xn)
        back = t.inv(y)
        outs[name] = [y, back, t(back)]
        if t.bijective:
            outs[name].append(t.log_abs_det_jacobian(xn, y))
    nv.realize(*[o for v in outs.values() for o in v])
    for name, (t, tt, x) in cases.items():
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
    if lib is torch:
        ps = [t64(p).requires_grad_() for p in params]
        lp = build(lib, *ps).log_prob(t64(value))
        grads = torch.autograd.grad(lp.sum(), ps)
        return [lp.detach().numpy()] + [g.numpy() for g in grads]
    ps = [f64(p).requires_grad_() for p in params]
    lp = build(lib, *ps).log_prob(f64(value))
    grads = nv.autograd.grad(lp.sum(), ps)
    nv.realize(lp, *grads)
    return [lp.detach().numpy()] + [g.numpy() for g in grads]


def _lib(lib):
    return (D, D) if lib is nv else (TD, TD.transforms)


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
    build, params, value = TD_CASES[name]
    got, expected = _grads(nv, build, params, value), _grads(torch, build, params, value)
    for g, e in zip(got, expected):
        assert g.shape == e.shape, name
        np.testing.assert_allclose(g, e, rtol=1e-11, atol=1e-12, err_msg=name)
    d, dt = build(nv, *map(f64, params)), build(torch, *map(t64, params))
    assert (d.batch_shape, d.event_shape) == (tuple(dt.batch_shape), tuple(dt.event_shape))
    assert _constraint_name(d.support) == _constraint_name(dt.support)


def test_sac_policy_rsample_through_the_cache():
    """A tanh-squashed Normal (``TanhTransform(cache_size=1)``): ``rsample`` and the
    score of that sample, through the cached pre-tanh value, with their gradients with
    respect to loc and scale, equal torch's for the same noise; a sample whose tanh
    rounds to 1 still scores finitely."""
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

    tloc, tscale = t64(loc_np).requires_grad_(), t64(scale_np).requires_grad_()
    tpolicy = TD.TransformedDistribution(TD.Normal(tloc, tscale),
                                         [TD.TanhTransform(cache_size=1)])
    x = tloc + tscale * t64(eps)
    ta = tpolicy.transforms[0](x)
    tlogp = tpolicy.log_prob(ta)
    tgrads = torch.autograd.grad((tlogp + ta * 2.0).sum(), [tloc, tscale])
    np.testing.assert_allclose(action.numpy(), ta.detach().numpy(), rtol=1e-14)
    assert action.numpy()[2] == 1.0            # tanh(25 + ...) rounds to 1
    assert np.isfinite(logp.numpy()).all()
    np.testing.assert_allclose(logp.numpy(), tlogp.detach().numpy(), rtol=1e-12)
    for g, t in zip(grads, tgrads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- biject_to / transform_to

BOUND = np.array([0.5, -1.0, 2.0, 0.0])


def _registry_cases():
    """name -> (nova constraint, torch constraint, input in the reals)."""
    return {
        "real": (C.real, TC.real, VEC),
        "real_vector": (C.real_vector, TC.real_vector, VEC),
        "positive": (C.positive, TC.positive, VEC),
        "nonnegative": (C.nonnegative, TC.nonnegative, VEC),
        "greater_than": (C.greater_than(f64(BOUND)), TC.greater_than(t64(BOUND)), VEC),
        "greater_than_eq": (C.greater_than_eq(-2.0), TC.greater_than_eq(-2.0), VEC),
        "less_than": (C.less_than(1.5), TC.less_than(1.5), VEC),
        "unit_interval": (C.unit_interval, TC.unit_interval, VEC),
        "interval": (C.interval(-1.0, f64(BOUND + 3)), TC.interval(-1.0, t64(BOUND + 3)), VEC),
        "half_open_interval": (C.half_open_interval(2.0, 5.0), TC.half_open_interval(2.0, 5.0),
                               VEC),
        "simplex": (C.simplex, TC.simplex, VEC),
        "independent_positive": (C.independent(C.positive, 2), TC.independent(TC.positive, 2),
                                 VEC),
        "lower_cholesky": (C.lower_cholesky, TC.lower_cholesky, MAT),
        "positive_definite": (C.positive_definite, TC.positive_definite, MAT),
        "positive_semidefinite": (C.positive_semidefinite, TC.positive_semidefinite, MAT),
        "cat": (C.cat([C.positive, C.interval(0.0, 2.0)], dim=-1, lengths=[3, 1]),
                TC.cat([TC.positive, TC.interval(0.0, 2.0)], dim=-1, lengths=[3, 1]), VEC),
        "stack": (C.stack([C.real, C.positive, C.less_than(0.0)], dim=0),
                  TC.stack([TC.real, TC.positive, TC.less_than(0.0)], dim=0), VEC),
    }


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_constraint_registries_against_torch(registry):
    """For every constraint Nova has, ``biject_to``/``transform_to`` give the transform
    torch's give (the same class; the same values, inside the constraint; the same
    log-determinant for ``biject_to``), or the same NotImplementedError."""
    ours, theirs = getattr(D, registry), getattr(TD, registry)
    checked = 0
    outs = {}
    for name, (c, tc, x) in _registry_cases().items():
        try:
            tt = theirs(tc)
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
    for name, (c, tc, x) in _registry_cases().items():
        if name not in outs:
            continue
        tt = theirs(tc)
        yt = tt(t64(x))
        np.testing.assert_allclose(outs[name][0].numpy(), yt.numpy(), rtol=1e-13, err_msg=name)
        assert outs[name][1].numpy().all(), name
        if registry == "biject_to":
            np.testing.assert_allclose(outs[name][2].numpy(),
                                       tt.log_abs_det_jacobian(t64(x), yt).numpy(),
                                       rtol=1e-12, atol=1e-13, err_msg=name)
        checked += 1
    assert checked >= (12 if registry == "biject_to" else 16)


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


def test_matrix_and_functor_constraints_against_torch():
    """``square``, ``symmetric``, ``positive_definite``, ``positive_semidefinite``,
    ``cat`` and ``stack`` check a Nova tensor (lazily but for the semidefinite one) and
    a numpy array (what validation reads) as torch's check the same values; each matrix
    of a batch judged on its own."""
    a = RNG.standard_normal((3, 3))
    pd = a @ a.T + np.eye(3)
    psd = np.diag([2.0, 0.0, 1.0])          # eigenvalue 0, exactly in any LAPACK
    indefinite = np.diag([1.0, -2.0, 3.0])
    asymmetric = pd + np.triu(np.ones((3, 3)), 1)
    mats = np.stack([pd, psd, indefinite, asymmetric])
    vec = np.array([[1.0, 0.5, -0.2, 3.0], [-1.0, 0.1, -0.5, 0.0]])
    cases = [
        (C.square, TC.square, mats), (C.square, TC.square, np.zeros((2, 3, 4))),
        (C.symmetric, TC.symmetric, mats),
        (C.positive_definite, TC.positive_definite, mats[:3]),
        (C.positive_definite, TC.positive_definite, mats[2:]),
        (C.positive_semidefinite, TC.positive_semidefinite, mats[:3]),
        (C.cat([C.positive, C.real], dim=-1, lengths=[2, 2]),
         TC.cat([TC.positive, TC.real], dim=-1, lengths=[2, 2]), vec),
        (C.stack([C.real, C.positive], dim=0), TC.stack([TC.real, TC.positive], dim=0), vec),
        (C.stack([C.simplex, C.real_vector], dim=0),
         TC.stack([TC.simplex, TC.real_vector], dim=0),
         np.abs(vec) / np.abs(vec).sum(-1, keepdims=True)),
    ]
    checks = [c.check(f64(v)) for c, _, v in cases]
    nv.realize(*checks)
    for (c, tc, v), got in zip(cases, checks):
        expected = tc.check(t64(v)).numpy()
        if type(c).__name__ == "_PositiveDefinite" and v.shape[0] == 2:
            expected = np.array([False, False])   # torch gives [True, False] here
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=repr(c))
        np.testing.assert_array_equal(c.check(v), expected, err_msg=repr(c))
        assert c.event_dim == tc.event_dim and c.is_discrete == tc.is_discrete, repr(c)
    assert C.stack([C.simplex], dim=-1).event_dim == TC.stack([TC.simplex], dim=-1).event_dim
    with pytest.raises(TypeError, match="constraints.cat: element 0 of cseq is a int"):
        C.cat([1])
    with pytest.raises(IndexError, match="constraints.stack: dim 3 is out of range"):
        C.stack([C.real], dim=3).check(vec)
