"""Parity 11 of ``nv.optim`` with ``torch.optim``: the half-precision updates of Adamax,
Adadelta, ASGD, Rprop, SparseAdam and RAdam (PyTorch's kernels' rounding), the 0-d
float32 state PyTorch keeps for NAdam's ``mu_product`` and ASGD's ``eta``/``mu``, the
"``lr_scheduler.step()`` before ``optimizer.step()``" warning, ``get_lr()``'s
momentum side effect in ``OneCycleLR``/``CyclicLR``, named parameters
(``model.named_parameters()``), and the constructors' defaults, argument checks and
``param_groups`` layout.

References are numpy re-implementations of PyTorch's op order (``ml_dtypes`` for the
half types' rounding, ``_Torch`` from ``test_port_probe10``), so everything runs without
torch; where torch is installed the same trajectories are also compared with it. The
interpreter runs these tiny steps."""
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.optim import lr_scheduler as sched
from tests.optim.test_port_probe10 import _param, _Torch

HALF = {"bfloat16": (nv.bfloat16, ml_dtypes.bfloat16), "float16": (nv.float16, np.float16)}
F32 = np.float32


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


# ------------------------------------------------------------------ 1: half precision
# Each reference follows PyTorch's single-tensor CPU path (``torch/optim/<name>.py``,
# ``_single_tensor_<name>``) kernel by kernel: ``k.r`` rounds a float32 result to the
# half type, ``k.s`` is a Scalar converted to the half type (``add``'s alpha, ``add_``'s
# scalar, a value written into a half tensor), other Scalars are float32.

def _decay(k, w, g, wd, decoupled, lr):
    """``param.mul_(1 - lr wd)`` or ``grad.add(param, alpha=wd)``."""
    if wd and decoupled:
        return k.r(w * F32(1 - lr * wd)), g
    if wd:
        return w, k.r(g + k.s(wd) * w)
    return w, g


def _adamax_ref(k, w, grads, lr=2e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, maximize=False):
    m, u = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = k.r(-g if maximize else g)
        w, g = _decay(k, w, g, wd, False, lr)
        m = k.lerp(m, g, 1 - b1)
        u = np.maximum(k.r(u * F32(b2)), k.r(np.abs(g) + k.s(eps)))
        w = k.r(w + (F32(-lr / (1 - b1 ** t)) * m) / u)
    return w


def _adadelta_ref(k, w, grads, lr=1.0, rho=0.9, eps=1e-6, wd=0.0, maximize=False):
    v, acc = np.zeros_like(w), np.zeros_like(w)
    for g in grads:
        g = k.r(-g if maximize else g)
        w, g = _decay(k, w, g, wd, False, lr)
        v = k.addcmul(k.r(v * F32(rho)), g, g, 1 - rho)
        std = k.r(np.sqrt(k.r(v + k.s(eps))))
        delta = k.r(np.sqrt(k.r(acc + k.s(eps))))
        delta = k.r(k.r(delta / std) * g)
        acc = k.addcmul(k.r(acc * F32(rho)), delta, delta, 1 - rho)
        w = k.r(w + k.s(-lr) * delta)
    return w


def _asgd_ref(k, w, grads, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, wd=0.0,
              maximize=False):
    """Also returns the average ``ax``. ``eta`` and ``mu`` are PyTorch's 0-d float32
    tensors: their values are float32 (``.item()`` of them)."""
    eta, mu, ax = float(F32(lr)), 1.0, np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = k.r(-g if maximize else g)
        w, g = _decay(k, w, g, wd, False, lr)
        w = k.r(w * F32(1 - lambd * eta))
        w = k.r(w + k.s(-eta) * g)
        ax = k.r(ax + k.r(k.r(w - ax) * F32(mu))) if mu != 1 else w.copy()
        eta = float(F32(lr / (1 + lambd * lr * t) ** alpha))
        mu = float(F32(1 / max(1, t - t0)))
    return w, ax


def _rprop_ref(k, w, grads, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50),
               maximize=False):
    prev, size = np.zeros_like(w), np.full_like(w, k.s(lr))
    etaminus, etaplus = k.s(etas[0]), k.s(etas[1])
    for g in grads:
        g = k.r(-g if maximize else g)
        s = np.sign(k.r(g * prev))
        factor = np.where(s > 0, etaplus, np.where(s < 0, etaminus, F32(1)))
        size = k.r(np.clip(k.r(size * factor), F32(step_sizes[0]), F32(step_sizes[1])))
        g = np.where(s < 0, F32(0), g)
        w = k.r(w - np.sign(g) * size)
        prev = g
    return w


