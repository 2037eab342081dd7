"""NAdam, RAdam, Adamax, Adadelta, Rprop and ASGD against their published update rules,
written here in float64 numpy: several steps on three parameters (two of one shape, so
the update template is stamped), with the learning rate and beta1 changing every step
as a schedule would change them -- and the training loop compiling once. Then state
dict round trips, RAdam's host-side rectification switch under an ``nv.compile``
replay, special values and argument errors; and, where torch is importable, the
trajectories against torch's."""
import math

import numpy as np
import pytest

import nova as nv

SHAPES = [(2, 3), (4,), (4,)]
STEPS = 8           # RAdam's rectification starts at step 6 (rho_t > 5)
_rng = np.random.default_rng(7)
G = [[_rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(STEPS)]
C = [(0.5 + _rng.random(s)).astype(np.float32) for s in SHAPES]
P0 = [_rng.standard_normal(s).astype(np.float32) for s in SHAPES]
LRS = [0.8 ** t for t in range(STEPS)]                 # times the optimizer's lr
B1S = [0.9, 0.85, 0.95, 0.9, 0.8, 0.9, 0.7, 0.9]       # beta1 per step (Adam family)


def _loss(params, t):
    """sum(G_t p) + sum(C p^2) / 2 per parameter: the gradient is ``G_t + C p``."""
    total = 0.0
    for p, g, c in zip(params, G[t], C):
        total = total + (p * nv.tensor(g)).sum() + 0.5 * (p * p * nv.tensor(c)).sum()
    return total


def _train(make, steps=STEPS, vary_beta1=False, start=0, params=None, opt=None):
    """Train steps ``start`` .. ``steps - 1``, scaling the lr by ``LRS`` (and setting
    beta1 from ``B1S``) before each; the parameters and the optimizer."""
    params = params or [nv.nn.Parameter(nv.tensor(p.copy())) for p in P0]
    opt = opt or make(params)
    lr0 = opt.defaults["lr"]
    for t in range(start, steps):
        g = opt.param_groups[0]
        g["lr"] = lr0 * LRS[t]
        if vary_beta1:
            g["betas"] = (B1S[t], g["betas"][1])
        _loss(params, t).backward()
        opt.step()
        opt.zero_grad()
    return params, opt


def _reference(update, hp, vary_beta1=False):
    """The float64 trajectory of every parameter under ``update(p, g, state, t, **hp)``
    (t from 1), with the same per-step lr and beta1 as ``_train``: the final parameters
    and states."""
    out, states = [], []
    for i in range(len(SHAPES)):
        p, state = P0[i].astype(np.float64), {}
        for t in range(STEPS):
            step_hp = dict(hp, lr=hp["lr"] * LRS[t])
            if vary_beta1:
                step_hp["betas"] = (B1S[t], hp["betas"][1])
            g = G[t][i].astype(np.float64) + C[i].astype(np.float64) * p
            p = update(p, g, state, t + 1, **step_hp)
        out.append(p)
        states.append(state)
    return out, states


def _decay(p, g, lr, weight_decay, decoupled, maximize):
    """maximize, then the L2 or decoupled weight decay, as every rule here starts."""
    g = -g if maximize else g
    if weight_decay and decoupled:
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    return p, g


def _nadam(p, g, s, t, lr, betas, eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
           decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    p, g = _decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    s["mu_product"] = s.get("mu_product", 1.0) * mu
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    denom = np.sqrt(s["v"] / (1 - b2 ** t)) + eps
    return (p - lr * (1 - mu) / (1 - s["mu_product"]) * g / denom
            - lr * mu_next / (1 - s["mu_product"] * mu_next) * s["m"] / denom)


def _radam(p, g, s, t, lr, betas, eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False,
           maximize=False):
    b1, b2 = betas
    p, g = _decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    m_hat = s["m"] / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho_t <= 5:
        return p - lr * m_hat
    l_t = math.sqrt(1 - b2 ** t) / (np.sqrt(s["v"]) + eps)
    r_t = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    return p - lr * m_hat * r_t * l_t


def _adamax(p, g, s, t, lr, betas, eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    p, g = _decay(p, g, lr, weight_decay, False, maximize)
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["u"] = np.maximum(b2 * s.get("u", 0.0), np.abs(g) + eps)
    return p - lr / (1 - b1 ** t) * s["m"] / s["u"]


def _adadelta(p, g, s, t, lr, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    p, g = _decay(p, g, lr, weight_decay, False, maximize)
    s["v"] = rho * s.get("v", 0.0) + (1 - rho) * g * g
    delta = np.sqrt(s.get("a", 0.0) + eps) / np.sqrt(s["v"] + eps) * g
    s["a"] = rho * s.get("a", 0.0) + (1 - rho) * delta * delta
    return p - lr * delta


def _rprop(p, g, s, t, lr, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    g = -g if maximize else g
    if t == 1:
        s["size"], s["prev"] = np.full(p.shape, lr), np.zeros(p.shape)
    sign = np.sign(g * s["prev"])
    factor = np.where(sign > 0, etas[1], np.where(sign < 0, etas[0], 1.0))
    s["size"] = np.clip(s["size"] * factor, *step_sizes)
    g = np.where(sign < 0, 0.0, g)
    s["prev"] = g
    return p - np.sign(g) * s["size"]


def _asgd(p, g, s, t, lr, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, maximize=False):
    p, g = _decay(p, g, lr, weight_decay, False, maximize)
    eta, mu = s.get("eta", lr), s.get("mu", 1.0)     # (eta starts at the first step's lr)
    p = p * (1 - lambd * eta) - eta * g
    s["ax"] = p if mu == 1 else s["ax"] + (p - s["ax"]) * mu
    s["eta"] = lr / (1 + lambd * lr * t) ** alpha
    s["mu"] = 1 / max(1, t - t0)
    return p


CASES = [
    ("NAdam", _nadam, dict(lr=0.05, betas=(0.9, 0.999))),
    ("NAdam", _nadam, dict(lr=0.05, betas=(0.9, 0.99), weight_decay=0.1, momentum_decay=0.02,
                           maximize=True)),
    ("NAdam", _nadam, dict(lr=0.05, betas=(0.9, 0.999), weight_decay=0.1,
                           decoupled_weight_decay=True)),
    ("RAdam", _radam, dict(lr=0.05, betas=(0.9, 0.999))),
    ("RAdam", _radam, dict(lr=0.05, betas=(0.9, 0.99), weight_decay=0.1,
                           decoupled_weight_decay=True, maximize=True)),
    ("RAdam", _radam, dict(lr=0.05, betas=(0.9, 0.999), eps=1e-3, weight_decay=0.05)),
    ("Adamax", _adamax, dict(lr=0.05, betas=(0.9, 0.999))),
    ("Adamax", _adamax, dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, maximize=True)),
    ("Adadelta", _adadelta, dict(lr=1.0)),
    ("Adadelta", _adadelta, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)),
    ("Rprop", _rprop, dict(lr=0.01)),
    ("Rprop", _rprop, dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(0.02, 0.2), maximize=True)),
    ("ASGD", _asgd, dict(lr=0.05)),
    ("ASGD", _asgd, dict(lr=0.05, lambd=0.1, alpha=0.5, t0=3, weight_decay=0.1,
                         maximize=True)),
]


@pytest.mark.parametrize("name,update,hp", CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_trajectory_equals_the_published_rule_and_compiles_once(fresh_cache, name, update, hp):
    adam_family = "betas" in hp
    params = [nv.nn.Parameter(nv.tensor(p.copy())) for p in P0]
    opt = getattr(nv.optim, name)(params, **hp)
    nv.debug.reset_cache()
    _train(None, vary_beta1=adam_family, params=params, opt=opt)
    want, states = _reference(update, hp, vary_beta1=adam_family)
    for p, w in zip(params, want):
        np.testing.assert_allclose(p.numpy(), w, rtol=2e-6, atol=2e-7)
    if name == "ASGD":          # the average (over steps 6-8 where t0=3)
        for p, s in zip(params, states):
            np.testing.assert_allclose(opt.state[p]["ax"].numpy(), s["ax"], rtol=2e-6,
                                       atol=2e-7)
    # the lr (and beta1) changed every step, RAdam switched to the rectified update
    assert nv.debug.cache_stats().misses == 1
    assert opt.state[params[0]]["step"] == STEPS


@pytest.mark.parametrize("b2", [0.999, 0.99])
def test_radam_cases_cover_both_branches(b2):
    """rho_t > 5 from step 6 on: the trajectories above take both of RAdam's updates."""
    rho_inf = 2 / (1 - b2) - 1
    rho = [rho_inf - 2 * t * b2 ** t / (1 - b2 ** t) for t in range(1, STEPS + 1)]
    assert [r > 5 for r in rho] == [False] * 5 + [True] * (STEPS - 5)


@pytest.mark.parametrize("name,hp", [
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05)),
    ("Adadelta", dict(lr=1.0)),
    ("Rprop", dict(lr=0.01)),
    ("ASGD", dict(lr=0.05, t0=1)),
])
def test_state_dict_round_trip_continues_the_same_trajectory(name, hp):
    """Three steps, save, load into a fresh optimizer over copies of the parameters and
    take two more steps: the bits of five uninterrupted steps. The tensor state and the
    host values (step counts, NAdam's mu product, ASGD's eta and mu) travel. (The state
    dict holds the optimizer's own state tensors, as PyTorch's does, so the saved
    optimizer is not stepped again.)"""
    def make(ps):
        return getattr(nv.optim, name)(ps, **hp)
    params, opt = _train(make, steps=3)
    sd = opt.state_dict()
    copies = [nv.nn.Parameter(nv.tensor(p.numpy().copy())) for p in params]
    other = make(copies)
    other.load_state_dict(sd)
    assert other.state[copies[1]]["step"] == 3
    if name == "NAdam":
        assert other.state[copies[0]]["mu_product"] == opt.state[params[0]]["mu_product"] < 1
    if name == "ASGD":
        assert other.state[copies[0]]["mu"] == 0.5        # averaging from step 4
    _train(make, steps=5, start=3, params=copies, opt=other)
    want, _ = _train(make, steps=5)
    for p, q in zip(want, copies):
        np.testing.assert_array_equal(q.numpy(), p.numpy())


def test_radam_rectification_switch_under_nv_compile_replays_bit_identical(fresh_cache):
    """The switch is a host-side decision passed as a runtime input: the compiled
    call replays across it, with the uncompiled loop's bits, and compiles once."""
    def run(compiled):
        p = nv.nn.Parameter(nv.tensor(P0[0].copy()))
        opt = nv.optim.RAdam([p], lr=0.1, weight_decay=0.1, decoupled_weight_decay=True)
        sched = nv.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)

        def train(g, c):
            ((p * g).sum() + 0.5 * (p * p * c).sum()).backward()
            opt.step()
            opt.zero_grad()
            sched.step()
        fn = nv.compile(train) if compiled else train
        c = nv.tensor(C[0])
        for t in range(STEPS):
            fn(nv.tensor(G[t][0]), c)
        return p.numpy(), getattr(fn, "replays", 0)
    want, _ = run(False)
    nv.debug.reset_cache()
    got, replays = run(True)
    np.testing.assert_array_equal(got, want)
    assert replays >= STEPS - 3           # every step after the first few (steps 6-8 too)
    assert nv.debug.cache_stats().misses == 1


