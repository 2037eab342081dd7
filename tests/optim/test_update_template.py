"""Optimizer updates stamped from a template equal the updates recorded op by op.

``nova.optim.update_template``: the first update of each structure is recorded as
written and kept; later ones stamp its nodes. Every test here runs the same training
twice, once stamping and once with a subclass whose own ``_update`` (calling the
parent's) turns stamping off, and wants the same bits and the same compiled steps.
"""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.optim import lr_scheduler as sched
from nova.optim.update_template import ONE_OFF, UpdateTemplate
from nova.runtime.cache import CACHE

OPTIMIZERS = {
    "adamw": lambda ps: nv.optim.AdamW(ps, lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1),
    "adam_l2_maximize": lambda ps: nv.optim.Adam(ps, lr=1e-2, weight_decay=0.05,
                                                 maximize=True),
    "sgd_nesterov": lambda ps: nv.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                            weight_decay=0.01),
    "sgd_plain": lambda ps: nv.optim.SGD(ps, lr=0.05),
    "rmsprop_centered_momentum": lambda ps: nv.optim.RMSprop(ps, lr=1e-3, momentum=0.5,
                                                             centered=True, weight_decay=0.1),
    "adagrad": lambda ps: nv.optim.Adagrad(ps, lr=0.1, lr_decay=0.01,
                                           initial_accumulator_value=0.1),
}


def _unstamped(make):
    """The same optimizer with stamping off: its class defines its own ``_update``."""
    base = type(make([nn.Parameter(nv.zeros(1))]))
    cls = type("Unstamped" + base.__name__, (base,),
               {"_update": lambda self, *a: base._update(self, *a)})

    def build(ps):
        opt = make(ps)
        opt.__class__ = cls
        opt._stamps = False
        return opt
    return build


def _model():
    nv.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU(),
                         nn.Linear(16, 3))


