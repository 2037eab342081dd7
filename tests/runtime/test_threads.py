"""The native worker pool: its IR, and chunks handed out, run once each, across sleeps."""
import ctypes
import os
import threading
import time

import numpy as np
import pytest
from llvmlite import ir

import nova as nv
from nova.compiler.targets.cpu.pool import (
    IDLE,
    TICKET,
    emit_barrier,
    pool_module,
    thread_word,
)
from nova.compiler.targets.cpu.device import usable_cores
from nova.compiler.lowering.plan import TEAM_BARRIER
from nova.runtime import threads
from nova.runtime.kernel_cache import KERNELS
from nova.runtime.threads import WorkerPool, ranges_array

I32, I64 = ir.IntType(32), ir.IntType(64)


def _function_ir(name: str) -> str:
    text = str(pool_module("x86_64-unknown-linux-gnu", ""))
    start = text.index(f'@"{name}"') if f'@"{name}"' in text else text.index(f"@{name}")
    return text[start:text.index("\n}\n", start)]


def test_launch_seals_the_claim_word_writes_the_job_opens_it_then_moves_tickets():
    """The claim word is sealed (seq_cst) before the job's fields are written (release)
    and opened after; only then do the tickets move (seq_cst), each followed by a
    sequentially consistent read of the worker's IDLE (Dekker)."""
    body = _function_ir("nova_pool_launch")
    stores = [line for line in body.splitlines() if "store atomic" in line]
    assert "seq_cst" in stores[1] and "4294967295" in body   # the seal (DONE=0 is first)
    assert all("release" in line for line in stores[2:7])     # fn, args, ranges, n, rc
    assert "seq_cst" in stores[7]                              # open at chunk 0
    ticket = body.index("atomicrmw add")
    assert body.index(stores[7].strip()) < ticket
    assert "seq_cst" in body[ticket:body.index("\n", ticket)]
    idle = body.index("load atomic", ticket)
    assert "seq_cst" in body[idle:body.index("\n", idle)]


def test_a_chunk_is_claimed_by_swapping_the_exact_word_read_before_the_fields():
    """Claiming (worker and join alike): an acquire load of the claim word, then the
    job's fields, then a compare-and-swap of that word; every chunk run is counted
    with a release increment, and a failing code raises the job's return code."""
    for name in ("nova_pool_worker", "nova_pool_join"):
        body = _function_ir(name)
        swap = body.index("cmpxchg")
        assert "acq_rel" in body[swap:body.index("\n", swap)]
        fields = body[body.index("attempt"):swap]
        assert fields.count("load atomic") == 3              # fn, args, ranges
        assert "atomicrmw umax" in body and "release" in body[body.index("atomicrmw add"):]


def test_worker_announces_idle_then_rereads_its_ticket_before_sleeping():
    body = _function_ir("nova_pool_worker")
    announce = body.index("store atomic i64 1")
    assert "seq_cst" in body[announce:body.index("\n", announce)]
    reread = body.index("load atomic", announce)
    assert "seq_cst" in body[reread:body.index("\n", reread)]
    assert "ret i64 1" in body and "ret i64 0" in body    # sleep / stop
    assert "llvm.x86.sse2.pause" in body and "llvm.readcyclecounter" in body


def test_only_the_waiting_caller_yields_its_core():
    # join yields every YIELD_EVERY spins (a descheduled worker gets a core back); an idle
    # worker never does (it would keep sharing the caller's core).
    assert "sched_yield" in _function_ir("nova_pool_join")
    assert "sched_yield" not in _function_ir("nova_pool_worker")