def _sparse_adam_ref(k, w, grads, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, maximize=False):
    """``w`` 2-D; a row of a gradient that is all zero is not in the sparse gradient."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = k.r(-g if maximize else g)
        rows = (g != 0).any(axis=1, keepdims=True)
        m_upd = k.r(k.r(g - m) * F32(1 - b1))
        v_upd = k.r(k.r(k.r(g * g) - v) * F32(1 - b2))
        numer = k.r(m_upd + m)
        denom = k.r(k.r(np.sqrt(k.r(v_upd + v))) + k.s(eps))
        step_size = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        update = k.r(F32(-step_size) * k.r(numer / denom))
        w = np.where(rows, k.r(w + update), w)
        m = np.where(rows, k.r(m + m_upd), m)
        v = np.where(rows, k.r(v + v_upd), v)
    return w


def _radam_ref(k, w, grads, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.0,
               decoupled=False, maximize=False):
    m, v = np.zeros_like(w), np.zeros_like(w)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, 1):
        g = k.r(-g if maximize else g)
        w, g = _decay(k, w, g, wd, decoupled, lr)
        m = k.lerp(m, g, 1 - b1)
        v = k.addcmul(k.r(v * F32(b2)), g, g, 1 - b2)
        bc2 = 1 - b2 ** t
        update = k.r(k.r(m / F32(1 - b1 ** t)) * F32(lr))
        rho_t = rho_inf - 2 * t * b2 ** t / bc2
        if rho_t > 5:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf /
                    ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            d = k.r(k.r(np.sqrt(v)) + k.s(eps))
            adaptive = k.r(k.r(F32(1) / d) * F32(bc2 ** 0.5))
            update = k.r(k.r(update * adaptive) * F32(rect))
        w = k.r(w - update)
    return w


HALF_CASES = [
    ("Adamax", dict(lr=0.05), _adamax_ref, dict(lr=0.05)),
    ("Adamax", dict(lr=0.01, betas=(0.6, 0.9), weight_decay=0.1, eps=1e-3, maximize=True),
     _adamax_ref, dict(lr=0.01, b1=0.6, b2=0.9, wd=0.1, eps=1e-3, maximize=True)),
    ("Adadelta", dict(), _adadelta_ref, dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, eps=1e-3, maximize=True),
     _adadelta_ref, dict(lr=0.5, rho=0.8, wd=0.1, eps=1e-3, maximize=True)),
    ("ASGD", dict(lr=0.05, lambd=1e-2, t0=3, weight_decay=0.1), _asgd_ref,
     dict(lr=0.05, lambd=1e-2, t0=3, wd=0.1)),
    ("ASGD", dict(lr=0.3, alpha=0.5, t0=1, maximize=True), _asgd_ref,
     dict(lr=0.3, alpha=0.5, t0=1, maximize=True)),
    ("Rprop", dict(lr=0.05), _rprop_ref, dict(lr=0.05)),
    ("Rprop", dict(lr=0.03, etas=(0.3, 1.7), step_sizes=(1e-2, 0.07), maximize=True),
     _rprop_ref, dict(lr=0.03, etas=(0.3, 1.7), step_sizes=(1e-2, 0.07), maximize=True)),
    ("RAdam", dict(lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1, maximize=True),
     _radam_ref, dict(lr=1e-2, b2=0.99, wd=0.1, maximize=True)),
    ("RAdam", dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1,
                   decoupled_weight_decay=True), _radam_ref,
     dict(lr=1e-2, b1=0.8, b2=0.99, wd=0.1, decoupled=True)),
]


def _half_run(name, kwargs, dtype, w0, grads):
    p = _param(w0, dtype)
    opt = getattr(nv.optim, name)([p], **kwargs)
    for g in grads:
        p.grad = nv.tensor(g).to(dtype)
        opt.step()
        opt.zero_grad()
    return p, opt


def _data(seed=7, shape=(64,), steps=8, zero_rows=()):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(shape).astype(F32)
    grads = []
    for i in range(steps):
        g = (rng.standard_normal(shape) * 0.5).astype(F32)
        if len(shape) == 2:
            g[[r for r in zero_rows if (r + i) % 2 == 0]] = 0      # rows absent some steps
        grads.append(g)
    return w0, grads


@pytest.mark.parametrize("half", sorted(HALF))
@pytest.mark.parametrize("name,kwargs,ref,ref_kwargs", HALF_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(HALF_CASES)])
def test_half_parameters_round_as_pytorchs_kernels(half, name, kwargs, ref, ref_kwargs):
    """Bit for bit over 8 steps (64 elements: PyTorch's vectorized loops cover all)."""
    dtype, np_half = HALF[half]
    w0, grads = _data()
    p, opt = _half_run(name, kwargs, dtype, w0, grads)
    k = _Torch(np_half)
    want = ref(k, k.r(w0), grads, **ref_kwargs)
    if name == "ASGD":
        want, ax = want
        np.testing.assert_array_equal(opt.state[p]["ax"].float().numpy(), ax)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(p.float().numpy(), want)


@pytest.mark.parametrize("half", sorted(HALF))
@pytest.mark.parametrize("kwargs", [dict(lr=0.05, eps=1e-4),
                                    dict(lr=0.01, betas=(0.5, 0.9), eps=1e-3, maximize=True)])
def test_sparse_adam_half_rows_round_as_pytorchs_kernels(half, kwargs):
    dtype, np_half = HALF[half]
    w0, grads = _data(shape=(8, 8), zero_rows=(1, 4, 5))
    p, _ = _half_run("SparseAdam", kwargs, dtype, w0, grads)
    k = _Torch(np_half)
    ref_kwargs = {"b1" if key == "betas" else key: v for key, v in kwargs.items()}
    if "b1" in ref_kwargs:
        ref_kwargs["b1"], ref_kwargs["b2"] = ref_kwargs["b1"]
    with np.errstate(divide="ignore", invalid="ignore"):    # (rows left as they are)
        want = _sparse_adam_ref(k, k.r(w0), grads, **ref_kwargs)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(p.float().numpy(), want)


def test_the_old_per_op_updates_differ_from_the_references():
    """Rounding every op of the float32 formulas (the updates before) leaves these
    trajectories, so the tests above tell the two apart: Rprop's etas and Adadelta's
    learning rate are half values in PyTorch's kernels."""
    k = _Torch(ml_dtypes.bfloat16)
    size = k.r(np.linspace(0.01, 0.05, 64))
    assert (k.r(size * F32(1.2)) != k.r(size * k.s(1.2))).any()
    w, d = k.r(np.linspace(-1, 1, 64)), k.r(np.linspace(-0.3, 0.2, 64))
    assert (k.r(w - k.r(F32(0.3) * d)) != k.r(w + k.s(-0.3) * d)).any()


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,kwargs", [(c[0], c[1]) for c in HALF_CASES] +
                         [("SparseAdam", dict(lr=0.05))])
