"""A step's missing kernels compile on several workers at once (issue #21): the same
object code as one after another, failures reported as the serial compile would, and
progress on stderr once a batch takes a while."""
import io

import pytest

from nova.runtime import compile_progress, kernel_cache
from tests.runtime.test_cache_bounds import _plan

MAKERS = [lambda a: (a.sin() * 3).sum(-1), lambda a: (a * 8).sum(), lambda a: a.exp() - 1,
          lambda a: (a - 2).abs().max(-1).values, lambda a: a.relu() * a,
          lambda a: (a * a).sum(0)]


_CACHES: list[kernel_cache.KernelCache] = []


@pytest.fixture(autouse=True)
def _close_workers():
    """End the worker processes of the caches a test made (their pipes otherwise stay
    open until exit)."""
    yield
    while _CACHES:
        cache = _CACHES.pop()
        if cache._jit is not None:
            for worker in cache.jit.workers:
                worker.close()


def _fresh_cache(monkeypatch, jobs: int) -> kernel_cache.KernelCache:
    monkeypatch.setenv("NOVA_COMPILE_JOBS", str(jobs))
    monkeypatch.setenv("NOVA_CACHE", "0")
    cache = kernel_cache.KernelCache()
    _CACHES.append(cache)
    return cache


def test_parallel_compilation_emits_the_bytes_a_serial_one_does(monkeypatch):
    plans = [_plan(make) for make in MAKERS]
    serial = _fresh_cache(monkeypatch, 1)
    one_by_one = [serial._compile(plan) for plan in plans]
    parallel = _fresh_cache(monkeypatch, 3)
    objects, error = parallel._compile_all(plans)
    assert error is None and objects == one_by_one
    assert len(parallel.jit.workers) == 3
    assert sum(w.starts > 0 for w in parallel.jit.workers) >= 2   # they shared the work
    assert parallel.stats.compiled == len(plans) and parallel.stats.compile_seconds > 0
    kernels = parallel.get_all(plans)                         # and they load and run
    assert [k.name for k in kernels] == [p.name for p in plans]


def test_without_workers_a_parallel_batch_compiles_here_with_one_warning(monkeypatch):
    from nova.runtime import compile_worker
    plans = [_plan(make) for make in MAKERS[:3]]
    expected = [kernel_cache.KERNELS._compile(plan) for plan in plans]
    cache = _fresh_cache(monkeypatch, 2)
    monkeypatch.setattr(compile_worker.sys, "executable", "/nonexistent/python")
    with pytest.warns(kernel_cache.CompileWorkerWarning, match="cannot start") as caught:
        objects, error = cache._compile_all(plans)
    assert error is None and objects == expected and len(caught) == 1
    assert "cannot start" in cache.jit.worker_problem


def test_a_failing_kernel_in_a_parallel_batch_is_the_error_and_the_rest_are_kept(
        monkeypatch, tmp_path):
    """The third kernel's IR is broken: the batch reports it (naming it, with its IR
    written), the two before it come back compiled (to be cached), as serially."""
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(tmp_path))
    plans = [_plan(make) for make in MAKERS[:5]]
    real = kernel_cache.module_for
    broken = plans[2].name
    monkeypatch.setattr(kernel_cache, "module_for", lambda plan, *a: (
        "define void @broken( {" if plan.name == broken else real(plan, *a)))
    cache = _fresh_cache(monkeypatch, 2)
    objects, error = cache._compile_all(plans)
    assert isinstance(error, kernel_cache.CompileError)
    assert f"kernel {broken}" in str(error) and "IR written to" in str(error)
    assert len(objects) == 2 and all(isinstance(o, bytes) and o for o in objects)
    with pytest.raises(kernel_cache.CompileError, match=f"kernel {broken}"):
        cache.get_all(plans)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_silent_for_a_second_then_counts_kernels():
    clock, out = _Clock(), io.StringIO()
    progress = compile_progress.CompileProgress(10, 2, stream=out, clock=clock)
    for _ in range(3):
        clock.now += 0.2
        progress.done()
    assert out.getvalue() == ""                       # under a second: nothing
    clock.now = 1.5
    progress.done()
    assert out.getvalue() == "nova: compiling kernels 4/10 (2 workers, 1.5 s)\n"
    clock.now = 2.0
    progress.done()                                   # a log gets a line every 2 s
    assert out.getvalue().count("\n") == 1
    clock.now = 4.0
    for _ in range(5):
        progress.done()
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[-2] == "nova: compiling kernels 10/10 (2 workers, 4.0 s)"
    assert lines[-1] == "nova: compiled 10 kernels in 4.0 s"


