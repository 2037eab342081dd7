"""Fault injection: Ctrl-C at random points of realizations, concurrent Python threads.

What must hold (``nova.tensor.realize``, ``nova.runtime.threads``,
``nova.runtime.interrupts``): an interrupted step is abandoned cleanly or, once it has
begun writing over donated buffers, finished before the interrupt is delivered; every
later result is right; the worker pool never runs a stale chunk or counts one twice;
threads running the same or different structures get what one thread would.
"""
import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import nova as nv
from nova.runtime import threads
from nova.compiler.targets.cpu.pool import OPEN
from nova.runtime.threads import WorkerPool, ranges_array
from tests.runtime.test_threads import _counting_kernel, _dispatch


@pytest.fixture
def watchdog():
    """A hang (the bug this module looks for) fails the run with a traceback instead
    of blocking CI."""
    faulthandler.dump_traceback_later(240, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def two_threads(request):
    """Kernels split across a pool of two threads (on any machine), spinning or
    sleeping at once (``NOVA_SPIN_US=0``) as the parameter says."""
    prev, spin = nv.get_num_threads(), os.environ.get("NOVA_SPIN_US")
    if request.param is not None:
        os.environ["NOVA_SPIN_US"] = request.param
    nv.set_num_threads(2)            # a fresh pool, which reads NOVA_SPIN_US
    yield
    if spin is None:
        os.environ.pop("NOVA_SPIN_US", None)
    else:
        os.environ["NOVA_SPIN_US"] = spin
    nv.set_num_threads(prev)


# ---------------------------------------------------------------- the worker pool

@pytest.mark.parametrize("spin_seconds", [2e-3, 0.0])
@pytest.mark.parametrize("where", ["after_launch", "before_join"])
def test_an_interrupt_between_launch_and_join_leaves_the_pool_in_step(
        spin_seconds, where, watchdog):
    """KeyboardInterrupt right after the chunks are handed out (before sleeping workers
    are woken, or before the caller joins): the pool finishes the abandoned job before
    ``run`` returns -- every chunk counted once, the caller's too -- and every later job
    counts each element exactly once."""
    pool = WorkerPool(3, spin_seconds=spin_seconds)
    fn, address = _counting_kernel()
    out = np.zeros(997, np.int64)
    flag = np.array([-1], np.int64)
    table = (ctypes.c_void_p * 2)(out.ctypes.data, flag.ctypes.data)
    real_launch, real_join = pool._launch, pool._join

    def launch_then_interrupt(*args):
        real_launch(*args)
        raise KeyboardInterrupt

    def interrupt_before_join(state):
        pool._join = real_join                 # once: the recovery's join is real
        raise KeyboardInterrupt

    try:
        for _ in range(3):
            if where == "after_launch":
                pool._launch = launch_then_interrupt
            else:
                pool._join = interrupt_before_join
            if spin_seconds == 0.0:
                time.sleep(0.01)          # the workers are asleep when the job comes
            out[:] = 0
            with pytest.raises(KeyboardInterrupt):
                pool.run(fn, address, ctypes.addressof(table),
                         ranges_array([(0, 300), (300, 600), (600, 997)]), 3)
            pool._launch, pool._join = real_launch, real_join
            np.testing.assert_array_equal(out, 1)          # finished before returning
            assert pool.words[OPEN] == 0
            _dispatch(pool, 60, seed=11)
    finally:
        pool._launch, pool._join = real_launch, real_join
        pool.close()


def test_a_recovery_interrupted_too_is_finished_by_the_next_job(watchdog):
    """The job's recovery (join) interrupted as well: the next job finds the pool's
    ``OPEN`` word set, cancels the chunks nobody claimed yet (their buffers may be
    gone), waits for those the workers claimed, and then counts exactly."""
    pool = WorkerPool(3, spin_seconds=0.0)
    fn, address = _counting_kernel()
    out = np.zeros(997, np.int64)
    flag = np.array([-1], np.int64)
    table = (ctypes.c_void_p * 2)(out.ctypes.data, flag.ctypes.data)
    real_join = pool._join

    def interrupted(state):
        raise KeyboardInterrupt
    try:
        pool._join = interrupted               # the join and the recovery's join
        with pytest.raises(KeyboardInterrupt):
            pool.run(fn, address, ctypes.addressof(table),
                     ranges_array([(0, 300), (300, 600), (600, 997)]), 3)
        pool._join = real_join
        assert pool.words[OPEN] == 1
        _dispatch(pool, 30, seed=12)
        assert pool.words[OPEN] == 0
        for start, end in ((0, 300), (300, 600), (600, 997)):   # each chunk: once or never
            assert set(np.unique(out[start:end])) in ({0}, {1}), (start, end)
    finally:
        pool._join = real_join
        pool.close()


def test_an_interrupted_team_kernel_does_not_deadlock(monkeypatch, watchdog):
    """A product whose threads share one packed B panel (their chunks meet at barriers
    for every member) interrupted between launch and join: the step's driver returned
    to Python to wake the sleeping worker, and Ctrl-C lands there. The recovery runs
    the caller's chunk too, so the worker gets past its barriers; later products are
    right."""
    from nova.compiler.targets.cpu import configurator
    from nova.compiler.targets.cpu.pool import DRIVE_WAKE
    monkeypatch.setattr(configurator, "SHARED_B_MIN_CORES", 1)
    monkeypatch.setenv("NOVA_SPIN_US", "0")      # workers sleep at once: the driver wakes
    prev = nv.get_num_threads()
    nv.set_num_threads(2)
    nv.debug.reset_cache()
    try:
        rng = np.random.default_rng(3)
        a = rng.standard_normal((768, 512)).astype(np.float32)
        b = rng.standard_normal((512, 768)).astype(np.float32)
        xa, xb = nv.from_numpy(a), nv.from_numpy(b)
        assert "share the packed B panel" in nv.debug.dump_ir(xa @ xb, stage="fused")
        ref = a.astype(np.float64) @ b
        np.testing.assert_allclose((xa @ xb).numpy(), ref, rtol=1e-3, atol=1e-2)
        pool = threads.pool()
        real_drive, real_join, codes, joins = pool._drive, pool._join, [], []

        def interrupt_at_the_wake(control):
            code = real_drive(control)
            codes.append(code)
            if code == DRIVE_WAKE and codes.count(DRIVE_WAKE) == 1:
                raise KeyboardInterrupt
            return code

        def counted_join(state):
            joins.append(state)
            return real_join(state)
        time.sleep(0.01)                          # the worker is asleep when the job comes
        pool._drive, pool._join = interrupt_at_the_wake, counted_join
        try:
            with pytest.raises(KeyboardInterrupt):
                (xa @ xb).numpy()
        finally:
            pool._drive, pool._join = real_drive, real_join
        assert codes == [DRIVE_WAKE] and len(joins) == 1    # recovered by a real join
        assert pool.words[OPEN] == 0
        np.testing.assert_allclose((xa @ xb).numpy(), ref, rtol=1e-3, atol=1e-2)
    finally:
        nv.set_num_threads(prev)
        nv.debug.reset_cache()


# ---------------------------------------------------------------- realizations

def _interrupter(delay: float) -> threading.Timer:
    """A timer that sends SIGINT to the main thread ``delay`` seconds after it starts
    (start it inside the ``try``: it may fire before ``start`` returns)."""
    main = threading.main_thread().ident
    return threading.Timer(delay, signal.pthread_kill, (main, signal.SIGINT))


@pytest.mark.parametrize("two_threads", [None, "0"], indirect=True,
                         ids=["spinning", "sleeping"])
def test_sigint_at_random_points_of_realizations_never_gives_a_wrong_value(
        two_threads, watchdog):
    """Many trials, each a loop of realizations hit by one SIGINT at a random moment:
    an in-place update (whose step donates the old buffer) and a product split across
    the pool's threads. The update's value always equals one application per recorded
    ``sub_`` (``_version``), whether the interrupt landed while recording, compiling,
    running or binding; the product always equals numpy's."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((192, 160)).astype(np.float32)
    b = rng.standard_normal((160, 224)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    xa, xb = nv.from_numpy(a), nv.from_numpy(b)
    w = nv.zeros(256, 256)
    ones = nv.ones(256, 256)
    (xa @ xb).numpy(), (w - ones).numpy()          # compile outside the trials
    interrupted = 0
    for trial in range(40):
        timer = _interrupter(float(rng.uniform(0, 4e-3)))
        try:
            timer.start()
            for _ in range(30):
                w.sub_(ones)
                nv.realize(w)
                product = (xa @ xb).numpy()
                assert np.abs(product - ref).max() < 1e-3
            timer.join()
            time.sleep(0.001)
        except KeyboardInterrupt:
            interrupted += 1
        timer.join()
        np.testing.assert_array_equal(w.numpy(), np.full((256, 256), -w._version, np.float32))
        np.testing.assert_allclose((xa @ xb).numpy(), ref, atol=1e-3)
    assert interrupted == 40         # every trial's signal arrived (inside the try)


def _one_update_with_a_signal_mid_run(monkeypatch, signum: int, raised: type) -> None:
    """``w.add_(1)`` realized with ``signum`` raised as its native run starts: the update
    is bound, exactly once, before the handler's ``raised`` reaches the caller."""
    w = nv.zeros(64)
    (w + 1).numpy()
    calls = []
    real_drive = threads.drive

    def drive_then_signal(control):
        if not calls:
            signal.raise_signal(signum)            # lands in the middle of the run
        calls.append(control)
        return real_drive(control)
    with monkeypatch.context() as m:
        m.setattr(threads, "drive", drive_then_signal)
        w.add_(1)
        with pytest.raises(raised):
            nv.realize(w)
    assert len(calls) == 1
    assert w.node.realized                         # bound before the handler ran
    np.testing.assert_array_equal(w.numpy(), np.ones(64, np.float32))


def test_an_interrupted_donating_step_finishes_before_the_interrupt_is_raised(monkeypatch):
    """A SIGINT arriving while a step writes over donated buffers (here: as its native
    run starts) is held until the step's results are bound, then raised: the update is
    applied exactly once."""
    _one_update_with_a_signal_mid_run(monkeypatch, signal.SIGINT, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class _Timeout(Exception):
    """What the SIGALRM handler of ``_raising_alarm`` raises (the timeout idiom)."""


@contextlib.contextmanager
def _raising_alarm():
    """A SIGALRM handler raising ``_Timeout`` installed for the body (its handler
    yielded), the previous one back after, with no timer left running."""
    def on_alarm(signum, frame):
        raise _Timeout
    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        yield on_alarm
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_any_python_signal_handler_is_held_back_while_a_donating_step_binds(monkeypatch):
    """A SIGALRM handler raising (the ``setitimer`` timeout idiom) was not held back: its
    exception could land between a donating step's run and its binding, and the next
    realization ran the step again over the overwritten buffer -- an update applied
    twice (fuzz_threads). Every Python-level handler is deferred now, then delivered."""
    with _raising_alarm() as on_alarm:
        _one_update_with_a_signal_mid_run(monkeypatch, signal.SIGALRM, _Timeout)
        assert signal.getsignal(signal.SIGALRM) is on_alarm

        # and at random moments of a loop of donating updates: never one applied twice
        rng = np.random.default_rng(1)
        ones = nv.ones(256, 256)
        w = nv.zeros(256, 256)
        (w - ones).numpy()
        for trial in range(30):
            try:
                signal.setitimer(signal.ITIMER_REAL, float(rng.uniform(0, 4e-3)))
                for _ in range(30):
                    w.sub_(ones)
                    nv.realize(w)
                time.sleep(0.01)
            except _Timeout:
                pass
            signal.setitimer(signal.ITIMER_REAL, 0)
            np.testing.assert_array_equal(w.numpy(), np.full((256, 256), -w._version,
                                                             np.float32))


def test_a_signal_handlers_exception_in_a_step_without_donation_reaches_the_caller(
        monkeypatch):
    """An exception a signal handler raises while a step runs is the program's, not a
    failure of the step: realization let it be caught as one and retried the values in
    smaller steps, so the caller never saw its timeout. It propagates now; the values
    stay pending and are computed by the next realization."""
    with _raising_alarm():
        x = nv.arange(16, dtype=nv.float32)
        y, z = x * 3 + 1, x - 2                    # x stays referenced: nothing donated

        runs = []

        def signalled(control):
            runs.append(control)
            signal.raise_signal(signal.SIGALRM)
            raise AssertionError("the handler's exception is raised before this")
        with monkeypatch.context() as m, warnings.catch_warnings():
            warnings.simplefilter("error")          # (no "computing them in smaller steps")
            m.setattr(threads, "drive", signalled)
            with pytest.raises(_Timeout):
                nv.realize(y, z)
        assert len(runs) == 1                       # not retried in parts
        assert not y.node.realized and not z.node.realized
        np.testing.assert_array_equal(y.numpy(), np.arange(16, dtype=np.float32) * 3 + 1)


def test_an_interrupt_in_a_step_without_donation_leaves_its_values_pending(monkeypatch):
    x = nv.arange(16, dtype=nv.float32)
    y = x * 3 + 1                                  # x stays referenced: nothing donated

    def interrupted(control):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(threads, "drive", interrupted)
        with pytest.raises(KeyboardInterrupt):
            y.numpy()
    assert not y.node.realized
    np.testing.assert_array_equal(y.numpy(), np.arange(16, dtype=np.float32) * 3 + 1)


# ---------------------------------------------------------------- threads

def _run_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as e:  # reported to the test below
            errors.append(e)
    workers = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return errors


def test_threads_running_the_same_structure_get_their_own_results(watchdog):
    """Four threads replay one cached step (same structure, their own data) many
    times: each result equals numpy's for that thread's data. (The cached program's
    arena and buffer tables are shared: runs of one program take turns.)"""
    w = np.random.default_rng(1).standard_normal((96, 80)).astype(np.float32)
    wt = nv.from_numpy(w)

    def work(i: int) -> None:
        rng = np.random.default_rng(100 + i)
        for _ in range(60):
            x = rng.standard_normal((64, 96)).astype(np.float32)
            got = ((nv.from_numpy(x) @ wt).relu() * 2 + 1).sum(-1).numpy()
            want = (np.maximum(x.astype(np.float64) @ w, 0) * 2 + 1).sum(-1)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)

    assert _run_threads(work, 4) == []


def test_threads_training_different_models_match_one_thread():
    """Two threads each train their own small model (different structures) for a few
    AdamW steps; each ends with exactly the weights it gets alone. (The generator is
    process-wide, as torch's: the models are built and seeded in this thread.)"""
    def build(width: int) -> nv.nn.Module:
        nv.manual_seed(width)
        return nv.nn.Sequential(nv.nn.Linear(8, width), nv.nn.GELU(), nv.nn.Linear(width, 4))

    def train(model: nv.nn.Module, width: int) -> np.ndarray:
        opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
        rng = np.random.default_rng(width)
        for _ in range(6):
            x = nv.from_numpy(rng.standard_normal((16, 8)).astype(np.float32))
            out = model(x)
            loss = (out * out).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        return np.concatenate([p.numpy().ravel() for p in model.parameters()])

    widths = (16, 24)
    alone = {wd: train(build(wd), wd) for wd in widths}
    models = {wd: build(wd) for wd in widths}
    together: dict[int, np.ndarray] = {}
    errors = _run_threads(
        lambda i: together.__setitem__(widths[i], train(models[widths[i]], widths[i])), 2)
    assert errors == []
    for wd in widths:
        np.testing.assert_array_equal(together[wd], alone[wd])


def test_grad_mode_engine_and_remat_are_per_thread():
    """``no_grad``, ``nv.engine`` and ``set_remat`` in one thread leave another
    thread's ops and steps alone; a new thread starts with the defaults."""
    seen: dict[str, object] = {}
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        inside.wait()
        x = nv.ones(3, requires_grad=True)
        seen["grad"] = (x * 2).grad_fn is not None
        seen["engine"], seen["remat"] = nv.get_engine(), nv.get_remat()
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with nv.no_grad(), nv.engine("interp"):
        prev = nv.get_remat()
        nv.set_remat("aggressive")
        try:
            inside.set()
            assert release.wait(30)
            assert not nv.is_grad_enabled() and nv.get_engine() == "interp"
        finally:
            nv.set_remat(prev)
    t.join()
    assert seen == {"grad": True, "engine": "cpu", "remat": "default"}


def test_a_thread_realizes_only_its_own_pending_values():
    """Realizing in one thread does not compute values another thread is recording."""
    ready, done = threading.Event(), threading.Event()
    held: dict[str, nv.Tensor] = {}

    def recorder() -> None:
        held["y"] = nv.arange(4, dtype=nv.float32) * 5
        ready.set()
        done.wait(30)

    t = threading.Thread(target=recorder)
    t.start()
    assert ready.wait(30)
    (nv.ones(2) + 1).numpy()
    assert not held["y"].node.realized
    done.set()
    t.join()
    np.testing.assert_array_equal(held["y"].numpy(), np.arange(4) * 5.0)


def test_concurrent_random_draws_never_share_an_offset():
    keys: list[tuple[int, int]] = []
    lock = threading.Lock()
    from nova.tensor.random import default_generator

    def draw(_: int) -> None:
        for _ in range(500):
            k = tuple(default_generator.next_key().numpy().tolist())
            with lock:
                keys.append(k)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)          # switch threads as often as CPython can
    try:
        assert _run_threads(draw, 4) == []
    finally:
        sys.setswitchinterval(interval)
    assert len(set(keys)) == len(keys) == 2000


