"""``nv.optim.Adafactor`` and ``nv.optim.Muon`` against numpy references written from
PyTorch's published update rules (``torch.optim.Adafactor``'s and ``torch.optim.Muon``'s
algorithm boxes and ``_single_tensor_*`` functions): several steps with weight decay,
``maximize``, a 1-D and 2-D (and 3-D) parameters; state dicts that round trip; the
errors PyTorch raises for bad arguments. A comparison with torch itself is an extra."""
import io
import math

import ml_dtypes
import numpy as np
import pytest

import nova as nv

RNG = np.random.default_rng(7)
SHAPES = [(3, 4), (5,), (2, 3, 2)]
P0 = [RNG.standard_normal(s).astype(np.float32) for s in SHAPES]
GRADS = [[RNG.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(4)]


def _run(opt_cls, shapes_idx, steps, dtype=nv.float32, **kw):
    """Parameters after each of ``steps`` steps on GRADS (numpy arrays)."""
    ps = [nv.nn.Parameter(nv.tensor(P0[i]).to(dtype)) for i in shapes_idx]
    opt = opt_cls(ps, **kw)
    out = []
    for t in range(steps):
        for p, i in zip(ps, shapes_idx):
            p.grad = nv.tensor(GRADS[t][i]).to(dtype)
        opt.step()
        out.append([p.double().numpy() for p in ps])
    return opt, ps, out


# ---------------------------------------------------------------- Adafactor reference

def _adafactor_ref(params, grads_per_step, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3),
                   d=1.0, weight_decay=0.0, maximize=False, eps_dtype=np.float32):
    """The algorithm of ``torch.optim.Adafactor`` in float64."""
    eps1 = float(ml_dtypes.finfo(eps_dtype).eps) if eps[0] is None else eps[0]
    eps2 = eps[1]
    ps = [p.astype(np.float64) for p in params]
    state = [None] * len(ps)
    out = []
    for t, grads in enumerate(grads_per_step, start=1):
        for i, (p, g) in enumerate(zip(ps, grads)):
            g = -g.astype(np.float64) if maximize else g.astype(np.float64)
            beta2 = 1.0 - t ** beta2_decay
            rho = min(lr, 1.0 / math.sqrt(t))
            alpha = max(eps2, np.sqrt(np.mean(p * p))) * rho
            p = p * (1.0 - lr * weight_decay)
            if g.ndim > 1:
                if state[i] is None:
                    state[i] = [np.zeros(g.shape[:-1] + (1,)),
                                np.zeros(g.shape[:-2] + (1, g.shape[-1]))]
                r, c = state[i]
                r = beta2 * r + (1 - beta2) * np.mean(g * g, -1, keepdims=True)
                c = beta2 * c + (1 - beta2) * np.mean(g * g, -2, keepdims=True)
                state[i] = [r, c]
                v = r * c / np.maximum(np.mean(r, -2, keepdims=True), eps1)
            else:
                if state[i] is None:
                    state[i] = np.zeros_like(g)
                state[i] = v = beta2 * state[i] + (1 - beta2) * g * g
            u = g / np.sqrt(np.maximum(v, eps1 * eps1))
            u_hat = u / max(1.0, np.sqrt(np.mean(u * u)) / d)
            ps[i] = p - alpha * u_hat
        out.append([p.copy() for p in ps])
    return out


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.05, weight_decay=0.1),
    dict(lr=0.3, maximize=True, eps=(1e-4, 1e-2), d=1.5, beta2_decay=-0.5),
])
def test_adafactor_matches_the_published_update(kw):
    _, _, got = _run(nv.optim.Adafactor, [0, 1, 2], 4, **kw)
    want = _adafactor_ref([P0[i] for i in range(3)], [[g[i] for i in range(3)]
                                                       for g in GRADS], **kw)
    for step_got, step_want in zip(got, want):
        for a, b in zip(step_got, step_want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_adafactor_float64_and_state_layout():
    opt, ps, got = _run(nv.optim.Adafactor, [0, 1], 3, dtype=nv.float64, weight_decay=0.2)
    want = _adafactor_ref([P0[0], P0[1]], [[g[0], g[1]] for g in GRADS[:3]],
                          weight_decay=0.2, eps_dtype=np.float64)
    for a, b in zip(got[-1], want[-1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    sd = opt.state_dict()
    assert sorted(sd["state"][0]) == ["col_var", "row_var", "step"]
    assert sorted(sd["state"][1]) == ["step", "variance"]
    assert sd["state"][0]["step"] == 3
    assert tuple(sd["state"][0]["row_var"].shape) == (3, 1)
    assert tuple(sd["state"][0]["col_var"].shape) == (1, 4)
    g = sd["param_groups"][0]
    assert (g["lr"], g["beta2_decay"], g["eps"], g["d"], g["weight_decay"], g["maximize"],
            g["foreach"]) == (1e-2, -0.8, (None, 1e-3), 1.0, 0.2, False, None)


def _round_trip(opt_cls, idx, **kw):
    """Two steps, a fresh optimizer loading the saved state dict, two more steps on
    both: the same parameters."""
    opt, ps, _ = _run(opt_cls, idx, 2, **kw)
    ps2 = [nv.nn.Parameter(nv.tensor(p.numpy())) for p in ps]
    opt2 = opt_cls(ps2, **kw)
    buf = io.BytesIO()
    nv.save(opt.state_dict(), buf)      # (a live state dict shares its tensors)
    buf.seek(0)
    opt2.load_state_dict(nv.load(buf))
    for t in (2, 3):
        for p, q, i in zip(ps, ps2, idx):
            p.grad = nv.tensor(GRADS[t][i])
            q.grad = nv.tensor(GRADS[t][i])
        opt.step()
        opt2.step()
    for p, q in zip(ps, ps2):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    return opt2


def test_adafactor_state_dict_round_trip():
    opt2 = _round_trip(nv.optim.Adafactor, [0, 1], lr=0.05, weight_decay=0.1)
    assert opt2.state_dict()["state"][0]["step"] == 4


def test_adafactor_load_refuses_a_misshapen_factor():
    opt, ps, _ = _run(nv.optim.Adafactor, [0], 1)
    sd = opt.state_dict()
    sd["state"][0]["row_var"] = nv.zeros(1, 3)
    with pytest.raises(ValueError, match="row_var"):
        nv.optim.Adafactor([nv.nn.Parameter(nv.zeros(3, 4))]).load_state_dict(sd)


@pytest.mark.parametrize("kw,match", [
    (dict(lr=-1.0), "Learning rate should be >= 0 but is: -1.0"),
    (dict(beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
    (dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0 but is: -1.0"),
    (dict(eps=(None, -1.0)), "epsilon2 should be >= 0 but is: -1.0"),
    (dict(d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
    (dict(weight_decay=-0.1), "weight_decay should be >= 0 but is: -0.1"),
])
def test_adafactor_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        nv.optim.Adafactor([nv.nn.Parameter(nv.zeros(2))], **kw)


# ---------------------------------------------------------------- Muon reference

def _bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _newton_schulz_ref(g, coeffs=(3.4445, -4.7750, 2.0315), steps=5, eps=1e-7):
    """PyTorch's ``_zeropower_via_newtonschulz``: bfloat16 values, float32 products,
    one rounding per op."""
    a, b, c = coeffs
    x = _bf16(g)
    tall = g.shape[0] > g.shape[1]
    if tall:
        x = x.T
    norm = _bf16(max(float(_bf16(np.sqrt(np.sum(x * x)))), eps))
    x = _bf16(x / norm)
    for _ in range(steps):
        gram = _bf16(x @ x.T)
        gram_update = _bf16(np.float32(b) * gram + np.float32(c) * (gram @ gram))
        x = _bf16(np.float32(a) * x + gram_update @ x)
    return x.T if tall else x


def _muon_ref(params, grads_per_step, lr=1e-3, weight_decay=0.1, momentum=0.95,
              nesterov=True, adjust_lr_fn=None):
    ps = [p.astype(np.float64) for p in params]
    bufs = [np.zeros_like(p) for p in ps]
    out = []
    for grads in grads_per_step:
        for i, (p, g) in enumerate(zip(ps, grads)):
            g = g.astype(np.float64)
            bufs[i] = momentum * bufs[i] + (1 - momentum) * g      # buf.lerp_(g, 1 - m)
            update = (1 - momentum) * g + momentum * bufs[i] if nesterov else bufs[i]
            o = _newton_schulz_ref(update)
            rows, cols = p.shape
            ratio = math.sqrt(max(1, rows / cols)) if adjust_lr_fn in (None, "original") \
                else 0.2 * math.sqrt(max(rows, cols))
            ps[i] = p * (1 - lr * weight_decay) - lr * ratio * o
        out.append([p.copy() for p in ps])
    return out


MUON_P = [RNG.standard_normal(s).astype(np.float32) for s in [(3, 5), (6, 2)]]
MUON_G = [[RNG.standard_normal(p.shape).astype(np.float32) for p in MUON_P]
          for _ in range(3)]


@pytest.mark.parametrize("kw", [
    dict(lr=0.02),
    dict(lr=0.05, weight_decay=0.01, momentum=0.6, nesterov=False,
         adjust_lr_fn="match_rms_adamw"),
])
def test_muon_matches_the_published_update(kw):
    ps = [nv.nn.Parameter(nv.tensor(p)) for p in MUON_P]
    opt = nv.optim.Muon(ps, **kw)
    want = _muon_ref(MUON_P, MUON_G, **kw)
    for t, grads in enumerate(MUON_G):
        for p, g in zip(ps, grads):
            p.grad = nv.tensor(g)
        opt.step()
        for p, w in zip(ps, want[t]):
            # one bfloat16 ulp of the orthogonalized update (an accumulation order)
            np.testing.assert_allclose(p.numpy(), w, rtol=0,
                                       atol=kw["lr"] * 2.0 * 2 ** -8 + 1e-6)
    sd = opt.state_dict()
    assert sorted(sd["state"][0]) == ["momentum_buffer"]
    buf = np.zeros(MUON_P[0].shape)
    m = kw.get("momentum", 0.95)
    for grads in MUON_G:
        buf = m * buf + (1 - m) * grads[0]
    np.testing.assert_allclose(sd["state"][0]["momentum_buffer"].numpy(), buf, rtol=1e-5,
                               atol=1e-6)


def test_muon_newton_schulz_orthogonalizes():
    """Five iterations bring every singular value into about (0.5, 1.5)."""
    from nova.optim.muon import zeropower_via_newtonschulz
    g = RNG.standard_normal((4, 7)).astype(np.float32)
    o = zeropower_via_newtonschulz(nv.tensor(g), (3.4445, -4.7750, 2.0315), 5, 1e-7)
    assert o.dtype == nv.bfloat16 and o.shape == (4, 7)
    s = np.linalg.svd(o.float().numpy(), compute_uv=False)
    assert np.all((s > 0.5) & (s < 1.5)), s
    np.testing.assert_allclose(o.float().numpy(), _newton_schulz_ref(g), atol=2 ** -7)


def test_muon_state_dict_round_trip():
    opt2 = _round_trip(nv.optim.Muon, [0], lr=0.02, weight_decay=0.05)
    assert sorted(opt2.state_dict()["state"][0]) == ["momentum_buffer"]


def test_muon_errors():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        nv.optim.Muon([nv.nn.Parameter(nv.zeros(3))])
    w = [nv.nn.Parameter(nv.zeros(2, 2))]
    with pytest.raises(ValueError, match="Learning rate should be >= 0 but is: -1"):
        nv.optim.Muon(w, lr=-1.0)
    with pytest.raises(ValueError, match="momentum should be >= 0 but is: -0.5"):
        nv.optim.Muon(w, momentum=-0.5)
    with pytest.raises(ValueError, match="weight decay should be >= 0 but is: -1"):
        nv.optim.Muon(w, weight_decay=-1.0)
    with pytest.raises(ValueError, match="Adjust learning rate function foo is not "
                                         "supported"):
        nv.optim.Muon(w, adjust_lr_fn="foo")
    opt = nv.optim.Muon(w, ns_steps=100)
    w[0].grad = nv.ones(2, 2)
    with pytest.raises(ValueError, match="Number of steps must be less than 100"):
        opt.step()
    opt = nv.optim.Muon(w, ns_coefficients=(1.0, 2.0))
    with pytest.raises(ValueError, match="Coefficients must be a tuple of exactly 3"):
        opt.step()
    g = nv.optim.Muon(w).param_groups[0]
    assert (g["lr"], g["weight_decay"], g["momentum"], g["nesterov"], g["ns_coefficients"],
            g["eps"], g["ns_steps"], g["adjust_lr_fn"]) == (
        1e-3, 0.1, 0.95, True, (3.4445, -4.7750, 2.0315), 1e-7, 5, None)


# ---------------------------------------------------------------- torch (an extra)

def test_adafactor_and_muon_match_torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("this torch has no Muon")
    for ncls, tcls, kw, idx in [
            (nv.optim.Adafactor, torch.optim.Adafactor, dict(lr=0.05, weight_decay=0.1,
                                                             maximize=True), [0, 1, 2]),
            (nv.optim.Muon, torch.optim.Muon, dict(lr=0.02), [0])]:
        ps = [nv.nn.Parameter(nv.tensor(P0[i])) for i in idx]
        qs = [torch.nn.Parameter(torch.from_numpy(P0[i].copy())) for i in idx]
        a, b = ncls(ps, **kw), tcls(qs, **kw)
        for t in range(3):
            for p, q, i in zip(ps, qs, idx):
                p.grad = nv.tensor(GRADS[t][i])
                q.grad = torch.from_numpy(GRADS[t][i].copy())
            a.step()
            b.step()
            for p, q in zip(ps, qs):
                np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-6,
                                           atol=1e-7)


def test_adafactor_and_muon_replay_under_compile():
    """``nv.compile`` replays the recorded step: the host side (step count, ``rho``, the
    ``lerp`` weight's form, Muon's scalars) is redone every call, as recording would."""
    w0 = P0[0]
    for opt_cls, kw in [(nv.optim.Adafactor, dict(lr=0.05, weight_decay=0.1)),
                        (nv.optim.Muon, dict(lr=0.05))]:
        w = nv.nn.Parameter(nv.tensor(w0))
        opt = opt_cls([w], **kw)

        @nv.compile
        def step(g):
            opt.zero_grad()
            (w * g).sum().backward()
            opt.step()

        for t in range(4):
            step(nv.tensor(GRADS[t][0]))
        grads = [[g[0]] for g in GRADS]
        want = _adafactor_ref([w0], grads, **kw) if opt_cls is nv.optim.Adafactor else \
            _muon_ref([w0], grads, **kw)
        atol = 1e-6 if opt_cls is nv.optim.Adafactor else kw["lr"] * 2.0 * 2 ** -8
        np.testing.assert_allclose(w.numpy(), want[-1][0], rtol=1e-5, atol=atol)


@pytest.mark.parametrize("dtype", [nv.bfloat16, nv.float16])
def test_half_precision_parameters(dtype):
    """Half parameters: each of PyTorch's ops rounded to the half type; within a few
    half ulps of the float64 rule (eps1 from the half dtype)."""
    with nv.engine("interp"):
        _, _, got = _run(nv.optim.Adafactor, [0, 1], 2, dtype=dtype, lr=0.05,
                         weight_decay=0.1)
        opt, ps, _ = _run(nv.optim.Muon, [0], 2, dtype=dtype, lr=0.05)
        assert ps[0].dtype == dtype and opt.state[ps[0]]["momentum_buffer"].dtype == dtype
    want = _adafactor_ref([P0[0], P0[1]], [[g[0], g[1]] for g in GRADS[:2]], lr=0.05,
                          weight_decay=0.1, eps_dtype=dtype.np)
    tol = 4 * float(nv.finfo(dtype).eps)
    for a, b in zip(got[-1], want[-1]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
