"""ReduceLROnPlateau and OneCycleLR: rates step by step against the published formulas
and (where torch is importable) against torch's schedulers; state dict round trips;
errors; training trajectories against torch's. And the property OneCycleLR relies on:
the momentum (SGD's ``momentum``, Adam's ``betas[0]``) is a runtime input of the
compiled step -- a training loop compiles once, and neither a cached step nor an
``nv.compile`` replay ever uses a stale value."""
import math
import warnings

import numpy as np
import pytest

import nova as nv
from nova.optim import lr_scheduler as sched


def _sgd(lr=1.0, n_groups=1, **kw):
    groups = [{"params": [nv.nn.Parameter(nv.ones(1))]} for _ in range(n_groups)]
    return nv.optim.SGD(groups, lr=lr, **kw)


# ------------------------------------------------------------ OneCycleLR: the formulas

def _cos(start, end, pct):
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _lin(start, end, pct):
    return (end - start) * pct + start


def _one_cycle_ref(n, total, max_lr, pct_start=0.3, anneal="cos", div=25.0, final_div=1e4,
                   three_phase=False, base_m=0.85, max_m=0.95):
    """(lr, momentum) at step ``n`` from the 1cycle definition as PyTorch documents it:
    phase ends at pct_start*T - 1 (and 2*pct_start*T - 2 with three phases) and T - 1;
    each phase anneals from its start to its end value over its steps."""
    f = _cos if anneal == "cos" else _lin
    init = max_lr / div
    low = init / final_div
    e1 = pct_start * total - 1
    if not three_phase:
        if n <= e1:
            p = n / e1
            return f(init, max_lr, p), f(max_m, base_m, p)
        p = (n - e1) / (total - 1 - e1)
        return f(max_lr, low, p), f(base_m, max_m, p)
    e2 = 2 * pct_start * total - 2
    if n <= e1:
        p = n / e1
        return f(init, max_lr, p), f(max_m, base_m, p)
    if n <= e2:
        p = (n - e1) / (e2 - e1)
        return f(max_lr, init, p), f(base_m, max_m, p)
    p = (n - e2) / (total - 1 - e2)
    return f(init, low, p), max_m


ONE_CYCLE_CASES = [
    dict(total_steps=20),
    dict(total_steps=20, anneal_strategy="linear"),
    dict(total_steps=30, pct_start=0.25, three_phase=True),
    dict(total_steps=30, pct_start=0.4, three_phase=True, anneal_strategy="linear"),
    dict(epochs=3, steps_per_epoch=7, pct_start=0.5, div_factor=10.0, final_div_factor=100.0,
         base_momentum=0.8, max_momentum=0.9),
]


def _ref_kwargs(kw):
    total = kw.get("total_steps") or kw["epochs"] * kw["steps_per_epoch"]
    return total, dict(pct_start=kw.get("pct_start", 0.3),
                       anneal=kw.get("anneal_strategy", "cos"),
                       div=kw.get("div_factor", 25.0),
                       final_div=kw.get("final_div_factor", 1e4),
                       three_phase=kw.get("three_phase", False),
                       base_m=kw.get("base_momentum", 0.85),
                       max_m=kw.get("max_momentum", 0.95))


@pytest.mark.parametrize("kw", ONE_CYCLE_CASES)
@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_one_cycle_rates_and_momenta_follow_the_formulas(kw, opt):
    p = nv.nn.Parameter(nv.ones(1))
    o = (nv.optim.SGD([p], lr=1.0, momentum=0.5) if opt == "sgd" else
         nv.optim.AdamW([p], lr=1.0, betas=(0.5, 0.99)))
    s = sched.OneCycleLR(o, max_lr=0.2, **kw)
    total, ref = _ref_kwargs(kw)
    for n in range(total + 1):          # step total_steps itself is allowed, as in torch
        lr, m = _one_cycle_ref(n, total, 0.2, **ref)
        assert s.get_last_lr() == [pytest.approx(lr, rel=1e-12, abs=1e-15)]
        assert o.param_groups[0]["lr"] == s.get_last_lr()[0]
        got_m = o.param_groups[0]["momentum"] if opt == "sgd" else o.param_groups[0]["betas"][0]
        assert got_m == pytest.approx(m, rel=1e-12)
        if opt == "adamw":
            assert o.param_groups[0]["betas"][1] == 0.99    # beta2 is left alone
        if n < total:
            s.step()
    g = o.param_groups[0]
    assert (g["initial_lr"], g["max_lr"]) == (0.2 / ref["div"], 0.2)
    assert g["min_lr"] == pytest.approx(0.2 / ref["div"] / ref["final_div"])