def test_half_parameters_match_torch(half, name, kwargs):
    """Extra, where torch is installed: the same trajectories as torch.optim's (and the
    references above are PyTorch's: the same trajectories once more)."""
    torch = pytest.importorskip("torch")
    tdtype = getattr(torch, half)
    shape = (8, 8) if name == "SparseAdam" else (64,)
    w0, grads = _data(seed=3, shape=shape, zero_rows=(2, 3))
    tp = torch.nn.Parameter(torch.tensor(w0).to(tdtype))
    topt = getattr(torch.optim, name)([tp], **kwargs)
    for g in grads:
        tg = torch.tensor(g).to(tdtype)
        tp.grad = tg.to_sparse(1) if name == "SparseAdam" else tg
        topt.step()
    p, _ = _half_run(name, kwargs, HALF[half][0], w0, grads)
    np.testing.assert_array_equal(p.float().numpy(), tp.detach().float().numpy())


# ------------------------------------------------------------------ 2: 0-d float32 state

W64 = np.array([1.0, -2.0, 3.0, 0.25])
G64 = np.array([0.5, 1.0, -1.5, 2.0])


def _train64(opt_factory, steps=6):
    p = nn.Parameter(nv.tensor(W64.copy()))
    opt = opt_factory(p)
    for t in range(1, steps + 1):
        p.grad = nv.tensor(G64 * t)
        opt.step()
        opt.zero_grad()
    return p, opt


def _nadam64_ref(steps, lr, b1=0.9, b2=0.999, eps=1e-8, psi=4e-3, f=np.float32):
    """PyTorch's NAdam in float64 with ``mu_product`` a 0-d tensor of type ``f``
    (``mu_product *= mu`` multiplies in ``f``)."""
    w, m, v, mp = W64.copy(), np.zeros(4), np.zeros(4), f(1.0)
    for t in range(1, steps + 1):
        g = G64 * t
        mu = b1 * (1 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        mp = f(mp * f(mu))
        m = m + (g - m) * (1 - b1)
        v = v * b2 + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2 ** t)) + eps
        w = w + (-lr * (1 - mu) / (1 - float(mp))) * g / denom
        w = w + (-lr * mu_next / (1 - float(mp) * mu_next)) * m / denom
    return w, float(mp)


def test_nadam_mu_product_is_pytorchs_float32_tensor_value():
    """PyTorch keeps ``mu_product`` as a 0-d float32 tensor, so a float64 parameter's
    update reads its float32 value (the product in double was ~1e-8 off)."""
    p, opt = _train64(lambda p: nv.optim.NAdam([p], lr=0.1))
    want, mp = _nadam64_ref(6, 0.1)
    assert opt.state[p]["mu_product"] == mp
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-14, atol=1e-15)
    double, _ = _nadam64_ref(6, 0.1, f=np.float64)
    assert np.abs(want - double).max() > 1e-9      # (the test tells the two apart)


def test_nadam_mu_product_is_double_under_a_float64_default_dtype():
    """``_get_scalar_dtype()`` is float64 when the default dtype is: so is the state."""
    nv.set_default_dtype(nv.float64)
    try:
        p, opt = _train64(lambda p: nv.optim.NAdam([p], lr=0.1))
    finally:
        nv.set_default_dtype(nv.float32)
    want, mp = _nadam64_ref(6, 0.1, f=np.float64)
    assert opt.state[p]["mu_product"] == mp
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-14, atol=1e-15)


