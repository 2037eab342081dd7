"""``nv.compile`` guards: Python-visible state changed between calls makes the next
call record again instead of replaying what it no longer does.

Each test runs one training program uncompiled and compiled, changes something
between calls once the compiled step replays, and compares the numbers. The
uncompiled program is the reference: a replay must never give another number.
"""
from __future__ import annotations

import collections
import copy
import warnings

import numpy as np
import pytest

import nova as nv
from nova.runtime.cache import RecompileWarning

rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def interpreted():
    """The guards are the capture's, whatever runs the steps: the interpreter runs
    these tiny ones without compiling a kernel (tests/test_capture.py covers the
    compiled engines' replays)."""
    with nv.engine("interp"):
        yield


XS = [rng.standard_normal((8, 4)).astype(np.float32) for _ in range(10)]


def _layers() -> nv.nn.Sequential:
    nv.manual_seed(0)
    return nv.nn.Sequential(nv.nn.Linear(4, 4), nv.nn.Linear(4, 1))


def _loss(m, x):
    return m(x).square().mean()


def _training_step(m, o, compiled: bool):
    """One step of ``m`` with optimizer ``o`` (zero_grad, loss, backward, step),
    compiled or not; returns the loss."""
    def step(x):
        o.zero_grad()
        loss = _loss(m, x)
        loss.backward()
        o.step()
        return loss
    return nv.compile(step) if compiled else step


def _twin(program, *args) -> str:
    """``program(compiled, *args)`` returns (arrays, compiled functions): the compiled
    run must give the uncompiled run's arrays, and each of its functions must have
    replayed (one recorded every call would match trivially). Returns what the
    compiled run noted in ``nv.debug.cache_stats()``'s log (why it recorded again)."""
    want, _ = program(False, *args)
    start = len(nv.debug.cache_stats().compile_log)
    got, fns = program(True, *args)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(np.asarray(b, np.float64), np.asarray(a, np.float64),
                                   rtol=1e-5, atol=1e-7)
    assert all(f.replays > 0 for f in fns), [f.replays for f in fns]
    return "\n".join(nv.debug.cache_stats().compile_log[start:])


def _weights(m) -> list[np.ndarray]:
    return [p.detach().numpy() for p in m.parameters()]


# ---------------------------------------------------------------- gradients


def _split_steps(compiled: bool):
    """``loss.backward()`` and ``opt.step(); opt.zero_grad()`` compiled apart and
    called alternately: the step reads the gradient the other function left."""
    m = _layers()
    o = nv.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def fwd_bwd(x):
        loss = _loss(m, x)
        loss.backward()
        return loss

    def opt_step():
        o.step()
        o.zero_grad()
    if compiled:
        fwd_bwd, opt_step = nv.compile(fwd_bwd), nv.compile(opt_step)
    losses = []
    for x in XS[:7]:
        losses.append(fwd_bwd(nv.tensor(x)).item())
        opt_step()
    return [losses, *_weights(m)], [fwd_bwd, opt_step] if compiled else []


def test_a_step_compiled_apart_from_backward_reads_each_new_gradient():
    assert "re-recorded" not in _twin(_split_steps)   # each reads p.grad as it begins


def _accumulate_after_replays(compiled: bool):
    """A compiled backward recorded with empty ``p.grad`` then called twice without
    ``zero_grad``: the second call adds to the gradient, as uncompiled."""
    m = _layers()
    o = nv.optim.SGD(m.parameters(), lr=0.1)

    def fwd_bwd(x):
        _loss(m, x).backward()
    fn = nv.compile(fwd_bwd) if compiled else fwd_bwd
    for x in XS[:4]:
        fn(nv.tensor(x))
        o.step()
        o.zero_grad()
    fn(nv.tensor(XS[4]))
    fn(nv.tensor(XS[5]))            # accumulates into the gradient of the call before
    return [p.grad.numpy() for p in m.parameters()], [fn] if compiled else []