def test_one_cycle_per_group_values_and_no_momentum_cycling():
    o = _sgd(n_groups=2, momentum=0.3)
    s = sched.OneCycleLR(o, max_lr=[0.1, 1.0], total_steps=10, cycle_momentum=False)
    for n in range(10):
        want = [_one_cycle_ref(n, 10, m)[0] for m in (0.1, 1.0)]
        assert s.get_last_lr() == pytest.approx(want, rel=1e-12)
        assert [g["momentum"] for g in o.param_groups] == [0.3, 0.3]
        s.step()
    o = _sgd(n_groups=2)
    s = sched.OneCycleLR(o, max_lr=1.0, total_steps=10, base_momentum=[0.8, 0.7],
                         max_momentum=(0.9, 0.99))
    s.step()
    assert [g["momentum"] for g in o.param_groups] == pytest.approx(
        [_one_cycle_ref(1, 10, 1.0, base_m=b, max_m=m)[1] for b, m in ((0.8, 0.9), (0.7, 0.99))])


@pytest.mark.parametrize("kw", ONE_CYCLE_CASES + [dict(total_steps=12, cycle_momentum=False)])
@pytest.mark.parametrize("opt", ["SGD", "AdamW", "RMSprop"])
def test_one_cycle_matches_torch(kw, opt):
    torch = pytest.importorskip("torch")
    extra = dict(momentum=0.5) if opt != "AdamW" else {}
    a = getattr(nv.optim, opt)([{"params": [nv.nn.Parameter(nv.ones(1))]},
                                {"params": [nv.nn.Parameter(nv.ones(1))]}], lr=0.1, **extra)
    b = getattr(torch.optim, opt)([{"params": [torch.nn.Parameter(torch.ones(1))]},
                                   {"params": [torch.nn.Parameter(torch.ones(1))]}],
                                  lr=0.1, **extra)
    sa = sched.OneCycleLR(a, max_lr=[0.3, 0.05], **kw)
    sb = torch.optim.lr_scheduler.OneCycleLR(b, max_lr=[0.3, 0.05], **kw)
    key = "betas" if opt == "AdamW" else "momentum"
    for _ in range(sb.total_steps + 1):
        np.testing.assert_allclose(sa.get_last_lr(), sb.get_last_lr(), rtol=1e-12, atol=0)
        for ga, gb in zip(a.param_groups, b.param_groups):
            np.testing.assert_allclose(np.ravel(ga[key]), np.ravel(gb[key]), rtol=1e-12)
            for k in ("initial_lr", "max_lr", "min_lr"):
                assert ga[k] == pytest.approx(gb[k], rel=1e-15)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # torch: "scheduler before optimizer"
            b.step()
            if sb.last_epoch < sb.total_steps:
                sa.step()
                sb.step()


def test_one_cycle_past_total_steps_raises_as_torch():
    o = _sgd(momentum=0.9)
    s = sched.OneCycleLR(o, max_lr=0.1, total_steps=5)
    for _ in range(5):
        s.step()
    lr = o.param_groups[0]["lr"]
    with pytest.raises(ValueError, match="OneCycleLR: Tried to step 6 times. The specified "
                                         "number of total steps is 5"):
        s.step()
    assert s.last_epoch == 6 and o.param_groups[0]["lr"] == lr    # as torch leaves them
    torch = pytest.importorskip("torch")
    t = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1, momentum=0.9)
    st = torch.optim.lr_scheduler.OneCycleLR(t, max_lr=0.1, total_steps=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):
            st.step()
        with pytest.raises(ValueError, match="Tried to step 6 times. The specified number "
                                             "of total steps is 5"):
            st.step()
    assert st.last_epoch == s.last_epoch


