"""Every test here runs on the compiled ``cpu`` engine and the reference interpreter
(``interp``), and -- where upstream MLIR's bindings are installed -- on the ``mlir``
engine (``nova.runtime.mlir_engine``): three independent implementations of every op.

The four modules slowest on the mlir engine (its compiles take ~0.1-0.3 s a step: they
took 155 of the 195 s all modules took on it) run on cpu and interp only, to keep the
suite in its time budget; ``pytest tests/tensor --mlir-all`` runs them there too."""
import pytest

import nova as nv
from nova.runtime.mlir_engine import unavailable_reason

SLOW_ON_MLIR = {"test_elementwise", "test_sorting", "test_matmul", "test_reductions"}
ENGINES = ["cpu", "interp"] + (["mlir"] if unavailable_reason() is None else [])


def pytest_generate_tests(metafunc):
    if "engine" not in metafunc.fixturenames or hasattr(metafunc.module, "engine"):
        return       # (a module with an engine fixture of its own chooses its engines)
    if any("engine" in [a.strip() for a in str(m.args[0]).split(",")]
           for m in metafunc.definition.iter_markers("parametrize") if m.args):
        return       # (so does a test parametrized over engines)
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    skip_mlir = module in SLOW_ON_MLIR and not metafunc.config.getoption("--mlir-all")
    metafunc.parametrize("engine", [e for e in ENGINES if not (e == "mlir" and skip_mlir)],
                         indirect=True)


@pytest.fixture(autouse=True)
def engine(request):
    with nv.engine(request.param):
        yield request.param