def test_a_gradient_left_from_the_call_before_is_accumulated_not_replaced():
    assert "is set, was None when captured" in _twin(_accumulate_after_replays)


# ---------------------------------------------------------------- parameters


def _toggle_requires_grad(compiled: bool, start_frozen: bool):
    m = _layers()
    o = nv.optim.SGD(m.parameters(), lr=0.1)
    m[0].requires_grad_(not start_frozen)

    fn = _training_step(m, o, compiled)
    losses = []
    for i, x in enumerate(XS[:7]):
        if i == 4:
            m[0].requires_grad_(start_frozen)
        losses.append(fn(nv.tensor(x)).item())
    grads_none = [float(p.grad is None) for p in m.parameters()]
    return [losses, grads_none, *_weights(m)], [fn] if compiled else []


@pytest.mark.parametrize("start_frozen", [False, True], ids=["freeze", "unfreeze"])
def test_requires_grad_changed_on_parameters_records_again(start_frozen):
    assert "requires_grad changed" in _twin(_toggle_requires_grad, start_frozen)


def _replace_in_module(compiled: bool, what: str):
    """A parameter, or a whole layer, replaced in the model only (the optimizer keeps
    the old parameters, so the new ones are used but not trained)."""
    m = _layers()
    o = nv.optim.SGD(m.parameters(), lr=0.1)

    fn = _training_step(m, o, compiled)
    losses = []
    for i, x in enumerate(XS[:7]):
        if i == 4 and what == "parameter":
            m[1].weight = nv.nn.Parameter(m[1].weight.detach() * 2.0)
        elif i == 4:
            nv.manual_seed(3)
            m[1] = nv.nn.Linear(4, 1)
        losses.append(fn(nv.tensor(x)).item())
    return [losses, *_weights(m)], [fn] if compiled else []


@pytest.mark.parametrize("what", ["parameter", "layer"])
def test_a_parameter_or_layer_replaced_in_the_model_only_records_again(what):
    assert "holds another" in _twin(_replace_in_module, what)


def _module_setting(compiled: bool):
    """A module's Python setting (``Dropout.p``), which the recorded steps hold as a
    constant, changed between calls."""
    nv.manual_seed(0)
    m = nv.nn.Sequential(nv.nn.Linear(4, 4), nv.nn.Dropout(0.5), nv.nn.Linear(4, 1))

    def forward(x):
        return m(x).sum()
    fn = nv.compile(forward) if compiled else forward
    out = []
    with nv.no_grad():      # (a result with autograd history is never replayed)
        for i, x in enumerate(XS[:7]):
            if i == 4:
                m[1].p = 0.25
            out.append(fn(nv.tensor(x)).item())
    return [out], [fn] if compiled else []


def test_a_module_setting_changed_between_calls_records_again():
    assert "Dropout.p changed 0.5 -> 0.25" in _twin(_module_setting)


# ---------------------------------------------------------------- the optimizer


def _optimizer_change(compiled: bool, change: str):
    """Optimizer state or structure changed between calls: a parameter group added,
    the state rewound to a snapshot, or the state dropped (``o.state = ...``,
    ``o.state.clear()``)."""
    m = _layers()
    if change == "add_param_group":
        o = nv.optim.SGD(m[0].parameters(), lr=0.1)
    elif change == "rewind":
        o = nv.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    else:
        o = nv.optim.Adam(m.parameters(), lr=0.01)

    fn = _training_step(m, o, compiled)
    out, snap = [], None
    for i, x in enumerate(XS[:8]):
        if i == 3:
            snap = copy.deepcopy(o.state_dict())
        if i == 5:
            if change == "add_param_group":
                o.add_param_group({"params": m[1].parameters(), "lr": 0.3})
            elif change == "rewind":
                o.load_state_dict(snap)
            elif change == "assign":
                o.state = collections.defaultdict(dict)
            else:
                o.state.clear()
        out.append(fn(nv.tensor(x)).item())
        if i == 5:
            out.append(float(m[1].weight.grad is None))
    state = [v.numpy() for s in o.state.values() for v in s.values()
             if isinstance(v, nv.Tensor)]
    return [out, *_weights(m), *state], [fn] if compiled else []