ONE_CYCLE_ERRORS = [
    (dict(total_steps=0), ValueError, "OneCycleLR: Expected positive integer total_steps, "
                                      "but got 0"),
    (dict(total_steps=2.5), ValueError, "total_steps, but got 2.5"),
    (dict(), ValueError, r"must define either total_steps OR \(epochs AND steps_per_epoch\)"),
    (dict(epochs=3), ValueError, "must define either total_steps"),
    (dict(epochs=0, steps_per_epoch=3), ValueError, "positive integer epochs, but got 0"),
    (dict(epochs=2, steps_per_epoch=-1), ValueError,
     "positive integer steps_per_epoch, but got -1"),
    (dict(total_steps=10, pct_start=1.5), ValueError,
     "Expected float between 0 and 1 pct_start, but got 1.5"),
    (dict(total_steps=10, pct_start=1), ValueError, "pct_start, but got 1"),   # an int
    (dict(total_steps=10, anneal_strategy="exp"), ValueError,
     "anneal_strategy must be one of 'cos' or 'linear', instead got exp"),
    (dict(total_steps=10, max_lr=[0.1, 0.2]), ValueError,
     "max_lr must have the same length as optimizer.param_groups. max_lr has 2 values, "
     "param_groups has 1"),
    (dict(total_steps=10, base_momentum=[0.8, 0.9, 0.7]), ValueError,
     "base_momentum has 3 values, param_groups has 1"),
]


@pytest.mark.parametrize("kw,exc,match", ONE_CYCLE_ERRORS)
def test_one_cycle_errors(kw, exc, match):
    kw = {"max_lr": 0.1, **kw}
    with pytest.raises(exc, match=match):
        sched.OneCycleLR(_sgd(), **kw)
    torch = pytest.importorskip("torch")
    with pytest.raises(exc):
        torch.optim.lr_scheduler.OneCycleLR(
            torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1), **kw)


def test_one_cycle_errors_without_a_torch_counterpart_message():
    p = nv.nn.Parameter(nv.ones(1))
    with pytest.raises(ValueError, match="OneCycleLR: optimizer must support momentum or "
                                         "beta1 .*Adagrad has neither"):
        sched.OneCycleLR(nv.optim.Adagrad([p]), max_lr=0.1, total_steps=5)
    sched.OneCycleLR(nv.optim.Adagrad([p]), max_lr=0.1, total_steps=5, cycle_momentum=False)
    with pytest.raises(TypeError, match="OneCycleLR: expected an Optimizer, got list"):
        sched.OneCycleLR([p], max_lr=0.1, total_steps=5)
    with pytest.raises(KeyError, match=r"OneCycleLR: param_groups\[0\] has no "
                                       r"\['initial_lr', 'max_lr'"):
        sched.OneCycleLR(_sgd(), max_lr=0.1, total_steps=5, last_epoch=2)
    # torch divides by zero for a phase without steps; Nova says which phase
    with pytest.raises(ValueError, match="OneCycleLR: phase 1 of 2 has no steps"):
        sched.OneCycleLR(_sgd(), max_lr=0.1, total_steps=10, pct_start=0.1)


