"""Chunks claimed as threads come: workers that never arrive, arrive late or are benched
for contention change no result and hold nothing up (issue #25)."""
import os
import threading
import time

import numpy as np
import pytest

import nova as nv
from models.gpt import GPT, GPTConfig
from nova.compiler.lowering.plan import TEAM_ARRIVED, TEAM_CLOSED
from nova.compiler.targets.cpu.pool import ACTIVE, TICKET, thread_word
from nova.runtime import contention, threads
from nova.runtime.cache import CACHE
from nova.runtime.threads import WorkerPool
from tests.runtime.test_threads import _dispatch


class _AbsentWorkerPool(WorkerPool):
    """A pool whose worker ``absent`` does not start until ``arrive`` is set (or, with
    ``delay``, until that many seconds have passed): a thread the OS never schedules."""

    def __init__(self, threads: int, absent: int = 1, delay: float | None = None, **kw):
        self.arrive = threading.Event()
        self._absent, self._delay = absent, delay
        super().__init__(threads, **kw)

    def _work(self, w: int) -> None:
        if w == self._absent:
            self.arrive.wait(self._delay)
        super()._work(w)

    def close(self) -> None:
        self.arrive.set()
        super().close()


def test_a_worker_that_never_arrives_leaves_every_chunk_to_the_others():
    pool = _AbsentWorkerPool(3, absent=2, spin_seconds=1e-4)
    try:
        ticket = thread_word(2, TICKET)
        _dispatch(pool, 100, seed=21, max_chunks=12, error_every=9)
        assert pool.words[ticket] > 0        # it was handed jobs, and never took one
        pool.arrive.set()                    # it comes at last: nothing stale to run
        _dispatch(pool, 100, seed=22, max_chunks=12, error_every=9)
    finally:
        pool.close()


def test_a_benched_worker_is_left_out_of_launches():
    pool = WorkerPool(3, spin_seconds=1e-4)
    pool.contention.enabled = False      # only this test benches (a busy CI box would too)
    try:
        pool._set_benched(1, True)
        assert pool.active == pool.words[ACTIVE] == 2
        ticket = pool.words[thread_word(1, TICKET)]
        _dispatch(pool, 50, seed=23, max_chunks=9)
        assert pool.words[thread_word(1, TICKET)] == ticket
        assert pool.words[thread_word(2, TICKET)] > 0
        pool._set_benched(1, False)
        assert pool.active == 3
        _dispatch(pool, 50, seed=24, max_chunks=9)
        assert pool.words[thread_word(1, TICKET)] > ticket
    finally:
        pool.close()


@pytest.fixture
def process_pool():
    """Install a pool of the test's making as the process's (two threads)."""
    previous = nv.get_num_threads()
    nv.set_num_threads(2)
    installed = []

    def install(pool: WorkerPool) -> WorkerPool:
        threads._shutdown()
        threads._state["pool"] = pool
        installed.append(pool)
        return pool
    yield install
    threads._shutdown()
    nv.set_num_threads(previous)


def test_a_team_whose_member_never_arrives_closes_without_it(monkeypatch, process_pool):
    """A shared-B GEMM (the plan of a 4-core machine) on a pool whose worker never
    comes: the caller's chunk waits the join spins, closes the team as a team of one,
    then claims the absent worker's chunk too, which packs its own panels."""
    from nova.compiler.targets import cpu as plan_module
    from tests.tensor.test_matmul import _team_headers, _tiny_cache_spec
    monkeypatch.setattr(plan_module, "detect_cpu", lambda: _tiny_cache_spec(cores=4))
    nv.debug.reset_cache()
    process_pool(_AbsentWorkerPool(2, absent=1, spin_seconds=1e-4))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((257, 97)).astype(np.float32)
    b = rng.standard_normal((97, 130)).astype(np.float32)
    try:
        got = (nv.tensor(a) @ nv.tensor(b)).numpy()
        teams = _team_headers()
        program = CACHE.last._program
        (p,) = [p for p, team in enumerate(program._teams) if team is not None]
        arrived = program._teams[p][TEAM_ARRIVED]
    finally:
        nv.debug.reset_cache()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    ((members, _, barriers, chunks),) = teams
    assert members == chunks == 2
    assert arrived == TEAM_CLOSED | 1 and barriers == 0   # closed with one member


