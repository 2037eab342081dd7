"""``nv.compile``: replayed calls give exactly the recorded loop's results.

Every test runs the same loop compiled and uncompiled from the same seed and compares
bit for bit; the guard tests check that each kind of change records the call again
(and says why in ``nv.debug.cache_stats()``) and still gives the uncompiled result.
"""
from __future__ import annotations

import shutil
import signal
import threading
import warnings

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.capture import CaptureError, CompiledFunction
from nova.runtime.cache import CACHE, RecompileWarning

STEPS = 20


def _model(seed: int = 0, dropout: float = 0.1) -> nv.nn.Module:
    nv.manual_seed(seed)
    return nv.nn.Sequential(nv.nn.Linear(8, 16), nv.nn.GELU(), nv.nn.Dropout(dropout),
                            nv.nn.Linear(16, 4))


def _data(n: int = STEPS, batch: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, 8)).astype(np.float32), rng.integers(0, 4, batch))
            for _ in range(n)]


def _train(compiled: bool, optimizer: str = "adamw", zero_first: bool = True,
           dropout: float = 0.1, device: str = "cpu"):
    """20 steps of a small MLP with dropout, an lr schedule and AdamW (or SGD with
    momentum): (losses, final parameters, optimizer state, the step function, the
    model, the optimizer)."""
    m = _model(dropout=dropout).to(device)
    if optimizer == "adamw":
        opt = nv.optim.AdamW(m.parameters(), lr=1e-2)
    else:
        opt = nv.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = nv.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)

    def step(x, y):
        if zero_first:
            opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        if not zero_first:
            opt.zero_grad()
        return loss
    fn = nv.compile(step) if compiled else step
    losses = [fn(nv.tensor(x, device=device), nv.tensor(y, device=device)).item()
              for x, y in _data()]
    state = [v.numpy() for s in opt.state.values() for v in s.values()
             if isinstance(v, nv.Tensor)]
    return losses, [p.numpy() for p in m.parameters()], state, fn, m, opt


def _assert_same(a, b) -> None:
    assert a[0] == b[0]                                   # losses, bit for bit
    for x, y in zip(a[1] + a[2], b[1] + b[2]):            # parameters, optimizer state
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
@pytest.mark.parametrize("zero_first", [True, False], ids=["zero_grad_first", "zero_grad_last"])
def test_compiled_training_is_bit_identical_to_the_recorded_loop(optimizer, zero_first):
    want = _train(False, optimizer, zero_first)
    got = _train(True, optimizer, zero_first)
    _assert_same(want, got)
    fn = got[3]
    assert fn.replays >= STEPS - 4 and fn.recorded + fn.replays == STEPS