@pytest.mark.parametrize("change", ["add_param_group", "rewind", "assign", "clear"])
def test_optimizer_groups_and_state_changed_between_calls_record_again(change):
    why = "parameter groups changed" if change == "add_param_group" else \
        "state is another dict"
    assert why in _twin(_optimizer_change, change)


# ---------------------------------------------------------------- names the step reads


OPT = None      # the global optimizer of ``_global_optimizer``
SCALE = 1.0     # a global number


def _global_optimizer(compiled: bool):
    """The step reads the optimizer from a global, replaced by another one."""
    global OPT
    m = _layers()
    OPT = nv.optim.Adam(m.parameters(), lr=0.01)

    def step(x):
        OPT.zero_grad()
        loss = _loss(m, x) * SCALE
        loss.backward()
        OPT.step()
        return loss
    fn = nv.compile(step) if compiled else step
    losses = []
    for i, x in enumerate(XS[:8]):
        if i == 4:
            OPT = nv.optim.SGD(m.parameters(), lr=0.5)
        losses.append(fn(nv.tensor(x)).item())
    return [losses, *_weights(m)], [fn] if compiled else []


def test_a_global_optimizer_replaced_records_again():
    assert "global OPT changed" in _twin(_global_optimizer)


def _rebound_names(compiled: bool):
    """A closure variable (the model) and a global number rebound between calls."""
    global SCALE
    SCALE = 1.0
    m, other = _layers(), nv.nn.Sequential(nv.nn.Linear(4, 1))

    def evaluate(x):
        return m(x).sum() * SCALE
    fn = nv.compile(evaluate) if compiled else evaluate
    out = []
    with nv.no_grad():
        for i, x in enumerate(XS[:9]):
            if i == 3:
                SCALE = 2.0
            if i == 6:
                m = other
            out.append(fn(nv.tensor(x)).item())
    return [out], [fn] if compiled else []


def test_a_rebound_global_or_closure_variable_records_again():
    log = _twin(_rebound_names)
    assert "global SCALE changed" in log and "closure variable m changed" in log


class _Trainer:
    """A step method reading the optimizer from an attribute."""

    def __init__(self):
        self.model = _layers()
        self.opt = nv.optim.Adam(self.model.parameters(), lr=0.01)

    def step(self, x):
        self.opt.zero_grad()
        loss = _loss(self.model, x)
        loss.backward()
        self.opt.step()
        return loss


def _attribute_optimizer(compiled: bool):
    t = _Trainer()
    fn = nv.compile(t.step) if compiled else t.step
    losses = []
    for i, x in enumerate(XS[:8]):
        if i == 4:
            t.opt = nv.optim.SGD(t.model.parameters(), lr=0.5)
        losses.append(fn(nv.tensor(x)).item())
    return [losses, *_weights(t.model)], [fn] if compiled else []


def test_an_optimizer_replaced_on_an_attribute_records_again():
    assert "holds another object than the Adam" in _twin(_attribute_optimizer)


class _Holder:
    """The user's own object, holding a tensor the compiled function reads."""


def _attribute_tensor(compiled: bool):
    h = _Holder()
    h.w = nv.tensor(np.ones(4, np.float32))

    def fn(x):
        return (x * h.w).sum()
    f = nv.compile(fn) if compiled else fn
    out = []
    for i in range(6):
        if i == 3:
            h.w = nv.tensor(np.full(4, 2.0, np.float32))
        out.append(f(nv.tensor(XS[i][0])).item())
    return [out], [f] if compiled else []


