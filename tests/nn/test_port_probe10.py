"""Port probe 10: ``parametrizations.orthogonal``, the hooks common to every module
(``nn.modules.module.register_module_*``), ``Module.to_empty`` / ``share_memory`` /
``set_submodule`` / ``compile`` and ``nn.utils.stateless.functional_call``, each with
PyTorch's semantics. References are numpy (finite differences in float64 for the
gradients); torch is an extra comparison where installed."""
import copy
import warnings

import numpy as np
import pytest

import nova as nv
from nova.nn.modules import module as mm
from nova.nn.utils import parametrizations as P

rng = np.random.default_rng(10)


@pytest.fixture(autouse=True)
def interpreted():
    """Python-level logic and tiny matrices: the interpreter runs them without
    compiling kernels."""
    with nv.engine("interp"):
        yield


# ---------------------------------------------------------------- orthogonal: references


def _expm(A: np.ndarray) -> np.ndarray:
    """exp(A) by scaling and squaring a 30-term Taylor series (float64)."""
    norm = np.abs(A).sum(0).max()
    s = max(0, int(np.ceil(np.log2(norm))) + 1) if norm > 0 else 0
    X = A / 2.0 ** s
    term = E = np.eye(len(A))
    for k in range(1, 30):
        term = term @ X / k
        E = E + term
    for _ in range(s):
        E = E @ E
    return E


def _householder(X: np.ndarray) -> np.ndarray:
    """PyTorch's Householder map of a tall X: the reflectors below the diagonal with
    tau = 2 / (1 + |a|^2), columns signed by the truncated diagonal."""
    n, k = X.shape
    A = np.tril(X, -1)
    tau = 2.0 / (1.0 + (A * A).sum(0))
    Q = np.eye(n, k)
    for i in reversed(range(k)):
        v = A[:, i].copy()
        v[i] = 1.0
        Q = Q - tau[i] * np.outer(v, v @ Q)
    return Q * np.trunc(np.diag(X))[None, :]


def _orthogonal_ref(X: np.ndarray, kind: str, base: np.ndarray | None) -> np.ndarray:
    transposed = X.shape[0] < X.shape[1]
    if transposed:
        X = X.T
    n, k = X.shape
    if kind == "householder":
        Q = _householder(X)
    else:
        L = np.hstack([np.tril(X), np.zeros((n, n - k))])
        A = L - L.T
        Id = np.eye(n)
        Q = _expm(A) if kind == "matrix_exp" else np.linalg.solve(Id - A / 2, Id + A / 2)
        Q = Q[:, :k]
    if base is not None:
        Q = base @ Q
    return Q.T if transposed else Q


def _orthonormalized(W: np.ndarray) -> np.ndarray:
    """The Q of W = QR with R's diagonal positive (transposed for a wide W)."""
    wide = W.shape[0] < W.shape[1]
    q, r = np.linalg.qr(W.T if wide else W)
    q = q * np.sign(np.diag(r))[None, :]
    return q.T if wide else q


def _module(W: np.ndarray) -> nv.nn.Module:
    m = nv.nn.Module()
    m.weight = nv.nn.Parameter(nv.tensor(W))
    return m


def _assert_orthogonal(W: np.ndarray) -> None:
    G = W @ W.T if W.shape[0] <= W.shape[1] else W.T @ W
    np.testing.assert_allclose(G, np.eye(len(G)), atol=1e-12)


# ---------------------------------------------------------------- orthogonal: tests


@pytest.mark.parametrize("shape,kind,triv", [
    ((4, 4), None, True),                 # matrix_exp, the square default
    ((3, 5), None, True),                 # householder, the rectangular default
    ((5, 3), "cayley", True),
    ((5, 3), "householder", False),
    ((3, 4), "householder", False),
])
def test_orthogonal_starts_at_the_orthonormalized_weight(shape, kind, triv):
    W0 = rng.standard_normal(shape)
    m = P.orthogonal(_module(W0), orthogonal_map=kind, use_trivialization=triv)
    W = m.weight.numpy()
    _assert_orthogonal(W)
    np.testing.assert_allclose(W, _orthonormalized(W0), atol=1e-12)
    assert type(m).__name__ == "ParametrizedModule"
    keys = set(m.state_dict())
    assert "parametrizations.weight.original" in keys
    assert ("parametrizations.weight.0.base" in keys) == triv
    if triv:       # the original becomes -I, which every map takes to the identity
        eye = np.zeros(shape)
        np.fill_diagonal(eye, -1.0)
        np.testing.assert_array_equal(m.parametrizations.weight.original.numpy(), eye)


