"""ConstantLR, PolynomialLR, MultiplicativeLR, CyclicLR and ChainedScheduler: rates (and
CyclicLR's momentum) step by step against their definitions written here, state dict
round trips, errors; a training loop under CyclicLR compiles once and an
``nv.compile`` replay of a chained schedule is bit-identical; and, where torch is
importable, the rates against torch's schedulers."""
import math

import numpy as np
import pytest

import nova as nv
from nova.optim import lr_scheduler as sched


def _sgd(lrs=(1.0,), **kw):
    return nv.optim.SGD([{"params": [nv.nn.Parameter(nv.ones(1))], "lr": lr} for lr in lrs],
                        **kw)


def _rates(s, n, key="lr"):
    """Group 0's ``key`` (betas: beta1) and every group's last rate, for epochs 0..n-1."""
    out, last = [], []
    for _ in range(n):
        v = s.optimizer.param_groups[0][key]
        out.append(v[0] if isinstance(v, tuple) else v)
        last.append(s.get_last_lr())
        s.step()
    return out, last


def test_constant_polynomial_and_multiplicative_closed_forms():
    opt = _sgd((1.0, 0.2))
    got, last = _rates(sched.ConstantLR(opt, factor=0.25, total_iters=3), 6)
    assert got == [0.25, 0.25, 0.25, 1.0, 1.0, 1.0]
    assert last[1] == [0.25, 0.05] and last[4] == [1.0, 0.2]

    got, _ = _rates(sched.PolynomialLR(_sgd((0.5,)), total_iters=4, power=2.0), 7)
    assert got == pytest.approx([0.5 * (1 - min(e, 4) / 4) ** 2 for e in range(7)], rel=1e-15)

    f = [lambda e: 0.9, lambda e: 1.0 + e / 10]         # one function per group
    s = sched.MultiplicativeLR(_sgd((1.0, 2.0)), f)
    _, last = _rates(s, 6)
    assert [r[0] for r in last] == pytest.approx([0.9 ** e for e in range(6)], rel=1e-15)
    assert [r[1] for r in last] == pytest.approx(
        [2.0 * math.prod(1 + k / 10 for k in range(1, e + 1)) for e in range(6)], rel=1e-15)
    # any epoch, in any order (SequentialLR asks from 0 again), is the same product
    assert s.lr_at(3) == last[3] and s.lr_at(0) == [1.0, 2.0] and s.lr_at(5) == last[5]


def test_multiplicative_inside_sequential_and_state_dict():
    opt = _sgd()
    warm = sched.ConstantLR(opt, factor=0.5, total_iters=2)
    decay = sched.MultiplicativeLR(opt, lambda e: 0.5)
    s = sched.SequentialLR(opt, [warm, decay], milestones=[2])
    got, _ = _rates(s, 6)
    assert got == [0.5, 0.5, 1.0, 0.5, 0.25, 0.125]
    saved = decay.state_dict()
    assert saved["lr_lambdas"] == [None] and "_memo" not in saved
    other = sched.MultiplicativeLR(_sgd(), lambda e: 0.5)
    other.load_state_dict({**saved, "last_epoch": 3})
    # the attributes only (PyTorch's): the rate comes with the optimizer's state dict
    assert other.last_epoch == 3 and other.get_last_lr() == saved["_last_lr"]
    assert other.optimizer.param_groups[0]["lr"] == 1.0


def _cyclic_ref(n, base, top, up, down, scale):
    """The CLR definition: a triangle rising over ``up`` steps and falling over ``down``,
    its amplitude times ``scale(cycle, n)`` (cycle counted from 1)."""
    k, cycle = n % (up + down), n // (up + down) + 1
    position = k / up if k <= up else 1 - (k - up) / down
    return base + (top - base) * position * scale(cycle, n)


