"""The benchmark harness itself, on the tiny preset with Nova (peers where installed)."""
import json
import math

import numpy as np
import pytest

import nova as nv
from benchmarks import bench_train, run_one
from benchmarks.common import Result, Work
from benchmarks.peers.nova_gpt import profile_kernels
from benchmarks.run_one import available, run


def test_run_one_measures_nova_in_process():
    r = run("nova", Work("tiny", 3, 2), profile_steps=2)
    assert r.available and len(r.step_times) == 3 and len(r.losses) == 3
    assert r.tokens_per_step == 64 and r.tokens_per_s > 0 and r.peak_rss_mb >= 0
    # the profiled steps come after the timed ones and give the kernel time, and the
    # profiler's bookkeeping is measured (the engine still reports through extend)
    assert len(r.kernel_times) == 2 and all(k > 0 for k in r.kernel_times)
    assert len(r.bookkeeping_times) == 2 and all(b > 0 for b in r.bookkeeping_times)
    assert all(w > k + b for w, k, b in zip(r.profiled_times, r.kernel_times,
                                            r.bookkeeping_times))
    assert math.isfinite(r.overhead_s) and r.replays is None


def test_profile_kernels_is_nv_debug_profile_plus_its_bookkeeping():
    from nova.runtime.cpu_engine import PROFILE
    x = nv.tensor(np.ones((4, 8), np.float32))
    with profile_kernels() as prof:
        nv.realize(*[(x * float(i)).sum(-1) for i in range(3)])
    assert PROFILE.get() is None                  # the engine's collector is restored
    assert len(prof.steps) == 1 and len(prof.steps[0]) >= 1 and prof.total() > 0
    assert all(isinstance(name, str) and t >= 0 for name, _, t in prof.steps[0])
    assert prof.bookkeeping > 0


def test_nova_compiled_replays_and_trains_like_plain_nova():
    plain = run("nova", Work("tiny", 4, 2), profile_steps=0)
    compiled = run("nova-compiled", Work("tiny", 4, 2), profile_steps=1)
    assert compiled.losses == plain.losses        # nv.compile replays bit-identically
    assert compiled.replays >= 2 and compiled.replays + compiled.recorded == 5
    assert len(compiled.kernel_times) == 1 and not plain.kernel_times
    assert math.isnan(plain.overhead_s) and math.isfinite(compiled.overhead_s)


def test_run_one_refuses_a_wrong_argument_count():
    with pytest.raises(SystemExit, match="usage"):
        run_one.main(["nova", "tiny", "3"])


def test_harness_writes_table_json_and_reports_missing_peers(tmp_path):
    results = bench_train.main(["--preset", "tiny", "--steps", "3", "--batch-size", "2",
                                "--frameworks", "nova", "nova-compiled", "jax",
                                "--profile-steps", "1", "--out", str(tmp_path)])
    assert [r.framework for r in results] == ["nova", "nova-compiled", "jax"]
    md = (tmp_path / "train_tiny.md").read_text()
    assert "| tiny | nova |" in md and "| tiny | nova-compiled |" in md and "1.00x" in md
    assert "--profile-steps 1" in md                     # the command is in the file
    assert "step time − kernel time" in md and "calls of the step replayed" in md
    data = json.loads((tmp_path / "train_tiny.json").read_text())
    nova, compiled, jax = data["results"]
    assert nova["framework"] == "nova" and nova["tokens_per_s"] > 0
    assert nova["overhead_s"] is not None and compiled["overhead_s"] is not None
    assert compiled["replays"] >= 1 and nova["replays"] is None
    if not available("jax"):
        assert "not installed" in md and jax["overhead_s"] is None


def test_dropout_reaches_every_peer_and_names_the_results(tmp_path):
    """``--dropout``: the Nova runs train with it (losses differ from the run without),
    the results files say so, the JAX peer (no dropout) is reported unavailable, and the
    PyTorch peer's model has the same dropout sites as ``models/gpt.py``."""
    results = bench_train.main(["--preset", "tiny", "--steps", "3", "--batch-size", "2",
                                "--frameworks", "nova-compiled", "jax", "--dropout", "0.3",
                                "--profile-steps", "0", "--out", str(tmp_path)])
    md = (tmp_path / "train_tiny_dropout0_3.md").read_text()
    assert "dropout 0.3," in md and "--dropout 0.3" in md
    assert results[1].available is False and "no dropout" in results[1].note
    plain = run("nova-compiled", Work("tiny", 3, 2), profile_steps=0)
    assert results[0].losses != plain.losses
    torch = pytest.importorskip("torch")
    from benchmarks.peers import torch_gpt
    model = torch_gpt.build(Work("tiny", 1, 2, dropout=0.3))
    drops = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert len(drops) == 1 + 2 * model.config.layers and all(d.p == 0.3 for d in drops)
    assert all(block.attn.dropout == 0.3 for block in model.h)