def test_asgd_eta_and_mu_are_pytorchs_float32_tensor_values():
    lr, lambd, alpha, t0 = 0.05, 1e-2, 0.75, 2
    p, opt = _train64(lambda p: nv.optim.ASGD([p], lr=lr, lambd=lambd, alpha=alpha, t0=t0))
    w, ax, eta, mu = W64.copy(), np.zeros(4), float(F32(lr)), 1.0
    for t in range(1, 7):
        g = G64 * t
        w = w * (1 - lambd * eta) + (-eta) * g
        ax = ax + (w - ax) * mu if mu != 1 else w.copy()
        eta = float(F32(lr / (1 + lambd * lr * t) ** alpha))
        mu = float(F32(1 / max(1, t - t0)))
    state = opt.state[p]
    assert (state["eta"], state["mu"]) == (eta, mu)
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(state["ax"].numpy(), ax, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", ["NAdam", "ASGD"])
def test_float64_trajectories_and_state_match_torch(name):
    """Extra, where torch is installed: a float64 run, then PyTorch's state dict loaded
    into each side's fresh optimizer continues alike."""
    torch = pytest.importorskip("torch")
    kw = dict(lr=0.1) if name == "NAdam" else dict(lr=0.05, lambd=1e-2, t0=2)
    tp = torch.nn.Parameter(torch.tensor(W64.copy()))
    to = getattr(torch.optim, name)([tp], **kw)
    for t in range(1, 7):
        tp.grad = torch.tensor(G64 * t)
        to.step()
    p, opt = _train64(lambda p: getattr(nv.optim, name)([p], **kw))
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-14, atol=1e-15)
    for k, v in to.state_dict()["state"][0].items():
        if v.dim() == 0:
            assert opt.state[p][k] == v.item(), k


# ------------------------------------------------------------------ 3: scheduler order

BEFORE = ("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch "
          "1.1.0 and later, you should call them in the opposite order: `optimizer.step()` "
          "before `lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping "
          "the first value of the learning rate schedule. See more details at "
          "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")
OVERRIDDEN = ("Seems like `optimizer.step()` has been overridden after learning rate "
              "scheduler initialization. Please, make sure to call `optimizer.step()` before "
              "`lr_scheduler.step()`. See more details at "
              "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")


def _order_warnings(calls):
    """The scheduler-order warnings of running ``calls`` (functions, in turn)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in calls:
            call()
    return [str(w.message) for w in caught
            if w.category is UserWarning and ("lr_scheduler" in str(w.message))]


def _sgd():
    p = _param([1.0, 2.0])
    p.grad = nv.ones(2)
    return nv.optim.SGD([p], lr=0.1, momentum=0.9)


def test_a_scheduler_stepped_before_its_optimizer_warns_pytorchs_words_once():
    opt = _sgd()
    s = sched.StepLR(opt, step_size=1, gamma=0.5)
    assert _order_warnings([s.step]) == [BEFORE]
    assert _order_warnings([s.step, opt.step, s.step]) == []     # only the first step
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 3)


def test_no_warning_in_the_right_order_and_the_flag_is_set_by_every_step():
    opt = _sgd()
    s = sched.ExponentialLR(opt, gamma=0.9)
    assert not getattr(opt, "_opt_called", False)
    assert _order_warnings([opt.step, s.step, opt.step, s.step]) == []
    assert opt._opt_called and opt.step._wrapped_by_lr_sched


def test_an_optimizer_step_before_the_scheduler_existed_does_not_count():
    """PyTorch marks only the calls its wrapper sees (installed by the scheduler)."""
    opt = _sgd()
    opt.step()
    s = sched.LinearLR(opt, start_factor=0.5, total_iters=2)
    assert _order_warnings([s.step]) == [BEFORE]


def test_one_wrapper_per_optimizer_and_every_scheduler_checks():
    opt = _sgd()
    a = sched.StepLR(opt, step_size=2)
    wrapped = opt.step
    b = sched.LambdaLR(opt, lambda e: 1.0)
    assert opt.step is wrapped
    assert _order_warnings([a.step, b.step]) == [BEFORE, BEFORE]


def test_a_step_replaced_after_the_scheduler_warns_it_was_overridden():
    opt = _sgd()
    s = sched.StepLR(opt, step_size=1)
    opt.step = lambda *a, **k: None
    assert _order_warnings([s.step]) == [OVERRIDDEN]


@pytest.mark.parametrize("make,step", [
    (lambda o: sched.OneCycleLR(o, max_lr=1.0, total_steps=5), lambda s: s.step()),
    (lambda o: sched.CyclicLR(o, base_lr=0.1, max_lr=1.0, step_size_up=2), lambda s: s.step()),
    (lambda o: sched.ChainedScheduler([sched.StepLR(o, 1), sched.ExponentialLR(o, 0.9)]),
     lambda s: s.step()),
    (lambda o: sched.SequentialLR(o, [sched.StepLR(o, 1), sched.ExponentialLR(o, 0.9)],
                                  milestones=[2]), lambda s: s.step()),
])
def test_the_other_schedulers_warn_as_pytorchs(make, step):
    """OneCycleLR, CyclicLR, the chain (each of its schedulers) and SequentialLR warn."""
    opt = _sgd()
    s = make(opt)
    got = _order_warnings([lambda: step(s)])
    assert got and set(got) == {BEFORE}


@pytest.mark.parametrize("make,step", [
    (lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=3), lambda s: s.step()),
    (lambda o: sched.ReduceLROnPlateau(o), lambda s: s.step(1.0)),
])
def test_schedulers_with_their_own_step_do_not_warn(make, step):
    """PyTorch's CosineAnnealingWarmRestarts and ReduceLROnPlateau define their own
    ``step()``, without the check."""
    opt = _sgd()
    s = make(opt)
    assert _order_warnings([lambda: step(s)]) == []


def test_the_wrapped_step_still_runs_the_update_and_hooks():
    p = _param([1.0, 2.0])
    opt = nv.optim.SGD([p], lr=0.5)
    sched.StepLR(opt, step_size=1)
    seen = []
    opt.register_step_post_hook(lambda o, a, k: seen.append(1))
    p.grad = nv.tensor(np.array([2.0, -2.0], np.float32))
    opt.step()
    opt.zero_grad()
    np.testing.assert_array_equal(p.numpy(), [0.0, 3.0])
    assert seen == [1]


def test_scheduler_order_warnings_match_torch():
    """Extra, where torch is installed: the same warnings for the same call orders."""
    torch = pytest.importorskip("torch")

    def run(lib, order):
        p = (torch.nn.Parameter(torch.ones(2)) if lib is torch else _param([1.0, 1.0]))
        p.grad = torch.ones(2) if lib is torch else nv.ones(2)
        opt = lib.optim.SGD([p], lr=0.1)
        s = lib.optim.lr_scheduler.StepLR(opt, step_size=1)
        calls = {"o": lambda: opt.step(), "s": lambda: s.step()}
        if order.startswith("x"):
            opt.step = lambda *a, **k: None
            order = order[1:]
        return _order_warnings([calls[c] for c in order])
    for order in ["s", "os", "ss", "sos", "xs"]:
        assert run(nv, order) == run(torch, order), order


# ------------------------------------------------------------------ 4: get_lr's momentum

def _one_cycle_at(n, total=10, max_lr=1.0, pct=0.3, base_m=0.85, max_m=0.95):
    """(lr, momentum) of PyTorch's 1cycle (cosine, two phases) at step ``n``."""
    init, end1 = max_lr / 25.0, pct * total - 1
    cos = lambda a, b, x: b + (a - b) / 2 * (math.cos(math.pi * x) + 1)  # noqa: E731
    if n <= end1:
        return cos(init, max_lr, n / end1), cos(max_m, base_m, n / end1)
    x = (n - end1) / (total - 1 - end1)
    return cos(max_lr, init / 1e4, x), cos(base_m, max_m, x)


