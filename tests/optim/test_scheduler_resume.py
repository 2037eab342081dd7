"""Resuming a scheduler with ``last_epoch=k`` (PyTorch's checkpoint idiom: load the
optimizer's state, build the scheduler with the epoch reached) and the epoch argument of
``step``: the constructor's step keeps the loaded rate of the schedules that scale the
current one (PyTorch's initial mode) instead of decaying it once more; ``step(epoch)``
is PyTorch's deprecated closed-form jump, with its warning, and
``CosineAnnealingWarmRestarts.step(epoch + i / iters)`` anneals within an epoch. The
rates are compared with torch's where torch is importable, else with the schedule's
formula; all of it is host arithmetic (no kernels)."""
import io
import math
import warnings

import numpy as np
import pytest

import nova as nv
from nova.capture import CaptureError
from nova.optim import lr_scheduler as sched

# (name, builder(module, optimizer, last_epoch), optimizer keyword arguments)
RESUMABLE = [
    ("LambdaLR", lambda M, o, le: M.LambdaLR(o, lambda e: 0.9 ** e, last_epoch=le), {}),
    ("MultiplicativeLR", lambda M, o, le: M.MultiplicativeLR(o, lambda e: 0.9,
                                                             last_epoch=le), {}),
    ("StepLR", lambda M, o, le: M.StepLR(o, 3, 0.5, last_epoch=le), {}),
    ("MultiStepLR", lambda M, o, le: M.MultiStepLR(o, [3, 6, 8], 0.5, last_epoch=le), {}),
    ("ConstantLR", lambda M, o, le: M.ConstantLR(o, 0.5, 8, last_epoch=le), {}),
    ("LinearLR", lambda M, o, le: M.LinearLR(o, 0.2, 1.0, 10, last_epoch=le), {}),
    ("ExponentialLR", lambda M, o, le: M.ExponentialLR(o, 0.9, last_epoch=le), {}),
    ("PolynomialLR", lambda M, o, le: M.PolynomialLR(o, 10, 2.0, last_epoch=le), {}),
    ("CosineAnnealingLR", lambda M, o, le: M.CosineAnnealingLR(o, 3, 0.01, last_epoch=le),
     {}),
    ("CosineAnnealingWarmRestarts", lambda M, o, le: M.CosineAnnealingWarmRestarts(
        o, 2, 2, 0.001, last_epoch=le), {}),
    ("OneCycleLR", lambda M, o, le: M.OneCycleLR(o, 1.0, total_steps=20, last_epoch=le),
     dict(momentum=0.9)),
    ("CyclicLR", lambda M, o, le: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, last_epoch=le),
     dict(momentum=0.9)),
]


def _resumed_rates(lib, make, kw, before=5, after=10):
    """Train ``before`` epochs, rebuild optimizer and scheduler from the optimizer's
    state with ``last_epoch=before``, and return the rates of the resumed run."""
    p = lib.nn.Parameter(lib.zeros(1))
    opt = lib.optim.SGD([p], lr=0.1, **kw)
    s = make(lib.optim.lr_scheduler, opt, -1)
    for _ in range(before):
        opt.step()
        s.step()
    state = opt.state_dict()
    opt2 = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=0.1, **kw)
    opt2.load_state_dict(state)
    s2 = make(lib.optim.lr_scheduler, opt2, before)
    rates = [opt2.param_groups[0]["lr"]]
    for _ in range(after):
        opt2.step()
        s2.step()
        rates.append(opt2.param_groups[0]["lr"])
    return rates


@pytest.mark.parametrize("name,make,kw", RESUMABLE, ids=[c[0] for c in RESUMABLE])
def test_resuming_with_last_epoch_matches_torch(name, make, kw):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # torch's "step before optimizer.step"
        want = _resumed_rates(torch, make, kw)
    with nv.engine("interp"):
        got = _resumed_rates(nv, make, kw)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_a_resumed_exponential_schedule_continues_where_it_stopped():
    """The uninterrupted schedule's rates, 0.1 * 0.9 ** epoch from the loaded epoch on
    (the constructor used to decay the loaded rate once more)."""
    with nv.engine("interp"):
        for make in (lambda M, o, le: M.ExponentialLR(o, 0.9, last_epoch=le),
                     lambda M, o, le: M.MultiplicativeLR(o, lambda e: 0.9, last_epoch=le)):
            got = _resumed_rates(nv, make, {}, before=5, after=3)
            assert got == pytest.approx([0.1 * 0.9 ** e for e in range(5, 9)], rel=1e-14)
    # the loaded cosine rate is kept, then decayed by PyTorch's ratio of cosines
    got = _resumed_rates(nv, lambda M, o, le: M.CosineAnnealingLR(o, 10, last_epoch=le),
                         {}, before=5, after=1)
    assert got[0] == pytest.approx(0.05, rel=1e-14)
    ratio = (1 + math.cos(math.pi * 7 / 10)) / (1 + math.cos(math.pi * 6 / 10))
    assert got[1] == pytest.approx(0.05 * ratio, rel=1e-14)