def test_pool_is_created_once_when_threads_race_to_start_it():
    prev = nv.get_num_threads()
    nv.set_num_threads(2)
    try:
        pools: list[object] = []
        barrier = threading.Barrier(4)

        def start(_: int) -> None:
            barrier.wait()
            pools.append(threads.pool())

        assert _run_threads(start, 4) == []
        assert len({id(p) for p in pools}) == 1
    finally:
        nv.set_num_threads(prev)


def test_a_cached_step_replays_while_another_thread_compiles(monkeypatch):
    """Hits do not wait behind a compile: one thread's compile is held open while
    another thread replays a cached step."""
    from nova.tensor import realize as realization
    x = nv.ones(8)
    nv.realize(x)
    (x * 3).numpy()                                  # cached: the same structure below
    entered, release = threading.Event(), threading.Event()
    real = realization._compile

    def slow(graph, *args):
        if any(n.op == "exp" for n in graph.nodes):
            entered.set()
            release.wait(60)
        return real(graph, *args)

    monkeypatch.setattr(realization, "_compile", slow)
    t = threading.Thread(target=lambda: nv.arange(5, dtype=nv.float32).exp().numpy())
    t.start()
    replayed = threading.Event()

    def replay() -> None:
        if (x * 3).tolist() == [3.0] * 8:
            replayed.set()
    try:
        assert entered.wait(60)
        r = threading.Thread(target=replay)
        r.start()
        assert replayed.wait(30)       # a lock held through the compile would block it
    finally:
        release.set()
        t.join()
        r.join()