def test_one_cycle_state_dict_round_trip():
    o = nv.optim.AdamW([nv.nn.Parameter(nv.ones(1))], lr=0.1)
    s = sched.OneCycleLR(o, max_lr=0.5, total_steps=16, three_phase=True)
    for _ in range(7):
        s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 7 and sd["total_steps"] == 16
    o2 = nv.optim.AdamW([nv.nn.Parameter(nv.ones(1))], lr=0.1)
    s2 = sched.OneCycleLR(o2, max_lr=0.5, total_steps=16, three_phase=True)
    o2.load_state_dict(o.state_dict())          # the rates and bounds travel in the groups
    s2.load_state_dict(sd)
    assert s2.get_last_lr() == s.get_last_lr()
    assert o2.param_groups[0]["lr"] == o.param_groups[0]["lr"]
    assert o2.param_groups[0]["betas"] == o.param_groups[0]["betas"]
    for _ in range(9):
        s.step()
        s2.step()
        assert s2.get_last_lr() == s.get_last_lr()
        assert o2.param_groups[0]["betas"] == o.param_groups[0]["betas"]
    # resuming by last_epoch from the optimizer's groups, as torch allows
    o3 = nv.optim.AdamW([nv.nn.Parameter(nv.ones(1))], lr=0.1)
    o3.load_state_dict(o.state_dict())
    s3 = sched.OneCycleLR(o3, max_lr=0.5, total_steps=16, three_phase=True, last_epoch=15)
    assert s3.last_epoch == 16 and s3.get_last_lr() == s.get_last_lr()


# ------------------------------------------------------------ ReduceLROnPlateau

def test_plateau_by_hand():
    o = _sgd(lr=1.0)
    s = sched.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1, min_lr=0.2)
    assert s.get_last_lr() == [1.0] and s.best == math.inf and s.last_epoch == 0
    metrics = [5.0, 4.0, 4.0, 4.0, 4.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    # epoch:    1    2    3    4    5    6    7    8    9   10   11   12   13   14
    # 4 is best at 2; bad 3, 4, 5 -> the third bad epoch > patience: halve at 5, and
    # 6 is in cooldown. 6: 3 improves. 7, 8, 9 bad -> halve at 9 (0.25); 10 in cooldown
    # (its bad epoch ignored); 11, 12, 13 bad -> 0.125, clipped to min_lr 0.2.
    want_lr = [1, 1, 1, 1, .5, .5, .5, .5, .25, .25, .25, .25, .2, .2]
    want_bad = [0, 0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0]
    want_cool = [0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0]
    for k, m in enumerate(metrics):
        s.step(m)
        assert (s.get_last_lr(), s.num_bad_epochs, s.cooldown_counter) == \
            ([want_lr[k]], want_bad[k], want_cool[k]), k + 1
        assert s.in_cooldown == (want_cool[k] > 0)
        assert o.param_groups[0]["lr"] == want_lr[k]
    assert s.best == 3.0 and s.last_epoch == 14


def test_plateau_is_better_thresholds():
    s = sched.ReduceLROnPlateau(_sgd(), threshold=0.1)                 # min, rel
    assert not s.is_better(0.9, 1.0) and s.is_better(0.89, 1.0)
    s = sched.ReduceLROnPlateau(_sgd(), threshold=0.1, threshold_mode="abs")
    assert not s.is_better(0.9, 1.0) and s.is_better(0.899, 1.0)
    s = sched.ReduceLROnPlateau(_sgd(), mode="max", threshold=0.1)
    assert not s.is_better(1.1, 1.0) and s.is_better(1.11, 1.0) and s.best == -math.inf
    s = sched.ReduceLROnPlateau(_sgd(), mode="max", threshold=0.5, threshold_mode="abs")
    assert not s.is_better(1.5, 1.0) and s.is_better(1.51, 1.0)
    assert s._is_better(2.0, 1.0)                                      # torch's name


def test_plateau_takes_a_0d_tensor_eps_and_per_group_min_lr():
    o = _sgd(lr=1.0, n_groups=2)
    s = sched.ReduceLROnPlateau(o, patience=0, factor=0.1, min_lr=[0.05, 0.0])
    s.step(nv.tensor(2.0))
    s.step(nv.tensor(3.0) * 1.0)            # a pending 0-d tensor: read with float()
    assert s.get_last_lr() == pytest.approx([0.1, 0.1])
    s.step(nv.tensor(3.0))
    assert s.get_last_lr() == pytest.approx([0.05, 0.01])
    o = _sgd(lr=1e-8)
    s = sched.ReduceLROnPlateau(o, patience=0, eps=1e-8)
    s.step(1.0)
    s.step(2.0)                             # 1e-8 - 1e-9 < eps: no update
    assert s.get_last_lr() == [1e-8]


PLATEAU_CASES = [
    dict(),
    dict(patience=2, factor=0.5),
    dict(mode="max", patience=1, threshold=0.05, cooldown=2),
    dict(patience=0, threshold_mode="abs", threshold=0.3, min_lr=[0.02, 0.01]),
    dict(mode="max", threshold_mode="abs", patience=3, cooldown=1, min_lr=0.003, eps=1e-3),
]


@pytest.mark.parametrize("kw", PLATEAU_CASES)
def test_plateau_matches_torch(kw):
    torch = pytest.importorskip("torch")
    a = nv.optim.SGD([{"params": [nv.nn.Parameter(nv.ones(1))]},
                      {"params": [nv.nn.Parameter(nv.ones(1))], "lr": 0.3}], lr=1.0)
    b = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.ones(1))]},
                         {"params": [torch.nn.Parameter(torch.ones(1))], "lr": 0.3}], lr=1.0)
    sa = sched.ReduceLROnPlateau(a, **kw)
    sb = torch.optim.lr_scheduler.ReduceLROnPlateau(b, **kw)
    rng = np.random.default_rng(0)
    metrics = np.cumsum(rng.normal(0.0, 1.0, 120)) * 0.1 + 5.0     # wanders, plateaus
    for k, m in enumerate(metrics):
        metric = float(m)
        sa.step(nv.tensor(np.float32(metric)) if k % 3 == 0 else metric)
        sb.step(torch.tensor(np.float32(metric)) if k % 3 == 0 else metric)
        assert sa.get_last_lr() == pytest.approx(sb.get_last_lr(), rel=1e-15)
        assert (sa.num_bad_epochs, sa.cooldown_counter, sa.in_cooldown, sa.last_epoch) == \
            (sb.num_bad_epochs, sb.cooldown_counter, sb.in_cooldown, sb.last_epoch)
        assert sa.best == sb.best
    assert sa.get_last_lr() != [1.0, 0.3]          # the cases do reduce