def _cyclic_at(n, base=0.1, top=1.0, up=3, base_m=0.8, max_m=0.9):
    """(lr, momentum) of the triangular cycle at step ``n``."""
    cycle = math.floor(1 + n / (2 * up))
    x = 1 + n / (2 * up) - cycle
    pos = x / 0.5 if x <= 0.5 else (x - 1) / (0.5 - 1)
    return base + (top - base) * pos, max_m - (max_m - base_m) * pos


def _momentum(opt):
    g = opt.param_groups[0]
    return g["betas"][0] if "betas" in g else g["momentum"]


def _set_momentum(opt, v):
    g = opt.param_groups[0]
    if "betas" in g:
        g["betas"] = (v, g["betas"][1])
    else:
        g["momentum"] = v


SCHEDULES = [
    (lambda o: sched.OneCycleLR(o, max_lr=1.0, total_steps=10), _one_cycle_at),
    (lambda o: sched.CyclicLR(o, base_lr=0.1, max_lr=1.0, step_size_up=3), _cyclic_at),
]


@pytest.mark.parametrize("make,at", SCHEDULES, ids=["OneCycleLR", "CyclicLR"])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_get_lr_writes_the_scheduled_momentum_as_pytorchs(make, at, opt_name):
    """PyTorch's ``get_lr()`` sets the momentum (SGD) or ``betas[0]`` (Adam) of the
    current step: called by hand (it warns), it puts the scheduled value back over
    one set since; ``step()`` writes the next one."""
    p = _param([1.0])
    opt = (nv.optim.SGD([p], lr=0.1, momentum=0.5) if opt_name == "SGD" else
           nv.optim.Adam([p], lr=0.1))
    s = make(opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.step()
        s.step()
    _set_momentum(opt, 0.123)
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        lrs = s.get_lr()
    lr, m = at(2)
    assert lrs == [pytest.approx(lr, rel=1e-12)]
    assert _momentum(opt) == pytest.approx(m, rel=1e-12)
    assert opt.param_groups[0]["lr"] == pytest.approx(lr, rel=1e-12)
    _set_momentum(opt, 0.123)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.step()
    assert _momentum(opt) == pytest.approx(at(3)[1], rel=1e-12)


def test_get_lr_without_cycle_momentum_leaves_the_momentum():
    opt = nv.optim.SGD([_param([1.0])], lr=0.1, momentum=0.5)
    s = sched.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=False)
    _set_momentum(opt, 0.123)
    with pytest.warns(UserWarning):
        s.get_lr()
    assert _momentum(opt) == 0.123


