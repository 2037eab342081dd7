"""``nv.compiler.is_compiling`` and ``nv.compiler.disable`` (``nova/compiler/__init__.py``,
state in ``nova/core/compiling.py``, set by ``nv.compile``'s recorder)."""
import warnings

import pytest

import nova as nv
from nova.runtime.cache import RecompileWarning


def test_is_compiling_is_true_only_while_nv_compile_records_a_call():
    seen = []

    @nv.compile
    def step(x):
        seen.append(nv.compiler.is_compiling())
        return x * 2

    assert not nv.compiler.is_compiling()
    x = nv.ones(3)
    for _ in range(5):
        assert step(x).tolist() == [2.0, 2.0, 2.0]
    assert seen and all(seen)                  # every call that ran its Python recorded
    assert step.replays == 5 - len(seen) > 0   # ... and the replays ran none
    assert not nv.compiler.is_compiling() and not nv.compiler.is_dynamo_compiling()
    assert not nv.compiler.is_exporting()


def test_is_compiling_lets_a_step_skip_a_host_read_and_still_replay():
    logged = []

    @nv.compile
    def step(x):
        y = (x * 3).sum()
        if not nv.compiler.is_compiling():
            logged.append(y.item())            # a host read would refuse the capture
        return y

    x = nv.ones(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)
        for _ in range(4):
            assert step(x).item() == 12.0
    assert step.replays > 0 and logged == []


def test_a_disabled_function_runs_every_call_and_keeps_its_caller_recorded():
    calls = []

    @nv.compiler.disable
    def log(v):
        calls.append(nv.compiler.is_compiling())    # eager inside, as in PyTorch
        return v

    @nv.compile
    def step(x):
        return log(x + 1)

    x = nv.ones(2)
    with pytest.warns(RecompileWarning, match="it calls .*log, which nv.compiler.disable "
                                              "keeps out of compiled replays"):
        for _ in range(4):
            assert step(x).tolist() == [2.0, 2.0]
    assert calls == [False] * 4 and step.replays == 0
    assert log(nv.ones(1)).tolist() == [1.0] and log.__name__ == "log"

    @nv.compile(fullgraph=True)
    def strict(x):
        return nv.compiler.disable(lambda v: v, reason="logging")(x)

    with pytest.raises(nv.CaptureError, match=r"keeps out of compiled replays \(logging\)"):
        strict(x)


def test_disable_as_a_decorator_factory_and_on_a_module():
    @nv.compiler.disable(recursive=False, reason="why")
    def f(v):
        return v + 1

    assert f(1) == 2
    layer = nv.nn.Linear(2, 2)
    assert nv.compiler.disable(layer) is layer
    assert layer(nv.ones(1, 2)).shape == (1, 2)
    with pytest.raises(AssertionError, match="A callable function is expected"):
        nv.compiler.disable(3)
