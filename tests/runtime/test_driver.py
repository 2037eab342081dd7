"""The native step driver (``nova_drive``): a step's kernels run in one native call.

First the driver alone, on a hand-built kernel list of counting kernels (each adds 1
to its output over its chunks; its output's address comes through the slot table and
the moving list, as an escaping result's does): every element counted exactly once per
kernel, in order, with or without the pool, with workers spinning or asleep (the
driver then returns to Python to wake them and resumes), timestamps when asked, and a
failing kernel stops the list there. Then through ``CpuProgram``: per-kernel profiles,
a pool held by another thread, a thread count that changes between runs.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import nova as nv
from nova.compiler.targets.cpu.pool import (
    DRIVE_ADDRESSES,
    DRIVE_CLOCK,
    DRIVE_COUNT,
    DRIVE_DONE,
    DRIVE_FAILED,
    DRIVE_MOVING,
    DRIVE_NEXT,
    DRIVE_RC,
    DRIVE_RECORDS,
    DRIVE_TIMES,
    DRIVE_WAKE,
    DRIVE_WORDS,
    REC_CHUNKS,
    REC_FN,
    REC_MOVE_AT,
    REC_MOVE_COUNT,
    REC_RANGES,
    REC_TABLE,
    REC_WORDS,
)
from nova.runtime import threads
from nova.runtime.cache import CACHE
from nova.runtime.threads import WorkerPool, ranges_array
from tests.runtime.test_threads import _counting_kernel, _split

EXTENT = 613


class _KernelList:
    """``kernels`` counting kernels, kernel k over random chunks into out[k]; out[k]'s
    address is table entry 0, moving (from slot k of the slot table); entry 1 is the
    error flag, fixed."""

    def __init__(self, kernels: int, max_chunks: int, seed: int):
        fn, self.address = _counting_kernel()
        rng = np.random.default_rng(seed)
        self.out = np.zeros((kernels, EXTENT), np.int64)
        self.flags = np.full((kernels, 1), -1, np.int64)
        self.tables = [(ctypes.c_void_p * 2)(0, self.flags[k].ctypes.data)
                       for k in range(kernels)]
        self.chunks = [_split(rng, EXTENT, int(rng.integers(1, max_chunks + 1)))
                       for _ in range(kernels)]
        self.ranges = [ranges_array(c) for c in self.chunks]
        self.records = (ctypes.c_int64 * (REC_WORDS * kernels))()
        self.moving = (ctypes.c_int64 * (2 * kernels))()
        self.slots = (ctypes.c_int64 * kernels)()
        for k in range(kernels):
            r = REC_WORDS * k
            self.records[r + REC_FN] = self.address
            self.records[r + REC_TABLE] = ctypes.addressof(self.tables[k])
            self.records[r + REC_RANGES] = ctypes.addressof(self.ranges[k])
            self.records[r + REC_CHUNKS] = len(self.chunks[k])
            self.records[r + REC_MOVE_AT], self.records[r + REC_MOVE_COUNT] = k, 1
            self.moving[2 * k], self.moving[2 * k + 1] = 0, k     # entry 0 <- slot k
            self.slots[k] = self.out[k].ctypes.data
        self.times = (ctypes.c_int64 * (2 * kernels))()
        self.control = (ctypes.c_int64 * DRIVE_WORDS)()
        c = self.control
        c[DRIVE_RECORDS], c[DRIVE_COUNT] = ctypes.addressof(self.records), kernels
        c[DRIVE_MOVING] = ctypes.addressof(self.moving)
        c[DRIVE_ADDRESSES] = ctypes.addressof(self.slots)
        c[DRIVE_TIMES] = ctypes.addressof(self.times)
        import time
        c[DRIVE_CLOCK] = time.CLOCK_MONOTONIC


def _pool_drive(pool: WorkerPool, kernels: _KernelList, codes: list[int]) -> int:
    """``pool.drive`` with the driver's return codes recorded."""
    real = pool._drive

    def recorded(control):
        codes.append(real(control))
        return codes[-1]
    pool._drive = recorded
    try:
        return pool.drive(kernels.control)
    finally:
        pool._drive = real