def test_sequential_lr_cycles_the_momentum_of_its_one_cycle():
    """PyTorch's SequentialLR steps its OneCycleLR, whose get_lr() writes the momentum;
    Nova's composed the rate alone and left the momentum where it was."""
    opt = nv.optim.SGD([_param([1.0])], lr=0.1, momentum=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = sched.SequentialLR(opt, [sched.LinearLR(opt, start_factor=0.5, total_iters=2),
                                     sched.OneCycleLR(opt, max_lr=1.0, total_steps=10)],
                               milestones=[2])
        moms = []
        for _ in range(5):
            s.step()
            moms.append(_momentum(opt))
            _set_momentum(opt, 0.123)          # the schedule writes it again each step
    assert moms[0] == pytest.approx(0.95)      # epoch 1: LinearLR, the 1cycle's start
    # epochs 2..5 are the 1cycle's steps 0..3
    assert moms[1:] == [pytest.approx(_one_cycle_at(n)[1], rel=1e-12) for n in range(4)]


class HalfCycle(sched.OneCycleLR):
    """A OneCycleLR subclass overriding get_lr (PyTorch's way), calling the base's."""

    def get_lr(self):
        return [lr / 2 for lr in super().get_lr()]


def test_a_one_cycle_subclass_overriding_get_lr_steps_by_it():
    opt = nv.optim.SGD([_param([1.0])], lr=0.1, momentum=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no get_lr warning inside step()
        s = HalfCycle(opt, max_lr=1.0, total_steps=10)
        assert opt.param_groups[0]["lr"] == pytest.approx(_one_cycle_at(0)[0] / 2)
        opt.step()
        s.step()
    lr, m = _one_cycle_at(1)
    assert opt.param_groups[0]["lr"] == pytest.approx(lr / 2, rel=1e-12)
    assert s.get_last_lr() == [pytest.approx(lr / 2, rel=1e-12)]
    assert _momentum(opt) == pytest.approx(m, rel=1e-12)


def test_get_lr_and_momentum_match_torch():
    """Extra, where torch is installed: rate and momentum after every call."""
    torch = pytest.importorskip("torch")

    def run(lib, opt_name, which):
        p = torch.nn.Parameter(torch.ones(2)) if lib is torch else _param([1.0, 1.0])
        kw = dict(lr=0.1, momentum=0.5) if opt_name == "SGD" else dict(lr=0.1)
        opt = getattr(lib.optim, opt_name)([p], **kw)
        L = lib.optim.lr_scheduler
        s = {"one": lambda: L.OneCycleLR(opt, max_lr=1.0, total_steps=10),
             "cyc": lambda: L.CyclicLR(opt, base_lr=0.1, max_lr=1.0, step_size_up=3),
             "seq": lambda: L.SequentialLR(opt, [L.OneCycleLR(opt, max_lr=1.0,
                                                              total_steps=10),
                                                 L.ExponentialLR(opt, 0.9)], [4])}[which]()
        out = []
        for op in ["s", "s", "m", "g", "s", "m", "s", "g", "s"]:
            if op == "s":
                s.step()
            elif op == "m":
                _set_momentum(opt, 0.123)
            elif which != "seq":
                out.append(list(s.get_lr()))
            out.append((opt.param_groups[0]["lr"], _momentum(opt)))
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for which in ["one", "cyc", "seq"]:
            for opt_name in ["SGD", "Adam"]:
                got, want = run(nv, opt_name, which), run(torch, opt_name, which)
                np.testing.assert_allclose(np.concatenate([np.ravel(x) for x in got]),
                                           np.concatenate([np.ravel(x) for x in want]),
                                           rtol=1e-12, err_msg=f"{which} {opt_name}")


# ------------------------------------------------------------------ 5: named parameters

def _model():
    nv.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))


def _train_model(model, opt, steps=3):
    x = nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 6)
    for _ in range(steps):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    opt.zero_grad()
    return [p.numpy().copy() for p in model.parameters()]


def test_an_optimizer_over_named_parameters_keeps_the_names():
    """``Adam(model.named_parameters())``: PyTorch 2.x takes the (name, tensor) pairs,
    optimizes the tensors and keeps the names as the group's ``param_names``."""
    named, plain = _model(), _model()
    opt = nv.optim.Adam(named.named_parameters(), lr=0.1)
    group = opt.param_groups[0]
    assert group["param_names"] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert all(a is b for a, b in zip(group["params"], named.parameters()))
    got = _train_model(named, opt)
    want = _train_model(plain, nv.optim.Adam(plain.parameters(), lr=0.1))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    saved = opt.state_dict()
    assert saved["param_groups"][0]["param_names"] == group["param_names"]
    assert saved["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert sorted(saved["state"]) == [0, 1, 2, 3]


def test_named_param_groups_and_their_state_dict_round_trip():
    model = _model()
    first, second = model[0], model[1]
    opt = nv.optim.SGD([{"params": first.named_parameters()},
                        {"params": second.named_parameters(prefix="1"), "lr": 0.5}],
                       lr=0.1, momentum=0.9)
    assert [g["param_names"] for g in opt.param_groups] == [["weight", "bias"],
                                                            ["1.weight", "1.bias"]]
    _train_model(model, opt, steps=2)
    saved = opt.state_dict()
    again = _model()
    resumed = nv.optim.SGD([{"params": again[0].named_parameters()},
                            {"params": again[1].named_parameters(prefix="1"), "lr": 0.5}],
                           lr=0.1, momentum=0.9)
    resumed.load_state_dict(saved)
    assert [g["param_names"] for g in resumed.param_groups] == \
        [g["param_names"] for g in opt.param_groups]
    plain = nv.optim.SGD(_model().parameters(), lr=0.1)       # names come with the state
    plain.load_state_dict(nv.optim.SGD(model.named_parameters(), lr=0.1).state_dict())
    assert plain.param_groups[0]["param_names"][0] == "0.weight"


def test_names_must_be_all_or_none():
    model = _model()
    w, b = model[0].weight, model[0].bias
    with pytest.raises(ValueError, match="Some param names are missing"):
        nv.optim.SGD([("w", w), b], lr=0.1)
    opt = nv.optim.SGD([("w", w)], lr=0.1)
    with pytest.raises(ValueError, match="cannot add param group without names"):
        opt.add_param_group({"params": [b]})
    opt = nv.optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="cannot add param group with names"):
        opt.add_param_group({"params": [("b", b)]})


