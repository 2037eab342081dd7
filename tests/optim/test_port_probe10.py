"""Port probe 10 of ``nv.optim`` against ``torch.optim``: code written for PyTorch --
custom optimizers reading ``self.state[p]``, schedulers overriding ``get_lr()``, PyTorch's
LBFGS checkpoints, bfloat16/float16 parameters, a parameter listed twice, Adagrad's
state before the first step, the optimizer hooks, ``swa_utils`` and the submodule
imports. References are the published formulas (numpy; ``ml_dtypes`` for PyTorch's
half-precision rounding), so the tests run without torch. The interpreter runs these
tiny steps."""
import warnings
from collections import defaultdict

import ml_dtypes
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.optim import lr_scheduler as sched
from nova.optim.optimizer import (Optimizer, register_optimizer_step_post_hook,
                                  register_optimizer_step_pre_hook)
from tests.test_serialization_torch_format import load_bytes, tensor, torch_file


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _param(values, dtype=None):
    p = nn.Parameter(nv.tensor(np.asarray(values, np.float32)))
    return p if dtype is None else nn.Parameter(p.detach().to(dtype))


# ------------------------------------------------------------------ 1: state is defaultdict

class Lion(Optimizer):
    """lucidrains' Lion as published for PyTorch: the state by lookup, its own step()."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    def step(self, closure=None):
        with nv.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = nv.zeros_like(p)
                    exp_avg, (beta1, beta2) = state["exp_avg"], group["betas"]
                    p.data.mul_(1 - group["lr"] * group["weight_decay"])
                    update = exp_avg.clone().mul_(beta1).add(p.grad, alpha=1 - beta1).sign_()
                    p.add_(update, alpha=-group["lr"])
                    exp_avg.mul_(beta2).add_(p.grad, alpha=1 - beta2)


def test_a_custom_optimizer_reading_state_by_lookup_trains_as_lion():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(6)
    grads = [rng.standard_normal(6) for _ in range(5)]
    p = _param(w0)
    opt = Lion([p], lr=0.1, betas=(0.9, 0.99), weight_decay=0.1)
    assert isinstance(opt.state, defaultdict)
    for g in grads:
        p.grad = nv.tensor(g.astype(np.float32))
        opt.step()
        assert not p.node.realized          # the step waits, as Nova's own do
        opt.zero_grad()
        assert p.node.realized
    w, m = w0.copy(), np.zeros(6)
    for g in grads:                         # Lion's closed-form update
        w = w * (1 - 0.1 * 0.1) - 0.1 * np.sign(0.9 * m + 0.1 * g)
        m = 0.99 * m + 0.01 * g
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(opt.state[p]["exp_avg"].numpy(), m, rtol=1e-5, atol=1e-6)
    assert list(opt.state_dict()["state"]) == [0]


def test_state_lists_what_pytorch_lists():
    """SGD without momentum keeps no state (PyTorch: ``state`` is empty); a lookup
    makes an entry, which PyTorch's state_dict lists; load_state_dict rebuilds a
    defaultdict."""
    p = _param([1.0, 2.0])
    opt = nv.optim.SGD([p], lr=0.1)
    p.grad = nv.ones(2)
    opt.step()
    opt.zero_grad()
    assert opt.state_dict()["state"] == {}
    assert opt.state[p] == {} and opt.state_dict()["state"] == {0: {}}
    adam = nv.optim.Adam([p], lr=0.1)
    adam.load_state_dict({"state": {}, "param_groups": adam.state_dict()["param_groups"]})
    assert isinstance(adam.state, defaultdict) and adam.state[p] == {}


# ------------------------------------------------------------------ 2: get_lr schedulers

class Warmup(sched._LRScheduler):
    """The usual linear warmup, PyTorch-style: only ``get_lr`` is defined."""

    def __init__(self, optimizer, warmup, last_epoch=-1):
        self.warmup = warmup
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * min(1.0, (self.last_epoch + 1) / self.warmup) for base in self.base_lrs]


def test_a_scheduler_overriding_get_lr_steps_by_it():
    opt = nv.optim.SGD([{"params": [_param([1.0])]}, {"params": [_param([2.0])], "lr": 0.5}],
                       lr=0.1)
    s = Warmup(opt, 4)
    seen = [[g["lr"] for g in opt.param_groups]]
    for _ in range(10):
        opt.step()
        s.step()
        seen.append([g["lr"] for g in opt.param_groups])
        assert s.get_last_lr() == seen[-1]
    assert seen == [[b * min(1.0, (e + 1) / 4) for b in (0.1, 0.5)] for e in range(11)]
    assert s.last_epoch == 10 and s._step_count == 11


def test_a_get_lr_schedulers_state_dict_round_trips():
    opt = nv.optim.SGD([_param([1.0])], lr=0.1)
    s = Warmup(opt, 8)
    for _ in range(3):
        s.step()
    saved = s.state_dict()
    assert saved["last_epoch"] == 3 and saved["warmup"] == 8 and "optimizer" not in saved
    opt2 = nv.optim.SGD([_param([1.0])], lr=0.1)
    s2 = Warmup(opt2, 2)
    s2.load_state_dict(saved)
    assert s2.warmup == 8 and s2.last_epoch == 3 and s2.get_last_lr() == s.get_last_lr()
    s.step()
    s2.step()
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"] == 0.1 * 5 / 8


def test_step_epoch_uses_a_subclasss_closed_form():
    class Halving(Warmup):
        def _get_closed_form_lr(self):
            return [base * 0.5 ** self.last_epoch for base in self.base_lrs]

    opt = nv.optim.SGD([_param([1.0])], lr=0.4)
    s = Halving(opt, 4)
    with pytest.warns(UserWarning, match=r"epoch parameter in `scheduler.step\(\)`"):
        s.step(3)
    assert opt.param_groups[0]["lr"] == 0.4 * 0.5 ** 3 and s.last_epoch == 3
    s.step()                                         # get_lr again, at epoch 4
    assert opt.param_groups[0]["lr"] == 0.4


def test_built_in_get_lr_is_pytorchs_and_warns_outside_step():
    opt = nv.optim.SGD([_param([1.0])], lr=0.1)
    s = sched.ExponentialLR(opt, gamma=0.5)
    s.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        assert s.get_lr() == [0.1 * 0.5 ** 2]       # the rule once more, as PyTorch's
    assert s.get_last_lr() == [0.1 * 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.step()                                     # no warning from inside step()
    assert sched._LRScheduler.__name__ == "_LRScheduler"
    assert issubclass(sched._LRScheduler, sched.LRScheduler)


# ------------------------------------------------------------------ 3: LBFGS torch state

def _quadratic(w):
    return ((w - nv.tensor([1.0, -2.0, 0.5], dtype=nv.float64)) ** 2 *
            nv.tensor([1.0, 4.0, 9.0], dtype=nv.float64)).sum() + (w[0] * w[1]) ** 2


def _lbfgs(w0):
    w = nn.Parameter(nv.tensor(np.asarray(w0, np.float64)))
    opt = nv.optim.LBFGS([w], lr=0.5, max_iter=3, history_size=3)

    def closure():
        opt.zero_grad()
        loss = _quadratic(w)
        loss.backward()
        return loss
    return w, opt, closure


def _as_torch_layout(state):
    """Nova's LBFGS state as PyTorch's saves it: H_diag, t and each ro a 0-d tensor,
    the scratch list al, every tensor a torch tensor (``torch_file``'s writer)."""
    out = {}
    for k, v in state.items():
        if isinstance(v, nv.Tensor):
            out[k] = tensor(v.numpy())
        elif k in ("H_diag", "t"):
            out[k] = tensor(np.array(v, np.float64))
        elif k == "ro":
            out[k] = [tensor(np.array(x, np.float64)) for x in v]
        elif k in ("old_dirs", "old_stps"):
            out[k] = [tensor(x.numpy()) for x in v]
        else:
            out[k] = v
    out["al"] = [tensor(np.array(0.25, np.float64)) for _ in state["ro"]] + [None]
    return out


def test_lbfgs_loads_pytorchs_state_layout_and_continues_the_same_iterates():
    w, opt, closure = _lbfgs([0.0, 0.0, 0.0])
    opt.step(closure)
    sd = opt.state_dict()
    blob = torch_file({"state": {0: _as_torch_layout(sd["state"][0])},
                       "param_groups": sd["param_groups"]})
    w2, opt2, closure2 = _lbfgs(w.numpy())
    opt2.load_state_dict(load_bytes(blob))
    st = opt2.state[w2]
    assert "al" not in st and isinstance(st["H_diag"], float) and isinstance(st["t"], float)
    assert all(isinstance(r, float) for r in st["ro"]) and st["ro"] == sd["state"][0]["ro"]
    for _ in range(2):
        opt.step(closure)
        opt2.step(closure2)
        np.testing.assert_array_equal(w2.numpy(), w.numpy())
    with pytest.raises(ValueError, match="'H_diag' of parameter 0 must be a number"):
        bad = dict(_as_torch_layout(sd["state"][0]), H_diag=tensor(np.zeros(2)))
        opt2.load_state_dict(load_bytes(torch_file({"state": {0: bad},
                                                    "param_groups": sd["param_groups"]})))


# ------------------------------------------------------------------ 4: half precision

HALF = {"bfloat16": (nv.bfloat16, ml_dtypes.bfloat16), "float16": (nv.float16, np.float16)}
F32 = np.float32


class _Torch:
    """PyTorch's CPU kernels for a half tensor (values held as float32): each op in
    float32, one rounding to the half type; ``add``'s alpha and ``add_``'s scalar in the
    half type, other Scalars in float32; lerp and addcmul fused multiply-adds."""

    def __init__(self, np_half):
        self.h = np_half

    def r(self, x):
        return np.asarray(x, F32).astype(self.h).astype(F32)

    def s(self, v):
        return F32(F32(v).astype(self.h))

    @staticmethod
    def fma(a, b, c):
        return (np.float64(a) * np.float64(b) + np.float64(c)).astype(F32)

    def lerp(self, x, end, w):
        w = F32(w)
        if abs(w) < 0.5:
            return self.r(self.fma(w, end - x, x))
        return self.r(self.fma(w - F32(1), end - x, end))

    def addcmul(self, x, t1, t2, value):
        return self.r(self.fma(F32(value) * t1, t2, x))


def _adam_ref(k, w, grads, lr, b1, b2, eps, wd, decoupled, amsgrad):
    m, v, vmax = (np.zeros_like(w) for _ in range(3))
    for t, g in enumerate(grads, 1):
        g = k.r(g)
        if wd and decoupled:
            w = k.r(w * F32(1 - lr * wd))
        elif wd:
            g = k.r(g + k.s(wd) * w)
        m = k.lerp(m, g, 1 - b1)
        v = k.addcmul(k.r(v * F32(b2)), g, g, 1 - b2)
        vmax = np.maximum(vmax, v)
        d = k.r(np.sqrt(vmax if amsgrad else v))
        d = k.r(k.r(d / F32((1 - b2 ** t) ** 0.5)) + k.s(eps))
        w = k.r(w + (F32(-lr / (1 - b1 ** t)) * m) / d)
    return w


def _sgd_ref(k, w, grads, lr, momentum, dampening, wd, nesterov):
    buf = None
    for g in grads:
        d = k.r(g)
        if wd:
            d = k.r(d + k.s(wd) * w)
        if momentum:
            buf = d.copy() if buf is None else \
                k.r(k.r(buf * F32(momentum)) + k.s(1 - dampening) * d)
            d = k.r(d + k.s(momentum) * buf) if nesterov else buf
        w = k.r(w + k.s(-lr) * d)
    return w


def _rmsprop_ref(k, w, grads, lr, alpha, eps, momentum, centered):
    v, a, buf = (np.zeros_like(w) for _ in range(3))
    for g in grads:
        g = k.r(g)
        v = k.addcmul(k.r(v * F32(alpha)), g, g, 1 - alpha)
        if centered:
            a = k.lerp(a, g, 1 - alpha)
            avg = k.r(np.sqrt(k.addcmul(v, a, a, -1.0)))
        else:
            avg = k.r(np.sqrt(v))
        avg = k.r(avg + k.s(eps))
        if momentum:
            buf = k.r(k.r(buf * F32(momentum)) + g / avg)
            w = k.r(w + k.s(-lr) * buf)
        else:
            w = k.r(w + (F32(-lr) * g) / avg)
    return w


def _adagrad_ref(k, w, grads, lr, lr_decay, eps, init):
    acc = k.r(np.full_like(w, init))
    for t, g in enumerate(grads, 1):
        g = k.r(g)
        acc = k.addcmul(acc, g, g, 1.0)
        std = k.r(k.r(np.sqrt(acc)) + k.s(eps))
        w = k.r(w + (F32(-lr / (1 + (t - 1) * lr_decay)) * g) / std)
    return w


def _nadam_ref(k, w, grads, lr, b1, b2, eps, wd, psi=4e-3):
    m, v, mu_product = np.zeros_like(w), np.zeros_like(w), 1.0
    for t, g in enumerate(grads, 1):
        w = k.r(w * F32(1 - lr * wd))                  # decoupled decay
        g = k.r(g)
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        mu_product *= mu
        m = k.lerp(m, g, 1 - b1)
        v = k.addcmul(k.r(v * F32(b2)), g, g, 1 - b2)
        d = k.r(k.r(np.sqrt(k.r(v / F32(1 - b2 ** t)))) + k.s(eps))
        w = k.r(w + (F32(-lr * (1 - mu) / (1 - mu_product)) * g) / d)
        w = k.r(w + (F32(-lr * mu_next / (1 - mu_product * mu_next)) * m) / d)
    return w


def _radam_ref(k, w, grads, lr, b1, b2, eps):
    m, v = np.zeros_like(w), np.zeros_like(w)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, 1):
        g = k.r(g)
        m = k.lerp(m, g, 1 - b1)
        v = k.addcmul(k.r(v * F32(b2)), g, g, 1 - b2)
        bc2 = 1 - b2 ** t
        update = k.r(k.r(m / F32(1 - b1 ** t)) * F32(lr))
        rho_t = rho_inf - 2 * t * b2 ** t / bc2
        if rho_t > 5:                                   # rectified from step 6 on here
            rect = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                           ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            d = k.r(k.r(np.sqrt(v)) + k.s(eps))
            adaptive = k.r(k.r(F32(1) / d) * F32(bc2 ** 0.5))
            update = k.r(k.r(update * adaptive) * F32(rect))
        w = k.r(w - update)
    return w