def test_plateau_state_dict_round_trip_and_torch_state():
    o = _sgd(lr=1.0)
    s = sched.ReduceLROnPlateau(o, patience=1, cooldown=2, factor=0.5)
    for m in (3.0, 2.0, 2.5, 2.5, 2.6):
        s.step(m)
    sd = s.state_dict()
    assert {"best", "num_bad_epochs", "cooldown_counter", "last_epoch", "mode", "threshold",
            "threshold_mode", "min_lrs", "factor", "patience", "cooldown", "eps"} <= set(sd)
    assert "optimizer" not in sd
    o2 = _sgd(lr=1.0)
    o2.load_state_dict(o.state_dict())        # the rate itself lives in the optimizer
    s2 = sched.ReduceLROnPlateau(o2)          # other settings: the state replaces them
    s2.load_state_dict(sd)
    assert (s2.best, s2.num_bad_epochs, s2.cooldown_counter, s2.patience) == \
        (s.best, s.num_bad_epochs, s.cooldown_counter, 1)
    for m in (2.7, 2.8, 1.0, 1.5, 1.6, 1.7, 1.8):
        s.step(m)
        s2.step(m)
        assert s2.get_last_lr() == s.get_last_lr()
    torch = pytest.importorskip("torch")
    t = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0)
    st = torch.optim.lr_scheduler.ReduceLROnPlateau(t, mode="max", patience=0)
    st.step(1.0)
    st.step(0.5)
    s3 = sched.ReduceLROnPlateau(_sgd(lr=0.1))
    s3.load_state_dict(st.state_dict())       # a torch checkpoint's scheduler state
    assert (s3.mode, s3.best, s3.patience, s3.mode_worse) == ("max", 1.0, 0, -math.inf)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(factor=1.0), ValueError, "ReduceLROnPlateau: factor should be < 1.0, got 1.0"),
    (dict(mode="avg"), ValueError, "ReduceLROnPlateau: mode 'avg' is unknown"),
    (dict(threshold_mode="pct"), ValueError, "ReduceLROnPlateau: threshold mode 'pct' is "
                                             "unknown"),
    (dict(min_lr=[0.1, 0.2]), ValueError, r"ReduceLROnPlateau: expected 1 min_lrs .*got 2"),
])
def test_plateau_errors(kw, exc, match):
    with pytest.raises(exc, match=match):
        sched.ReduceLROnPlateau(_sgd(), **kw)
    torch = pytest.importorskip("torch")
    with pytest.raises(exc):
        torch.optim.lr_scheduler.ReduceLROnPlateau(
            torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1), **kw)