def test_on_a_terminal_progress_rewrites_one_line():
    clock, out = _Clock(), _Terminal()
    progress = compile_progress.CompileProgress(3, 1, stream=out, clock=clock)
    clock.now = 1.2
    progress.done()
    progress.done()
    progress.close()
    text = out.getvalue()
    assert text.startswith("\rnova: compiling kernels 1/3 (1 worker, 1.2 s)")
    assert "\rnova: compiling kernels 2/3" in text and text.endswith("in 1.2 s\n")
    assert text.count("\n") == 1


def test_a_quick_batch_prints_nothing_at_all():
    out = io.StringIO()
    progress = compile_progress.CompileProgress(2, 2, stream=out)
    progress.done()
    progress.done()
    progress.close()
    assert out.getvalue() == ""


def test_compile_jobs_must_be_a_positive_integer(monkeypatch):
    from nova import config
    monkeypatch.setenv("NOVA_COMPILE_JOBS", "1.5")
    with pytest.raises(ValueError, match="NOVA_COMPILE_JOBS='1.5': expected an integer"):
        config.COMPILE_JOBS.get()
    monkeypatch.setenv("NOVA_COMPILE_JOBS", "3")
    assert config.COMPILE_JOBS.get() == 3


def test_each_kernel_compiles_at_its_configured_llvm_level(monkeypatch):
    """``configurator.llvm_speed_level``: a column reduction at O2 (O3's loop passes
    made it the slowest kernel class to compile, for no speed), the rest at O3 -- the
    same level in a worker as in this process."""
    from nova.compiler.targets.cpu.configurator import llvm_speed_level
    from nova.runtime.compile_worker import CompileWorker
    column, other = _plan(lambda a: (a * a).sum(0)), _plan(lambda a: (a * a).sum(-1))
    assert (column.schedule.strategy, llvm_speed_level(column)) == ("column", 2)
    assert llvm_speed_level(other) == 3
    sent, here = [], []
    original, optimize = CompileWorker.compile, kernel_cache.optimize

    def spy(self, name, text, level=3):
        sent.append((name, level))
        return original(self, name, text, level)
    monkeypatch.setattr(CompileWorker, "compile", spy)
    monkeypatch.setattr(kernel_cache, "optimize", lambda tm, mod, level=3, vectorize=True: (
        here.append(level), optimize(tm, mod, level, vectorize)))
    cache = _fresh_cache(monkeypatch, 1)
    from_worker = [cache._compile(column), cache._compile(other)]
    assert sent == [(column.name, 2), (other.name, 3)]
    in_process = [cache.jit.tm.emit_object(cache.optimized(p)) for p in (column, other)]
    assert here == [2, 3] and in_process == from_worker


_DRIVER_SCRIPT = """
import json, numpy as np, nova as nv
from nova.runtime import kernel_cache
from nova.runtime.compile_worker import CompileWorker
from nova.compiler.targets.cpu.llvm import support_for
from tests.runtime.test_cache_bounds import _plan
from tests.runtime.test_parallel_compile import MAKERS
gemm = _plan(lambda a: (a @ a.T).relu())
plans = [gemm] + [_plan(make) for make in MAKERS[:2]]
sent = []
original = CompileWorker.compile
def spy(self, name, text, level=3, vectorize=True):
    sent.append((name, vectorize))
    return original(self, name, text, level, vectorize)
CompileWorker.compile = spy
cache = kernel_cache.KERNELS
objects, error = cache._compile_all(plans, cache._support_jobs(plans))
batch = list(sent)
(support,) = support_for(gemm)
text = str(support.build(cache.jit.triple, cache.jit.data_layout))
same = cache.jit.compile_here(text, vectorize=True) == cache.jit.compile_here(text,
                                                                              vectorize=False)
(kernel,) = cache.get_all([gemm])
print(json.dumps({"strategy": gemm.schedule.strategy, "error": error is None,
                  "objects": len(objects), "sent": batch, "support": support.name,
                  "compiled": cache.stats.support_compiled, "same": same,
                  "loaded": kernel.name == gemm.name}))
"""