def test_special_values():
    """RAdam with eps=0 on an always-zero gradient element: the unrectified steps never
    divide 0 by 0. Rprop ignores a NaN gradient element (sign 0, torch.sign's rule);
    Adamax carries it, as torch.maximum does. An empty parameter is fine."""
    p = nv.nn.Parameter(nv.tensor(np.array([1.0, 2.0], np.float32)))
    opt = nv.optim.RAdam([p], lr=0.1, eps=0.0)
    for _ in range(3):
        (p * nv.tensor(np.array([0.0, 1.0], np.float32))).sum().backward()
        opt.step()
        opt.zero_grad()
    np.testing.assert_allclose(p.numpy(), [1.0, 2.0 - 0.3], rtol=1e-6)

    grads = np.array([[1.0, np.nan, -1.0], [1.0, 1.0, 1.0]], np.float32)
    p = nv.nn.Parameter(nv.tensor(np.zeros(3, np.float32)))
    q = nv.nn.Parameter(nv.tensor(np.zeros(3, np.float32)))
    e = nv.nn.Parameter(nv.tensor(np.zeros((0, 2), np.float32)))
    rprop, adamax = nv.optim.Rprop([p, e], lr=0.1), nv.optim.Adamax([q], lr=0.1)
    for g in grads:
        ((p * nv.tensor(g)).sum() + e.sum()).backward()
        (q * nv.tensor(g)).sum().backward()
        rprop.step()
        adamax.step()
        rprop.zero_grad()
        adamax.zero_grad()
    # element 0: same sign twice -> step size 0.1 then 0.12; element 1: the NaN step
    # moved nothing, then a first step of 0.1 (previous gradient NaN: sign 0)
    np.testing.assert_allclose(p.numpy(), [-0.22, -0.1, 0.1], rtol=1e-6)
    assert np.isnan(q.numpy()[1]) and np.isfinite(q.numpy()[[0, 2]]).all()
    assert e.numpy().shape == (0, 2)