def test_plateau_other_errors():
    with pytest.raises(TypeError, match="ReduceLROnPlateau: expected an Optimizer, got str"):
        sched.ReduceLROnPlateau("sgd")
    s = sched.ReduceLROnPlateau(_sgd())
    with pytest.raises(RuntimeError, match="elements"):
        s.step(nv.ones(2))                    # not a scalar metric
    o = _sgd()
    s = sched.ReduceLROnPlateau(o, patience=0, min_lr=[0.0])
    o.add_param_group({"params": [nv.nn.Parameter(nv.ones(1))], "lr": 1.0})
    s.step(1.0)
    with pytest.raises(RuntimeError, match="ReduceLROnPlateau: the optimizer has 2 parameter "
                                           "groups but min_lr gave 1"):
        s.step(2.0)
    with pytest.warns(UserWarning, match="epoch argument is deprecated"):
        sched.ReduceLROnPlateau(_sgd()).step(1.0, epoch=3)


def test_plateau_step_inside_nv_compile_runs_recorded():
    p = nv.nn.Parameter(nv.ones(2))
    o = nv.optim.SGD([p], lr=1.0)
    s = sched.ReduceLROnPlateau(o, patience=0)

    @nv.compile
    def step(x, metric):
        (p * x).sum().backward()
        o.step()
        o.zero_grad()
        s.step(metric)

    x = nv.tensor([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in (3.0, 2.0, 4.0, 4.0):
            step(x, m)
    assert step.replays == 0
    assert s.get_last_lr() == pytest.approx([0.01])     # reduced at 4.0 and again
    np.testing.assert_allclose(p.numpy(), 1.0 - np.array([1.0, 2.0]) * (1 + 1 + 1 + 0.1),
                               rtol=1e-6)


# ------------------------------------------------------------ momentum at runtime

P0 = np.array([[0.5, -1.0, 2.0], [0.1, 0.0, -0.3]], np.float32)
C = np.array([[1.0, -2.0, 0.5], [0.3, 1.5, -1.0]], np.float32)


def _grad(p):                                  # of sum(C p^2)
    return 2.0 * C * p


def _loss(p, c):
    return (p * p * c).sum()


def _adam_reference(b1s, lr=0.1, b2=0.999, eps=1e-8, wd=0.01, steps=6):
    """AdamW in float64, beta1 taking the values ``b1s`` step by step: PyTorch's
    formula uses the current beta1 in both the moment and its bias correction."""
    p = P0.astype(np.float64)
    m = v = np.zeros_like(p)
    for t in range(1, steps + 1):
        b1 = b1s[t - 1]
        g = _grad(p)
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / math.sqrt(1 - b2 ** t) + eps)
    return p


def _sgd_reference(ms, lr=0.05, nesterov=False, steps=6):
    p = P0.astype(np.float64)
    buf = None
    for t in range(steps):
        m = ms[t]
        d = _grad(p)
        buf = d.copy() if buf is None else m * buf + d
        p = p - lr * (d + m * buf if nesterov else buf)
    return p


B1S = [0.9, 0.5, 0.95, 0.0, 0.7, 0.8]


def _loop(make, set_value, values, compiled=False):
    """Train with ``set_value(opt, v)`` before each step: (final p, per call whether it
    was an ``nv.compile`` replay)."""
    p = nv.nn.Parameter(nv.tensor(P0.copy()))
    opt = make([p])

    def train(c):
        _loss(p, c).backward()
        opt.step()
        opt.zero_grad()

    fn = nv.compile(train) if compiled else train
    replayed = []
    c = nv.tensor(C)           # (an argument: nv.compile refuses host data made inside)
    for v in values:
        set_value(opt, v)
        before = getattr(fn, "replays", 0)
        fn(c)
        replayed.append(getattr(fn, "replays", 0) > before)
    return p.numpy().astype(np.float64), replayed


def _set_beta1(opt, v):
    g = opt.param_groups[0]
    g["betas"] = (v, g["betas"][1])


def _set_momentum(opt, v):
    opt.param_groups[0]["momentum"] = v


def test_changing_beta1_changes_the_update_as_the_formula_and_compiles_once(fresh_cache):
    make = lambda ps: nv.optim.AdamW(ps, lr=0.1, weight_decay=0.01)  # noqa: E731
    got, _ = _loop(make, _set_beta1, B1S)
    np.testing.assert_allclose(got, _adam_reference(B1S), rtol=2e-6, atol=1e-7)
    assert nv.debug.cache_stats().misses == 1
    # a constant beta1 is a different trajectory (the value is not ignored)
    const, _ = _loop(make, _set_beta1, [0.9] * 6)
    assert not np.allclose(const, got, rtol=1e-4)
    assert nv.debug.cache_stats().misses == 1


@pytest.mark.parametrize("nesterov", [False, True])
def test_changing_sgd_momentum_changes_the_update_as_the_formula(fresh_cache, nesterov):
    ms = [0.9, 0.5, 0.99, 0.2, 0.7, 0.8]
    make = lambda ps: nv.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=nesterov)  # noqa: E731
    got, _ = _loop(make, _set_momentum, ms)
    np.testing.assert_allclose(got, _sgd_reference(ms, nesterov=nesterov), rtol=2e-6, atol=1e-7)
    assert nv.debug.cache_stats().misses == 1