def _one_step(model, opt, x):
    """One training step on batch ``x`` (a numpy array or a tensor); its loss."""
    loss = (model(x if isinstance(x, nv.Tensor) else nv.tensor(x)) ** 2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _train(make, steps=6, schedule=False, model=None):
    model = model or _model()
    opt = make(list(model.parameters()))
    lr = sched.StepLR(opt, step_size=2, gamma=0.5) if schedule else None
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(steps):
        loss = _one_step(model, opt, rng.standard_normal((8, 6)).astype(np.float32))
        if lr is not None:
            lr.step()
        losses.append(loss.item())
    params = [p.numpy().copy() for p in model.parameters()]
    state = [v.numpy().copy() for s in opt.state.values() for k, v in sorted(s.items())
             if isinstance(v, nv.Tensor)]
    return losses, params, state, opt


def _same(a, b):
    assert a[0] == b[0]
    for x, y in zip(a[1] + a[2], b[1] + b[2]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_stamped_updates_are_bit_identical_and_compile_to_the_recorded_ir(name):
    make = OPTIMIZERS[name]
    CACHE.clear()
    plain = _train(_unstamped(make), schedule=True)
    assert not plain[3]._templates
    recorded_ir = {str(exe.module) for exe in CACHE._entries.values()}
    before = set(CACHE._entries)
    stamped = _train(make, schedule=True)
    _same(stamped, plain)
    # a stamped update is a call; inlined, it is the recorded nodes: the new structures
    # (steps with calls) compile to IR the recorded steps compiled to already
    new = [exe for key, exe in CACHE._entries.items() if key not in before]
    assert new, f"{name}: the stamped steps have the recorded steps' keys: no calls?"
    assert all(str(exe.module) in recorded_ir for exe in new)
    templates = [t for t in stamped[3]._templates.values() if isinstance(t, UpdateTemplate)]
    assert templates, f"{name}: no update was made a template"


def test_a_template_per_structure_and_none_from_the_first_step():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
    x = nv.ones(2, 4)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    # step 1 creates the moments: its updates change the state's entries, no template
    # (each is made a call all the same: ONE_OFF)
    assert all(t is ONE_OFF for t in opt._templates.values())
    model(x).sum().backward()
    opt.step()
    # weights (4, 4) and biases (4,): two structures, each recorded once
    made = [t for t in opt._templates.values() if isinstance(t, UpdateTemplate)]
    assert len(made) == 2
    assert all(isinstance(t, UpdateTemplate) for t in made)


@pytest.mark.parametrize("name", ["adamw", "sgd_nesterov", "rmsprop_centered_momentum"])
def test_the_step_that_creates_the_state_has_the_later_steps_structure(name):
    """Every update of the first step creates state (no template can be kept), yet
    each is a call like the later stamped ones -- several parameters of one structure
    included -- so the first step and every later one are one structure: one compile."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4))
    nv.realize(*model.parameters())
    opt = OPTIMIZERS[name](list(model.parameters()))
    x = nv.tensor(np.ones((2, 4), np.float32))
    CACHE.clear()
    for _ in range(4):
        loss = (model(x) ** 2).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss.item()
    assert CACHE.stats.misses == 1, [m.reason for m in CACHE.stats.miss_log]


def test_a_changed_compiled_in_hyperparameter_records_a_new_template():
    make = OPTIMIZERS["adam_l2_maximize"]

    def run(build):
        model = _model()
        opt = build(list(model.parameters()))
        out = []
        for step in range(4):
            if step == 2:
                opt.param_groups[0]["weight_decay"] = 0.2     # a constant of the step
            out.append(_one_step(model, opt, nv.ones(3, 6)).item())
        return out, [p.numpy().copy() for p in model.parameters()], [], opt

    plain, stamped = run(_unstamped(make)), run(make)
    _same(stamped, plain)
    decays = {dict(key[1])["weight_decay"] for key, t in stamped[3]._templates.items()
              if isinstance(t, UpdateTemplate)}
    assert decays == {0.05, 0.2}


def test_mixed_dtypes_get_their_own_templates():
    def model():
        nv.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 5), nn.Linear(5, 5).to(nv.float64))

    def run(build):
        m = model()
        opt = build(list(m.parameters()))
        for _ in range(4):
            h = m[0](nv.ones(2, 5)).to(nv.float64)
            (m[1](h) ** 2).sum().backward()
            opt.step()
            opt.zero_grad()
        return [], [p.numpy().copy() for p in m.parameters()], [], opt

    plain, stamped = run(_unstamped(OPTIMIZERS["adamw"])), run(OPTIMIZERS["adamw"])
    _same(stamped, plain)
    dtypes = {key[2][1] for key, t in stamped[3]._templates.items()
              if isinstance(t, UpdateTemplate)}
    assert dtypes == {"float32", "float64"}


def test_a_subclass_with_its_own_update_records_as_written():
    class Custom(nv.optim.SGD):
        def _update(self, group, p, grad, state):
            p.copy_(p - 0.5 * grad)

    p = nn.Parameter(nv.ones(3))
    opt = Custom([p], lr=0.1)
    for _ in range(3):
        (p * p).sum().backward()
        opt.step()
        opt.zero_grad()
    assert not opt._stamps and not opt._templates
    np.testing.assert_array_equal(p.numpy(), np.zeros(3, np.float32))   # 1 -> 0 -> 0


def test_structure_outside_baked_is_an_error_not_a_wrong_update():
    """A stamping optimizer whose scalars depend on something its key does not hold
    (here a global switch) fails loudly instead of stamping a different structure."""
    switch = {"extra": False}

    class Leaky(nv.optim.SGD):
        _stamp_updates = True

        def _host_update(self, group, state):
            s = super()._host_update(group, state)
            if switch["extra"]:
                s["extra"] = self._scalar("extra", 1.0)
            return s

        def _update(self, group, p, grad, state):
            s = self._host_update(group, state)
            p.copy_(p - s["lr"] * grad * (s["extra"] if "extra" in s else 1.0))

    p = nn.Parameter(nv.ones(3))
    opt = Leaky([p], lr=0.1)
    for _ in range(2):
        (p * p).sum().backward()
        opt.step()
        opt.zero_grad()
    switch["extra"] = True
    (p * p).sum().backward()
    with pytest.raises(RuntimeError, match="drew scalars.*_baked"):
        opt.step()


def test_views_and_grad_mode_are_not_templated():
    from nova.optim.update_template import template_key
    p = nn.Parameter(nv.ones(4, 2))
    g = nv.ones(4, 2)
    assert template_key(0, (), p, g, {}) is None            # grad mode on
    with nv.no_grad():
        assert template_key(0, (), p, g, {}) is not None
        assert template_key(0, (), p, g.t().t(), {}) is None   # the gradient is a view
        assert template_key(0, (), p, g, {"m": nv.ones(2, 4).t()}) is None


def test_compiled_steps_with_stamped_updates_equal_recorded_unstamped_ones():
    """``nv.compile`` records its first calls (stamping the updates) and then replays:
    the losses and parameters equal a plain loop whose optimizer never stamps."""
    def run(make, compiled):
        model = _model()
        opt = make(list(model.parameters()))
        lr = sched.StepLR(opt, step_size=3, gamma=0.5)

        def step(x):
            return _one_step(model, opt, x)
        step = nv.compile(step) if compiled else step
        rng = np.random.default_rng(2)
        losses = []
        for _ in range(8):
            losses.append(step(nv.tensor(rng.standard_normal((8, 6)).astype(np.float32))).item())
            lr.step()
        return losses, [p.numpy().copy() for p in model.parameters()], [], opt

    plain = run(_unstamped(OPTIMIZERS["adamw"]), compiled=False)
    compiled = run(OPTIMIZERS["adamw"], compiled=True)
    _same(compiled, plain)


def test_threads_stamping_their_own_optimizers_get_the_sequential_results():
    """Two threads, each training its own model with its own AdamW (templates, stamped
    nodes and live sets per optimizer and per thread), end where the same trainings run
    one after the other end, bit for bit."""
    import threading

    def setup(seed):
        nv.manual_seed(seed)      # (made here, in one thread: the models' initial values)
        model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
        rng = np.random.default_rng(seed)
        batches = [rng.standard_normal((8, 6)).astype(np.float32) for _ in range(6)]
        return model, OPTIMIZERS["adamw"](list(model.parameters())), batches

    def train(model, opt, batches, out, seed):
        for x in batches:
            _one_step(model, opt, x)
        out[seed] = [p.numpy().copy() for p in model.parameters()]

    alone: dict = {}
    for seed in (1, 2):
        train(*setup(seed), alone, seed)
    together: dict = {}
    jobs = [setup(seed) for seed in (1, 2)]
    threads = [threading.Thread(target=train, args=(*job, together, seed))
               for job, seed in zip(jobs, (1, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seed in (1, 2):
        for a, b in zip(together[seed], alone[seed]):
            np.testing.assert_array_equal(a, b)