@pytest.mark.parametrize("mode,kw,scale", [
    ("triangular", {}, lambda c, n: 1.0),
    ("triangular2", {}, lambda c, n: 0.5 ** (c - 1)),
    ("exp_range", dict(gamma=0.9), lambda c, n: 0.9 ** n),
    ("custom cycle", dict(scale_fn=lambda c: 1 / c), lambda c, n: 1 / c),
    ("custom iterations", dict(scale_fn=lambda n: 1 / (1 + n), scale_mode="iterations"),
     lambda c, n: 1 / (1 + n)),
])
def test_cyclic_lr_modes_and_inverse_momentum(mode, kw, scale):
    opt = _sgd((9.0,), momentum=0.5)
    kw = dict(kw) if mode.startswith("custom") else dict(kw, mode=mode)
    s = sched.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4, step_size_down=2,
                       base_momentum=0.8, max_momentum=0.95, **kw)
    lrs, _ = _rates(s, 15)
    assert lrs == pytest.approx([_cyclic_ref(n, 0.01, 0.1, 4, 2, scale) for n in range(15)],
                                rel=1e-12)
    s = sched.CyclicLR(_sgd((9.0,), momentum=0.5), base_lr=0.01, max_lr=0.1, step_size_up=4,
                       step_size_down=2, base_momentum=0.8, max_momentum=0.95, **kw)
    moms, _ = _rates(s, 15, key="momentum")
    assert moms == pytest.approx([0.95 - (_cyclic_ref(n, 0.8, 0.95, 4, 2, scale) - 0.8)
                                  for n in range(15)], rel=1e-12)
    assert s.optimizer.param_groups[0]["base_momentum"] == 0.8


def test_cyclic_lr_adam_betas_groups_state_dict_and_errors():
    opt = nv.optim.NAdam([{"params": [nv.nn.Parameter(nv.ones(1))]},
                          {"params": [nv.nn.Parameter(nv.ones(1))]}], lr=5.0)
    s = sched.CyclicLR(opt, base_lr=[0.1, 0.2], max_lr=[1.0, 2.0], step_size_up=2)
    beta1, last = _rates(s, 5, key="betas")
    assert beta1 == pytest.approx([0.9, 0.85, 0.8, 0.85, 0.9])
    assert last[2] == pytest.approx([1.0, 2.0]) and last[3] == pytest.approx([0.55, 1.1])
    assert opt.param_groups[1]["betas"][1] == 0.999
    saved_opt, saved = opt.state_dict(), s.state_dict()     # at epoch 5: half way up
    restored = sched.CyclicLR(opt, base_lr=[0.1, 0.2], max_lr=[1.0, 2.0], step_size_up=2)
    opt.load_state_dict(saved_opt)
    restored.load_state_dict(saved)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.55)
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.85)
    restored.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0)

    with pytest.raises(ValueError, match="CyclicLR: optimizer must support momentum or beta1"):
        sched.CyclicLR(nv.optim.Adagrad([nv.nn.Parameter(nv.ones(1))]), 0.1, 1.0)
    sched.CyclicLR(nv.optim.Adagrad([nv.nn.Parameter(nv.ones(1))]), 0.1, 1.0,
                   cycle_momentum=False)
    with pytest.raises(ValueError, match="CyclicLR: mode 'sine' is invalid and scale_fn is None"):
        sched.CyclicLR(_sgd(momentum=0.9), 0.1, 1.0, mode="sine")
    with pytest.raises(ValueError, match="step_size_up must be > 0"):
        sched.CyclicLR(_sgd(momentum=0.9), 0.1, 1.0, step_size_up=0)
    with pytest.raises(ValueError, match="max_lr has 3 values, param_groups has 2"):
        sched.CyclicLR(opt, 0.1, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="ConstantLR: factor must be in"):
        sched.ConstantLR(_sgd(), factor=1.5)
    with pytest.raises(ValueError, match="PolynomialLR: total_iters must be >= 1"):
        sched.PolynomialLR(_sgd(), total_iters=0)
    with pytest.raises(TypeError, match="MultiplicativeLR: lr_lambda should be a function"):
        sched.MultiplicativeLR(_sgd(), 0.9)


def test_chained_constant_and_exponential_compose_as_factors():
    opt = _sgd((1.0, 0.5))
    chain = sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.1, total_iters=2),
                                    sched.ExponentialLR(opt, gamma=0.9)])
    got, last = _rates(chain, 6)
    want = [(0.1 if e < 2 else 1.0) * 0.9 ** e for e in range(6)]
    assert got == pytest.approx(want, rel=1e-12)
    assert [r[1] for r in last] == pytest.approx([0.5 * w for w in want], rel=1e-12)