@pytest.mark.parametrize("spin_seconds", [2e-3, 0.0], ids=["spinning", "asleep"])
def test_every_kernel_counts_each_element_once_in_order(spin_seconds):
    pool = WorkerPool(3, spin_seconds=spin_seconds)
    try:
        for seed in range(5):
            kl, codes = _KernelList(40, 3, seed), []
            assert _pool_drive(pool, kl, codes) == DRIVE_DONE
            np.testing.assert_array_equal(kl.out, 1)
            assert kl.control[DRIVE_NEXT] == 40
            starts, ends = np.array(kl.times[0::2]), np.array(kl.times[1::2])
            assert (ends >= starts).all() and (starts[1:] >= ends[:-1]).all()
            if spin_seconds == 0.0:    # the sleeping workers were woken from Python
                assert DRIVE_WAKE in codes and codes[-1] == DRIVE_DONE
            assert pool.words[threads.OPEN] == 0
    finally:
        pool.close()


def test_without_the_pool_the_caller_runs_every_chunk():
    kl = _KernelList(25, 3, seed=7)
    drive = threads._native()[4]
    assert drive(kl.control) == DRIVE_DONE          # DRIVE_POOL is 0: no pool
    np.testing.assert_array_equal(kl.out, 1)


@pytest.mark.parametrize("use_pool", [True, False])
def test_a_failing_kernel_stops_the_list_there(use_pool):
    kl = _KernelList(12, 2, seed=3)
    kl.flags[5, 0] = 17                      # kernel 5 reports an error at element 17
    if use_pool:
        pool = WorkerPool(2)
        try:
            code = pool.drive(kl.control)
        finally:
            pool.close()
    else:
        code = threads._native()[4](kl.control)
    assert code == DRIVE_FAILED
    assert kl.control[DRIVE_NEXT] == 5 and kl.control[DRIVE_RC] == 1
    np.testing.assert_array_equal(kl.out[:6], 1)     # the failing kernel ran whole
    np.testing.assert_array_equal(kl.out[6:], 0)     # nothing after it


def test_a_pool_held_by_another_thread_runs_the_list_on_the_caller():
    pool = WorkerPool(2)
    kl, codes = _KernelList(10, 2, seed=4), []
    try:
        with pool._busy:                       # another thread's kernel, say
            result: list[int] = []
            t = threading.Thread(target=lambda: result.append(_pool_drive(pool, kl, codes)))
            t.start()
            t.join()
        assert result == [DRIVE_DONE]
        np.testing.assert_array_equal(kl.out, 1)
    finally:
        pool.close()


# ---------------------------------------------------------------- through CpuProgram

def _mlp_step(x: nv.Tensor, w1: nv.Tensor, w2: nv.Tensor) -> nv.Tensor:
    return ((x @ w1).relu() @ w2).softmax(-1).sum(0)


def _inputs():
    rng = np.random.default_rng(0)
    return [nv.from_numpy(rng.standard_normal(s).astype(np.float32))
            for s in ((64, 96), (96, 128), (128, 32))]


def test_the_profile_attributes_time_to_every_kernel_in_plan_order():
    x, w1, w2 = _inputs()
    _mlp_step(x, w1, w2).numpy()
    program = CACHE.last._program
    with nv.debug.profile() as prof:
        _mlp_step(x, w1, w2).numpy()
    (step,) = prof.steps
    assert [name for name, _, _ in step] == [st.plan.name for st in program.steps]
    assert all(seconds >= 0 for _, _, seconds in step) and prof.total() > 0


def test_changing_the_thread_count_rebuilds_the_kernel_list():
    x, w1, w2 = _inputs()
    prev = nv.get_num_threads()
    try:
        nv.set_num_threads(2)
        two = _mlp_step(x, w1, w2).numpy()
        program = CACHE.last._program
        nv.set_num_threads(1)
        one = _mlp_step(x, w1, w2).numpy()
        assert CACHE.last._program is program and program._ranges_threads[0] == 1
        assert all(len(r) == 1 for r in program._ranges)
        np.testing.assert_allclose(one, two, rtol=1e-6)
        nv.set_num_threads(2)
        np.testing.assert_array_equal(_mlp_step(x, w1, w2).numpy(), two)
    finally:
        nv.set_num_threads(prev)


def test_a_step_whose_pool_is_busy_elsewhere_is_still_right():
    x, w1, w2 = _inputs()
    prev = nv.get_num_threads()
    try:
        nv.set_num_threads(2)
        want = _mlp_step(x, w1, w2).numpy()
        pool = threads.pool()
        with pool._busy:
            result: list[np.ndarray] = []
            t = threading.Thread(target=lambda: result.append(_mlp_step(x, w1, w2).numpy()))
            t.start()
            t.join()
        np.testing.assert_array_equal(result[0], want)
    finally:
        nv.set_num_threads(prev)