def test_gradients_left_by_a_replay_are_the_recorded_loops():
    """Without zero_grad after the step, p.grad holds the last gradient: a replay puts
    a new tensor there, as the recorded loop does."""
    want, got = _train(False, zero_first=True), _train(True, zero_first=True)
    assert got[3].replays > 0
    for p, q in zip(want[4].parameters(), got[4].parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_returned_structures_and_inputs_come_back():
    w = nv.zeros(3)

    @nv.compile
    def fn(x, scale: float):
        with nv.no_grad():
            w.add_(x)
        return {"sum": (w * scale).sum(), "pair": (x, None), "k": 7}
    for i in range(6):
        x = nv.tensor(np.full(3, float(i), np.float32))
        out = fn(x, 2.0)
        assert out["pair"][0] is x and out["pair"][1] is None and out["k"] == 7
        assert out["sum"].item() == 2.0 * 3 * sum(range(i + 1))
    assert fn.replays >= 3
    np.testing.assert_array_equal(w.numpy(), np.full(3, 15.0, np.float32))


# ---------------------------------------------------------------- guards


def _mlp_step():
    m = _model(dropout=0.0)
    opt = nv.optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    return m, opt, step


def _warm(fn, calls: int = 4, batch: int = 5):
    for x, y in _data(calls, batch):
        fn(nv.tensor(x), nv.tensor(y)).item()
    assert fn.replays > 0


def _reasons() -> str:
    return "\n".join(nv.debug.cache_stats().compile_log)


def _twin(change) -> None:
    """Run the guard scenario compiled and uncompiled; ``change(model, opt, fn)``
    happens after warm-up; both end with the same parameters."""
    results = []
    for compiled in (False, True):
        m, opt, step = _mlp_step()
        fn = nv.compile(step) if compiled else step
        for x, y in _data(4):
            fn(nv.tensor(x), nv.tensor(y)).item()
        change(m, opt, fn)
        for x, y in _data(3, seed=5):
            fn(nv.tensor(x), nv.tensor(y)).item()
        results.append([p.numpy() for p in m.parameters()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_a_new_input_shape_records_again_and_says_so():
    nv.debug.reset_cache()
    m, opt, step = _mlp_step()
    fn = nv.compile(step)
    _warm(fn)
    before = fn.recorded
    x, y = _data(1, batch=7)[0]
    fn(nv.tensor(x), nv.tensor(y)).item()
    assert fn.recorded == before + 1
    assert "input 0 shape changed (5, 8) -> (7, 8)" in _reasons()


def test_a_new_input_dtype_and_python_argument_record_again():
    nv.debug.reset_cache()
    calls = []

    @nv.compile
    def fn(x, k: float):
        calls.append(k)
        return x * k + 1
    x = nv.tensor(np.ones(4, np.float32))
    for _ in range(4):
        fn(x, 2.0)
    assert fn.replays == 2 and calls == [2.0, 2.0]
    np.testing.assert_array_equal(fn(x, 3.0).numpy(), np.full(4, 4.0, np.float32))
    assert "argument k changed 2.0 -> 3.0" in _reasons()
    np.testing.assert_array_equal(fn(nv.tensor(np.ones(4, np.float64)), 3.0).numpy(),
                                  np.full(4, 4.0))
    assert "input 0 dtype changed float32 -> float64" in _reasons()


def test_grad_mode_is_a_guard():
    nv.debug.reset_cache()
    w = nv.nn.Parameter(nv.tensor(np.ones(3, np.float32)))

    @nv.compile
    def fn(x):
        return (w * x).sum()
    x = nv.tensor(np.arange(3, dtype=np.float32))
    for _ in range(4):
        fn(x)
    with nv.no_grad():
        out = fn(x)
    assert out.item() == 3.0 and "grad mode changed" in _reasons()
    with nv.no_grad(), nv.engine("interp"):
        assert fn(x).item() == 3.0
    assert "engine changed cpu -> interp" in _reasons()


def test_a_replaced_parameter_records_again():
    def replace(m, opt, fn):
        layer = m[0]
        layer.weight = nv.nn.Parameter(layer.weight.detach() * 0.5)
        opt.param_groups[0]["params"][0] = layer.weight
    _twin(replace)
    assert "holds another tensor object than when captured" in _reasons()


def test_train_and_eval_are_guards():
    def to_eval(m, opt, fn):
        m.eval()
    _twin(to_eval)
    assert "training changed to False" in _reasons()


def test_a_parameter_changed_between_calls_is_read_again():
    def scale(m, opt, fn):
        with nv.no_grad():
            m[0].weight.mul_(0.5)          # pending when the next call comes
    _twin(scale)
    assert "holds a pending value" in _reasons()


def test_a_scheduler_changed_outside_the_function_is_seen():
    def set_lr(m, opt, fn):
        for g in opt.param_groups:
            g["lr"] = 0.01
    _twin(set_lr)


# ---------------------------------------------------------------- what cannot be captured


def test_a_host_read_inside_is_refused_with_its_line_and_stays_right():
    nv.debug.reset_cache()
    m, opt, step = _mlp_step()
    seen = []

    def with_item(x, y):
        loss = step(x, y)
        seen.append(loss.item())        # the Python below depends on the value
        return loss * (2.0 if seen[-1] > 100 else 1.0)
    fn = nv.compile(with_item)
    with pytest.warns(RecompileWarning, match=r"reads a tensor's value on the host.*"
                                              r"test_capture.py:\d+"):
        for x, y in _data(5):
            fn(nv.tensor(x), nv.tensor(y))
    assert fn.replays == 0 and len(seen) == 5
    strict = nv.compile(with_item, fullgraph=True)
    x, y = _data(1)[0]
    with pytest.raises(CaptureError, match="reads a tensor's value"):
        strict(nv.tensor(x), nv.tensor(y))


def test_results_stored_in_a_new_place_every_call_are_never_replayed_wrong():
    history = []
    w = nv.ones(2)

    def fn(x):
        y = w * x
        history.append(y)              # index grows every call
        return y.sum()
    compiled = nv.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecompileWarning)
        for i in range(10):
            assert compiled(nv.tensor(np.full(2, float(i), np.float32))).item() == 2.0 * i
    assert compiled.replays == 0 and len(history) == 10
    assert [h.numpy()[0] for h in history] == [float(i) for i in range(10)]


def test_a_view_of_a_value_made_inside_replays_and_its_base_stays_private():
    """``(x * w)[:, -1]`` returned (a view whose base only the view holds) replays as a
    plain tensor (it never replayed: the base had no place a replay could fill); a base
    also returned keeps the view relation by recording every call."""
    w = nv.tensor(np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3))

    def last_column(x):
        return (x * w)[:, -1]

    def both(x):
        y = x * w
        return y, y[1]
    compiled, pair = nv.compile(last_column), nv.compile(both)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecompileWarning)
        for i in range(5):
            x = np.full((2, 3), float(i), np.float32)
            got = compiled(nv.tensor(x))
            got[0] = -1.0                        # writes into this call's result only
            assert got.tolist() == [-1.0, 6.0 * i]
            y, row = pair(nv.tensor(x))
            row[0] = 9.0                          # the recorded view writes into y
            assert y.tolist() == [[i, 2.0 * i, 3.0 * i], [9.0, 5.0 * i, 6.0 * i]]
    assert compiled.replays >= 3 and pair.replays == 0