CASES = [
    ("Adam", dict(lr=1e-2, eps=1e-6), _adam_ref, dict(lr=1e-2, b1=0.9, b2=0.999, eps=1e-6,
                                                      wd=0.0, decoupled=False, amsgrad=False)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1, eps=1e-6), _adam_ref,
     dict(lr=1e-2, b1=0.9, b2=0.999, eps=1e-6, wd=0.1, decoupled=True, amsgrad=False)),
    ("Adam", dict(lr=1e-2, betas=(0.3, 0.99), weight_decay=0.1, amsgrad=True, eps=1e-6),
     _adam_ref, dict(lr=1e-2, b1=0.3, b2=0.99, eps=1e-6, wd=0.1, decoupled=False,
                     amsgrad=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.1), _sgd_ref,
     dict(lr=0.1, momentum=0.9, dampening=0.2, wd=0.1, nesterov=False)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True), _sgd_ref,
     dict(lr=0.1, momentum=0.9, dampening=0.0, wd=0.0, nesterov=True)),
    ("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True, eps=1e-3), _rmsprop_ref,
     dict(lr=1e-2, alpha=0.99, eps=1e-3, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=1e-2, alpha=0.3), _rmsprop_ref,
     dict(lr=1e-2, alpha=0.3, eps=1e-8, momentum=0.0, centered=False)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, eps=1e-3),
     _adagrad_ref, dict(lr=0.1, lr_decay=0.01, eps=1e-3, init=0.1)),
    ("NAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True, eps=1e-6),
     _nadam_ref, dict(lr=1e-2, b1=0.9, b2=0.999, eps=1e-6, wd=0.1)),
    ("RAdam", dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-6), _radam_ref,
     dict(lr=1e-2, b1=0.9, b2=0.99, eps=1e-6)),
]