def test_a_batch_compiles_the_gemm_driver_first_without_llvm_vectorizers():
    """A batch whose tiled GEMM calls a driver the (disabled) disk cache lacks sends
    the driver first, with LLVM's vectorizers off: its vectors are explicit, and its
    object is byte for byte what the vectorizers would give (they only cost time). In
    a fresh process: the driver, once linked, is the process's."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _DRIVER_SCRIPT], capture_output=True,
                         text=True, timeout=300, cwd=root,
                         env={**os.environ, "NOVA_CACHE": "0", "NOVA_COMPILE_JOBS": "2",
                              "NOVA_ENGINE": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["strategy"] == "tiled" and report["error"] and report["objects"] == 3
    sent = [tuple(x) for x in report["sent"]]
    assert sent[0] == (report["support"], False) and all(v for _, v in sent[1:])
    assert len(sent) == 4 and report["compiled"] == 1
    assert report["same"] and report["loaded"]


def test_a_support_module_llvm_rejects_is_a_compile_error_naming_it(monkeypatch, tmp_path):
    """A support module whose IR LLVM rejects (on a worker) fails its batch with a
    CompileError naming the module, its IR written for the report; nothing is linked."""
    from nova.compiler.targets.cpu.llvm import SupportModule
    from nova.runtime.disk_cache import Lookup
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(tmp_path))
    broken = SupportModule("nova_test_broken", ("nova_test_broken",), lambda *_: None)
    job = kernel_cache._SupportJob(broken, "define void @broken( {", Lookup("missing"),
                                   broken.identity("triple", "layout"))
    cache = _fresh_cache(monkeypatch, 1)
    objects, error = cache._compile_all([], [job])
    assert objects == [] and isinstance(error, kernel_cache.CompileError)
    assert "support module nova_test_broken" in str(error) and "IR written to" in str(error)
    assert any(tmp_path.rglob("nova_test_broken.ll"))
    assert "nova_test_broken" not in kernel_cache._LINKED
    assert cache.stats.support_compiled == 0


_PREFETCH_SCRIPT = """
import json, sys, threading, time, numpy as np, nova as nv
from nova.runtime import kernel_cache
from nova.runtime.compile_worker import CompileWorker, WorkerDied
from nova.compiler.targets import get_target
mode = sys.argv[1]
sent = []
spans = []          # (by the prefetch, name, start, end) of every compile
original = CompileWorker.compile
def spy(self, name, text, level=3, vectorize=True):
    sent.append((threading.current_thread().name.startswith("nova-prefetch"), name))
    start = time.perf_counter()
    try:
        if sent[-1][0] and mode.startswith("slow"):
            time.sleep(1.5)          # a driver compile longer than the step's front end
            if mode == "slow-fail":
                raise WorkerDied("injected: the prefetch's worker ended")
        if mode == "fail" and sent[-1][0]:
            raise WorkerDied("injected: the prefetch's worker ended")
        if mode == "bug" and sent[-1][0]:
            raise ZeroDivisionError("injected: a bug in the prefetch")
        return original(self, name, text, level, vectorize)
    finally:
        spans.append((threading.current_thread().name.startswith("nova-prefetch"), name,
                      start, time.perf_counter()))
CompileWorker.compile = spy
cache = kernel_cache.KERNELS
started = []
prefetch = cache.prefetch_support
cache.prefetch_support = lambda s: (started.append(s.name), prefetch(s))
driver = get_target("cpu").product_support().name
a = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
nv.realize(nv.tensor(a) * 2 + 1)                     # no product: nothing prefetched
without = list(started)
sent.clear(); spans.clear()
pool_and_all = cache.stats.support_compiled      # (the thread pool's, with NOVA_CACHE=0)
x = nv.tensor(a)
y = (x @ x.T).relu()                                 # a product: the driver is prefetched
z = (x * 3).exp().sum(0) if mode.startswith("slow") else None   # (more kernels)
try:
    if z is not None:
        nv.realize(y, z)
    got = y.numpy()
except ZeroDivisionError as e:
    print(json.dumps({"raised": str(e)}))
    sys.exit(0)
print(json.dumps({"without": without, "started": started, "driver": driver, "sent": sent,
                  "spans": spans,
                  "compiled": cache.stats.support_compiled - pool_and_all,
                  "linked": driver in kernel_cache._LINKED, "pending": len(cache._prefetching),
                  "right": bool(np.allclose(got, np.maximum(a @ a.T, 0), rtol=1e-5,
                                            atol=1e-5)
                                and (z is None or np.allclose(z.numpy(),
                                                              np.exp(a * 3).sum(0),
                                                              rtol=1e-5)))}))