def test_chained_cosine_follows_the_recursive_rule():
    """In a chain CosineAnnealingLR applies PyTorch's documented recursion
    eta_{t+1} = eta_min + (eta_t - eta_min) (1 + cos((t+1) pi / T)) / (1 + cos(t pi / T))
    to the rate the scheduler before it left; here after a 0.5 step at epoch 2."""
    T, eta_min = 6, 0.1
    opt = _sgd()
    chain = sched.ChainedScheduler([sched.MultiStepLR(opt, milestones=[2], gamma=0.5),
                                    sched.CosineAnnealingLR(opt, T_max=T, eta_min=eta_min)])
    got, _ = _rates(chain, T + 1)
    want, lr = [1.0], 1.0
    for t in range(1, T + 1):
        lr = lr * (0.5 if t == 2 else 1.0)
        lr = eta_min + (lr - eta_min) * ((1 + math.cos(t * math.pi / T)) /
                                         (1 + math.cos((t - 1) * math.pi / T)))
        want.append(lr)
    assert got == pytest.approx(want, rel=1e-12)


def test_chained_state_dict_and_errors():
    def build():
        opt = _sgd(momentum=0.9)
        return sched.ChainedScheduler([sched.LinearLR(opt, 0.25, 1.0, total_iters=3),
                                       sched.CyclicLR(opt, 0.01, 0.1, step_size_up=2),
                                       sched.StepLR(opt, step_size=2, gamma=0.5)])
    chain = build()
    for _ in range(5):
        chain.step()
    saved = chain.state_dict()
    assert len(saved["_schedulers"]) == 3 and "optimizer" not in saved["_schedulers"][0]
    other = build()
    fresh_lr = other.optimizer.param_groups[0]["lr"]
    other.load_state_dict(saved)
    assert other.get_last_lr() == chain.get_last_lr()
    # the rates come back with the optimizer's state dict, as in PyTorch
    assert other.optimizer.param_groups[0]["lr"] == fresh_lr
    other.optimizer.load_state_dict(chain.optimizer.state_dict())
    assert other.optimizer.param_groups[0]["lr"] == chain.optimizer.param_groups[0]["lr"]
    chain.step()
    other.step()
    assert other.get_last_lr() == chain.get_last_lr()

    opt = _sgd()
    with pytest.raises(ValueError, match="expects at least one scheduler"):
        sched.ChainedScheduler([])
    with pytest.raises(ValueError, match="cannot chain the ReduceLROnPlateau at index 1"):
        sched.ChainedScheduler([sched.StepLR(opt, 2), sched.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="all schedulers to belong to the same optimizer"):
        sched.ChainedScheduler([sched.StepLR(opt, 2), sched.StepLR(_sgd(), 2)])
    with pytest.raises(TypeError, match="not a closed form"):
        sched.SequentialLR(opt, [sched.ChainedScheduler([sched.StepLR(opt, 2)]),
                                 sched.StepLR(opt, 2)], milestones=[2]).step()


def _sgd_reference(p, lrs, moms, steps, c):
    """SGD with momentum on loss sum(c p^2)/2 at the given per-step lr and momentum."""
    buf = None
    for t in range(steps):
        d = c * p
        buf = d.copy() if buf is None else moms[t] * buf + d
        p = p - lrs[t] * buf
    return p


def test_cyclic_training_compiles_once(fresh_cache):
    c = np.array([1.0, 0.5, 2.0], np.float32)
    p = nv.nn.Parameter(nv.tensor(np.array([1.0, -2.0, 0.5], np.float32)))
    opt = nv.optim.SGD([p], lr=0.1, momentum=0.9)
    s = sched.CyclicLR(opt, base_lr=0.01, max_lr=0.2, step_size_up=2, mode="triangular2")
    nv.debug.reset_cache()
    lrs, moms = [], []
    for _ in range(7):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
        (0.5 * p * p * nv.tensor(c)).sum().backward()
        opt.step()
        opt.zero_grad()
        s.step()
    assert len(set(lrs)) > 2 and len(set(moms)) > 2
    np.testing.assert_allclose(p.numpy(), _sgd_reference(
        np.array([1.0, -2.0, 0.5]), lrs, moms, 7, c.astype(np.float64)), rtol=2e-6)
    assert nv.debug.cache_stats().misses == 1


def test_chained_schedule_under_nv_compile_replays_bit_identical(fresh_cache):
    """The chain records nothing of its own: a replay re-runs each scheduler's step,
    in order, as the uncompiled call does."""
    def run(compiled):
        p = nv.nn.Parameter(nv.tensor(np.array([1.0, -2.0], np.float32)))
        opt = nv.optim.Adam([p], lr=0.1)
        chain = sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.5, total_iters=3),
                                        sched.CyclicLR(opt, 0.01, 0.1, step_size_up=2),
                                        sched.ExponentialLR(opt, gamma=0.9)])

        def train(c):
            (p * p * c).sum().backward()
            opt.step()
            opt.zero_grad()
            chain.step()
        fn = nv.compile(train) if compiled else train
        c = nv.tensor(np.float32(1.5))
        for _ in range(8):
            fn(c)
        return p.numpy(), chain.get_last_lr(), opt.param_groups[0]["betas"], \
            getattr(fn, "replays", 0)
    want = run(False)
    nv.debug.reset_cache()
    got = run(True)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:3] == want[1:3] and got[3] >= 5
    assert nv.debug.cache_stats().misses == 1