def test_a_graph_whose_shared_value_another_thread_realized_meanwhile_is_extracted_again(
        monkeypatch):
    """Thread A extracts a step reading a pending value S and waits for the compile lock;
    thread B realizes S (a cache hit) meanwhile, which makes S's node a buffer in place;
    A then built its IR from the changed node: ``KeyError: 'buffer'`` (fuzz_threads, 16
    of 16 trials with sleeps). Simulated here in one thread: S is realized between the
    extraction and the lookup."""
    from nova.tensor import realize as realize_module
    nv.debug.reset_cache()
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    (nv.from_numpy(a) * 2 + 1).numpy()                # S's own step is cached
    shared = nv.from_numpy(a) * 2 + 1
    c = 1.25
    y = (shared * c).exp().sum(0)                     # a new structure reading S
    monkeypatch.setattr(realize_module.step_cache, "load", lambda name: None)  # compiled
    real = realize_module.CACHE.lookup
    calls = []

    def lookup(key, build, engine=""):
        if not calls:
            calls.append(key)
            realize_module._realize_cpu([shared.node])   # "thread B", while A waits
        return real(key, build, engine)
    monkeypatch.setattr(realize_module.CACHE, "lookup", lookup)
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # (not "a step ... failed (KeyError: 'buffer')")
        got = y.numpy()
    np.testing.assert_allclose(got, np.exp((a * 2 + 1) * c).sum(0), rtol=1e-6)
    assert calls