def test_table_ratios_are_peer_over_nova():
    nova = Result("nova", "p", 3, 100, [1.0, 0.5, 0.5, 0.5], [1.0], 100.0)
    peer = Result("torch-eager", "p", 3, 100, [1.0, 1.0, 1.0, 1.0], [1.0], 300.0)
    md = bench_train.table([nova, peer])
    assert "| p | torch-eager | 1.00 | 100 | 0.50x | 300 | 3.00x | 1.0000 | – |" in md


def test_table_takes_ratios_against_nova_compiled_and_shows_the_overhead():
    nova = Result("nova", "p", 3, 100, [1.0, 0.5, 0.5, 0.5], [1.0], 100.0,
                  profiled_times=[0.5, 0.6, 0.5], kernel_times=[0.39, 0.45, 0.4],
                  bookkeeping_times=[0.01, 0.05, 0.0])
    compiled = Result("nova-compiled", "p", 3, 100, [1.0, 0.5, 0.25, 0.25], [1.0], 100.0,
                      profiled_times=[0.26], kernel_times=[0.24],
                      bookkeeping_times=[0.01], replays=2, recorded=3)
    md = bench_train.table([nova, compiled])
    assert "| p | nova | 1.00 | 200 | 0.50x | 100 | 1.00x | 1.0000 | 100.0 |" in md
    assert "| p | nova-compiled | 1.00 | 400 | 1.00x | 100 | 1.00x | 1.0000 | 10.0 |" in md
    report = bench_train.overhead_report([nova, compiled])
    assert "p nova " in report and "100.00 ms per step" in report
    assert "profiler bookkeeping 10.00 ms taken out" in report
    assert "10.00 ms per step" in report and "2 of 5 calls of the step replayed" in report


def test_overhead_is_the_median_over_profiled_steps_of_wall_minus_kernels_and_profiler():
    r = Result("nova", "p", 5, 1, [9.0, 9.0, 0.2, 0.3, 0.25], [1.0],
               profiled_times=[0.3, 0.5, 0.4], kernel_times=[0.1, 0.2, 0.15],
               bookkeeping_times=[0.0, 0.1, 0.05])
    # per step: 0.2, 0.2, 0.2 -- paired, not the difference of the two medians
    assert r.overhead_s == pytest.approx(0.2) and r.kernel_s == pytest.approx(0.15)
    assert r.steady_step_s == pytest.approx(0.25)
    assert r.to_json()["overhead_s"] == pytest.approx(0.2)
    assert Result("jax", "p", 1, 1, [1.0]).to_json()["overhead_s"] is None


@pytest.mark.skipif(not available("torch-eager"), reason="PyTorch is not installed")
def test_loss_parity_with_pytorch_on_tiny():
    assert bench_train.parity("tiny", 5, 2) < 1e-3


def test_the_iree_peer_trains_nova_step_compiled_by_iree():
    """Nova's step exported as StableHLO and compiled by IREE: from the same weights and
    batches it follows Nova's loss curve (the same math; summation orders differ), and
    it is reported unavailable without IREE or with dropout."""
    from benchmarks.peers import iree_module
    if iree_module.unavailable_reason():
        r = run("iree", Work("tiny", 2, 2))
        assert not r.available and "pip install" in r.note
        pytest.skip(iree_module.unavailable_reason())
    plain = run("nova", Work("tiny", 4, 2), profile_steps=0)
    # (a process of its own, as bench_train runs it: IREE's runtime bindings report
    # leaked objects when the process exits)
    iree = bench_train.run_isolated("iree", Work("tiny", 4, 2), timeout=600)
    assert iree.available, iree.note
    assert len(iree.step_times) == 4
    np.testing.assert_allclose(iree.losses, plain.losses, rtol=1e-4)
    assert plain.losses[-1] < plain.losses[0]
    dropped = run("iree", Work("tiny", 2, 2, dropout=0.1))
    assert not dropped.available and "no dropout" in dropped.note