def test_add_param_group_fills_the_given_dict_in_pytorchs_order():
    """PyTorch appends the dict it is given, its own keys first, then the defaults it
    leaves out (in the defaults' order)."""
    w, b = _param([1.0]), _param([2.0])
    opt = nv.optim.SGD([w], lr=0.1)
    group = {"lr": 0.5, "params": (b,), "note": "head"}
    opt.add_param_group(group)
    assert opt.param_groups[1] is group and group["params"] == [b]
    assert list(group) == ["lr", "params", "note", "momentum", "dampening", "weight_decay",
                           "nesterov", "maximize", "foreach", "differentiable", "fused"]
    with pytest.raises(TypeError, match="param_group must be a dict, but got list"):
        opt.add_param_group([_param([3.0])])


def test_named_parameters_state_dict_matches_torch():
    """Extra, where torch is installed: the same groups (names included) and state keys."""
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    topt = torch.optim.AdamW([{"params": tm[0].named_parameters()},
                              {"params": tm[1].named_parameters(prefix="1"), "lr": 0.5}])
    model = _model()
    opt = nv.optim.AdamW([{"params": model[0].named_parameters()},
                          {"params": model[1].named_parameters(prefix="1"), "lr": 0.5}])
    assert opt.state_dict()["param_groups"] == topt.state_dict()["param_groups"]
    assert [list(g) for g in opt.state_dict()["param_groups"]] == \
        [list(g) for g in topt.state_dict()["param_groups"]]


# ------------------------------------------------------------------ 6: constructors

# torch 2.13's param_groups entries, in its order (``torch.optim.X([p]).param_groups``)
GROUP_KEYS = {
    "SGD": "lr momentum dampening weight_decay nesterov maximize foreach differentiable fused",
    "Adam": "lr betas eps weight_decay amsgrad maximize foreach capturable differentiable "
            "fused decoupled_weight_decay",
    "AdamW": "lr betas eps weight_decay amsgrad maximize foreach capturable differentiable "
             "fused decoupled_weight_decay",
    "RMSprop": "lr momentum alpha eps centered weight_decay capturable foreach maximize "
               "differentiable",
    "Adagrad": "lr lr_decay eps weight_decay initial_accumulator_value foreach maximize "
               "differentiable fused",
    "NAdam": "lr betas eps weight_decay momentum_decay decoupled_weight_decay maximize "
             "foreach capturable differentiable",
    "RAdam": "lr betas eps weight_decay maximize foreach capturable decoupled_weight_decay "
             "differentiable",
    "Adamax": "lr betas eps weight_decay foreach maximize differentiable capturable",
    "Adadelta": "lr rho eps weight_decay maximize capturable foreach differentiable",
    "ASGD": "lr lambd alpha t0 weight_decay foreach maximize differentiable capturable",
    "Rprop": "lr etas step_sizes foreach maximize differentiable capturable",
    "SparseAdam": "lr betas eps maximize",
    "LBFGS": "lr max_iter max_eval tolerance_grad tolerance_change history_size "
             "line_search_fn",
}


@pytest.mark.parametrize("name", sorted(GROUP_KEYS))
def test_param_groups_have_pytorchs_entries_in_pytorchs_order(name):
    group = getattr(nv.optim, name)([_param([1.0])]).param_groups[0]
    assert list(group) == ["params"] + GROUP_KEYS[name].split()


def test_integer_defaults_are_pytorchs():
    """PyTorch's defaults are ``0`` (an int) for SGD's momentum, dampening and weight
    decay: ``repr`` and a saved group show them so."""
    g = nv.optim.SGD([_param([1.0])]).param_groups[0]
    assert [type(g[k]) for k in ("momentum", "dampening", "weight_decay")] == [int] * 3
    assert type(nv.optim.Adam([_param([1.0])]).param_groups[0]["weight_decay"]) is int