@pytest.mark.parametrize("which", ["adamw", "sgd", "sgd-nesterov", "rmsprop"])
def test_an_nv_compile_replay_uses_the_current_momentum(fresh_cache, which):
    """Calls at one value until they replay, then a new value every call: every later
    call is a replay, and the result is bit-identical to the uncompiled loop's (a
    replay running the recorded value would differ)."""
    values = [0.9, 0.9, 0.9, 0.9, 0.5, 0.95, 0.3, 0.8]
    if which == "adamw":
        make, setter = (lambda ps: nv.optim.AdamW(ps, lr=0.1)), _set_beta1
    elif which == "rmsprop":
        make, setter = (lambda ps: nv.optim.RMSprop(ps, lr=0.01, momentum=0.9)), _set_momentum
    else:
        make, setter = (lambda ps: nv.optim.SGD(ps, lr=0.05, momentum=0.9,
                                                nesterov=which == "sgd-nesterov")), _set_momentum
    want, _ = _loop(make, setter, values)
    # the compiled call's step does not return the gradient zero_grad() drops: a step
    # of its own, which must compile once whatever the values
    nv.debug.reset_cache()
    got, replayed = _loop(make, setter, values, compiled=True)
    np.testing.assert_array_equal(got, want)
    assert replayed[3:] == [True] * 5, replayed
    assert nv.debug.cache_stats().misses == 1