def test_a_value_made_from_numpy_inside_is_not_baked_in():
    data = [np.full(3, float(i), np.float32) for i in range(8)]
    calls = iter(range(8))

    def fn(scale):
        x = nv.tensor(data[next(calls)])        # new host data each call
        return (x * scale).sum()
    compiled = nv.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecompileWarning)
        got = [compiled(nv.tensor(2.0)).item() for _ in range(8)]
    assert got == [6.0 * i for i in range(8)] and compiled.replays == 0


# ---------------------------------------------------------------- failures, threads, signals


def test_a_kernel_failure_in_a_replay_fails_as_the_recorded_call_would():
    table = nv.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    acc = nv.zeros(3)

    @nv.compile
    def fn(idx):
        with nv.no_grad():
            acc.add_(table[idx].sum(0))
        return acc.sum()
    for _ in range(4):
        fn(nv.tensor(np.array([0, 1])))
    assert fn.replays > 0
    before = acc.numpy()
    # the replay's kernel reports the bad index; the call is then recorded, which
    # raises at the user's line exactly as the uncompiled function does
    with pytest.raises(IndexError, match="index 9 is out of bounds for dim 0 with size 4"):
        fn(nv.tensor(np.array([0, 9])))
    assert "a kernel failed" in _reasons()
    # nothing was applied twice or half: the next good call continues from ``before``
    acc_after = fn(nv.tensor(np.array([2, 3])))
    np.testing.assert_array_equal(acc.numpy(), before + np.array([15, 17, 19], np.float32))
    assert acc_after.item() == float((before + np.array([15, 17, 19])).sum())


def test_ctrl_c_during_a_replay_lands_after_the_step_is_applied(monkeypatch):
    want = _train(False)
    m = _model()
    opt = nv.optim.AdamW(m.parameters(), lr=1e-2)
    sched = nv.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)

    @nv.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss
    from nova.runtime import executable
    real_run = executable.Executable.run
    fired = []

    def run_then_signal(self, *args, **kwargs):
        if step.replays == 5 and not fired:
            fired.append(1)
            signal.raise_signal(signal.SIGINT)     # arrives in the middle of the replay
        return real_run(self, *args, **kwargs)
    monkeypatch.setattr(executable.Executable, "run", run_then_signal)
    losses = []
    data = _data()
    i = 0
    while i < len(data):
        x, y = data[i]
        try:
            losses.append(step(nv.tensor(x), nv.tensor(y)).item())
        except KeyboardInterrupt:
            assert fired
            losses.append(None)            # the step was applied; its loss is lost
        i += 1
    assert fired
    assert [a for a, b in zip(want[0], losses) if b is not None] == \
        [b for b in losses if b is not None]
    for p, q in zip(want[1], [p.numpy() for p in m.parameters()]):
        np.testing.assert_array_equal(p, q)