def test_argument_errors():
    p = nv.nn.Parameter(nv.ones(2))
    with pytest.raises(ValueError, match=r"NAdam: Invalid momentum_decay value: -1 \("):
        nv.optim.NAdam([p], momentum_decay=-1)
    with pytest.raises(ValueError, match="RAdam: Invalid beta parameter at index 1: 1.0"):
        nv.optim.RAdam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Adamax: Invalid learning rate: -0.1"):
        nv.optim.Adamax([p], lr=-0.1)
    with pytest.raises(ValueError, match=r"Adadelta: Invalid rho value: 1.5 \(rho must be in"):
        nv.optim.Adadelta([p], rho=1.5)
    with pytest.raises(ValueError, match=r"Rprop: Invalid eta values: 0.5, 0.9"):
        nv.optim.Rprop([p], etas=(0.5, 0.9))
    with pytest.raises(ValueError, match="ASGD: Invalid weight_decay value: -1"):
        nv.optim.ASGD([p], weight_decay=-1)
    with pytest.raises(NotImplementedError, match="NAdam: differentiable=True"):
        nv.optim.NAdam([p], differentiable=True)
    with pytest.raises(ValueError, match="got an empty parameter list"):
        nv.optim.Rprop([])
    # PyTorch's kernel-choice flags are accepted (and change nothing)
    nv.optim.RAdam([p], foreach=True, capturable=True)
    nv.optim.ASGD([p], 0.01, 1e-4, 0.75, 1e6, 0.0, None, False, False, True)
    assert nv.optim.NAdam([p]).defaults == dict(
        lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
        decoupled_weight_decay=False, maximize=False, foreach=None, capturable=False,
        differentiable=False)


