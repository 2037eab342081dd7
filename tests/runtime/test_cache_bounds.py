"""Memory bounds of the compiled-step and kernel caches (#17).

A training loop over many shapes used to grow without bound: every compiled kernel
left ~100-200 KB of LLVM memory in the process (llvmlite's pass pipeline), kernel code
was never unmapped, and an evicted step's IR stayed frozen out of the collector. Now
the optimizer runs in a worker process, a kernel's code lives exactly as long as a
step that calls it, and eviction lets the collector see the dropped IR. These tests
check that bound end to end (in a subprocess, so other tests' memory does not count),
and that freeing code never pulls it from under a step that can still run.
"""
import gc
import json
import os
import signal
import subprocess
import sys
import weakref

import numpy as np
import pytest

import nova as nv
from nova.runtime import compile_worker, kernel_cache
from nova.runtime.cache import CACHE, KEEP_RECENT
from nova.runtime.kernel_cache import KERNELS

X = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)

RSS_SCRIPT = """
import gc, json, warnings
import numpy as np
import nova as nv
from nova.runtime.kernel_cache import KERNELS

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

def step(n):    # four kernels per shape (x read transposed: no kernel is flat, so shared)
    x = nv.tensor(np.linspace(-1, 1, 6 * n, dtype=np.float32).reshape(6, n)).transpose(0, 1)
    y = (x * 1.5 + 0.5).exp()
    return (y / y.sum(-1, keepdim=True)).amax(-1).sum().item()

nv.debug.set_step_cache_limit(0)       # keep only the KEEP_RECENT most recent
warnings.simplefilter("ignore")          # the recompile warning, expected here
for n in range(2, 12):
    step(n)
gc.collect()
before, compiled = rss_mib(), KERNELS.stats.compiled
for n in range(12, 12 + {shapes}):
    step(n)
gc.collect()
print(json.dumps({{"growth_mib": rss_mib() - before,
                   "compiled": KERNELS.stats.compiled - compiled,
                   "evictions": nv.debug.cache_stats().evictions}}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS read from /proc")
def test_rss_stays_bounded_over_many_shapes_with_a_small_step_cache():
    """70 shapes, 280 kernels compiled: the old code grew ~30 MiB here (~110 KB per
    kernel compiled, measured 45 MiB over 100 shapes), this grows ~1 MiB."""
    shapes = 70
    out = subprocess.run([sys.executable, "-c", RSS_SCRIPT.format(shapes=shapes)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NOVA_CACHE": "0", "NOVA_ENGINE": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["compiled"] == 4 * shapes and report["evictions"] >= shapes
    assert report["growth_mib"] < 12, report


@pytest.fixture
def tiny_step_cache():
    """A step cache that keeps only the KEEP_RECENT most recent steps."""
    nv.debug.reset_cache()
    limit = CACHE.limit_bytes
    nv.debug.set_step_cache_limit(0)
    yield
    nv.debug.set_step_cache_limit(limit)
    nv.debug.reset_cache()


def _realize(*make) -> "nv.Tensor":
    """Realize the tensors ``make`` builds from X in one step; returns its executable."""
    a = nv.tensor(X)
    nv.realize(*[f(a) for f in make])
    return CACHE.last


def _names(exe) -> list[str]:
    return [st.kernel.name for st in exe._program.steps]


def _fill_the_cache() -> None:
    """KEEP_RECENT steps of other structures, so every earlier step is evicted."""
    for k in range(KEEP_RECENT):
        a = nv.tensor(np.full((k + 2, 3), 0.5, np.float32))
        (a.tanh() * (k + 1)).sum().item()


def test_the_least_recently_used_step_goes_first(tiny_step_cache):
    steps = [lambda a, k=k: (a * (k + 2)).sum() for k in range(KEEP_RECENT + 1)]
    for make in steps[:KEEP_RECENT]:
        _realize(make)
    _realize(steps[0])                                    # a hit: now the most recent
    _realize(steps[KEEP_RECENT])                          # evicts steps[1]
    stats = nv.debug.cache_stats()
    assert (stats.hits, stats.evictions, stats.entries) == (1, 1, KEEP_RECENT)
    _realize(steps[0])
    assert nv.debug.cache_stats().hits == 2
    _realize(steps[1])
    assert nv.debug.cache_stats().misses == KEEP_RECENT + 2
    with pytest.raises(ValueError, match="set_step_cache_limit: expected a byte count"):
        nv.debug.set_step_cache_limit(-1)


def test_an_evicted_step_still_held_keeps_its_code_and_runs(tiny_step_cache):
    held = _realize(lambda a: (a.cos() * 3 - 1).sum(-1))
    dropped = weakref.ref(_realize(lambda a: (a.sqrt() + 2).amax(-1)))
    dropped_names = set(_names(dropped()))
    released = KERNELS.stats.released
    _fill_the_cache()
    gc.collect()
    assert held not in CACHE._entries.values() and dropped() is None
    assert nv.debug.cache_stats().evictions >= 2
    assert set(_names(held)) <= set(KERNELS.loaded())
    assert not dropped_names & set(KERNELS.loaded())      # unused code is unmapped
    assert KERNELS.stats.released >= released + len(dropped_names)
    assert held._program.n_args == 1
    for _ in range(2):
        (out,) = held.run([X * 2])
        np.testing.assert_allclose(out, (np.cos(X * 2) * 3 - 1).sum(-1), rtol=1e-5, atol=1e-5)


def test_a_kernel_shared_with_a_live_step_survives_the_eviction_of_another(tiny_step_cache):
    only = weakref.ref(_realize(lambda a: (a.sin() * 2 + 1).sum(-1)))
    both = _realize(lambda a: (a.sin() * 2 + 1).sum(-1), lambda a: (a.exp() - 1).amax())
    shared = set(_names(only())) & set(_names(both))
    assert shared, "the two steps were meant to share their first kernel"
    _fill_the_cache()
    gc.collect()
    assert only() is None and both not in CACHE._entries.values()
    assert shared <= set(KERNELS.loaded())
    first, second = both.run([X])
    np.testing.assert_allclose(first, (np.sin(X) * 2 + 1).sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, (np.exp(X) - 1).max(), rtol=1e-5, atol=1e-6)
    del both
    gc.collect()
    assert not shared & set(KERNELS.loaded())              # its last user is gone


def test_an_evicted_steps_ir_is_collected(tiny_step_cache):
    """After a compile every survivor is frozen out of the collector (gc.freeze); the
    IR of a step evicted later is cyclic garbage that must become collectable."""
    module = weakref.ref(_realize(lambda a: (a * 7 + 2).sum()).module)
    _fill_the_cache()
    gc.collect()
    assert module() is None


def test_a_kernel_reused_after_its_release_is_loaded_again(tiny_step_cache):
    step = lambda a: (a.sin() * 5).sum(-1)   # noqa: E731
    name, = set(_names(_realize(step)))
    _fill_the_cache()
    gc.collect()
    assert name not in KERNELS.loaded()
    np.testing.assert_allclose(_realize(step).run([X])[0], (np.sin(X) * 5).sum(-1),
                               rtol=1e-5, atol=1e-5)
    assert name in KERNELS.loaded()


# ----------------------------------------------------------------- the compile worker

def _plan(make):
    from nova.compiler.irgen import build_module
    from nova.compiler.lowering import plan_kernels
    from nova.compiler.passes.fusion import fuse
    from nova.tensor.realize import pending_graph
    (plan,) = plan_kernels(fuse(build_module(pending_graph(make(nv.tensor(X))))))
    return plan


def test_the_worker_emits_the_object_this_process_would():
    plan = _plan(lambda a: (a.sin() * 3).sum(-1))
    jit = KERNELS.jit
    here = jit.tm.emit_object(KERNELS.optimized(plan))
    assert KERNELS._compile(plan) == here


def test_a_worker_that_dies_or_grows_is_replaced():
    jit = KERNELS.jit
    worker = compile_worker.CompileWorker(jit.cpu, jit.features)
    plan = _plan(lambda a: (a * 3 + 1).sum())
    text = KERNELS.llvm_ir(plan)
    try:
        first = worker.compile(plan.name, text)
        os.kill(worker.pid, signal.SIGKILL)                   # killed from outside
        assert worker.compile(plan.name, text) == first
        assert worker.starts == 2
        worker.limit_bytes = 0                                # recycled after each compile
        worker.compile(plan.name, text)
        assert worker.pid is None
        worker.compile(plan.name, text)
        assert worker.starts == 3
        with pytest.raises(compile_worker.InvalidModule, match="expected"):
            worker.compile("bad", "define void @f( {")
        assert worker.compile(plan.name, text) == first     # still in step after an error
    finally:
        worker.close()


def test_an_interrupt_while_waiting_for_the_worker_ends_it_and_the_next_compile_works(
        monkeypatch):
    jit = KERNELS.jit
    worker = compile_worker.CompileWorker(jit.cpu, jit.features)
    plan = _plan(lambda a: (a * 5 - 1).sum())
    text = KERNELS.llvm_ir(plan)
    try:
        first = worker.compile(plan.name, text)
        proc = worker._proc
        real = compile_worker.receive

        def interrupted(stream):       # Ctrl-C lands after the request was sent
            monkeypatch.setattr(compile_worker, "receive", real)
            raise KeyboardInterrupt
        monkeypatch.setattr(compile_worker, "receive", interrupted)
        with pytest.raises(KeyboardInterrupt):
            worker.compile(plan.name, text)
        assert worker.pid is None and proc.poll() is not None   # its answer is not read later
        assert worker.compile(plan.name, text) == first and worker.starts == 2
    finally:
        worker.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_worker():
    jit = KERNELS.jit
    worker = compile_worker.CompileWorker(jit.cpu, jit.features)
    plan = _plan(lambda a: (a * 6 + 3).sum())
    text = KERNELS.llvm_ir(plan)
    try:
        first = worker.compile(plan.name, text)
        parents = worker.pid
        pid = os.fork()
        if pid == 0:                   # the child: never return into pytest
            ok = worker.compile(plan.name, text) == first and worker.pid != parents
            worker.close()
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert worker.pid == parents and worker.compile(plan.name, text) == first
    finally:
        worker.close()


def test_a_kernel_that_kills_the_worker_is_a_compile_error(monkeypatch, tmp_path):
    """LLVM aborting on a kernel used to take the whole process down; now the worker
    dies (twice: the kernel is retried once on a fresh worker) and the caller gets a
    CompileError naming the kernel and how the worker ended."""
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(tmp_path))
    monkeypatch.setattr(compile_worker, "_BOOT", (
        "import sys, os; del sys.path[0]; g = {'__name__': 'worker'}; "
        "exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'), g); "
        "g['optimize'] = lambda tm, mod, level, vectorize=True: os._exit(3); g['serve']()"))
    cache = kernel_cache.KernelCache()
    plan = _plan(lambda a: (a * 8).sum())
    with pytest.raises(kernel_cache.CompileError,
                       match=f"kernel {plan.name} .*ended twice.*exit status 3.*IR written"):
        cache._compile(plan)
    assert cache.jit.worker.starts == 2 and cache.jit.worker_problem is None


def test_invalid_ir_from_the_worker_is_a_compile_error_with_the_ir(monkeypatch, tmp_path):
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(tmp_path))
    plan = _plan(lambda a: (a * 4).sum())
    monkeypatch.setattr(kernel_cache, "module_for", lambda *_: "define void @broken( {")
    with pytest.raises(kernel_cache.CompileError, match=f"kernel {plan.name} .*failed LLVM "
                                                        f"verification.*IR written to"):
        KERNELS._compile(plan)


def test_without_a_worker_kernels_compile_here_with_a_warning(monkeypatch):
    plan = _plan(lambda a: (a - 2).abs().sum())
    expected = KERNELS._compile(plan)
    cache = kernel_cache.KernelCache()
    monkeypatch.setattr(compile_worker.sys, "executable", "/nonexistent/python")
    with pytest.warns(kernel_cache.CompileWorkerWarning, match="cannot start"):
        assert cache._compile(plan) == expected
    assert "cannot start" in cache.jit.worker_problem
    assert cache._compile(plan) == expected                  # in-process from now on
    (kernel,) = cache.get_all([plan])
    assert kernel.address and kernel.name == plan.name
