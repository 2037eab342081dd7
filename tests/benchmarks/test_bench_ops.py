"""bench_ops' measurements, on sizes that take a second: each reports what it says."""
import math

import numpy as np
import pytest

import nova as nv
from benchmarks import bench_ops


@pytest.fixture(autouse=True)
def cpu_engine():
    before = nv.get_engine()
    nv.set_engine("cpu")
    yield
    nv.set_engine(before)


def test_timed_with_kernels_profiles_separate_calls():
    x = nv.tensor(np.ones(8, np.float32))
    calls = []

    def step():
        calls.append(1)
        nv.realize(*bench_ops.tiny_step(x))
    wall, kernels, n = bench_ops.timed_with_kernels(step, reps=2, inner=3)
    assert len(calls) == 2 + 2 * (3 + 3)      # warm-up, then timed and profiled calls
    assert n > 1 and 0 < kernels < wall


def test_replay_overhead_runs_the_cached_executable_without_recording():
    from nova.runtime.cache import CACHE
    per_kernel, per_kernel_run, n = bench_ops.replay_overhead(reps=2)
    assert n == CACHE.last.num_kernels > 1
    assert math.isfinite(per_kernel) and 0 < per_kernel_run and per_kernel < per_kernel_run


def test_compile_overhead_replays_the_tiny_step():
    before = nv.debug.cache_stats().replays
    c = bench_ops.compile_overhead(reps=2)
    assert nv.debug.cache_stats().replays - before >= 2 * 2 * bench_ops.INNER
    assert c["kernels"] > 1 and c["compiled_call_s"] > 0 and c["plain_call_s"] > 0
    assert math.isfinite(c["compiled_s"]) and math.isfinite(c["plain_s"])


def test_unary_bandwidth_measures_every_op_against_add():
    rows = bench_ops.unary_bandwidth(1024, reps=1)
    assert [r["op"] for r in rows] == list(bench_ops.UNARY)
    assert rows[0]["of_add"] == 1.0 and all(r["nova_gbs"] > 0 for r in rows)
    assert all((r["numpy_gbs"] is None) == (bench_ops.UNARY[r["op"]][1] is None) for r in rows)


def test_main_prints_every_labeled_line(capsys, monkeypatch):
    monkeypatch.setattr(bench_ops, "ATTENTION_SHAPES", ((2, 2, 16, 8),))
    rows = bench_ops.main(["--rows", "64", "--cols", "64", "--reps", "1",
                           "--unary-elements", "4096"])
    assert len(rows) == 6 and all(r["nova_gbs"] > 0 for r in rows)
    out = capsys.readouterr().out
    for label in ("replay overhead, no recording:", "end-to-end, recording included:",
                  "per-step overhead (call time minus kernel time)", "nv.compile",
                  "uncompiled", "thread hand-off:", "unary float32 op", "gelu (erf)",
                  "one row @ w.T (w square in)", "w.T.sum(0) (w square in)",
                  "causal attention fwd+bwd 2x2x16x8 (B, H, T, E): nova fused",
                  "causal attention fwd+bwd 2x2x16x8 (B, H, T, E, dropout 0.1): nova fused"):
        assert label in out


def test_only_unary_prints_the_unary_section_alone(capsys):
    assert bench_ops.main(["--only-unary", "--reps", "1", "--unary-elements", "4096"]) == []
    out = capsys.readouterr().out
    assert "unary float32 op, 4096 elements" in out and "cos" in out
    assert "replay overhead" not in out and "causal attention" not in out


def test_only_attention_prints_the_attention_section_alone(capsys, monkeypatch):
    monkeypatch.setattr(bench_ops, "ATTENTION_SHAPES", ((2, 2, 16, 8),))
    assert bench_ops.main(["--only-attention", "--reps", "1"]) == []
    out = capsys.readouterr().out
    assert "causal attention fwd+bwd 2x2x16x8 (B, H, T, E): nova fused" in out
    assert "dropout 0.1" in out and "unary float32 op" not in out and "replay" not in out