def test_a_tensor_replaced_on_the_users_object_records_again():
    assert "holds another tensor object" in _twin(_attribute_tensor)


# ---------------------------------------------------------------- hooks


def _hooks_between_calls(compiled: bool, kind: str):
    """A hook registered after the step replays, and removed later: a replay skips
    the Python that would run it, so each change must record again."""
    m = _layers()
    o = nv.optim.SGD(m.parameters(), lr=0.1)

    fn = _training_step(m, o, compiled)
    losses, handle = [], None
    for i, x in enumerate(XS[:8]):
        if i == 3:
            if kind == "forward":           # scales the first layer's output
                handle = m[0].register_forward_hook(lambda mod, args, out: out * 2.0)
            else:                           # scales the gradient of a weight
                handle = m[1].weight.register_hook(lambda g: g * 3.0)
        if i == 6:
            handle.remove()
            handle.remove()                 # (a second remove changes nothing)
        losses.append(fn(nv.tensor(x)).item())
    return [losses, *_weights(m)], [fn] if compiled else []


@pytest.mark.parametrize("kind", ["forward", "tensor"])
def test_hooks_registered_or_removed_between_calls_record_again(kind):
    log = _twin(_hooks_between_calls, kind)
    # (a tensor hook running in backward then makes the step record every call)
    assert log.count("a hook was registered or removed") == (2 if kind == "forward" else 1), log


def test_hooks_a_function_registers_itself_do_not_stop_replays():
    """A function that registers and removes a hook on each call changes the count
    while recording; its replays (which skip that Python) still replay."""
    m = _layers()

    def fwd(x):
        h = m[0].register_forward_hook(lambda mod, args, out: out + 1.0)
        y = m(x)
        h.remove()
        return y
    fn = nv.compile(fwd)
    with nv.no_grad():      # (a result with autograd history is never replayed)
        got = [fn(nv.tensor(x)).numpy() for x in XS[:5]]
        want = [fwd(nv.tensor(x)).numpy() for x in XS[:5]]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert fn.replays >= 2


def test_arguments_that_alias_differently_record_again():
    """A call recorded with one tensor passed twice read one value; called with two
    (or a view of the other), it must not replay that (nor the other way round)."""
    f = nv.compile(lambda a, b: a * 2.0 + b)
    x, y = nv.tensor([1.0, 2.0]), nv.tensor([10.0, 20.0])
    for _ in range(3):
        np.testing.assert_array_equal(f(x, x).numpy(), [3.0, 6.0])
    assert f.replays >= 1
    np.testing.assert_array_equal(f(x, y).numpy(), [12.0, 24.0])
    assert "share storage differently" in nv.debug.cache_stats().compile_log[-1]
    g = nv.compile(lambda a, b: a.sum() + b.sum())
    z = nv.tensor([1.0, 2.0, 3.0])
    for _ in range(3):
        assert g(z, z[1:]).item() == 11.0
    assert g(z, y).item() == 36.0

    def add_into(buf, v):
        buf.add_(v)
        return buf.sum()
    h = nv.compile(add_into)
    b = nv.zeros(2)
    for _ in range(4):
        h(b, nv.tensor([1.0, 2.0]))
    assert h.replays >= 1
    np.testing.assert_array_equal(b.numpy(), [4.0, 8.0])
    c = nv.tensor([5.0, 5.0])
    assert h(c, c).item() == 20.0
    np.testing.assert_array_equal(c.numpy(), [10.0, 10.0])


def test_an_argument_that_is_a_global_the_function_writes_records_again():
    G = nv.tensor([1.0, 1.0])

    def h(x):
        G.add_(x)
        return x * 1.0
    f = nv.compile(h)
    for _ in range(3):
        f(nv.tensor([1.0, 2.0]))
    assert f.replays >= 1
    np.testing.assert_array_equal(G.numpy(), [4.0, 7.0])
    np.testing.assert_array_equal(f(G).numpy(), [8.0, 14.0])     # x is G, updated
    np.testing.assert_array_equal(G.numpy(), [8.0, 14.0])