@pytest.mark.parametrize("make,error,match", [
    (lambda p: nv.optim.Adam([p], lr=-1), ValueError, r"Adam: Invalid learning rate: -1"),
    (lambda p: nv.optim.AdamW([p], eps=-1e-8), ValueError, r"Invalid epsilon value: -1e-08"),
    (lambda p: nv.optim.Adam([p], betas=(0.9, 1.0)), ValueError,
     r"Adam: Invalid beta parameter at index 1: 1.0"),
    (lambda p: nv.optim.NAdam([p], betas=(-0.1, 0.9)), ValueError,
     r"Invalid beta parameter at index 0: -0.1"),
    (lambda p: nv.optim.SGD([p], momentum=-0.5), ValueError, r"Invalid momentum value: -0.5"),
    (lambda p: nv.optim.SGD([p], nesterov=True), ValueError,
     r"Nesterov momentum requires a momentum and zero dampening"),
    (lambda p: nv.optim.RMSprop([p], alpha=-0.1), ValueError, r"Invalid alpha value: -0.1"),
    (lambda p: nv.optim.Adagrad([p], initial_accumulator_value=-1), ValueError,
     r"Invalid initial_accumulator_value value: -1"),
    (lambda p: nv.optim.Adadelta([p], rho=1.5), ValueError, r"Invalid rho value: 1.5"),
    (lambda p: nv.optim.Rprop([p], etas=(0.5, 0.9)), ValueError,
     r"Invalid eta values: 0.5, 0.9"),
    (lambda p: nv.optim.ASGD([p], weight_decay=-1), ValueError,
     r"Invalid weight_decay value: -1"),
    (lambda p: nv.optim.NAdam([p], momentum_decay=-1), ValueError,
     r"Invalid momentum_decay value: -1"),
    (lambda p: nv.optim.SparseAdam([p], lr=0.0), ValueError,
     r"SparseAdam: Invalid learning rate: 0.0 \(lr must be > 0\)"),
    (lambda p: nv.optim.LBFGS([p], lr=-1), ValueError, r"Invalid learning rate: -1"),
    (lambda p: nv.optim.Adam([p], lr=nv.ones(2)), ValueError, r"Tensor lr must be 1-element"),
    (lambda p: nv.optim.Adam([p], fused=True, foreach=True), RuntimeError,
     r"`fused` and `foreach` cannot be `True` together."),
    (lambda p: nv.optim.SGD([p], 0.1, 0, 0, 0, False, True), TypeError, r"positional"),
    (lambda p: nv.optim.Adam([]), ValueError, r"optimizer got an empty parameter list"),
    (lambda p: nv.optim.SGD([p, 1.0]), TypeError,
     r"optimizer can only optimize Tensors, but one of the params is float"),
])
def test_argument_errors_are_pytorchs(make, error, match):
    with pytest.raises(error, match=match):
        make(_param([1.0]))


def test_rmsprop_takes_an_alpha_above_one_as_pytorch():
    """PyTorch checks ``alpha >= 0`` only (Nova refused ``alpha > 1``); the update is
    the formula's: here the square average turns negative, its root NaN, as there."""
    p = _param([1.0, -2.0])
    opt = nv.optim.RMSprop([p], lr=0.1, alpha=1.5)
    assert opt.param_groups[0]["alpha"] == 1.5
    g = np.array([0.5, 1.0], np.float32)
    p.grad = nv.tensor(g)
    opt.step()
    opt.zero_grad()
    np.testing.assert_allclose(opt.state[p]["square_avg"].numpy(), -0.5 * g * g)
    assert np.isnan(p.numpy()).all()


def test_load_state_dict_errors_say_pytorchs_words():
    a, b = _param([1.0]), _param([2.0])
    opt = nv.optim.SGD([a], lr=0.1)
    two = nv.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="loaded state dict has a different number of "
                                         "parameter groups"):
        opt.load_state_dict(two)
    with pytest.raises(ValueError, match="loaded state dict contains a parameter group that "
                                         "doesn't match the size of optimizer's group"):
        opt.load_state_dict(nv.optim.SGD([a, b], lr=0.1).state_dict())


def test_constructors_match_torch():
    """Extra, where torch is installed: signatures (names, kinds, defaults) and the
    groups they make, entry for entry and in order."""
    torch = pytest.importorskip("torch")
    import inspect
    for name in GROUP_KEYS:
        sig = lambda cls: [(q.name, q.kind, q.default) for q in  # noqa: E731
                           list(inspect.signature(cls.__init__).parameters.values())[1:]]
        assert sig(getattr(nv.optim, name)) == sig(getattr(torch.optim, name)), name
        tg = getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(1))]).param_groups[0]
        ng = getattr(nv.optim, name)([_param([1.0])]).param_groups[0]
        assert repr({k: v for k, v in ng.items() if k != "params"}) == \
            repr({k: v for k, v in tg.items() if k != "params"}), name


def test_a_deep_copied_optimizer_with_a_scheduler_steps_its_own_parameters():
    """A scheduler wraps ``opt.step`` in an instance attribute holding ``opt``; a deep
    copy kept that wrapper, so ``copy.deepcopy(opt).step()`` updated the original's
    parameters (PyTorch does the same); the copy now gets a wrapper of its own."""
    import copy
    p = nn.Parameter(nv.ones(2))
    opt = nv.optim.SGD([p], lr=0.1)
    sched.StepLR(opt, 1)
    twin = copy.deepcopy(opt)
    q = twin.param_groups[0]["params"][0]
    assert q is not p
    p.grad, q.grad = nv.ones(2), nv.full((2,), 10.0)
    twin.step()
    assert p.tolist() == [1.0, 1.0] and q.tolist() == [0.0, 0.0]
    assert getattr(twin, "_opt_called", False) and not getattr(opt, "_opt_called", False)
