"""``nv.profiler``: torch.profiler's surface over Nova's kernel timings."""
import gzip
import json
import time
import warnings

import numpy as np
import pytest

import nova as nv
from nova.profiler import (ProfilerAction, ProfilerActivity, profile, record_function,
                           schedule, tensorboard_trace_handler)


def _step(x, w):
    return ((x @ w).relu().sum()).item()


def _inputs():
    rng = np.random.default_rng(0)
    x = nv.tensor(rng.standard_normal((64, 48)).astype(np.float32))
    w = nv.tensor(rng.standard_normal((48, 40)).astype(np.float32))
    return x, w


def test_kernels_and_ranges_are_events_with_self_times():
    x, w = _inputs()
    _step(x, w)                       # compile outside the profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("outer"):
            with record_function("inner"):
                time.sleep(0.002)
            _step(x, w)
    events = prof.events()
    names = [e.name for e in events]
    assert names.count("outer") == 1 and names.count("inner") == 1
    kernels = [e for e in events if not e.is_user_annotation]
    assert kernels and all(e.name.startswith("nova_k_") for e in kernels)
    assert any("matmul" in e.name for e in kernels)
    outer = next(e for e in events if e.name == "outer")
    inner = next(e for e in events if e.name == "inner")
    # the kernels ran inside "outer" (``.item()``), "inner" is its child too
    assert inner in outer.cpu_children and all(k in outer.cpu_children for k in kernels)
    assert inner.cpu_time_total >= 2000                         # microseconds
    kernel_us = sum(k.cpu_time_total for k in kernels)
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - inner.cpu_time_total - kernel_us, abs=1e-6)
    for k in kernels:                        # inside the range that was open
        assert outer.start_ns <= k.start_ns <= k.end_ns <= outer.end_ns
        assert k.self_cpu_time_total == k.cpu_time_total


def test_key_averages_sums_by_name_and_table_sorts():
    x, w = _inputs()
    _step(x, w)
    with profile() as prof:
        for _ in range(3):
            with record_function("step"):
                _step(x, w)
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["step"].count == 3
    per_kernel = [a for k, a in avg.items() if k.startswith("nova_k_")]
    assert per_kernel and all(a.count == 3 for a in per_kernel)
    assert avg["step"].cpu_time == pytest.approx(avg["step"].cpu_time_total / 3)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=2)
    lines = table.splitlines()
    assert "Self CPU %" in lines[1] and "# of Calls" in lines[1]
    assert lines[3].split()[0] == "step"           # the largest total first
    assert len(lines) == 3 + 2 + 2 and lines[-1].startswith("Self CPU time total:")
    with pytest.raises(ValueError, match="sort_by must be one of"):
        prof.key_averages().table(sort_by="wall")


def test_schedule_matches_pytorchs_cycle():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    A = ProfilerAction
    assert [fn(s) for s in range(7)] == [A.NONE, A.NONE, A.WARMUP, A.RECORD,
                                         A.RECORD_AND_SAVE, A.NONE, A.NONE]
    with pytest.warns(UserWarning, match="won't be using warmup"):
        schedule(wait=0, warmup=0, active=1)
    with pytest.raises(AssertionError, match="active=0 \\(need > 0\\)"):
        schedule(wait=0, warmup=1, active=0)


def test_on_trace_ready_once_per_active_cycle_with_that_cycles_events(tmp_path):
    x, w = _inputs()
    _step(x, w)
    ready = []

    def keep(prof):
        ready.append((prof.step_num, [e.name for e in prof.events()]))

    with profile(schedule=schedule(wait=1, warmup=1, active=1, repeat=2),
                 on_trace_ready=keep) as prof:
        for i in range(8):
            with record_function(f"work{i}"):
                _step(x, w)
            prof.step()
    # active steps are 2 and 5; each cycle reports its own step only
    assert [r[0] for r in ready] == [3, 6]
    assert "work2" in ready[0][1] and "work1" not in ready[0][1]
    assert "work5" in ready[1][1] and "work2" not in ready[1][1]
    assert "ProfilerStep#2" in ready[0][1]
    assert any(n.startswith("nova_k_") for n in ready[0][1])


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    x, w = _inputs()
    _step(x, w)
    with profile() as prof:
        with record_function("r"):
            _step(x, w)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    assert {e["ph"] for e in trace} == {"X"}
    assert any(e["name"] == "r" and e["cat"] == "user_annotation" for e in trace)
    kernel = next(e for e in trace if e["cat"] == "kernel")
    assert "loops=" in kernel["args"]["schedule"] and kernel["dur"] >= 0
    handler = tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w0", use_gzip=True)
    handler(prof)
    [written] = list((tmp_path / "tb").iterdir())
    assert written.name.startswith("w0.") and written.name.endswith(".pt.trace.json.gz")
    with gzip.open(written, "rt") as f:
        assert json.load(f)["traceEvents"]


def test_record_function_outside_a_profile_and_as_decorator():
    @record_function("decorated")
    def f(v):
        return v + 1

    assert f(1) == 2                                # no profile: nothing recorded
    with profile() as prof:
        f(2)
    assert [e.name for e in prof.events()] == ["decorated"]
    with pytest.raises(TypeError, match="name must be a str"):
        record_function(3)


def test_the_profile_sees_only_its_own_window_and_restores_debug_profile():
    x, w = _inputs()
    _step(x, w)
    with nv.debug.profile() as outer:
        with profile() as prof:
            _step(x, w)
        _step(x, w)
    assert len([e for e in prof.events() if not e.is_user_annotation]) >= 1
    assert len(outer.steps) == 1 and len(outer.steps[0]) >= 1    # the call after
    with pytest.raises(TypeError, match="ProfilerActivity"):
        profile(activities=["cpu"])


def test_the_legacy_autograd_profiler():
    x, w = _inputs()
    _step(x, w)
    with nv.autograd.profiler.profile() as prof:
        with nv.autograd.profiler.record_function("legacy"):
            _step(x, w)
    names = [e.name for e in prof.function_events]
    assert "legacy" in names and any(n.startswith("nova_k_") for n in names)
    assert prof.self_cpu_time_total == pytest.approx(
        next(e.cpu_time_total for e in prof.function_events if e.name == "legacy"))
    assert "legacy" in prof.key_averages().table(sort_by="self_cpu_time_total")
    with nv.autograd.profiler.profile(enabled=False) as off:
        _step(x, w)
    with pytest.raises(RuntimeError, match="didn.t finish running"):
        off.table()            # disabled: no events, as PyTorch
    unfinished = nv.autograd.profiler.profile()
    with pytest.raises(RuntimeError, match="didn't finish running"):
        unfinished.key_averages()