@pytest.mark.parametrize("half", sorted(HALF))
@pytest.mark.parametrize("name,kwargs,ref,ref_kwargs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_half_parameters_round_as_pytorchs_kernels(half, name, kwargs, ref, ref_kwargs):
    """Bit for bit over 8 steps (64 elements: PyTorch's vectorized loop covers all)."""
    dtype, np_half = HALF[half]
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal(64).astype(F32)
    grads = [(rng.standard_normal(64) * 0.5).astype(F32) for _ in range(8)]
    p = _param(w0, dtype)
    opt = getattr(nv.optim, name)([p], **kwargs)
    for g in grads:
        p.grad = nv.tensor(g).to(dtype)
        opt.step()
        opt.zero_grad()
    k = _Torch(np_half)
    want = ref(k, k.r(w0), grads, **ref_kwargs)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(p.float().numpy(), want)


@pytest.mark.parametrize("name,kwargs", [(c[0], c[1]) for c in CASES[:2]] +
                         [("SGD", dict(lr=0.1, momentum=0.9))])
def test_half_parameters_match_torch(name, kwargs):
    """Extra, where torch is installed: the same trajectories as torch.optim's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(64).astype(F32)
    tp = torch.nn.Parameter(torch.tensor(w0).to(torch.bfloat16))
    topt = getattr(torch.optim, name)([tp], **kwargs)
    p = _param(w0, nv.bfloat16)
    opt = getattr(nv.optim, name)([p], **kwargs)
    for _ in range(5):
        g = rng.standard_normal(64).astype(F32)
        tp.grad = torch.tensor(g).to(torch.bfloat16)
        topt.step()
        p.grad = nv.tensor(g).to(nv.bfloat16)
        opt.step()
        opt.zero_grad()
    np.testing.assert_array_equal(p.float().numpy(), tp.detach().float().numpy())


def test_the_half_kernels_rounding_points_matter():
    """The reference differs from rounding after every op (the old update), so the
    test above tells them apart."""
    k = _Torch(ml_dtypes.bfloat16)
    rng = np.random.default_rng(7)
    m, g = k.r(rng.standard_normal(64)), k.r(rng.standard_normal(64))
    per_op = k.r(k.r(m * F32(0.9)) + k.r(g * F32(0.1)))
    assert (k.lerp(m, g, 0.1) != per_op).any()


# ------------------------------------------------------------------ 5: duplicate parameters

def test_a_parameter_listed_twice_in_a_group_warns_and_steps_twice():
    a, b = _param([1.0, -2.0]), _param([3.0])
    with pytest.warns(UserWarning, match="duplicate parameters"):
        opt = nv.optim.SGD([a, b, a], lr=0.1, momentum=0.9)
    assert opt.state_dict()["param_groups"][0]["params"] == [2, 1, 2]   # PyTorch's ids
    g = np.array([0.5, 1.0], F32)
    a.grad, b.grad = nv.tensor(g), nv.ones(1)
    opt.step()
    opt.zero_grad()
    # PyTorch starts the buffer (buf = g) at both first-step updates
    np.testing.assert_allclose(a.numpy(), [1.0, -2.0] - 2 * 0.1 * g, rtol=1e-6)
    np.testing.assert_allclose(opt.state[a]["momentum_buffer"].numpy(), g)
    a.grad, b.grad = nv.tensor(2 * g), nv.ones(1)
    opt.step()
    opt.zero_grad()
    buf1 = 0.9 * g + 2 * g
    buf2 = 0.9 * buf1 + 2 * g
    np.testing.assert_allclose(a.numpy(), [1.0, -2.0] - 0.2 * g - 0.1 * (buf1 + buf2),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="more than one parameter group"):
        nv.optim.SGD([{"params": [a]}, {"params": [a]}], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate"):
        adam = nv.optim.Adam([a, a], lr=0.1)
    a.grad = nv.tensor(g)
    adam.step()
    assert adam.state[a]["step"] == 2


# ------------------------------------------------------------------ 6: Adagrad's state

def test_adagrad_makes_its_state_at_construction():
    p = _param([1.0, 2.0, 3.0])
    opt = nv.optim.Adagrad([p], lr=0.1, initial_accumulator_value=0.25)
    sd = opt.state_dict()["state"]
    assert list(sd) == [0] and sd[0]["step"] == 0
    np.testing.assert_array_equal(sd[0]["sum"].numpy(), [0.25] * 3)
    p.grad = nv.tensor([1.0, 2.0, 4.0])
    opt.step()
    np.testing.assert_allclose(p.numpy(), np.array([1.0, 2.0, 3.0]) - 0.1 * np.array(
        [1.0, 2.0, 4.0]) / (np.sqrt(0.25 + np.array([1.0, 4.0, 16.0])) + 1e-10), rtol=1e-6)


# ------------------------------------------------------------------ 7: hooks

def test_step_hooks_run_around_step_and_see_the_updated_parameters():
    p = _param([1.0, 2.0])
    opt = nv.optim.SGD([p], lr=0.5)
    calls = []

    def pre(o, args, kwargs):
        calls.append(("pre", args[0] is o, kwargs))

    def post(o, args, kwargs):
        calls.append(("post", p.numpy().tolist()))     # a read: the step runs first

    handles = [register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global pre")),
               opt.register_step_pre_hook(pre), opt.register_step_post_hook(post),
               register_optimizer_step_post_hook(lambda o, a, k: calls.append("global post"))]
    try:
        p.grad = nv.ones(2)
        opt.step()
        assert calls == ["global pre", ("pre", True, {}), ("post", [0.5, 1.5]), "global post"]
        handles[1].remove()
        opt.register_step_pre_hook(lambda o, args, kwargs: (args, {"closure": lambda: 7.0}))
        assert opt.step() == 7.0                        # the pre-hook's kwargs were used
        opt.register_step_pre_hook(lambda o, args, kwargs: "bad")
        with pytest.raises(RuntimeError, match="must return None or a tuple"):
            opt.step()
    finally:
        for h in handles:
            h.remove()


def test_a_custom_step_and_a_step_calling_super_run_the_hooks_once():
    p = _param([1.0])
    calls = []

    class Twice(nv.optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    for opt in (Lion([p], lr=0.1), Twice([p], lr=0.1)):
        h = opt.register_step_post_hook(lambda o, a, k: calls.append(type(o).__name__))
        p.grad = nv.ones(1)
        opt.step()
        opt.zero_grad()
        h.remove()
    assert calls == ["Lion", "Twice"]


def test_state_dict_hooks():
    p = _param([1.0])
    opt = nv.optim.Adam([p], lr=0.1)
    seen = []
    opt.register_state_dict_pre_hook(lambda o: seen.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    sd = opt.state_dict()
    assert seen == ["pre"] and sd["extra"] == 1
    opt.register_load_state_dict_pre_hook(
        lambda o, sd: {"state": sd["state"], "param_groups": [
            {**sd["param_groups"][0], "lr": 0.25}]})
    opt.register_load_state_dict_post_hook(lambda o: seen.append(o.param_groups[0]["lr"]))
    h = opt.register_state_dict_pre_hook(lambda o: seen.append("first"), prepend=True)
    opt.load_state_dict(opt.state_dict())
    assert seen == ["pre", "first", "pre", 0.25]
    h.remove()
    opt.state_dict()
    assert seen[-1] == "pre"


# ------------------------------------------------------------------ 8: swa_utils

def _linear(w):
    m = nn.Linear(2, 1, bias=False)
    with nv.no_grad():
        m.weight.copy_(nv.tensor(np.asarray(w, F32)))
    return m


def test_averaged_model_swa_and_ema():
    su = nv.optim.swa_utils
    ws = [np.array([[1.0, 2.0]]), np.array([[3.0, -2.0]]), np.array([[5.0, 0.0]])]
    model = _linear(ws[0])
    swa = su.AveragedModel(model)
    ema = su.AveragedModel(model, multi_avg_fn=su.get_ema_multi_avg_fn(0.75))
    ema1 = su.AveragedModel(model, avg_fn=su.get_ema_avg_fn(0.75))
    for w in ws:
        with nv.no_grad():
            model.weight.copy_(nv.tensor(w.astype(F32)))
        for avg in (swa, ema, ema1):
            avg.update_parameters(model)
    want_ema = ws[0]
    for w in ws[1:]:
        want_ema = 0.75 * want_ema + 0.25 * w
    np.testing.assert_allclose(swa.module.weight.numpy(), np.mean(ws, 0), rtol=1e-6)
    np.testing.assert_allclose(ema.module.weight.numpy(), want_ema, rtol=1e-6)
    np.testing.assert_allclose(ema1.module.weight.numpy(), want_ema, rtol=1e-6)
    assert swa.n_averaged.item() == 3 and swa.n_averaged.dtype == nv.int64
    assert list(swa.state_dict()) == ["n_averaged", "module.weight"]
    x = nv.tensor([[1.0, 1.0]])
    np.testing.assert_allclose(swa(x).numpy(), np.mean(ws, 0).sum(1, keepdims=True), rtol=1e-6)
    with pytest.raises(ValueError, match="Invalid decay value"):
        su.get_ema_avg_fn(1.5)


def test_swalr_anneals_to_the_swa_rate():
    opt = nv.optim.SGD([_param([1.0])], lr=0.5)
    s = nv.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="cos")
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(5):
        s.step()
        lrs.append(opt.param_groups[0]["lr"])
    # lr_s = swa + (lr_0 - swa) * (1 - alpha(s)), alpha(t) = (1 - cos(pi t)) / 2, t = s / 3
    alpha = [(1 - np.cos(np.pi * min(1.0, k / 3))) / 2 for k in range(6)]
    np.testing.assert_allclose(lrs, [0.05 * a + 0.5 * (1 - a) for a in alpha], rtol=1e-12)
    assert opt.param_groups[0]["swa_lr"] == 0.05 and "anneal_func" not in s.state_dict()
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        nv.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_strategy="step")


def test_update_bn_recomputes_the_statistics_as_a_cumulative_average():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2, momentum=0.3))
    with nv.no_grad():
        model[0].weight.copy_(nv.tensor([[1.0, 0.0], [0.5, 2.0]]))
        model[0].bias.zero_()
    model.eval()
    batches = [np.arange(8, dtype=F32).reshape(4, 2) * k for k in (1.0, 2.0, -1.0)]
    nv.optim.swa_utils.update_bn([(nv.tensor(b), 0) for b in batches], model)
    w = np.array([[1.0, 0.0], [0.5, 2.0]])
    outs = [b @ w.T for b in batches]
    np.testing.assert_allclose(model[1].running_mean.numpy(),
                               np.mean([o.mean(0) for o in outs], 0), rtol=1e-5)
    np.testing.assert_allclose(model[1].running_var.numpy(),
                               np.mean([o.var(0, ddof=1) for o in outs], 0), rtol=1e-5)
    assert not model.training and model[1].momentum == 0.3


# ------------------------------------------------------------------ 9: submodules

def test_pytorchs_submodule_imports():
    from nova.optim.adagrad import Adagrad
    from nova.optim.adam import Adam
    from nova.optim.adamw import AdamW
    from nova.optim.lr_scheduler import _LRScheduler
    from nova.optim.sgd import SGD
    from nova.optim.swa_utils import SWALR, AveragedModel, update_bn  # noqa: F401
    assert (AdamW, Adam, SGD, Adagrad) == (nv.optim.AdamW, nv.optim.Adam, nv.optim.SGD,
                                           nv.optim.Adagrad)
    assert _LRScheduler is nv.optim.lr_scheduler._LRScheduler


# ------------------------------------------------------------------ nv.compile

def _compiled_training(opt_factory, calls=4):
    nv.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = opt_factory(model.parameters())
    x = nv.tensor(np.arange(6, dtype=F32).reshape(2, 3) / 6)

    def train(x):
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss
    step = nv.compile(train)
    return [step(x).item() for _ in range(calls)], step, opt


def test_nv_compile_replays_a_stateless_sgd_and_runs_step_hooks_every_call():
    """SGD without momentum keeps no state entry: the replay's state check (None
    then, None now) still passes; a step hook makes every call run recorded, so the
    hook runs every time."""
    got, step, opt = _compiled_training(lambda ps: nv.optim.SGD(ps, lr=0.1))
    nv.manual_seed(0)
    model = nn.Linear(3, 2)
    ref = nv.optim.SGD(model.parameters(), lr=0.1)
    x = nv.tensor(np.arange(6, dtype=F32).reshape(2, 3) / 6)
    want = []
    for _ in range(4):
        ref.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        ref.step()
        want.append(loss.item())
    assert got == want and step.replays >= 1 and opt.state_dict()["state"] == {}
    seen = []

    def hooked(ps):
        o = nv.optim.SGD(ps, lr=0.1)
        o.register_step_post_hook(lambda o, a, k: seen.append(1))
        return o
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, step, _ = _compiled_training(hooked)
    assert got == want and step.replays == 0 and len(seen) == 4