def test_team_barrier_publishes_then_polls_with_acquire_and_yields():
    """``emit_barrier``: the arrival is a sequentially consistent increment of the
    team's barrier word (publishing the packed panel), the poll an acquire load against
    the target, and the wait pauses and yields now and then (threads may outnumber
    cores)."""
    module = ir.Module(name="barrier")
    module.triple = "x86_64-unknown-linux-gnu"
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64.as_pointer(), I64]),
                     name="wait")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    spins = b.alloca(I64)
    b.store(ir.Constant(I64, 0), spins)
    emit_barrier(module, b, fn.args[0], fn.args[1], spins)
    b.ret_void()
    text = str(module)
    arrive = text.index("atomicrmw add")
    assert f"i64 {TEAM_BARRIER}" in text[:arrive]
    assert "seq_cst" in text[arrive:text.index("\n", arrive)]
    poll = text.index("load atomic", arrive)
    assert "acquire" in text[poll:text.index("\n", poll)]
    assert "icmp sge" in text[poll:] and "llvm.x86.sse2.pause" in text
    assert "sched_yield" in text


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and 2 CPUs")
def test_each_worker_is_pinned_to_a_cpu_of_its_own_and_the_caller_is_not():
    cpus = sorted(os.sched_getaffinity(0))
    pool = WorkerPool(2)
    try:
        native = pool._workers[0].native_id
        deadline = time.monotonic() + 5
        while os.sched_getaffinity(native) != {cpus[1]} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.sched_getaffinity(native) == {cpus[1]}
        assert sorted(os.sched_getaffinity(0)) == cpus
        _dispatch(pool, 20, seed=9)
    finally:
        pool.close()


def test_no_pinning_with_more_threads_than_cpus_or_when_turned_off(monkeypatch):
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    assert threads.pinned_cpus(cpus + 1) is None
    monkeypatch.setenv("NOVA_PIN_THREADS", "0")
    assert threads.pinned_cpus(1) is None


def test_more_threads_than_cores_sleep_instead_of_spinning():
    cores = usable_cores()
    pool = WorkerPool(cores + 1)
    try:
        assert pool._spin == 0
        _dispatch(pool, 20, seed=6)
    finally:
        pool.close()


def test_off_x86_the_spin_clock_counts_iterations():
    text = str(pool_module("aarch64-unknown-linux-gnu", ""))
    assert "readcyclecounter" not in text and "pause" not in text


_COUNTER = {}


def _counting_kernel() -> tuple[ctypes.CFUNCTYPE, int]:
    """``i32 count(i64** args, i64 start, i64 end)``: args[0][i] += 1 for i in
    [start, end); returns 1 when args[1][0] lies in the range (an error flag)."""
    if "fn" not in _COUNTER:
        module = ir.Module(name="count")
        jit = KERNELS.jit
        module.triple, module.data_layout = jit.triple, jit.data_layout
        fn = ir.Function(module, ir.FunctionType(I32, [I64.as_pointer(), I64, I64]),
                         name="nova_test_count")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args, start, end = fn.args
        out = b.inttoptr(b.load(b.gep(args, [ir.Constant(I64, 0)])), I64.as_pointer())
        flag = b.load(b.inttoptr(b.load(b.gep(args, [ir.Constant(I64, 1)])),
                                 I64.as_pointer()))
        i = b.alloca(I64)
        b.store(start, i)
        head, body, done = (fn.append_basic_block(n) for n in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(b.icmp_signed("<", b.load(i), end), body, done)
        b.position_at_end(body)
        slot = b.gep(out, [b.load(i)])
        b.store(b.add(b.load(slot), ir.Constant(I64, 1)), slot)
        b.store(b.add(b.load(i), ir.Constant(I64, 1)), i)
        b.branch(head)
        b.position_at_end(done)
        hit = b.and_(b.icmp_signed(">=", flag, start), b.icmp_signed("<", flag, end))
        b.ret(b.zext(hit, I32))
        address = jit.load(module, ["nova_test_count"])["nova_test_count"]
        _COUNTER["fn"] = (ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
                                           ctypes.c_int64, ctypes.c_int64)(address), address)
    return _COUNTER["fn"]


def _split(rng, extent: int, n: int) -> list[tuple[int, int]]:
    cuts = sorted(rng.choice(np.arange(1, extent), size=n - 1, replace=False)) if n > 1 else []
    edges = [0, *map(int, cuts), extent]
    return list(zip(edges[:-1], edges[1:]))