@pytest.mark.parametrize("name,hp", [
    ("NAdam", dict(lr=0.1, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.1, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.1, weight_decay=0.1)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.1)),
    ("Rprop", dict(lr=0.05, etas=(0.4, 1.3))),
    ("ASGD", dict(lr=0.05, t0=2, lambd=0.01)),
])
def test_matches_torch(name, hp):
    torch = pytest.importorskip("torch")
    p = nv.nn.Parameter(nv.tensor(P0[0].copy()))
    q = torch.nn.Parameter(torch.from_numpy(P0[0].copy()))
    a, b = getattr(nv.optim, name)([p], **hp), getattr(torch.optim, name)([q], **hp)
    c, ct = nv.tensor(C[0]), torch.from_numpy(C[0])
    for t in range(STEPS):
        ((p * nv.tensor(G[t][0])).sum() + 0.5 * (p * p * c).sum()).backward()
        ((q * torch.from_numpy(G[t][0])).sum() + 0.5 * (q * q * ct).sum()).backward()
        a.step()
        b.step()
        a.zero_grad()
        b.zero_grad()
    np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,wd", [(nv.optim.Adam, 0.01), (nv.optim.AdamW, 0.1)])
def test_amsgrad_divides_by_the_largest_second_moment_so_far(cls, wd):
    """Gradients large for three steps, then small: the denominator keeps the largest
    v, as PyTorch's AMSGrad (float64 reference from the published rule)."""
    w0 = np.array([1.0, -2.0, 3.0])
    scale = np.array([1.0, 0.1, 3.0])
    w = nv.nn.Parameter(nv.tensor(w0, dtype=nv.float64))
    opt = cls([w], lr=0.1, amsgrad=True, weight_decay=wd)
    ref, m, v, vmax = w0.copy(), np.zeros(3), np.zeros(3), np.zeros(3)
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, 7):
        k = 1.0 if t <= 3 else 0.01
        opt.zero_grad()
        ((w * w * nv.tensor(scale, dtype=nv.float64)).sum() * k).backward()
        opt.step()
        g = 2 * ref * scale * k
        if cls is nv.optim.AdamW:
            ref = ref * (1 - 0.1 * wd)
        else:
            g = g + wd * ref
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax) / np.sqrt(1 - b2 ** t) + eps
        ref = ref - 0.1 / (1 - b1 ** t) * m / denom
    # (Adam's runtime scalars are float32, as the constants they replace were)
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-6)
    assert "max_exp_avg_sq" in opt.state[w]