def test_a_result_with_autograd_history_is_never_replayed_without_it():
    """A compiled forward whose result the caller differentiates: a replay could give
    back only the values, cut from the graph, so such a call runs recorded (with a
    warning), and every call's gradient is the uncompiled one."""
    nv.manual_seed(0)
    net = nv.nn.Linear(3, 2)
    fwd = nv.compile(lambda x: net(x))
    x = nv.ones(4, 3)
    grads = []
    with pytest.warns(RecompileWarning, match="autograd history"):
        for _ in range(4):
            net.zero_grad()
            out = fwd(x)
            assert out.requires_grad
            ((out ** 2).sum() + 0.0 * net.weight.sum()).backward()
            grads.append(net.weight.grad.numpy())
    assert fwd.replays == 0
    net.zero_grad()
    (net(x) ** 2).sum().backward()
    for g in grads:
        np.testing.assert_array_equal(g, net.weight.grad.numpy())
    with nv.no_grad():                  # without history to keep, it replays
        for _ in range(3):
            fwd(x)
    assert fwd.replays >= 1


def test_negative_zero_and_zero_arguments_record_apart():
    """-0.0 == 0.0 (and they hash alike), so a float argument keyed by value replayed
    a call recorded with one for the other: atan2(-0.0, -1) came out +pi. Floats are
    keyed by their bits (a NaN argument replays a NaN call)."""
    f = nv.compile(lambda x, c: nv.atan2(x * 0 + c, x))
    x = nv.tensor([-1.0, -2.0])
    for _ in range(3):
        np.testing.assert_allclose(f(x, 0.0).numpy(), [np.pi, np.pi], rtol=1e-6)
    assert f.replays >= 1
    np.testing.assert_allclose(f(x, -0.0).numpy(), [-np.pi, -np.pi], rtol=1e-6)
    assert "argument c changed 0.0 -> -0.0" in nv.debug.cache_stats().compile_log[-1]
    g = nv.compile(lambda x, c: x.clamp(min=c[0]) * c[1].real)
    for c in [(0.0, 2j + 1), (0.0, 2j + 1), (-0.0, 2j + 1), (-0.0, 2j - 1), (0.0, -1j)]:
        want = np.maximum(np.array([-1.0, -2.0]), c[0]) * c[1].real
        got = g(x, c).numpy()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    h = nv.compile(lambda x, c: x + c)
    for _ in range(3):
        assert np.isnan(h(x, float("nan")).numpy()).all()
    assert h.replays >= 1


def test_the_default_dtype_and_autocast_are_guarded():
    """What integer inputs divide into and what a matmul computes in depend on the
    default dtype and the autocast state, which the guard key left out: a replay
    returned the recorded call's dtype."""
    f = nv.compile(lambda x: x / 3)
    xi = nv.tensor([1, 2, 3])
    for _ in range(3):
        assert f(xi).dtype == nv.float32
    try:
        nv.set_default_dtype(nv.float64)
        assert f(xi).dtype == nv.float64
        np.testing.assert_array_equal(f(xi).numpy(), np.array([1, 2, 3]) / 3)
    finally:
        nv.set_default_dtype(nv.float32)
    assert "the default dtype changed" in nv.debug.cache_stats().compile_log[-1]
    assert f(xi).dtype == nv.float32
    h = nv.compile(lambda a, b: a @ b)
    a = nv.tensor([[1.0, 2.0], [3.0, 4.0]])
    for _ in range(3):
        assert h(a, a).dtype == nv.float32
    with nv.autocast("cpu", dtype=nv.bfloat16):
        for _ in range(3):
            assert h(a, a).dtype == nv.bfloat16
    assert h(a, a).dtype == nv.float32
    assert h.replays >= 2