def test_resuming_needs_the_initial_rates_in_the_groups():
    opt = nv.optim.SGD([nv.nn.Parameter(nv.zeros(1))], lr=0.1)
    with pytest.raises(KeyError, match=r"ExponentialLR: param 'initial_lr' is not specified "
                                       r"in param_groups\[0\] when resuming.*last_epoch=3"):
        sched.ExponentialLR(opt, 0.9, last_epoch=3)


EPOCH_CASES = [
    ("LambdaLR", lambda M, o: M.LambdaLR(o, lambda e: 0.9 ** e)),
    ("MultiplicativeLR", lambda M, o: M.MultiplicativeLR(o, lambda e: 0.9)),
    ("StepLR", lambda M, o: M.StepLR(o, 2, 0.5)),
    ("MultiStepLR", lambda M, o: M.MultiStepLR(o, [3, 6, 6, 8], 0.5)),
    ("ConstantLR", lambda M, o: M.ConstantLR(o, 0.3, 6)),
    ("LinearLR", lambda M, o: M.LinearLR(o, 0.2, 0.9, 7)),
    ("ExponentialLR", lambda M, o: M.ExponentialLR(o, 0.9)),
    ("PolynomialLR", lambda M, o: M.PolynomialLR(o, 10, 2.0)),
    ("CosineAnnealingLR", lambda M, o: M.CosineAnnealingLR(o, 7, 0.01)),
    ("CosineAnnealingWarmRestarts", lambda M, o: M.CosineAnnealingWarmRestarts(o, 3, 1, 0.001)),
    ("CosineAnnealingWarmRestarts-mult", lambda M, o: M.CosineAnnealingWarmRestarts(
        o, 2, 2, 0.001)),
    ("OneCycleLR", lambda M, o: M.OneCycleLR(o, 1.0, total_steps=30)),
    ("CyclicLR", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3)),
]
# step() and step(epoch) interleaved, back and forth, fractional too
EPOCHS = [None, None, 5, None, 2, 2, None, 9, 3.5, None, 0, None, 12, None]


def _epoch_run(lib, make):
    """Rates, the final position, and how many epoch warnings the steps raised."""
    opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=0.1, momentum=0.9)
    s = make(lib.optim.lr_scheduler, opt)
    rates, warned = [opt.param_groups[0]["lr"]], 0
    for e in EPOCHS:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            opt.step()
            s.step() if e is None else s.step(e)
        warned += sum("epoch parameter in `scheduler.step()`" in str(w.message) for w in seen)
        rates.append(opt.param_groups[0]["lr"])
    return rates, (s.last_epoch, getattr(s, "T_cur", None), getattr(s, "T_i", None),
                   s._step_count, warned)


@pytest.mark.parametrize("name,make", EPOCH_CASES, ids=[c[0] for c in EPOCH_CASES])
def test_step_with_an_epoch_matches_torch(name, make):
    """PyTorch's deprecated ``step(epoch)``: the closed form where it has one (StepLR,
    MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR, CosineAnnealingLR),
    else its ``get_lr`` at that epoch (MultiplicativeLR scales the current rate), with
    its warning; CosineAnnealingWarmRestarts' own epoch rule, without one."""
    torch = pytest.importorskip("torch")
    want = _epoch_run(torch, make)
    with nv.engine("interp"):
        got = _epoch_run(nv, make)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=0)
    assert got[1] == want[1]


def test_warm_restarts_anneal_within_an_epoch():
    """``step(epoch + i / iters)`` (PyTorch's docs' idiom): T_cur is the fractional
    position in the period (periods 2, 4, 8 with T_mult=2), the rate its cosine."""
    opt = nv.optim.SGD([nv.nn.Parameter(nv.zeros(1))], lr=0.1)
    s = sched.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.001)
    got, want = [], []
    for epoch in range(4):
        for i in range(3):
            opt.step()
            s.step(epoch + i / 3)
            got.append(opt.param_groups[0]["lr"])
            t = epoch + i / 3
            t_cur, t_i = (t, 2) if t < 2 else (t - 2, 4) if t < 6 else (t - 6, 8)
            want.append(0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * t_cur / t_i)) / 2)
    assert got == pytest.approx(want, rel=1e-13)
    assert s.last_epoch == 3 and s.T_i == 4
    s.step()            # one epoch on from floor(epoch) = 3, and from T_cur = 1 + 2/3
    assert (s.last_epoch, s.T_cur, s.T_i) == (4, pytest.approx(2 + 2 / 3), 4)
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        s.step(-1)
    saved = s.state_dict()
    fresh = sched.CosineAnnealingWarmRestarts(
        nv.optim.SGD([nv.nn.Parameter(nv.zeros(1))], lr=0.1), T_0=2, T_mult=2, eta_min=0.001)
    fresh.load_state_dict(saved)            # the fractional position comes back
    assert fresh.get_last_lr() == s.get_last_lr()