@pytest.mark.parametrize("shape,kind,triv", [
    ((3, 3), "matrix_exp", True),
    ((4, 2), "cayley", True),
    ((2, 4), "householder", True),
    ((3, 3), "cayley", False),
    ((2, 3), "matrix_exp", False),
    ((4, 3), "householder", False),
])
def test_orthogonal_maps_values_and_gradients(shape, kind, triv):
    m = P.orthogonal(_module(rng.standard_normal(shape)), orthogonal_map=kind,
                     use_trivialization=triv)
    X = rng.standard_normal(shape) * 0.4
    if kind == "householder":           # its diagonal holds the signs
        idx = np.arange(min(shape))
        X[idx, idx] = np.where(rng.standard_normal(len(idx)) < 0, -1.0, 1.0)
    base = m.parametrizations.weight[0].base.numpy() if triv else None
    m.parametrizations.weight.original.data = nv.tensor(X)
    C = rng.standard_normal(shape)
    W = m.weight
    np.testing.assert_allclose(W.numpy(), _orthogonal_ref(X, kind, base), atol=1e-10)
    _assert_orthogonal(W.numpy())
    (W * nv.tensor(C)).sum().backward()
    got = m.parametrizations.weight.original.grad.numpy()

    def f(Y):
        return float((_orthogonal_ref(Y, kind, base) * C).sum())
    h = 1e-6
    want = np.zeros(shape)
    for i in np.ndindex(*shape):
        if kind == "householder" and i[0] == i[1]:
            continue                     # not differentiated (PyTorch's .int())
        d = np.zeros(shape)
        d[i] = h
        want[i] = (f(X + d) - f(X - d)) / (2 * h)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_orthogonal_assignment_and_refusals():
    m = P.orthogonal(_module(rng.standard_normal((3, 3))))
    R = _orthonormalized(rng.standard_normal((3, 3)))
    m.weight = nv.tensor(R)                        # an orthogonal value is kept as is
    np.testing.assert_allclose(m.weight.numpy(), R, atol=1e-12)
    S = rng.standard_normal((3, 3))
    m.weight = nv.tensor(S)                        # another is orthonormalized
    np.testing.assert_allclose(m.weight.numpy(), _orthonormalized(S), atol=1e-12)
    with pytest.raises(ValueError, match=r"Expected a matrix or batch of matrices of "
                                         r"shape \(3, 3\)"):
        m.weight = nv.zeros(2, 3)
    c = P.orthogonal(_module(rng.standard_normal((3, 3))), orthogonal_map="cayley",
                     use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        c.weight = nv.tensor(R)
    with pytest.raises(ValueError, match='has to be one of "matrix_exp", "cayley", '
                                         '"householder". Got: qr'):
        P.orthogonal(_module(np.eye(2)), orthogonal_map="qr")
    with pytest.raises(ValueError, match="Got a tensor of 1 dimensions"):
        P.orthogonal(nv.nn.Linear(2, 2), name="bias")
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'w'"):
        P.orthogonal(nv.nn.Linear(2, 2), name="w")


def test_orthogonal_batches_and_training_keep_it_orthogonal():
    W0 = rng.standard_normal((2, 3, 3))
    m = P.orthogonal(_module(W0))
    for k in range(2):
        np.testing.assert_allclose(m.weight.numpy()[k], _orthonormalized(W0[k]), atol=1e-12)
    opt = nv.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        (m.weight * nv.tensor(rng.standard_normal((2, 3, 3)))).sum().backward()
        opt.step()
    W = m.weight.numpy()
    assert not np.allclose(W[0], _orthonormalized(W0[0]))       # it moved
    for k in range(2):
        _assert_orthogonal(W[k])


def test_orthogonal_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import parametrizations as TP
    for shape, kind, triv in [((4, 4), None, True), ((3, 5), None, True),
                              ((5, 3), "householder", False), ((3, 3), "cayley", True)]:
        W0 = rng.standard_normal(shape)
        tm = torch.nn.Module()
        tm.weight = torch.nn.Parameter(torch.tensor(W0))
        TP.orthogonal(tm, orthogonal_map=kind, use_trivialization=triv)
        m = P.orthogonal(_module(W0), orthogonal_map=kind, use_trivialization=triv)
        np.testing.assert_allclose(m.weight.numpy(), tm.weight.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(m.parametrizations.weight.original.numpy(),
                                   tm.parametrizations.weight.original.detach().numpy(),
                                   atol=1e-12)


# ---------------------------------------------------------------- global module hooks


def test_global_forward_hooks_run_before_the_modules_own():
    log = []
    lin = nv.nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda m, a: log.append("own pre"))
    lin.register_forward_hook(lambda m, a, o: log.append("own") or o + 1.0)
    pre = mm.register_module_forward_pre_hook(
        lambda m, a: (log.append(f"global pre {type(m).__name__}"), (a[0] * 2.0,))[1])
    post = mm.register_module_forward_hook(
        lambda m, a, k, o: log.append(f"global {sorted(k)}") or o * 10.0, with_kwargs=True)
    try:
        x = rng.standard_normal((1, 2)).astype(np.float32)
        y = lin(nv.tensor(x)).numpy()
        want = (2 * x @ lin.weight.numpy().T + lin.bias.numpy()) * 10 + 1
        np.testing.assert_allclose(y, want, rtol=1e-6)
        assert log == ["global pre Linear", "own pre", "global []", "own"]
    finally:
        pre.remove()
        post.remove()
    log.clear()
    lin(nv.ones(1, 2))
    assert log == ["own pre", "own"]


def test_a_global_always_call_hook_runs_when_forward_raises():
    class Boom(nv.nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    seen = []
    with mm.register_module_forward_hook(lambda m, a, o: seen.append(o), always_call=True):
        with pytest.raises(ValueError, match="boom"):
            Boom()(nv.ones(1))
    assert seen == [None]


def test_global_full_backward_hooks_run_before_the_modules_own():
    lin = nv.nn.Linear(3, 2)
    order = []
    lin.register_full_backward_hook(lambda m, gi, go: order.append("own"))
    lin.register_full_backward_pre_hook(lambda m, go: order.append("own pre"))
    h1 = mm.register_module_full_backward_pre_hook(
        lambda m, go: order.append("global pre"))
    h2 = mm.register_module_full_backward_hook(
        lambda m, gi, go: (order.append("global"), (gi[0] * 2.0,))[1])
    try:
        x = nv.tensor(rng.standard_normal((1, 3)).astype(np.float32), requires_grad=True)
        C = rng.standard_normal((1, 2)).astype(np.float32)
        (lin(x) * nv.tensor(C)).sum().backward()
    finally:
        h1.remove()
        h2.remove()
    assert order == ["global pre", "own pre", "global", "own"]
    np.testing.assert_allclose(x.grad.numpy(), 2 * C @ lin.weight.numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="register_module_full_backward_hook"):
        mm.register_module_backward_hook(lambda m, gi, go: None)


def test_global_registration_hooks_see_and_may_replace_what_is_registered():
    seen = []
    swap = nv.nn.Parameter(nv.full((2,), 7.0))
    hp = mm.register_module_parameter_registration_hook(
        lambda m, n, p: seen.append(("param", n)) or (swap if n == "bias" else None))
    hb = mm.register_module_buffer_registration_hook(
        lambda m, n, b: seen.append(("buffer", n)) or (b * 0 + 3 if b is not None else None))
    hm = mm.register_module_module_registration_hook(
        lambda m, n, s: seen.append(("module", n)) or (nv.nn.Tanh() if n == "act" else None))
    try:
        lin = nv.nn.Linear(3, 2)
        assert lin.bias is swap
        m = nv.nn.Module()
        m.register_buffer("stat", nv.ones(2))
        m.stat = nv.zeros(2)                       # assigning a buffer's name registers
        m.act = nv.nn.ReLU()
        m.add_module("lin", lin)
        m.lin = None
        assert m.stat.tolist() == [3.0, 3.0] and isinstance(m.act, nv.nn.Tanh)
    finally:
        for h in (hp, hb, hm):
            h.remove()
    assert seen == [("param", "weight"), ("param", "bias"), ("buffer", "stat"),
                    ("buffer", "stat"), ("module", "act"), ("module", "lin"),
                    ("module", "lin")]
    assert nv.nn.Linear(1, 1).bias is not swap


def test_a_global_hook_registered_between_compiled_calls_is_not_skipped():
    """A replay skips the Python a global hook runs in: registering (and removing) one
    must make the next call record again, as a module's own hook does."""
    nv.manual_seed(0)
    model = nv.nn.Sequential(nv.nn.Linear(4, 4), nv.nn.Linear(4, 1))
    xs = [nv.tensor(rng.standard_normal((2, 4)).astype(np.float32)) for _ in range(8)]

    def run(fn):
        out, handle = [], None
        for i, x in enumerate(xs):
            if i == 3:
                handle = mm.register_module_forward_hook(
                    lambda m, a, o: o * 2.0 if isinstance(m, nv.nn.Linear) else None)
            if i == 6:
                handle.remove()
            with nv.no_grad():      # (a result with autograd history never replays)
                out.append(fn(x).numpy())
        return out
    eager = run(lambda x: model(x))
    assert not np.allclose(eager[3], model(xs[3]).numpy())      # (the hook mattered)
    start = len(nv.debug.cache_stats().compile_log)
    fn = nv.compile(lambda x: model(x))
    compiled = run(fn)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)
    log = "\n".join(nv.debug.cache_stats().compile_log[start:])
    assert log.count("a hook was registered or removed") == 2, log
    assert fn.replays > 0


def test_the_global_hooks_live_in_nn_modules_module():
    names = [n for n in mm.__all__ if n.startswith("register_module_")]
    assert len(names) == 8 and all(callable(getattr(mm, n)) for n in names)
    assert not hasattr(nv.nn.modules, "register_module_forward_hook")   # as torch's


# ---------------------------------------------------------------- Module methods


def test_to_empty_gives_new_zero_values_keeping_the_tensors():
    outer = nv.nn.Sequential(nv.nn.Linear(2, 3), nv.nn.BatchNorm1d(3))
    outer.register_buffer("own", nv.ones(2))
    w = outer[0].weight
    w.grad = nv.ones(3, 2)
    assert outer.to_empty(device=None, recurse=False) is outer
    assert outer.own.tolist() == [0, 0] and w.numpy().any()      # only its own tensors
    outer.to_empty(device="cpu")
    assert outer[0].weight is w and w.requires_grad and w.dtype == nv.float32
    assert not w.numpy().any() and not w.grad.numpy().any()
    assert outer[1].running_var.tolist() == [0, 0, 0]
    assert outer[1].num_batches_tracked.dtype == nv.int64
    with pytest.raises(ValueError, match="Module.to_empty: .*meta"):
        outer.to_empty(device="meta")


def test_share_memory_returns_the_module_unchanged():
    lin = nv.nn.Linear(2, 2)
    before = lin.weight.numpy()
    assert lin.share_memory() is lin
    np.testing.assert_array_equal(lin.weight.numpy(), before)


def test_set_submodule_follows_pytorch():
    m = nv.nn.Sequential(nv.nn.Sequential(nv.nn.Linear(2, 2)), nv.nn.ReLU())
    m.set_submodule("0.0", nv.nn.Tanh(), strict=True)
    assert isinstance(m[0][0], nv.nn.Tanh)
    m.set_submodule("0.extra", nv.nn.Identity())
    assert isinstance(m.get_submodule("0.extra"), nv.nn.Identity)
    with pytest.raises(AttributeError, match="has no attribute `new`"):
        m.set_submodule("0.new", nv.nn.ReLU(), strict=True)
    with pytest.raises(AttributeError, match="has no attribute `missing`"):
        m.set_submodule("missing.x", nv.nn.ReLU())
    m.note = 3
    with pytest.raises(AttributeError, match="`note` is not an nn.Module"):
        m.set_submodule("note", nv.nn.ReLU())
    with pytest.raises(ValueError, match="is not an nn.Module"):
        m.set_submodule("1", 3)
    with pytest.raises(ValueError, match="without a target name"):
        m.set_submodule("", nv.nn.ReLU())


def test_compile_in_place_replays_calls_without_gradient():
    nv.manual_seed(1)
    lin = nv.nn.Linear(3, 2)
    xs = [rng.standard_normal((1, 3)).astype(np.float32) for _ in range(5)]
    want = [x @ lin.weight.numpy().T + lin.bias.numpy() for x in xs]
    assert lin.compile() is None
    with nv.no_grad():
        got = [lin(nv.tensor(x)).numpy() for x in xs]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert lin._compiled_call_impl._fn.replays > 0
    y = lin(nv.tensor(xs[0]))                    # recording for autograd: runs as is
    y.sum().backward()
    np.testing.assert_allclose(lin.bias.grad.numpy(), [1.0, 1.0])
    twin = copy.deepcopy(lin)                    # a copy compiles a call of its own
    with nv.no_grad():
        twin.weight.zero_()
        np.testing.assert_allclose(twin(nv.tensor(xs[1])).numpy(), [lin.bias.numpy()],
                                   rtol=1e-6)
        np.testing.assert_allclose(lin(nv.tensor(xs[1])).numpy(), want[1], rtol=1e-6)
    with pytest.raises(ValueError, match="unknown mode"):
        nv.nn.Linear(1, 1).compile(mode="bogus")


def test_stateless_functional_call_is_func_functional_call_with_torchs_warning():
    from nova.func import functional_call as func_call
    from nova.nn.utils.stateless import functional_call
    lin = nv.nn.Linear(2, 2)
    params = {"weight": nv.tensor([[1.0, 2.0], [3.0, 4.0]]), "bias": nv.zeros(2)}
    with pytest.warns(FutureWarning, match=r"^`torch.nn.utils.stateless.functional_call` "
                                           r"is deprecated as of PyTorch 2.0 .*Please use "
                                           r"`torch.func.functional_call` instead"):
        out = functional_call(lin, params, nv.tensor([[1.0, 1.0]]))
    assert out.tolist() == [[3.0, 7.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert func_call(lin, params, (nv.tensor([[1.0, 1.0]]),)).tolist() == [[3.0, 7.0]]
    assert nv.nn.utils.stateless.functional_call is functional_call