"""


def _prefetch_run(mode: str) -> dict:
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _PREFETCH_SCRIPT, mode], capture_output=True,
                         text=True, timeout=300, cwd=root,
                         env={**os.environ, "NOVA_CACHE": "0", "NOVA_COMPILE_JOBS": "2",
                              "NOVA_ENGINE": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_a_step_with_a_product_has_its_gemm_driver_compiled_while_its_ir_is_built():
    """Realizing a float32 product with no driver on disk starts the driver's compile on
    a worker before the step's front end (``cpu_engine.anticipate``); the batch of
    kernels then finds it linked and sends only kernels. A step without a product
    starts nothing. In a fresh process: the driver, once linked, is the process's."""
    report = _prefetch_run("ok")
    driver = report["driver"]
    assert report["without"] == [] and report["started"] == [driver]
    prefetched = [name for by_prefetch, name in report["sent"] if by_prefetch]
    batch = [name for by_prefetch, name in report["sent"] if not by_prefetch]
    assert prefetched == [driver] and driver not in batch and batch
    assert report["compiled"] == 1 and report["linked"] and report["pending"] == 0
    assert report["right"]


def test_a_failed_prefetch_leaves_the_driver_to_the_batch():
    """The prefetch's worker dies on the driver: the batch that needs it compiles it as
    it did before prefetching existed, and the product is right."""
    report = _prefetch_run("fail")
    driver = report["driver"]
    assert [name for by_prefetch, name in report["sent"] if by_prefetch] == [driver]
    batch = [name for by_prefetch, name in report["sent"] if not by_prefetch]
    assert batch[0] == driver and len(batch) > 1
    assert report["compiled"] == 1 and report["linked"] and report["right"]


def test_kernels_compile_on_the_other_workers_while_the_driver_still_compiles():
    """A prefetch still compiling the driver when the step's kernels are ready to
    compile (injected: it takes 1.5 s) holds one worker; the other compiles kernels
    meanwhile (the medium GPT's cold step used to wait 0.38 s with every worker idle),
    and the kernels are loaded once the driver is linked: the results are right."""
    report = _prefetch_run("slow")
    driver = report["driver"]
    (prefetch,) = [sp for sp in report["spans"] if sp[0]]
    batch = [sp for sp in report["spans"] if not sp[0]]
    assert prefetch[1] == driver and len(batch) >= 2 and driver not in {b[1] for b in batch}
    assert min(b[2] for b in batch) < prefetch[3]       # a kernel compiled meanwhile
    assert report["compiled"] == 1 and report["linked"] and report["pending"] == 0
    assert report["right"]


def test_a_prefetch_failing_while_kernels_compile_leaves_the_driver_to_the_batch():
    """The slow prefetch's worker dies after the kernels compiled beside it: the batch
    compiles the driver itself, links it before loading them, and the results are
    right."""
    report = _prefetch_run("slow-fail")
    driver = report["driver"]
    batch = [name for by_prefetch, name in report["sent"] if not by_prefetch]
    assert driver in batch and len(batch) > 2
    assert report["compiled"] == 1 and report["linked"] and report["right"]


def test_a_bug_in_the_prefetch_is_raised_not_hidden():
    """Only what the batch meets again and reports (a worker that dies or cannot start,
    LLVM's rejection, a bad object, the disk) leaves the driver to the batch quietly;
    anything else the prefetch raises comes out of the realization that waits for it."""
    assert _prefetch_run("bug") == {"raised": "injected: a bug in the prefetch"}


def test_a_worker_whose_parent_is_gone_ends_quietly():
    """Fault injection: the parent process ends (here: closes the reply pipe) while a
    kernel compiles in a worker. The worker's reply meets a closed pipe; it ends with
    status 0 and prints no traceback into the user's terminal (it used to print a
    BrokenPipeError after a short script's last line)."""
    import os
    import subprocess
    import sys

    from llvmlite import binding as llvm

    from nova.runtime import compile_worker as cw
    llvm.initialize_native_target()
    proc = subprocess.Popen([sys.executable, "-c", cw._BOOT, os.path.abspath(cw.__file__)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    cw.send(proc.stdin, {"cpu": llvm.get_host_cpu_name(),
                         "features": llvm.get_host_cpu_features().flatten()})
    cw.receive(proc.stdout)                                    # its hello
    proc.stdout.close()                                        # the parent is gone
    ir = 'define i32 @f(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n'
    cw.send(proc.stdin, {"seq": 1, "name": "f"}, ir.encode())
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    err = proc.stderr.read()
    proc.stderr.close()
    assert b"Traceback" not in err, err.decode()
