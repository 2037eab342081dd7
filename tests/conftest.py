import gc
import os
import signal

import pytest
from hypothesis import HealthCheck, settings

import nova as nv

# Every compiler pass re-verifies its output in the tests (off by default: it is a
# quarter of a warm first step), so a pass that breaks the IR fails at the pass.
os.environ.setdefault("NOVA_VERIFY_PASSES", "1")

settings.register_profile("nova", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture])
# CI gates a submission, so there the examples are derandomized (the same every run, for
# the pinned hypothesis version); locally each run explores new ones.
settings.register_profile("ci", parent=settings.get_profile("nova"), derandomize=True,
                          print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "nova")


def pytest_addoption(parser):
    parser.addoption("--mlir-all", action="store_true",
                     help="run every tests/tensor module on the mlir engine too (by default "
                          "the four slowest there run on cpu and interp only)")


@pytest.fixture(autouse=True)
def sigint_raises():
    """Ctrl-C raises ``KeyboardInterrupt`` in every test however pytest was started: a
    shell without job control starts background jobs (``pytest ... &``) with SIGINT
    ignored, Python keeps it ignored, and the fault-injection tests' interrupts would
    silently never arrive."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def finish_earlier_work() -> None:
    """Compute what earlier tests in this process left pending -- tensors kept alive by
    reference cycles until a collection, an optimizer step left deferred -- so it does
    not join (or run beside) this test's first realization as an extra compile."""
    gc.collect()
    nv.realize()


@pytest.fixture
def fresh_cache():
    """An empty executable cache, so stats count only this test's realizations (earlier
    tests' pending work computed first: ``finish_earlier_work``)."""
    finish_earlier_work()
    nv.debug.reset_cache()
    yield
    nv.debug.reset_cache()


def pytest_collection_modifyitems(config, items):
    try:
        import cupy  # noqa: F401
        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
        for item in items:
            if "cuda" in item.keywords:
                item.add_marker(skip)