def _dispatch(pool: WorkerPool, jobs: int, seed: int, extent: int = 997,
              error_every: int = 0, max_chunks: int | None = None) -> None:
    """``jobs`` jobs of random chunkings (1 to ``max_chunks`` chunks, default one per
    thread); every element is counted once per job, and a job whose error flag lies in
    some chunk returns 1."""
    fn, address = _counting_kernel()
    rng = np.random.default_rng(seed)
    out = np.zeros(extent, np.int64)
    flag = np.array([-1], np.int64)
    table = (ctypes.c_void_p * 2)(out.ctypes.data, flag.ctypes.data)
    for job in range(jobs):
        chunks = _split(rng, extent, int(rng.integers(1, (max_chunks or pool.threads) + 1)))
        flag[0] = int(rng.integers(0, extent)) if error_every and job % error_every == 0 \
            else -1
        rc = pool.run(fn, address, ctypes.addressof(table), ranges_array(chunks),
                      len(chunks))
        assert rc == (flag[0] >= 0), (job, chunks, flag[0])
    np.testing.assert_array_equal(out, np.full(extent, jobs))


@pytest.mark.parametrize("spin_seconds", [2e-3, 0.0])
def test_every_chunk_runs_exactly_once_spinning_or_sleeping(spin_seconds):
    pool = WorkerPool(3, spin_seconds=spin_seconds)
    try:
        _dispatch(pool, 300, seed=1, error_every=7)
        _dispatch(pool, 300, seed=11, error_every=7, max_chunks=12)
    finally:
        pool.close()
    assert not pool._workers[0].is_alive() and not pool._workers[1].is_alive()


def test_a_worker_that_fell_asleep_is_woken_by_the_next_job():
    pool = WorkerPool(2, spin_seconds=0.0)
    try:
        _dispatch(pool, 1, seed=2)
        word = thread_word(1, IDLE)
        for _ in range(1000):       # the worker announces it is idle within a moment
            if pool.words[word]:
                break
            threading.Event().wait(0.001)
        assert pool.words[word] == 1
        ticket = pool.words[thread_word(1, TICKET)]
        _dispatch(pool, 5, seed=3)
        assert pool.words[thread_word(1, TICKET)] > ticket
    finally:
        pool.close()


def test_two_python_threads_dispatching_at_once_both_get_right_results():
    pool = WorkerPool(2, spin_seconds=1e-4)
    errors = []

    def client(seed: int) -> None:
        try:
            _dispatch(pool, 200, seed=seed)
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)
    clients = [threading.Thread(target=client, args=(s,)) for s in (4, 5)]
    try:
        for c in clients:
            c.start()
        for c in clients:
            c.join()
    finally:
        pool.close()
    assert not errors


def test_more_chunks_than_threads_are_claimed_but_a_team_gets_one_per_thread():
    pool = WorkerPool(2, spin_seconds=1e-4)
    fn, address = _counting_kernel()
    try:
        _dispatch(pool, 100, seed=8, max_chunks=4 * pool.threads, error_every=5)
        with pytest.raises(ValueError, match="3 chunks for a pool of 2 threads.*one per "
                                             "thread for a team"):
            pool.run(fn, address, 0, ranges_array([(0, 1), (1, 2), (2, 3)]), 3,
                     team=(ctypes.c_int64 * 16)())
    finally:
        pool.close()


def test_set_num_threads_replaces_the_pool_and_stops_the_old_workers():
    prev = nv.get_num_threads()
    try:
        nv.set_num_threads(3)
        old = threads.pool()
        assert old.threads == 3
        nv.set_num_threads(2)
        assert all(not t.is_alive() for t in old._workers)
        assert threads.pool().threads == 2
        nv.set_num_threads(1)
        assert threads.pool() is None
    finally:
        nv.set_num_threads(prev)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_pool():
    prev = nv.get_num_threads()
    nv.set_num_threads(2)
    try:
        x = nv.from_numpy(np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / 65536)
        expect = (x @ x).numpy()
        pid = os.fork()
        if pid == 0:   # the child: run the same product on a fresh pool, report by status
            ok = threads.pool() is not None and np.allclose((x @ x).numpy(), expect)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        nv.set_num_threads(prev)