def test_threads_replaying_their_own_functions_match_one_thread():
    """Two threads train their own models with compiled steps at the same time. (No
    dropout: the generator is process-wide, as torch's, so two threads' draws would
    interleave.)"""
    want = [_train(False, dropout=0.0)[1] for _ in range(2)]
    got: list = [None, None]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            got[i] = _train(True, dropout=0.0)[1]
        except BaseException as e:   # reported below
            errors.append(e)
    # (models are built from the process-wide generator: build them one at a time)
    lock = threading.Lock()
    real = _model

    def locked(*a, **k):
        with lock:
            return real(*a, **k)
    globals()["_model"] = locked
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        globals()["_model"] = real
    assert errors == []
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- modules, API


def test_a_compiled_module_replays_its_evaluation_and_trains_as_itself():
    m = _model(dropout=0.0)
    cm = nv.compile(m)
    assert cm._orig_mod is m and list(cm.parameters()) == list(m.parameters())
    assert set(cm.state_dict()) == set(m.state_dict())
    x = nv.tensor(_data(1)[0][0])
    with nv.no_grad():
        want = m(x).numpy()
        outs = [cm(x).numpy() for _ in range(5)]
    for o in outs:
        np.testing.assert_array_equal(o, want)
    assert cm._replayed.replays > 0
    loss = cm(x).sum()                         # grad mode on: recorded, differentiable
    loss.backward()
    assert m[0].weight.grad is not None


def test_compile_arguments():
    assert isinstance(nv.compile(lambda x: x), CompiledFunction)
    assert isinstance(nv.compile(fullgraph=True)(lambda x: x), CompiledFunction)
    assert isinstance(nv.compile(lambda x: x, mode="reduce-overhead"), CompiledFunction)
    with pytest.raises(ValueError, match="backend"):
        nv.compile(lambda x: x, backend="eager")
    with pytest.raises(ValueError, match="mode"):
        nv.compile(lambda x: x, mode="fastest")
    with pytest.raises(TypeError, match="function or an nn.Module"):
        nv.compile(3)


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")
def test_compiled_training_on_the_gpu_is_bit_identical_to_the_recorded_loop():
    """On the CUDA emulator: the replays upload each call's host values (dropout keys,
    the schedule's learning rate), donate the parameters and optimizer state as the
    recorded loop does, and run the step as a CUDA graph. (AdamW only: SGD's momentum
    takes the same donation and upload paths, and the emulator's steps are slow.)"""
    optimizer = "adamw"
    from nova.runtime.cuda_runtime import use_backend
    from tests.runtime.emulated_cuda import EmulatorBackend
    nv.debug.reset_cache()
    with use_backend(EmulatorBackend()) as emu:
        want = _train(False, optimizer, device="cuda")
        got = _train(True, optimizer, device="cuda")
        assert all(p.device == nv.device("cuda") for p in got[4].parameters())
        # the last replay wrote the parameters and the optimizer state over their memory
        assert len(CACHE.last.last_donated) == 12    # 4 parameters, 2 moments each
        nv.realize()
    _assert_same(want, got)
    fn = got[3]
    assert fn.replays >= STEPS - 4 and fn.recorded + fn.replays == STEPS
    # one graph per loop (the recorded and the compiled one share the executable but
    # each loop's parameters live at their own addresses), replayed from then on
    assert emu.captures <= 3 and emu.graph_launches >= 2 * STEPS - 8
    nv.debug.reset_cache()


def test_a_replay_writes_parameters_over_their_old_buffers():
    """Donation as in the recorded loop: a parameter nobody else holds is updated in
    its own memory, replay after replay."""
    m, opt, step = _mlp_step()
    fn = nv.compile(step)
    _warm(fn, calls=5)
    w = m[0].weight
    address = w.node.buffer.__array_interface__["data"][0]
    for x, y in _data(4, seed=3):
        fn(nv.tensor(x), nv.tensor(y))
        assert w.node.buffer.__array_interface__["data"][0] == address
    held = w.clone()                   # now someone else reads the old value
    old = held.numpy()
    x, y = _data(1, seed=4)[0]
    fn(nv.tensor(x), nv.tensor(y))
    np.testing.assert_array_equal(held.numpy(), old)     # not overwritten
    assert not np.array_equal(w.numpy(), old)