def _train(steps: int = 3) -> tuple[list[float], list[np.ndarray]]:
    """A few AdamW steps of a small GPT with dropout: losses and parameters."""
    nv.manual_seed(0)
    model = GPT(GPTConfig(vocab=64, block=32, d=64, layers=2, heads=2, dropout=0.1))
    opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = nv.tensor(rng.integers(0, 64, (8, 32)))
        y = nv.tensor(rng.integers(0, 64, (8, 32)))
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.numpy().copy() for p in model.parameters()]


def test_training_is_bit_identical_whoever_claims_the_chunks(process_pool):
    """The same steps on two threads, with a worker that never arrives (the caller
    claims every chunk), with one that arrives after a while, with the worker benched,
    and on one thread (each kernel one call over its whole extent): identical bits."""
    process_pool(WorkerPool(2))
    reference = _train()
    runs = {}
    process_pool(_AbsentWorkerPool(2, absent=1))
    runs["never arrives"] = _train()
    process_pool(_AbsentWorkerPool(2, absent=1, delay=0.05))
    runs["arrives late"] = _train()
    pool = process_pool(WorkerPool(2))
    pool.contention.enabled = False
    pool._set_benched(1, True)
    runs["benched"] = _train()
    threads._shutdown()
    nv.set_num_threads(1)
    runs["one thread"] = _train()
    for name, (losses, params) in runs.items():
        assert losses == reference[0], name
        assert all(np.array_equal(p, q) for p, q in zip(params, reference[1])), name


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Cpus:
    """Fake ``/proc/stat`` of one CPU: ``idle_rate`` of each tick of the clock is idle."""

    def __init__(self, clock: _Clock):
        self.clock, self.idle_rate = clock, 0.0
        self.idle = self.total = 0.0
        self._at = clock.now

    def __call__(self) -> dict[int, tuple[float, float]]:
        elapsed = self.clock.now - self._at
        self._at = self.clock.now
        self.idle += self.idle_rate * elapsed * 100
        self.total += elapsed * 100
        return {0: (self.idle, self.total)}


def _monitor(waits: dict[int, int], workers: int = 2):
    """A Contention over fake workers 101.. with a fake clock, run-queue waits and
    CPU idle time; the caller is this thread (its wait under ``waits[caller]``)."""
    clock = _Clock()
    cpus = _Cpus(clock)
    benched = {}
    ids = list(range(101, 101 + workers))
    monitor = contention.Contention(ids, lambda w, flag: benched.__setitem__(w, flag),
                                    clock=clock, waits=lambda tid: waits.get(tid, 0),
                                    idle=cpus)
    monitor.cpus = cpus
    return monitor, clock, benched


def _advance(monitor, clock, waits, seconds: float, shares: dict[int, float]) -> None:
    """Let ``seconds`` pass with thread tid waiting ``shares[tid]`` of it, then tick."""
    clock.now += seconds
    for tid, share in shares.items():
        waits[tid] = waits.get(tid, 0) + int(share * seconds * 1e9)
    monitor.tick()