def test_an_argument_object_at_a_dead_objects_address_records_again():
    """Objects other than tensors and Python scalars are keyed by identity, ``id``: an
    address, which a new object takes once the old one is freed (CPython reuses it at
    once). A temporary config object (or numpy array) read on the host each call was
    replayed with the first one's value baked in."""
    class Cfg:
        def __init__(self, v):
            self.v = v
    x = nv.tensor([1.0, 2.0])
    f = nv.compile(lambda x, c: x * c.v)
    g = nv.compile(lambda x, a: x * float(a[0]))
    for v in [0.5, 0.5, 0.5, 0.7, -1.5]:   # (each call records: a capture scans the heap)
        np.testing.assert_allclose(f(x, Cfg(v)).numpy(), [v, 2 * v], rtol=1e-6)
        np.testing.assert_allclose(g(x, np.array([v])).numpy(), [v, 2 * v], rtol=1e-6)
    # the same object again replays
    c = Cfg(0.25)
    for _ in range(4):
        np.testing.assert_allclose(f(x, c).numpy(), [0.25, 0.5], rtol=1e-6)
    assert f.replays >= 1
    # the mechanism, with the address forced: an entry recorded with one object is not
    # the entry of another object under the same key
    key = f._last_key
    first, other = Cfg(1.0), Cfg(2.0)
    entry = f._entry(key, [first])
    assert f._entry(key, [first]) is entry
    assert f._entry(key, [other]) is not entry
    assert "another object at the address" in nv.debug.cache_stats().compile_log[-1]


def test_an_input_whose_grad_the_call_filled_is_guarded_by_identity():
    """``(m(x) ** 2).sum().backward()`` fills ``x.grad``: a call with another input
    replayed into the first input's ``.grad`` (x2.grad stayed None, x.grad got x2's
    gradient added) (fuzz_compile)."""
    def run(compiled):
        nv.manual_seed(0)
        m = nv.nn.Linear(3, 2)

        def step(x):
            (m(x) ** 2).sum().backward()
        f = nv.compile(step) if compiled else step
        x = nv.tensor(np.ones((2, 3), np.float32), requires_grad=True)
        for _ in range(3):
            f(x)
        x2 = nv.tensor(np.full((2, 3), 2.0, np.float32), requires_grad=True)
        f(x2)
        return x.grad.numpy(), x2.grad.numpy()
    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)


def test_a_new_input_each_call_whose_grad_the_call_fills_says_why_it_records():
    """A step whose argument requiring grad is a new tensor each call cannot replay (its
    ``.grad`` is a place of another object each time): every call records, correctly,
    and the log says why at each call (it said nothing until the sixth call refused)."""
    nv.manual_seed(0)
    m = nv.nn.Linear(3, 2)

    def step(x):
        (m(x) ** 2).sum().backward()
    f = nv.compile(step)
    start = len(nv.debug.cache_stats().compile_log)
    grads = []
    for k in range(3):
        x = nv.tensor(np.full((2, 3), k + 1.0, np.float32), requires_grad=True)
        f(x)
        grads.append(x.grad.numpy())
    log = "\n".join(nv.debug.cache_stats().compile_log[start:])
    assert f.replays == 0 and f.recorded == 3
    assert "a result went to Tensor.grad, the previous call's to Tensor.grad of another " \
           "object" in log, log
    w = m.weight.detach().numpy().astype(np.float64)
    for k, g in enumerate(grads):           # d/dx sum((x W^T + b)^2) = 2 (x W^T + b) W
        x = np.full((2, 3), k + 1.0)
        np.testing.assert_allclose(g, 2 * (x @ w.T + m.bias.detach().numpy()) @ w,
                                   rtol=1e-5)