def test_a_replay_failing_after_it_overwrote_donated_buffers_keeps_what_it_computed():
    """Run-time index errors in a replay: if the failing kernel comes after one that
    wrote over a donated buffer, the call can be neither undone nor run recorded. The
    results the replay computed before the failure are kept -- here acc's update, as
    the uncompiled call leaves it -- and only what depends on the failure fails: never
    a silently half-updated tensor, never an unrelated one lost."""
    acc = nv.zeros(4)
    table = nv.tensor(np.arange(4, dtype=np.float32))

    @nv.compile
    def fn(x, idx):
        with nv.no_grad():
            acc.add_(x)
        return (acc * table)[idx].sum()     # reads the updated acc: runs after it
    for _ in range(4):
        fn(nv.ones(4), nv.tensor(np.array([1, 2])))
    assert fn.replays > 0
    with pytest.raises((nv.RealizationError, IndexError)):
        fn(nv.ones(4), nv.tensor(np.array([1, 9])))
    np.testing.assert_array_equal(acc.numpy(), np.full(4, 5.0, np.float32))
    assert fn(nv.ones(4), nv.tensor(np.array([1, 2]))).item() == 6.0 * (1 + 2)   # goes on


def test_pending_inputs_are_inputs_not_baked_in():
    @nv.compile
    def fn(x):
        return (x * 2).sum()
    for k in range(1, 7):
        assert fn(nv.ones(3) * float(k)).item() == 6.0 * k     # pending when passed
    assert fn.replays >= 2


def test_gradients_accumulated_across_calls_replay_as_recorded():
    """No zero_grad at all: each call adds to p.grad (read from p.grad, written back
    to it), as the recorded loop does."""
    runs = []
    for compiled in (False, True):
        m = _model(dropout=0.0)
        opt = nv.optim.SGD(m.parameters(), lr=0.01)

        def step(x, y):
            F.cross_entropy(m(x), y).backward()
            opt.step()
        fn = nv.compile(step) if compiled else step
        for x, y in _data(8):
            fn(nv.tensor(x), nv.tensor(y))
        runs.append([t.numpy() for p in m.parameters() for t in (p, p.grad)])
        if compiled:
            assert fn.replays > 0
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_a_function_called_with_ever_new_arguments_keeps_a_bounded_cache():
    from nova.capture import MAX_ENTRIES

    @nv.compile
    def fn(x, k: float):
        return x * k

    x = nv.ones(2)
    with pytest.warns(RecompileWarning, match=f"{MAX_ENTRIES} different input shapes"):
        for k in range(3 * MAX_ENTRIES):
            assert fn(x, float(k)).numpy().tolist() == [float(k)] * 2
    assert len(fn._entries) == MAX_ENTRIES


# ---------------------------------------------------------------- the step boundary