def test_step_with_an_epoch_warns_and_sequential_takes_none():
    opt = nv.optim.SGD([nv.nn.Parameter(nv.zeros(1))], lr=1.0)
    s = sched.StepLR(opt, 2, 0.5)
    with pytest.warns(UserWarning, match=r"The epoch parameter in `scheduler.step\(\)` was "
                                         r"not necessary and is being deprecated"):
        s.step(5)
    assert opt.param_groups[0]["lr"] == 0.25 and s.last_epoch == 5
    s.step()                                # from epoch 5, by the recursive rule
    assert opt.param_groups[0]["lr"] == 0.125
    seq = sched.SequentialLR(opt, [sched.ConstantLR(opt, 0.5, 2), sched.StepLR(opt, 2)], [2])
    with pytest.raises(TypeError):
        seq.step(3)                         # as torch's SequentialLR.step()


def test_a_compiled_step_with_an_epoch_runs_recorded():
    """An ``nv.compile`` replay re-runs ``step()`` without arguments, so a function
    passing an epoch cannot be replayed: fullgraph names the call."""
    opt = nv.optim.SGD([nv.nn.Parameter(nv.zeros(1))], lr=1.0)
    s = sched.CosineAnnealingWarmRestarts(opt, T_0=4)

    def fn(x, t):
        s.step(t)
        return x + 1
    with nv.engine("interp"):
        strict = nv.compile(fn, fullgraph=True)
        with pytest.raises(CaptureError, match=r"CosineAnnealingWarmRestarts.step\(epoch\)"):
            strict(nv.ones(2), 0.5)



@pytest.mark.parametrize("make", [
    lambda o: sched.ExponentialLR(o, 0.9),
    lambda o: sched.StepLR(o, 2, 0.7),
    lambda o: sched.PolynomialLR(o, 10, 1.5),
    lambda o: sched.CosineAnnealingLR(o, 7, 0.001),
    lambda o: sched.CyclicLR(o, 0.01, 0.1, step_size_up=3),
    lambda o: sched.ChainedScheduler([sched.LinearLR(o, 0.5, 1.0, 4), sched.ExponentialLR(o, 0.95)]),
], ids=["exponential", "step", "polynomial", "cosine", "cyclic", "chained"])
def test_a_resumed_run_continues_bit_for_bit_and_keeps_a_rate_set_by_hand(make):
    """Loading a scheduler's state restores its attributes only (PyTorch's): the rates
    come with the optimizer's state dict. Nova wrote the closed form's rate into the
    groups -- an ulp from the recursive rule's (0.1 * 0.9^3 against 0.1 * 0.9 * 0.9 *
    0.9), so float64 parameters left the uninterrupted run's, and a rate set by hand
    before the save was lost (fuzz_serial)."""
    def build():
        p = nv.nn.Parameter(nv.tensor(np.linspace(-1, 1, 5), dtype=nv.float64))
        opt = nv.optim.SGD([p], lr=0.1, momentum=0.9)
        return p, opt, make(opt)

    def train(p, opt, s, steps):
        for _ in range(steps):
            opt.zero_grad()
            (p ** 2).sum().backward()
            opt.step()
            s.step()
    p, opt, s = build()
    train(p, opt, s, 3)
    opt.param_groups[0]["lr"] *= 0.5                     # set by hand before the save
    buffer = io.BytesIO()
    nv.save({"opt": opt.state_dict(), "sched": s.state_dict()}, buffer)
    buffer.seek(0)
    saved = nv.load(buffer)
    p2, opt2, s2 = build()
    with nv.no_grad():
        p2.copy_(p)
    opt2.load_state_dict(saved["opt"])
    s2.load_state_dict(saved["sched"])
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for _ in range(4):
        train(p, opt, s, 1)
        train(p2, opt2, s2, 1)
        assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
        np.testing.assert_array_equal(p2.detach().numpy(), p.detach().numpy())


def test_multistep_loads_pytorchs_counter_of_milestones():
    """PyTorch's ``MultiStepLR.state_dict()`` holds the milestones as a ``Counter``; Nova
    keeps the sorted list with repeats (a milestone listed twice decays twice)."""
    import collections
    opt = nv.optim.SGD([nv.nn.Parameter(nv.ones(1))], lr=1.0)
    s = sched.MultiStepLR(opt, [1], gamma=0.5)
    state = {**s.state_dict(), "milestones": collections.Counter({3: 2, 2: 1}),
             "last_epoch": 1}
    s.load_state_dict(state)
    assert s.milestones == [2, 3, 3]
    rates = []
    for _ in range(3):
        s.step()
        rates.append(opt.param_groups[0]["lr"])
    assert rates == [0.5, 0.125, 0.125]