def test_a_worker_whose_core_is_taken_is_benched_then_retried_when_cpus_idle():
    caller = threading.get_native_id()
    waits = {caller: 0}
    monitor, clock, benched = _monitor(waits)
    step = contention.CHECK_SECONDS
    _advance(monitor, clock, waits, step, {})            # the baseline
    _advance(monitor, clock, waits, step, {102: 0.5})    # worker 2 shares its core...
    assert monitor.benched == set()                      # (once could be Nova's own)
    _advance(monitor, clock, waits, step, {102: 0.5})    # ...at the next check too
    assert monitor.benched == {2} and benched == {2: True}
    _advance(monitor, clock, waits, step, {102: 0.0})    # (benched: it sleeps)
    assert monitor.benched == {2}
    clock.now += contention.PROBE_SECONDS                # no CPU was idle: no retry
    monitor.tick()
    assert monitor.benched == {2} and monitor.changes == 1
    monitor.cpus.idle_rate = 1.0                         # a CPU is idle now: retry
    clock.now += contention.PROBE_SECONDS
    monitor.tick()
    assert monitor.benched == set() and benched[2] is False
    _advance(monitor, clock, waits, step, {102: 0.5})    # yet it still waits: out, longer
    _advance(monitor, clock, waits, step, {102: 0.5})
    assert monitor.benched == {2}
    clock.now += contention.PROBE_SECONDS
    monitor.tick()
    assert monitor.benched == {2}                        # not yet: the wait doubled
    clock.now += contention.PROBE_SECONDS
    monitor.tick()
    assert monitor.benched == set()
    _advance(monitor, clock, waits, step, {})            # the core is free again
    _advance(monitor, clock, waits, step, {})
    assert monitor.benched == set()


def test_idle_shares_reads_this_machines_cpus():
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    shares = contention.idle_shares(cpus)
    if shares is None:
        pytest.skip("no /proc/stat here")
    assert set(shares) == set(cpus)
    assert all(0 <= idle <= total for idle, total in shares.values())


def test_a_caller_waiting_for_a_cpu_benches_the_last_worker_in_use():
    caller = threading.get_native_id()
    waits = {caller: 0}
    monitor, clock, benched = _monitor(waits, workers=3)
    step = contention.CHECK_SECONDS
    _advance(monitor, clock, waits, step, {})
    _advance(monitor, clock, waits, step, {caller: 0.4})
    assert monitor.benched == set()
    _advance(monitor, clock, waits, step, {caller: 0.4})
    assert monitor.benched == {3}
    _advance(monitor, clock, waits, step, {caller: 0.4})
    assert monitor.benched == {2, 3}
    _advance(monitor, clock, waits, step, {caller: 0.01})   # below the share: no change
    assert monitor.benched == {2, 3}


def test_one_check_of_waiting_benches_nobody():
    """A wait seen at one check only (Nova's own caller and spinning worker sharing a
    core for a moment, as around ``models/train.py``'s evaluations) benches no one;
    waits at checks that are not consecutive do not add up."""
    caller = threading.get_native_id()
    waits = {caller: 0}
    monitor, clock, benched = _monitor(waits, workers=3)
    step = contention.CHECK_SECONDS
    _advance(monitor, clock, waits, step, {})
    for _ in range(5):
        _advance(monitor, clock, waits, step, {102: 0.15, caller: 0.3})
        _advance(monitor, clock, waits, step, {})
    _advance(monitor, clock, waits, step, {102: 0.15})    # worker 2, then worker 3
    _advance(monitor, clock, waits, step, {103: 0.15})
    assert monitor.benched == set() and monitor.changes == 0 and benched == {}


def test_ticks_between_checks_read_nothing():
    reads = []
    clock = _Clock()
    monitor = contention.Contention([101], lambda w, flag: None, clock=clock,
                                    waits=lambda tid: reads.append(tid) or 0)
    reads.clear()
    for _ in range(100):
        clock.now += contention.CHECK_SECONDS / 1000
        monitor.tick()
    assert len(reads) <= 2 * 2       # at most one check (caller and worker) in that time


def test_the_real_counters_are_read_for_the_pools_workers():
    pool = WorkerPool(2, spin_seconds=1e-4)
    try:
        if not pool.contention.enabled:
            pytest.skip("no /proc/self/task/<tid>/schedstat here")
        wait = pool.contention._read(pool._workers[0].native_id)
        assert isinstance(wait, int) and wait >= 0
        time.sleep(contention.CHECK_SECONDS)
        _dispatch(pool, 5, seed=25)
    finally:
        pool.close()