def test_a_global_the_function_writes_passed_in_turn_with_another_records_again():
    """``h(x)`` adds ``x`` into global ``A`` and doubles global ``B``: after ``h(A)``,
    ``h(B)`` replayed as if its argument were ``A`` (A 160, not 88) (fuzz_compile)."""
    def run(compiled):
        g = {"A": nv.tensor([1.0, 1.0]), "B": nv.tensor([5.0, 5.0])}

        def h(x):
            g["A"].add_(x)
            g["B"].mul_(2.0)
        f = nv.compile(h) if compiled else h
        for _ in range(3):
            f(g["A"])
        for _ in range(2):
            f(g["B"])
        return g["A"].numpy(), g["B"].numpy()
    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)


def test_a_function_held_by_a_module_is_a_guarded_setting():
    """``self.act = F.relu`` then ``m.act = F.gelu``: the replay kept relu."""
    class Net(nv.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nv.nn.functional.relu

        def forward(self, x):
            return self.act(x)
    m = Net()
    f = nv.compile(lambda x: m(x))
    x = nv.tensor([-1.0, 2.0])
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), [0.0, 2.0])
    assert f.replays >= 1
    m.act = nv.nn.functional.gelu
    np.testing.assert_allclose(f(x).numpy(), nv.nn.functional.gelu(x).numpy())
    assert "act changed" in nv.debug.cache_stats().compile_log[-1]


def test_a_returned_view_of_a_parameter_is_never_a_stale_copy():
    """``return m.weight.detach()[0]``: the recorded calls returned views that follow the
    weight's later updates, replays returned copies of the value at the time (-0.72
    where the view reads -1.12). Such a function runs recorded every call, warning."""
    def run(compiled):
        nv.manual_seed(0)
        m = nv.nn.Linear(3, 2)
        opt = nv.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            m(x).sum().backward()
            opt.step()
            return m.weight.detach()[0]
        f = nv.compile(step) if compiled else step
        x = nv.tensor(np.ones((2, 3), np.float32))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            outs = [f(x) for _ in range(4)]
        if compiled:
            assert any("returns a view" in str(w.message) for w in seen)
        return [o.numpy() for o in outs] + [m.weight.numpy()]
    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)


def test_a_tensor_step_count_is_counted_once_when_a_replay_gives_up():
    """Adam's ``state["step"]`` held as a tensor (as PyTorch keeps it): a replay counted
    it in place, then gave up (its runtime scalars changed) and the recorded call
    counted it again (102, not 101; weights off). The undo restores its value."""
    def run(compiled):
        nv.manual_seed(0)
        m = nv.nn.Linear(3, 2)
        opt = nv.optim.Adam(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            (m(x) ** 2).mean().backward()
            opt.step()
        f = nv.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RecompileWarning)
            for i in range(5):
                if i == 4:
                    opt.state[m.weight]["step"] = nv.tensor(100.0)
                f(nv.ones(2, 3))
        return opt.state[m.weight]["step"].item(), m.weight.numpy()
    (s1, w1), (s2, w2) = run(False), run(True)
    assert s1 == s2 == 101.0
    np.testing.assert_array_equal(w1, w2)


def test_a_pending_argument_is_keyed_by_the_device_it_is_realized_on():
    """A pending argument's device is None until realized: a call with one after a call
    with a realized one recorded again ("device changed cpu -> None") every time."""
    w = nv.tensor(np.eye(4, dtype=np.float32) * 0.5)
    f = nv.compile(lambda x: (x @ w).tanh().sum())
    start = len(nv.debug.cache_stats().compile_log)
    got = []
    with nv.no_grad():
        for i in range(6):
            if i % 2:                          # pending on odd calls (a factory's)
                x = nv.full((3, 4), 0.1 * i) * 2
            else:
                x = nv.tensor(np.full((3, 4), 0.1 * i, np.float32))
            got.append(float(f(x)))
    assert f.recorded == 2 and f.replays == 4, nv.debug.cache_stats().compile_log[start:]
    want = [12 * np.tanh(0.1 * i * (2 if i % 2 else 1) * 0.5) for i in range(6)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