def test_an_nv_compile_replay_rerecords_when_a_compiled_in_hyperparameter_changes(fresh_cache):
    """eps is a constant of the compiled step: changing it after the replay began must
    record the call again (and compile the new constant), never run the old one."""
    def set_eps(opt, v):
        opt.param_groups[0]["eps"] = v
    make = lambda ps: nv.optim.AdamW(ps, lr=0.1)  # noqa: E731
    values = [1e-8] * 4 + [0.5] * 4
    want, _ = _loop(make, set_eps, values)
    nv.debug.reset_cache()              # the compiled call's step is a step of its own
    got, replayed = _loop(make, set_eps, values, compiled=True)
    np.testing.assert_array_equal(got, want)
    log = nv.debug.cache_stats().compile_log
    assert any("re-recorded: AdamW: parameter group 0 changed eps 1e-08 -> 0.5" in m
               for m in log), log
    # replaying before the change, the changed call recorded (a new constant: a second
    # compile), then replaying the new one
    assert replayed[3] and not replayed[4] and replayed[-1], replayed
    assert nv.debug.cache_stats().misses == 2


# ------------------------------------------------------------ trajectories vs torch

GRADS = [np.random.default_rng(k).standard_normal(P0.shape).astype(np.float32)
         for k in range(10)]


@pytest.mark.parametrize("opt,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("AdamW", dict(lr=0.1, weight_decay=0.05)),
    ("Adam", dict(lr=0.1, betas=(0.8, 0.99))),
])
@pytest.mark.parametrize("three_phase", [False, True])
def test_one_cycle_training_matches_torch(fresh_cache, opt, kw, three_phase):
    torch = pytest.importorskip("torch")
    p = nv.nn.Parameter(nv.tensor(P0.copy()))
    q = torch.nn.Parameter(torch.from_numpy(P0.copy()))
    a, b = getattr(nv.optim, opt)([p], **kw), getattr(torch.optim, opt)([q], **kw)
    sk = dict(max_lr=0.3, total_steps=10, pct_start=0.3, three_phase=three_phase)
    sa = sched.OneCycleLR(a, **sk)
    sb = torch.optim.lr_scheduler.OneCycleLR(b, **sk)
    c, ct = nv.tensor(C), torch.from_numpy(C)
    for g in GRADS:
        ((p * p * c).sum() + (p * nv.tensor(g)).sum()).backward()
        ((q * q * ct).sum() + (q * torch.from_numpy(g)).sum()).backward()
        a.step()
        b.step()
        a.zero_grad()
        b.zero_grad()
        sa.step()
        sb.step()
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert nv.debug.cache_stats().misses == 1     # lr and momentum changed every step


def _one_cycle_run(compiled, steps, total=8):
    p = nv.nn.Parameter(nv.tensor(P0.copy()))
    opt = nv.optim.AdamW([p], lr=0.1)
    s = sched.OneCycleLR(opt, max_lr=0.2, total_steps=total)

    def train(c, g):
        (_loss(p, c) + (p * g).sum()).backward()
        opt.step()
        opt.zero_grad()
        s.step()

    fn = nv.compile(train) if compiled else train
    error = None
    for g in GRADS[:steps]:
        try:
            fn(nv.tensor(C), nv.tensor(g))
        except ValueError as e:
            error = str(e)
            break
    return p.numpy(), opt.state[p]["step"], s.last_epoch, error, fn


def test_one_cycle_under_nv_compile_replays_and_fails_as_uncompiled(fresh_cache):
    want = _one_cycle_run(False, 8)
    nv.debug.reset_cache()              # the compiled call's step is a step of its own
    got = _one_cycle_run(True, 8)
    np.testing.assert_array_equal(got[0], want[0])
    # (calls 1-3 record: the first creates the optimizer state) lr and beta1 change
    # every call, the replays see them, and the step compiled once
    assert got[1:4] == want[1:4] and got[4].replays == 5
    assert nv.debug.cache_stats().misses == 1
    # Step 9 of 8: the uncompiled call updates the parameters, then its scheduler
    # raises. A replay must do the same (it records that call instead of failing
    # before its kernels ran).
    want = _one_cycle_run(False, 10)
    got = _one_cycle_run(True, 10)
    assert want[3] == "OneCycleLR: Tried to step 9 times. The specified number of total " \
                      "steps is 8"
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:4] == want[1:4] == (9, 9, want[3])
    assert any("re-recorded: OneCycleLR: Tried to step 9 times" in m
               for m in nv.debug.cache_stats().compile_log)