def _head_step(compiled: bool):
    """A model whose logits the step function holds in a local while the optimizer
    steps (``_, loss = model(x, y)``, as nanoGPT writes it)."""
    m = _model(dropout=0.0)
    opt = nv.optim.AdamW(m.parameters(), lr=1e-2)

    def step(x, y):
        logits = m(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return (nv.compile(step) if compiled else step), m


def test_a_compiled_call_does_not_compute_what_it_drops():
    """Uncompiled, the step ``opt.step()`` leaves waiting runs at ``zero_grad()``
    (``realize.end_of_step``): the gradients are dropped by then, the logits the step
    function still holds are a result. Compiled, the call's return is the step
    boundary: the step computes neither as a result, and the values are the same."""
    results = {}
    for compiled in (False, True):
        fn, m = _head_step(compiled)
        losses = [fn(nv.tensor(x), nv.tensor(y)).item() for x, y in _data(6)]
        report = nv.debug.memory_report()
        results[compiled] = (losses, [p.numpy() for p in m.parameters()], report)
    (l0, p0, r0), (l1, p1, r1) = results[False], results[True]
    assert l0 == l1
    for a, b in zip(p0, p1):
        np.testing.assert_array_equal(a, b)
    gradients = sum(a.nbytes for a in p0)
    logits = 5 * 4 * 4
    assert logits <= r0.result_bytes < logits + gradients   # no gradient: cleared first
    assert r1.result_bytes < logits                     # the loss alone


def test_three_optimizer_steps_in_one_compiled_call_match_the_loop(monkeypatch):
    """Only a call's first step boundary waits for its return: the second realizes
    what is pending then (the first two steps), the third its own step, so the graphs
    stay the size of one or two steps; the values are the loop's."""
    import importlib
    realize_module = importlib.import_module("nova.tensor.realize")   # not the function
    sizes, run_step = [], realize_module._run_step

    def counting(graph_of, outputs, *args, **kwargs):
        sizes.append(len(graph_of(outputs).key[1]))
        return run_step(graph_of, outputs, *args, **kwargs)
    monkeypatch.setattr(realize_module, "_run_step", counting)
    def run(compiled):
        m = _model(dropout=0.0)
        opt = nv.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def three_steps(x, y):
            for xs, ys in ((x[:2], y[:2]), (x[2:4], y[2:4]), (x[4:], y[4:])):
                opt.zero_grad()
                loss = F.cross_entropy(m(xs), ys)
                loss.backward()
                opt.step()
            return loss
        fn = nv.compile(three_steps) if compiled else three_steps
        sizes.clear()
        fn(*(nv.tensor(a) for a in _data(1, batch=6)[0]))
        nv.realize()     # (uncompiled, the third step waits for a zero_grad() or a read)
        first_call = list(sizes)
        losses = [fn(nv.tensor(x), nv.tensor(y)).item()
                  for x, y in _data(6, batch=6, seed=1)]
        return losses, [p.numpy() for p in m.parameters()], fn, first_call
    want, got = run(False), run(True)
    assert want[0] == got[0]
    for a, b in zip(want[1], got[1]):
        np.testing.assert_array_equal(a, b)
    assert got[2].replays > 0
    plain = want[3]     # the first two at the next zero_grad(), the third at the read
    assert len(plain) == 3 and plain[0] == plain[1]
    two, one = got[3]                      # the first two together, then the third
    assert one == plain[0] and plain[0] < two <= 2 * plain[0]


def test_the_first_call_settles_the_collector_after_its_scan_not_during_it(monkeypatch):
    """A compile inside a recorded call does not collect and freeze the heap
    (``settling_deferred``): the scan for the call's results then collects only the
    unfrozen heap, and the call's compile is settled when the call returns -- even
    when the call raises."""
    import gc

    from nova import capture
    from nova.runtime import cache
    monkeypatch.setenv("NOVA_GC_FREEZE", "1")
    seen = []
    scan = capture._instances

    def spy(cls, collect=False, frozen_at=None):
        if collect:
            seen.append((frozen_at, cache.freezes()))
        return scan(cls, collect, frozen_at)
    monkeypatch.setattr(capture, "_instances", spy)
    w = nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))

    @nv.compile
    def f(x):
        return (x @ w * 1.75).sum(-1)          # a structure no other test compiles
    before = cache.freezes()
    f(nv.tensor(np.ones((4, 2), np.float32)))
    (frozen_at, at_scan), = seen
    assert frozen_at == at_scan               # the compile during the call froze nothing
    assert cache.freezes() > before and gc.get_freeze_count() > 0   # settled after

    @nv.compile
    def g(x):
        (x * 2.5 - 0.75).exp().sum().item()    # compiles, then fails
        raise ValueError("after a compile")
    mid = cache.freezes()
    with pytest.raises(ValueError, match="after a compile"):
        g(nv.tensor(np.ones(3, np.float32)))
    assert cache.freezes() > mid               # settled although the call raised


def test_the_results_scan_does_not_count_a_dead_frozen_cycle(monkeypatch):
    """A tensor in a cycle that died after being frozen is only freed by collecting the
    thawed heap: the scan does that whenever anything was frozen since the reading it
    is given, and collects just the unfrozen heap otherwise."""
    import gc

    from nova import capture
    from nova.runtime import cache
    from nova.tensor.tensor import Tensor
    monkeypatch.setenv("NOVA_GC_FREEZE", "1")
    marker = (3, 1, 7, 1, 2)                      # a shape no other live tensor has

    def dead_frozen_cycle() -> None:
        box: dict = {"t": nv.zeros(marker)}
        box["self"] = box                          # a cycle holding the tensor
        cache.freeze()

    def found(frozen_at: int) -> bool:
        return any(tuple(t.shape) == marker
                   for t in capture._instances(Tensor, collect=True, frozen_at=frozen_at))

    before = cache.freezes()
    dead_frozen_cycle()
    assert not found(before)                      # frozen since: the thawed collection
    reading = cache.freezes()
    dead_frozen_cycle()
    monkeypatch.setattr(capture, "freezes", lambda: reading)   # told nothing was since
    assert found(reading)                         # the cheap collection leaves it
    gc.unfreeze()
    gc.collect()