TORCH_CASES = [
    ("ConstantLR", lambda M, o: M.ConstantLR(o, factor=0.3, total_iters=4), "SGD", {}),
    ("PolynomialLR", lambda M, o: M.PolynomialLR(o, total_iters=7, power=0.5), "SGD", {}),
    ("MultiplicativeLR", lambda M, o: M.MultiplicativeLR(o, lambda e: 0.95 if e % 3 else 1.1),
     "SGD", {}),
    ("CyclicLR", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=5,
                                         mode="triangular2"), "SGD", dict(momentum=0.9)),
    ("CyclicLR-exp", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="exp_range",
                                             gamma=0.9), "Adam", {}),
    ("Chained", lambda M, o: M.ChainedScheduler([
        M.LinearLR(o, 0.2, 1.0, 4), M.StepLR(o, 3, 0.5), M.MultiStepLR(o, [2, 5, 5], 0.7),
        M.CosineAnnealingLR(o, 5, eta_min=0.05), M.PolynomialLR(o, 30, 1.5)]), "SGD", {}),
    ("Chained-absolute", lambda M, o: M.ChainedScheduler([
        M.LambdaLR(o, lambda e: 1 / (e + 1)), M.ConstantLR(o, 0.5, 2),
        M.OneCycleLR(o, 0.9, total_steps=40), M.ExponentialLR(o, 0.95)]), "SGD",
     dict(momentum=0.9)),
]


@pytest.mark.parametrize("name,make,opt,kw", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_rates_match_torch(name, make, opt, kw):
    torch = pytest.importorskip("torch")
    a = getattr(nv.optim, opt)([nv.nn.Parameter(nv.ones(1))], lr=0.5, **kw)
    b = getattr(torch.optim, opt)([torch.nn.Parameter(torch.ones(1))], lr=0.5, **kw)
    sa, sb = make(sched, a), make(torch.optim.lr_scheduler, b)
    key = "betas" if opt == "Adam" else "momentum"
    for _ in range(40):
        np.testing.assert_allclose(sa.get_last_lr(), sb.get_last_lr(), rtol=1e-12)
        np.testing.assert_allclose(a.param_groups[0]["lr"], b.param_groups[0]["lr"], rtol=1e-12)
        np.testing.assert_allclose(a.param_groups[0][key], b.param_groups[0][key], rtol=1e-12)
        b.step()
        sa.step()
        sb.step()


def test_schedulers_stepped_together_compose_as_pytorchs():
    """ConstantLR warmup then ExponentialLR, both stepped each epoch (PyTorch's docs):
    the second overwrote the first; they now compose by PyTorch's recursive rule,
    and a SequentialLR's own schedulers keep their closed forms."""
    o = nv.optim.SGD([nv.nn.Parameter(nv.ones(1))], lr=1.0)
    a = nv.optim.lr_scheduler.ConstantLR(o, 0.5, 3)
    b = nv.optim.lr_scheduler.ExponentialLR(o, 0.9)
    seen = []
    for _ in range(5):
        seen.append(round(o.param_groups[0]["lr"], 10))
        a.step()
        b.step()
    assert seen == [0.5, 0.45, 0.405, 0.729, 0.6561]
    o = nv.optim.SGD([nv.nn.Parameter(nv.ones(1))], lr=1.0)
    warm = nv.optim.lr_scheduler.LinearLR(o, 0.1, total_iters=2)
    cos = nv.optim.lr_scheduler.CosineAnnealingLR(o, 4)
    seq = nv.optim.lr_scheduler.SequentialLR(o, [warm, cos], milestones=[2])
    seen = []
    for _ in range(6):
        seen.append(round(o.param_groups[0]["lr"], 6))
        seq.step()
    assert seen == [0.1, 0.55, 1.0, 0.853553, 0.5, 0.146447]


def test_state_dicts_carry_pytorchs_step_count_and_warm_restart_position():
    """``_step_count`` (the constructor's step included) in every state dict (torch
    2.13's CosineAnnealingWarmRestarts, whose own ``step`` does not count, keeps 0);
    CosineAnnealingWarmRestarts' ``T_cur`` (epochs since the restart) and ``T_i`` (the
    period, ``T_0 * T_mult ** k``) as attributes and entries; a state saved without them
    (an older Nova) still restores the position."""
    s = sched.CosineAnnealingWarmRestarts(_sgd(), T_0=2, T_mult=3, eta_min=0.1)
    positions = []
    for _ in range(9):
        positions.append((s.last_epoch, s.T_cur, s.T_i))
        s.step()
    # periods of 2 then 6 epochs: restarts at epochs 2 and 8
    assert positions == [(0, 0, 2), (1, 1, 2), (2, 0, 6), (3, 1, 6), (4, 2, 6), (5, 3, 6),
                         (6, 4, 6), (7, 5, 6), (8, 0, 18)]
    sd = s.state_dict()
    assert (sd["T_cur"], sd["T_i"], sd["_step_count"], sd["last_epoch"]) == (1, 18, 0, 9)
    assert sd["base_lrs"] == [1.0] and sd["_last_lr"] == s.get_last_lr()
    fresh = sched.CosineAnnealingWarmRestarts(_sgd(), T_0=2, T_mult=3, eta_min=0.1)
    fresh.load_state_dict(sd)
    assert (fresh.T_cur, fresh.T_i, fresh._step_count) == (1, 18, 0)
    old = {k: v for k, v in sd.items() if k not in ("T_cur", "T_i", "_step_count")}
    fresh = sched.CosineAnnealingWarmRestarts(_sgd(), T_0=2, T_mult=3, eta_min=0.1)
    fresh.load_state_dict(old)
    assert (fresh.T_cur, fresh.T_i, fresh.last_epoch) == (1, 18, 9)
    fresh.optimizer.load_state_dict(s.optimizer.state_dict())
    fresh.step()
    s.step()
    assert fresh.optimizer.param_groups[0]["lr"] == s.optimizer.param_groups[0]["lr"] == \
        pytest.approx(0.1 + 0.9 * (1 + math.cos(2 * math.pi / 18)) / 2, rel=1e-15)
    opt = _sgd(momentum=0.9)
    for s in (sched.StepLR(_sgd(), 2), sched.CyclicLR(opt, 0.1, 1.0, step_size_up=2),
              sched.OneCycleLR(_sgd(momentum=0.9), 1.0, total_steps=5)):
        s.step()
        s.step()
        assert s._step_count == 3 and s.state_dict()["_step_count"] == 3, type(s).__name__


def test_a_rate_set_by_hand_and_a_group_added_later_decay_as_in_pytorch():
    """Schedulers scale each group's current rate (PyTorch's recursive get_lr): a rate
    set by hand between steps is decayed from there, and a group added after the
    scheduler is decayed too (the closed form from the base rates overwrote both)."""
    import nova as nv
    p, q = nv.zeros(1, requires_grad=True), nv.zeros(1, requires_grad=True)
    opt = nv.optim.SGD([p], lr=1.0)
    s = sched.StepLR(opt, 2, 0.5)
    rates = []
    for k in range(6):
        if k == 1:
            opt.param_groups[0]["lr"] = 0.2
        if k == 2:
            opt.add_param_group({"params": [q], "lr": 0.08})
        rates.append([g["lr"] for g in opt.param_groups])
        s.step()
    # torch 2.13: [1.0], [0.2], [0.1, 0.08], [0.1, 0.08], [0.05, 0.04], [0.05, 0.04]
    assert rates == [[1.0], [0.2], [0.1, 0.08], [0.1, 0.08], [0.05, 0.04], [0.05, 0.04]]
